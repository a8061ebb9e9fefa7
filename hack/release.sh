#!/usr/bin/env bash
# Builds one release into _output/release (`make release`, docs/release.md):
#   hack/release.sh vX.Y.Z
# The version must be the one the file VERSION names, with
# deploy/kustomization.yaml and deploy/daemonset.yaml already naming it, and
# the tree must be clean apart from those release files (hack/version.sh).
# It writes:
#   kubectl-dkc_VERSION_OS_ARCH.tar.gz        the plugin, per platform (hack/dist.sh)
#   kubectl-dkc-agent_VERSION_linux_ARCH.tar.gz the agent and its systemd unit
#   image/kubectl-dkc-{agent,pause,probe}.oci.tar the image indexes (make image)
#   image/digests.txt                          each image's name and index digest
#   SHA256SUMS                                 sha256sum of the .tar.gz archives, the
#                                              GitHub release's assets
# and renders plugins/dkc.yaml with the plugin archives' sums, then checks it
# (hack/verify-release.sh). The same commit and Go toolchain give the same
# bytes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
version=${1:?usage: hack/release.sh vX.Y.Z}
release=$(hack/version.sh release)
if [[ $version != "$release" ]]; then
  echo "error: VERSION=$version, but the file VERSION says $release: write $version into the file VERSION first (docs/release.md)" >&2
  exit 1
fi
hack/version.sh check "$version"
if ! grep -qxF "  newTag: $version" deploy/kustomization.yaml; then
  echo "error: deploy/kustomization.yaml: set newTag: $version" >&2
  exit 1
fi
if ! grep -qE "^ +image: [^ ]+:$version\$" deploy/daemonset.yaml; then
  echo "error: deploy/daemonset.yaml: tag the image $version" >&2
  exit 1
fi
out=${RELEASE_DIR:-_output/release}
DIST_OUT=$out hack/dist.sh "$version"
mkdir -p "$out/image"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
make --no-print-directory image VERSION="$version" IMAGE_DIR="$out/image" | tee "$log"
# hack/image prints: ARCHIVE NAME DIGEST (N bytes)
awk '$3 ~ /^sha256:/ {print $2, $3}' "$log" >"$out/image/digests.txt"
(cd "$out" && find . -maxdepth 1 -type f -name '*.tar.gz' | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum) >"$out/SHA256SUMS"
hack/verify-release.sh "$out"
echo "release $version in $out; index digests:"
cat "$out/image/digests.txt"
