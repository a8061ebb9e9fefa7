#!/usr/bin/env bash
# Builds reproducible release archives of kubectl-dkc and renders the krew
# manifest template (krew-manifest.yaml) into plugins/dkc.yaml with their
# sha256 sums:   hack/dist.sh v0.1.0
# `make release` runs it for the version in the file VERSION (docs/release.md).
# Archives land in _output/dist. The same VERSION and commit give the same
# bytes: -trimpath, no VCS stamp, a fixed build date (the commit's), sorted
# tar entries with fixed owners and mtimes, and gzip -n.
#
# Each Linux platform also gets kubectl-dkc-agent_VERSION_linux_ARCH.tar.gz:
# the slim node agent (cmd/kubectl-dkc-agent) with the systemd unit, for
# host installs (docs/install.md).
#
# DIST_PLATFORMS (default: linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
# builds fewer platforms, and DIST_OUT puts the archives elsewhere; the krew
# manifest is rendered only when every platform of the template was built.
# test/krew builds the host's archive this way and installs it with krew.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
version=${1:?usage: hack/dist.sh VERSION}
# The source commit (hack/version.sh): a commit that only sets the version in
# the release files builds the same bytes as its parent.
commit=$(hack/version.sh commit)
date=$(hack/version.sh date)
epoch=$(hack/version.sh epoch)
out=${DIST_OUT:-_output/dist}
platforms=${DIST_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
rm -rf "$out" && mkdir -p "$out"
manifest=$(cat krew-manifest.yaml | grep -v '^#' | sed "s/VERSION/$version/g")
for platform in $platforms; do
  os=${platform%/*} arch=${platform#*/}
  stage=$(mktemp -d)
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false -ldflags "-s -w \
    -X github.com/kubectl-dkc/dkc/pkg/version.version=$version \
    -X github.com/kubectl-dkc/dkc/pkg/version.gitCommit=$commit \
    -X github.com/kubectl-dkc/dkc/pkg/version.buildDate=$date" -o "$stage/kubectl-dkc" .
  cp kubectl_complete-dkc README.md "$stage/"
  archive=$out/kubectl-dkc_${version}_${os}_${arch}.tar.gz
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$stage" -cf - \
    kubectl-dkc kubectl_complete-dkc README.md | gzip -n >"$archive"
  if [[ $os == linux ]]; then
    rm -rf "${stage:?}"/*
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false -ldflags "-s -w \
      -X github.com/kubectl-dkc/dkc/pkg/version.version=$version \
      -X github.com/kubectl-dkc/dkc/pkg/version.gitCommit=$commit \
      -X github.com/kubectl-dkc/dkc/pkg/version.buildDate=$date" -o "$stage/kubectl-dkc-agent" ./cmd/kubectl-dkc-agent
    cp deploy/systemd/* "$stage/"
    agent_archive=$out/kubectl-dkc-agent_${version}_${os}_${arch}.tar.gz
    (cd "$stage" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) >"$stage.files"
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$stage" -cf - -T "$stage.files" |
      gzip -n >"$agent_archive"
    rm -f "$stage.files"
    echo "$agent_archive $(sha256sum "$agent_archive" | cut -d' ' -f1)"
  fi
  rm -rf "$stage"
  sum=$(sha256sum "$archive" | cut -d' ' -f1)
  key=SHA256_$(echo "${os}_${arch}" | tr a-z A-Z)
  manifest=${manifest//$key/$sum}
  echo "$archive $sum"
done
if [[ $manifest == *SHA256_* ]]; then
  echo "plugins/dkc.yaml left as it is: not every platform of krew-manifest.yaml was built"
  exit 0
fi
mkdir -p plugins
{ echo "# Rendered by hack/dist.sh $version from krew-manifest.yaml. Do not edit."; echo "$manifest"; } >plugins/dkc.yaml
echo "wrote plugins/dkc.yaml"
