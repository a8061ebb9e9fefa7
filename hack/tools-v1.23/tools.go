//go:build tools

// Package tools pins kube-apiserver and kubelet v1.23.17, the last release
// whose kubelet still runs Dynamic Kubelet Configuration itself. The e2e
// suite runs them as the side-by-side reference for the original system.
//
// This module does not build in place: k8s.io/kubernetes v1.23.17 needs
// pkg/generated/openapi, which its module zip lacks.
// hack/build-components-v1.23.sh generates it into a writable copy of the
// module and builds a copy of this module next to it, where the replace
// path ../kubernetes-v1.23.17 resolves.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
