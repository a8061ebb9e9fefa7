#!/usr/bin/env bash
# Builds the real Kubernetes components the e2e harness and the local cluster
# run, and the kubectl the plugin-discovery and --append-hash tests use:
# kube-apiserver, kubelet, kube-controller-manager, kube-scheduler, kubectl
# and kubeadm from k8s.io/kubernetes, and etcd from go.etcd.io/etcd/server, at
# the versions pinned in hack/tools/go.mod.
# Binaries land in $DKC_BIN_DIR (default ~/.cache/kubectl-dkc/bin/v1.37.2)
# and are reused when present. The first build says what it builds and about
# how long each part takes, and prints progress every 15 s
# (hack/build-components-lib.sh); later runs take seconds.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=build-components-lib.sh
source "$here/build-components-lib.sh"
k8s_version=${K8S_VERSION:-v1.37.2}
bin_dir=${DKC_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-dkc/bin/$k8s_version}
mkdir -p "$bin_dir"

major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"

# name:package. Every missing one is built in one go build (go_build).
components=(
  "etcd:./etcd"
  "kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver"
  "kubelet:k8s.io/kubernetes/cmd/kubelet"
  # The DaemonSet e2e and `make cluster-up AGENT=daemonset` run pods: the
  # DaemonSet controller creates them and the scheduler binds them.
  "kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager"
  "kube-scheduler:k8s.io/kubernetes/cmd/kube-scheduler"
  "kubectl:k8s.io/kubernetes/cmd/kubectl"
  # The kubeadm node (framework.StartKubeadmNode) is joined by kubeadm.
  "kubeadm:k8s.io/kubernetes/cmd/kubeadm"
)

fresh() { [[ -x "$bin_dir/$1" && "$bin_dir/$1" -nt "$here/tools/go.sum" ]]; }

missing=()
for c in "${components[@]}"; do
  name=${c%%:*}
  if fresh "$name"; then
    echo "reuse $bin_dir/$name"
  else
    missing+=("$name=${c#*:}")
  fi
done
if ((${#missing[@]} > 0)); then
  echo "Building the Kubernetes $k8s_version components from Go modules into $bin_dir."
  echo "This happens once; later runs reuse them."
  go_build "Kubernetes $k8s_version" "$here/tools" "$ldflags" "$bin_dir" "25 min for all" "${missing[@]}"
fi
echo "$bin_dir"
