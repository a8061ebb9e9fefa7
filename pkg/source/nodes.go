package source

import corev1 "k8s.io/api/core/v1"

// NodePointers returns pointers to the elements of nodes, as a List gives
// them, for the functions that take a fleet as []*corev1.Node: ordering
// or filtering pointers moves no Node values.
func NodePointers(nodes []corev1.Node) []*corev1.Node {
	ptrs := make([]*corev1.Node, len(nodes))
	for i := range nodes {
		ptrs[i] = &nodes[i]
	}
	return ptrs
}
