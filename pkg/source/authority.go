package source

import (
	"fmt"
	"strings"
)

// The authority model (docs/security.md, "Who can do what"): an opt-in to an
// unsafe class is a permission of its own, checked at admission
// (deploy/admission-policy.yaml) and asked for by the CLI before it writes.
// Whoever allows a class, in a pin, a rollout or a pool, must hold the verb
// UseVerb on the resource UnsafeClassesResource of the group Group, with
// the class as the resource's name, as PodSecurityPolicy's "use" worked.
// No API serves the resource; RBAC answers for it all the same.
const (
	// Group is dkc's API group.
	Group = "kubectl-dkc.io"
	// UnsafeClassesResource is the resource whose names are the unsafe
	// classes.
	UnsafeClassesResource = "unsafeclasses"
	// UseVerb is the verb that allows a class.
	UseVerb = "use"
)

// UnsafeClassRole is the shipped ClusterRole (deploy/roles.yaml) that grants
// the use of class, and nothing else.
func UnsafeClassRole(class string) string { return "kubectl-dkc:unsafe:" + class }

// UnsafeClassDenied is the refusal of an opt-in to class by an identity that
// may not use it. The admission policy and the CLI say the same words.
func UnsafeClassDenied(class string) string {
	return fmt.Sprintf("allowing the unsafe class %s needs the verb use on %s.%s named %s: bind the ClusterRole %s",
		class, UnsafeClassesResource, Group, class, UnsafeClassRole(class))
}

// UnsafeClassesDenied joins the refusals of classes, in their order.
func UnsafeClassesDenied(classes []string) string {
	msgs := make([]string, len(classes))
	for i, c := range classes {
		msgs[i] = UnsafeClassDenied(c)
	}
	return strings.Join(msgs, "; ")
}

// EvictionDenied is the refusal of a drain by an identity that may not
// evict pods: a rollout or pool that drains evicts pods in every namespace
// of its nodes, which is kubectl drain's right.
const EvictionDenied = "draining nodes needs the verb create on pods/eviction in every namespace, as kubectl drain does: bind a ClusterRole that grants it"
