#!/usr/bin/env bash
# Builds krew (kubectl-krew) and krew's manifest validator
# (validate-krew-manifest) at the version pinned in hack/tools-krew/go.mod,
# for test/krew. Binaries land in $DKC_KREW_BIN_DIR (default
# ~/.cache/kubectl-dkc/bin/krew-v0.4.4) and are reused when newer than the
# pins and this script.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=build-components-lib.sh
source "$here/build-components-lib.sh"
tools=$here/tools-krew
krew_version=$(cd "$tools" && GOWORK=off go list -m -f '{{.Version}}' sigs.k8s.io/krew)
bin_dir=${DKC_KREW_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-dkc/bin/krew-$krew_version}
export GOWORK=off
mkdir -p "$bin_dir"
for tool in kubectl-krew:sigs.k8s.io/krew/cmd/krew validate-krew-manifest:sigs.k8s.io/krew/cmd/validate-krew-manifest; do
  name=${tool%%:*} pkg=${tool#*:}
  if [[ -x "$bin_dir/$name" && "$bin_dir/$name" -nt "$tools/go.sum" && "$bin_dir/$name" -nt "${BASH_SOURCE[0]}" ]]; then
    echo "reuse $bin_dir/$name"
    continue
  fi
  go_build "$name" "$tools" "$pkg" "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$krew_version" "$bin_dir/$name" "1 min"
done
echo "$bin_dir"
