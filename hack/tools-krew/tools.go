//go:build tools

// Package tools pins krew, the kubectl plugin manager, and its manifest
// validator. test/krew validates plugins/dkc.yaml with the validator and
// installs the plugin with krew from an archive hack/dist.sh built.
// hack/build-components-krew.sh builds both.
package tools

import (
	_ "sigs.k8s.io/krew/cmd/krew"
	_ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
)
