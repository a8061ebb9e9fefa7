//go:build tools

// Package tools pins kubelet v1.34.12, the oldest kubelet the version skew
// policy lets run under kube-apiserver v1.37 (three minors older). The e2e
// suite runs the agent against it (test/e2e/skew_test.go):
// its /configz has no kind/apiVersion and its --config-dir is beta.
// hack/build-components-v1.34.sh builds it.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
