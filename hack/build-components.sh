#!/usr/bin/env bash
# Builds the real Kubernetes components the e2e harness and the local cluster
# run, and the kubectl the plugin-discovery and --append-hash tests use:
# kube-apiserver, kubelet, kubectl, kube-controller-manager and kube-scheduler
# from k8s.io/kubernetes, and etcd from
# go.etcd.io/etcd/server, at the versions pinned in hack/tools/go.mod.
# Binaries land in $DKC_BIN_DIR (default ~/.cache/kubectl-dkc/bin/v1.36.3)
# and are reused when present.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
k8s_version=${K8S_VERSION:-v1.36.3}
bin_dir=${DKC_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-dkc/bin/$k8s_version}
mkdir -p "$bin_dir"

major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"

build() { # name package
  local name=$1 pkg=$2
  if [[ -x "$bin_dir/$name" && "$bin_dir/$name" -nt "$here/tools/go.sum" ]]; then
    echo "reuse $bin_dir/$name"
    return
  fi
  echo "build $name ($pkg)"
  local start=$SECONDS
  (cd "$here/tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin_dir/$name.tmp" "$pkg")
  mv "$bin_dir/$name.tmp" "$bin_dir/$name"
  echo "built $name in $((SECONDS - start))s"
}

build etcd ./etcd
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kubelet k8s.io/kubernetes/cmd/kubelet
# The DaemonSet e2e and `make cluster-up AGENT=daemonset` run pods: the
# DaemonSet controller creates them and the scheduler binds them.
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build kubectl k8s.io/kubernetes/cmd/kubectl
echo "$bin_dir"
