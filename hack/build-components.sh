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

# name:package:estimate. Estimates are cold-cache times measured on 2 cores
# of a shared machine; each part after kube-apiserver reuses much of its
# compiled packages.
components=(
  "etcd:./etcd:2 min"
  "kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver:5 min"
  "kubelet:k8s.io/kubernetes/cmd/kubelet:3 min"
  # The DaemonSet e2e and `make cluster-up AGENT=daemonset` run pods: the
  # DaemonSet controller creates them and the scheduler binds them.
  "kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager:4 min"
  "kube-scheduler:k8s.io/kubernetes/cmd/kube-scheduler:1 min"
  "kubectl:k8s.io/kubernetes/cmd/kubectl:2 min"
  # The kubeadm node (framework.StartKubeadmNode) is joined by kubeadm.
  "kubeadm:k8s.io/kubernetes/cmd/kubeadm:2 min"
)

fresh() { [[ -x "$bin_dir/$1" && "$bin_dir/$1" -nt "$here/tools/go.sum" ]]; }

missing=()
for c in "${components[@]}"; do
  fresh "${c%%:*}" || missing+=("${c%%:*}")
done
if ((${#missing[@]} == 0)); then
  echo "reuse $k8s_version components in $bin_dir"
  echo "$bin_dir"
  exit 0
fi
if ((${#missing[@]} == ${#components[@]})); then
  echo "Building the Kubernetes $k8s_version components from Go modules into $bin_dir:"
  echo "  ${missing[*]}."
  echo "This happens once: about 15-20 min on 2 cores and 2.5 GB of RAM; later runs reuse them."
else
  echo "Building ${missing[*]} ($k8s_version) into $bin_dir; the others are reused."
fi
for c in "${components[@]}"; do
  name=${c%%:*} rest=${c#*:}
  pkg=${rest%%:*} estimate=${rest#*:}
  if fresh "$name"; then
    echo "reuse $bin_dir/$name"
    continue
  fi
  go_build "$name" "$here/tools" "$pkg" "$ldflags" "$bin_dir/$name" "$estimate"
done
echo "$bin_dir"
