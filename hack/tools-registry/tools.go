//go:build tools

// Package tools pins distribution's registry, the OCI registry the e2e
// harness serves on loopback: the tests push dkc's images to it and every
// node's containerd pulls them from it (test/e2e/framework/registry.go).
// Its own module keeps distribution's dependencies out of the component
// builds. hack/build-components-registry.sh builds it.
package tools

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"
)
