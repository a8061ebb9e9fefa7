#!/usr/bin/env bash
# Builds kubelet v1.34.12, the newest v1.34 patch on the Go module proxy and
# the oldest minor the version skew policy lets run under kube-apiserver
# v1.37 (three minors older). The e2e suite runs the agent against it under
# the v1.37.2 control plane (test/e2e/skew_test.go). The pins are in
# hack/tools-v1.34/go.mod: k8s.io/kubernetes plus one replace per staging
# module, as for v1.37.2. The binary lands in $DKC_V134_BIN_DIR (default
# ~/.cache/kubectl-dkc/bin/v1.34.12) and is reused when it is newer than the
# pins and this script.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=build-components-lib.sh
source "$here/build-components-lib.sh"
k8s_version=v1.34.12
tools=$here/tools-v1.34
bin_dir=${DKC_V134_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-dkc/bin/$k8s_version}
export GOWORK=off

if [[ -x "$bin_dir/kubelet" && "$bin_dir/kubelet" -nt "$tools/go.sum" && "$bin_dir/kubelet" -nt "${BASH_SOURCE[0]}" ]]; then
  echo "reuse $bin_dir/kubelet"
  echo "$bin_dir"
  exit 0
fi
mkdir -p "$bin_dir"
echo "Building kubelet $k8s_version from Go modules into $bin_dir (once; later runs reuse it)."
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34 -X k8s.io/component-base/version.gitTreeState=clean"
go_build "kubelet $k8s_version" "$tools" "$ldflags" "$bin_dir" "6-15 min" kubelet=k8s.io/kubernetes/cmd/kubelet
"$bin_dir/kubelet" --version
echo "$bin_dir"
