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
missing=()
for tool in kubectl-krew=sigs.k8s.io/krew/cmd/krew validate-krew-manifest=sigs.k8s.io/krew/cmd/validate-krew-manifest; do
  name=${tool%%=*}
  if [[ -x "$bin_dir/$name" && "$bin_dir/$name" -nt "$tools/go.sum" && "$bin_dir/$name" -nt "${BASH_SOURCE[0]}" ]]; then
    echo "reuse $bin_dir/$name"
  else
    missing+=("$tool")
  fi
done
if ((${#missing[@]} > 0)); then
  go_build "krew $krew_version" "$tools" "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$krew_version" "$bin_dir" "1 min" "${missing[@]}"
fi
echo "$bin_dir"
