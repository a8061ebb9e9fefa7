#!/usr/bin/env bash
# Builds kube-apiserver and kubelet v1.23.17, the last release whose kubelet
# runs Dynamic Kubelet Configuration itself: the e2e suite's side-by-side
# reference for the original system (test/e2e/legacy_test.go). etcd comes
# from hack/build-components.sh; etcd 3.6 serves apiserver 1.23 fine.
#
# k8s.io/kubernetes v1.23.17 does not build from its module zip: the zip
# lacks pkg/generated/openapi, which upstream generates at build time
# (build/root/Makefile.generated_files, target gen_openapi). So this script
#   1. copies the module to a writable directory under the cache, with its
#      ./staging/src/k8s.io/X replaces pointed at k8s.io/X v0.23.17;
#   2. builds openapi-gen at the kube-openapi version 1.23.17 pins and runs
#      it as the Makefile did: every package tagged +k8s:openapi-gen= in
#      kubernetes and its staging modules (less code-generator and
#      sample-apiserver), checking the API rule report against
#      api/api-rules/violation_exceptions.list;
#   3. builds in a copy of hack/tools-v1.23 placed next to that directory,
#      where its replace path ../kubernetes-v1.23.17 resolves.
# Binaries land in $DKC_LEGACY_BIN_DIR (default ~/.cache/kubectl-dkc/bin/v1.23.17)
# and are reused when present and newer than hack/tools-v1.23/go.sum. The
# prepared source is reused when complete. Needs only Go and the module proxy.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=build-components-lib.sh
source "$here/build-components-lib.sh"
k8s_version=v1.23.17
staging_version=v0.23.17
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-dkc
bin_dir=${DKC_LEGACY_BIN_DIR:-$cache/bin/$k8s_version}
src_root=$cache/src
src=$src_root/kubernetes-$k8s_version
tools=$src_root/tools-v1.23
template=$here/tools-v1.23
export GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"

# 1.23 reads its version from two packages (hack/lib/version.sh sets both):
# component-base for --version, client-go for the apiserver's /version.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=23 -X $pkg.gitTreeState=clean"
done

# A binary is reused when it is newer than the pins and this script.
built() { [[ -x "$bin_dir/$1" && "$bin_dir/$1" -nt "$template/go.sum" && "$bin_dir/$1" -nt "${BASH_SOURCE[0]}" ]]; }

if built kube-apiserver && built kubelet; then
  echo "reuse $bin_dir/kube-apiserver"
  echo "reuse $bin_dir/kubelet"
  echo "$bin_dir"
  exit 0
fi
mkdir -p "$bin_dir" "$src_root"

# moddir MODULE@VERSION prints the module's directory in the module cache.
moddir() {
  (cd / && go mod download -json "$1") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

# openapi_dirs DIR IMPORTPATH lists the packages under DIR that ask for
# openapi generation, as Makefile.generated_files finds them: files with a
# column-0 "// +k8s:" tag that contain "+k8s:openapi-gen=", skipping _*, .*,
# vendor and testdata directories. grep exits 1 where no file matches, so
# failures are not checked here; the API rule report check below catches a
# wrong list.
openapi_dirs() {
  (cd "$1" && find -H . \( -name '_*' -o -name '.[^.]*' -o -name vendor -o -name testdata \) -prune \
      -o -type f -name '*.go' -print0 |
    { xargs -0 grep -l '^// *+k8s:' || true; } | tr '\n' '\0' |
    { xargs -0 -r grep -l '+k8s:openapi-gen=' || true; } | xargs -r -n1 dirname |
    LC_ALL=C sort -u | sed "s|^\.|$2|")
}

prepare_source() {
  if [[ -f "$src/.dkc-prepared" ]]; then
    echo "reuse $src"
    return
  fi
  local start=$SECONDS
  echo "prepare $src"
  local zipdir
  zipdir=$(moddir "k8s.io/kubernetes@$k8s_version")
  [[ -n "$zipdir" ]] || { echo "download k8s.io/kubernetes@$k8s_version failed" >&2; exit 1; }
  rm -rf "$src" "$src.tmp"
  cp -r "$zipdir" "$src.tmp"
  chmod -R u+w "$src.tmp"

  # The staging modules come from the proxy instead of ./staging/src, which
  # the zip lacks. The proxy serves no sample-controller or sample-cli-plugin
  # at all; nothing here imports them.
  local staging=() m
  mapfile -t staging < <(sed -n 's|^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => \./staging/src/.*|\1|p' "$src.tmp/go.mod")
  local edits=()
  for m in "${staging[@]}"; do
    case $m in
      k8s.io/sample-controller | k8s.io/sample-cli-plugin) edits+=("-dropreplace=$m") ;;
      *) edits+=("-replace=$m=$m@$staging_version") ;;
    esac
  done
  (cd "$src.tmp" && go mod edit "${edits[@]}")

  local kube_openapi
  kube_openapi=$(cd "$src.tmp" && go list -m -f '{{.Version}}' k8s.io/kube-openapi)
  local gen=$src_root/openapi-gen-$kube_openapi
  if [[ ! -x "$gen" ]]; then
    echo "build openapi-gen (k8s.io/kube-openapi $kube_openapi)"
    (cd "$src.tmp" && go build -o "$gen.tmp" k8s.io/kube-openapi/cmd/openapi-gen)
    mv "$gen.tmp" "$gen"
  fi

  local inputs=$src.tmp/.openapi-inputs
  openapi_dirs "$src.tmp" k8s.io/kubernetes >"$inputs"
  for m in "${staging[@]}"; do
    case $m in
      k8s.io/code-generator | k8s.io/sample-*) continue ;;
    esac
    openapi_dirs "$(moddir "$m@$staging_version")" "$m" >>"$inputs"
  done
  echo "generate pkg/generated/openapi from $(wc -l <"$inputs") packages"
  local out
  out=$(mktemp -d)
  (cd "$src.tmp" && "$gen" --logtostderr \
    --input-dirs "$(paste -sd, "$inputs")" \
    --output-package k8s.io/kubernetes/pkg/generated/openapi \
    --output-file-base zz_generated.openapi \
    --go-header-file hack/boilerplate/boilerplate.generatego.txt \
    --report-filename "$out/violations.report" \
    --output-base "$out")
  cp "$out/k8s.io/kubernetes/pkg/generated/openapi/zz_generated.openapi.go" "$src.tmp/pkg/generated/openapi/"
  # Upstream fails the build when the API rule report differs from the
  # known violations: the same check proves the inputs match upstream's.
  if ! diff -u "$src.tmp/api/api-rules/violation_exceptions.list" "$out/violations.report"; then
    echo "openapi-gen: API rule violations differ from api/api-rules/violation_exceptions.list: the input packages do not match upstream's" >&2
    exit 1
  fi
  rm -rf "$out"
  touch "$src.tmp/.dkc-prepared"
  mv "$src.tmp" "$src"
  echo "prepared source in $((SECONDS - start))s"
}

prepare_source
rm -rf "$tools"
mkdir -p "$tools"
cp "$template/go.mod" "$template/go.sum" "$template/tools.go" "$tools/"
GO_BUILD_FLAGS=-mod=readonly go_build "Kubernetes $k8s_version" "$tools" "$ldflags" "$bin_dir" "15 min" \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver kubelet=k8s.io/kubernetes/cmd/kubelet
echo "$bin_dir"
