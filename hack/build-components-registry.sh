#!/usr/bin/env bash
# Builds distribution's registry (github.com/distribution/distribution/v3)
# at the version pinned in hack/tools-registry/go.mod, from
# hack/tools-registry/registry: upstream's cmd/registry with only the
# filesystem and inmemory storage drivers. It is the OCI registry the e2e
# harness serves on loopback and pushes dkc's images to
# (test/e2e/framework/registry.go). The binary lands in
# $DKC_REGISTRY_BIN_DIR (default ~/.cache/kubectl-dkc/bin/registry-v3.1.2)
# and is reused when newer than the pins and this script.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=build-components-lib.sh
source "$here/build-components-lib.sh"
tools=$here/tools-registry
export GOWORK=off
version=$(cd "$tools" && go list -m -f '{{.Version}}' github.com/distribution/distribution/v3)
bin_dir=${DKC_REGISTRY_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-dkc/bin/registry-$version}
mkdir -p "$bin_dir"
if [[ -x "$bin_dir/registry" && "$bin_dir/registry" -nt "$tools/go.sum" && "$bin_dir/registry" -nt "${BASH_SOURCE[0]}" ]]; then
  echo "reuse $bin_dir/registry"
else
  go_build "registry $version" "$tools" "-s -w -X github.com/distribution/distribution/v3/version.version=$version" \
    "$bin_dir" "3 min" registry=./registry
fi
echo "$bin_dir"
