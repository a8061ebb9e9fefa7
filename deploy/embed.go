// Package deploy holds the manifests of this directory, embedded in the
// binary, so that `kubectl dkc install` applies the same bytes as
// `kubectl apply --server-side -k deploy/` (pkg/install renders them).
package deploy

import "embed"

// FS holds every manifest of deploy/: kustomization.yaml, the files it
// names, and rbac-host.yaml, the identity of an agent installed as a
// systemd unit.
//
//go:embed *.yaml
var FS embed.FS
