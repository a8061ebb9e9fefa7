package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of dkc's custom resources.
const GroupName = "kubectl-dkc.io"

// SchemeGroupVersion is the group and version of dkc's custom resources, and
// of the objects `kubectl dkc status` and `history` print.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// GroupVersion is SchemeGroupVersion, by the name controller-tools uses.
var GroupVersion = SchemeGroupVersion

// Kinds of the custom resources.
const (
	NodeConfigRolloutKind = "NodeConfigRollout"
	NodeConfigPoolKind    = "NodeConfigPool"
)

// Resources of the custom resources.
var (
	NodeConfigRolloutResource = SchemeGroupVersion.WithResource("nodeconfigrollouts")
	NodeConfigPoolResource    = SchemeGroupVersion.WithResource("nodeconfigpools")
)
