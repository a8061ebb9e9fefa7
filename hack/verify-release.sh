#!/usr/bin/env bash
# Checks a release directory against plugins/dkc.yaml (`make release` runs
# it; docs/release.md):   hack/verify-release.sh _output/release
# - every file in SHA256SUMS has its sum;
# - each platform of plugins/dkc.yaml names an archive of the directory,
#   kubectl-dkc_VERSION_OS_ARCH.tar.gz of plugins/dkc.yaml's version, whose
#   sha256 is the manifest's;
# - krew's own validator, validate-krew-manifest (as test/krew runs it,
#   built by hack/build-components-krew.sh), accepts the manifest, when it
#   is built.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=$(cd "${1:?usage: hack/verify-release.sh DIR}" && pwd)
manifest=$root/plugins/dkc.yaml
(cd "$dir" && sha256sum --quiet -c SHA256SUMS)
version=$(awk '$1 == "version:" {print $2; exit}' "$manifest")
if [[ $version != "$("$root/hack/version.sh" release)" ]]; then
  echo "plugins/dkc.yaml names $version, the file VERSION $("$root/hack/version.sh" release)" >&2
  exit 1
fi
# Pairs "URI SHA256" in the order of the manifest's platforms.
pairs=$(awk '$1 == "uri:" {uri = $2} $1 == "sha256:" {print uri, $2}' "$manifest")
n=0
while read -r uri sum; do
  name=${uri##*/}
  if [[ $uri != "https://github.com/kubectl-dkc/dkc/releases/download/$version/$name" || $name != kubectl-dkc_"$version"_*.tar.gz ]]; then
    echo "plugins/dkc.yaml: uri $uri is not an archive of release $version" >&2
    exit 1
  fi
  if [[ ! -f $dir/$name ]]; then
    echo "plugins/dkc.yaml names $name, which is not in $dir" >&2
    exit 1
  fi
  got=$(sha256sum "$dir/$name" | cut -d' ' -f1)
  if [[ $got != "$sum" ]]; then
    echo "plugins/dkc.yaml: $name has sha256 $sum, the archive $got" >&2
    exit 1
  fi
  n=$((n + 1))
done <<<"$pairs"
if ((n == 0)); then
  echo "plugins/dkc.yaml names no archive" >&2
  exit 1
fi
echo "plugins/dkc.yaml: the sha256 of all $n archives of $version match $dir"
validator=$(ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/kubectl-dkc/bin/krew-*/validate-krew-manifest 2>/dev/null | tail -1 || true)
if [[ -n $validator ]]; then
  "$validator" -manifest "$manifest" -skip-install
else
  echo "validate-krew-manifest not built (hack/build-components-krew.sh): krew's validation skipped"
fi
