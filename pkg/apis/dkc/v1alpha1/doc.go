// Package v1alpha1 is the API of dkc's custom resources, NodeConfigRollout
// and NodeConfigPool, in group kubectl-dkc.io, version v1alpha1: their Go
// types, the constants that the code on either side of the API shares
// (kinds, condition types and reasons, message prefixes), and the markers
// that deploy/crds.yaml is generated from (`make generate`, which also
// writes zz_generated.deepcopy.go).
//
// +groupName=kubectl-dkc.io
// +kubebuilder:object:generate=true
package v1alpha1
