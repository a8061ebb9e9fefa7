#!/usr/bin/env bash
# The one source of kubectl-dkc's version: the file VERSION, vX.Y.Z, the
# release that deploy/kustomization.yaml, deploy/daemonset.yaml and
# plugins/dkc.yaml name (pkg/version's TestReleaseFilesAgree checks them).
#
#   hack/version.sh release   the file VERSION: the version of a release build
#   hack/version.sh dev       a development build's version:
#                             RELEASE-dev-COMMIT, and -dirty when the tree
#                             differs from that commit; never a release's name
#   hack/version.sh commit    COMMIT, the short hash of the source commit
#   hack/version.sh epoch     the source commit's time, in Unix seconds
#   hack/version.sh date      the same, RFC 3339
#   hack/version.sh check V   fails unless V may be built and pushed from this
#                             tree: the dev version, or the release when the
#                             tree is clean (its release files aside)
#
# The source commit is the last commit that changed anything but the
# release files below. They name a release but are no input of any build,
# so the commit that sets a new version in them builds the same bytes as
# its parent, and plugins/dkc.yaml can carry the sums of its own release.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
release_files=(VERSION deploy/kustomization.yaml deploy/daemonset.yaml plugins/dkc.yaml)
excludes=()
for f in "${release_files[@]}"; do excludes+=(":(exclude)$f"); done

release() {
  local v
  v=$(<VERSION)
  if [[ ! $v =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "VERSION says \"$v\": want a release version vX.Y.Z" >&2
    return 1
  fi
  echo "$v"
}
source_commit() { git log -1 --format=%H -- . "${excludes[@]}"; }
# dirty lists what differs from the source commit: changed and untracked
# files outside the release files.
dirty() { git status --porcelain -- . "${excludes[@]}"; }

case ${1:-} in
release) release ;;
commit) git rev-parse --short "$(source_commit)" ;;
epoch) git show -s --format=%ct "$(source_commit)" ;;
date) git show -s --format=%cI "$(source_commit)" ;;
dev)
  suffix=
  [[ -z $(dirty) ]] || suffix=-dirty
  echo "$(release)-dev-$(git rev-parse --short "$(source_commit)")$suffix"
  ;;
check)
  v=${2:?usage: hack/version.sh check VERSION}
  r=$(release)
  if [[ $v == "$r" ]]; then
    if [[ -n $(dirty) ]]; then
      echo "version $v is the release, but the tree differs from its source commit (commit or stash these, or build the dev version):" >&2
      dirty >&2
      exit 1
    fi
  elif [[ $v != "$("$0" dev)" ]]; then
    echo "version $v is neither the file VERSION ($r) nor this tree's dev version ($("$0" dev)): set VERSION in the file VERSION (docs/release.md)" >&2
    exit 1
  fi
  ;;
*)
  echo "usage: hack/version.sh release|dev|commit|epoch|date|check VERSION" >&2
  exit 2
  ;;
esac
