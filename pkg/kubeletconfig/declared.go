package kubeletconfig

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/nodedeclaredfeatures"
	"k8s.io/component-helpers/nodedeclaredfeatures/features"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Node Declared Features (KEP-5328, GA in 1.37): at its start the kubelet
// declares in node.status.declaredFeatures the features its feature gates
// (and its container runtime) turn on, from the registry of
// k8s.io/component-helpers/nodedeclaredfeatures. The scheduler places a pod
// only on a node that declares every feature the pod needs, and a kubelet
// that starts with fewer features re-admits its pods against the new set:
// the ones that need a missing feature are rejected and set Failed.

// NodeDeclaredFeaturesGate turns the declaration on (alpha in 1.35, beta in
// 1.36, GA and locked on in 1.37): off, the node declares nothing.
const NodeDeclaredFeaturesGate = "NodeDeclaredFeatures"

// FieldDeclaredFeatures is the Field of a DeclaredFeatures change: the
// node's status.declaredFeatures, one feature per change.
const FieldDeclaredFeatures = "declaredFeatures"

// maxReliantPods bounds the running pods a change names.
const maxReliantPods = 10

// FeatureGates returns the feature gates the declared feature depends on,
// as the registry of the kubelet's library lists them. A feature the
// registry does not know (one a newer kubelet declares) is taken to depend
// on the gate of its own name, as every feature of 1.37 does.
func FeatureGates(feature string) []string {
	for _, f := range features.AllFeatures {
		if f.Name() == feature {
			return slices.Clone(f.Requirements().EnabledFeatureGates)
		}
	}
	return []string{feature}
}

// PodFeatures returns the declared features pod relies on, sorted: those the
// kubelet's admission infers from its spec, which a node must declare for
// the kubelet to admit the pod again after a restart.
func PodFeatures(pod *corev1.Pod) []string {
	info := &nodedeclaredfeatures.PodInfo{Spec: &pod.Spec, Status: &pod.Status}
	var names []string
	for _, f := range features.AllFeatures {
		if f.InferForScheduling(info) {
			names = append(names, f.Name())
		}
	}
	slices.Sort(names)
	return names
}

// RunningPodFeatures returns, by namespace/name, the declared features each
// of pods that is not terminal relies on, as featuresOf tells them
// (PodFeatures, for whole pods): NodeFacts.PodFeatures. Pods that rely on
// none are left out.
func RunningPodFeatures(pods []*corev1.Pod, featuresOf func(*corev1.Pod) []string) map[string][]string {
	out := map[string][]string{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if fs := featuresOf(p); len(fs) > 0 {
			out[p.Namespace+"/"+p.Name] = fs
		}
	}
	return out
}

// FeatureChanges lists, as DeclaredFeatures changes, the declared features
// that the node (facts.DeclaredFeatures) would stop or start declaring if
// its kubelet ran newCfg instead of oldCfg, judged by the feature gates of
// each feature (FeatureGates) in the two configs' featureGates:
//   - a feature the node declares is lost when newCfg turns one of its
//     gates, or NodeDeclaredFeaturesGate, off (false where oldCfg did not
//     say false), or leaves out a gate that oldCfg turned on: the kubelet's
//     default, which dkc does not know, then decides;
//   - a feature of the registry the node does not declare is gained when
//     newCfg turns one of its gates on (true where oldCfg did not say true),
//     or leaves out a gate oldCfg turned off, and turns none of them off. A
//     feature that also needs the container runtime's support counts too:
//     whether the runtime has it is not known either.
//
// A lost feature's change names the running pods that rely on it
// (facts.PodFeatures). A node that declares no feature (a kubelet before
// 1.35, or with NodeDeclaredFeaturesGate off) gets no changes.
func FeatureChanges(oldCfg, newCfg *kubeletconfigv1beta1.KubeletConfiguration, facts NodeFacts) []Change {
	if len(facts.DeclaredFeatures) == 0 {
		return nil
	}
	oldGates, newGates := gatesOf(oldCfg), gatesOf(newCfg)
	turnedOff := func(g string) bool {
		n, nSet := newGates[g]
		o, oSet := oldGates[g]
		return nSet && !n && !(oSet && !o) || !nSet && oSet && o
	}
	turnedOn := func(g string) bool {
		n, nSet := newGates[g]
		o, oSet := oldGates[g]
		return nSet && n && !(oSet && o) || !nSet && oSet && !o
	}
	declared := map[string]bool{}
	for _, f := range facts.DeclaredFeatures {
		declared[f] = true
	}
	var changes []Change
	for _, f := range slices.Sorted(maps.Keys(declared)) {
		if turnedOff(NodeDeclaredFeaturesGate) || slices.ContainsFunc(FeatureGates(f), turnedOff) {
			changes = append(changes, Change{Class: DeclaredFeatures, Field: FieldDeclaredFeatures, Old: f, Pods: reliantPods(f, facts.PodFeatures)})
		}
	}
	for _, f := range features.AllFeatures {
		gates := f.Requirements().EnabledFeatureGates
		if declared[f.Name()] || len(gates) == 0 {
			continue
		}
		off := slices.ContainsFunc(gates, func(g string) bool { v, set := newGates[g]; return set && !v })
		if !off && slices.ContainsFunc(gates, turnedOn) {
			changes = append(changes, Change{Class: DeclaredFeatures, Field: FieldDeclaredFeatures, New: f.Name()})
		}
	}
	slices.SortStableFunc(changes, func(a, b Change) int { return strings.Compare(a.Old+a.New, b.Old+b.New) })
	return changes
}

// gatesOf returns cfg's featureGates; nil for a nil cfg.
func gatesOf(cfg *kubeletconfigv1beta1.KubeletConfiguration) map[string]bool {
	if cfg == nil {
		return nil
	}
	return cfg.FeatureGates
}

// reliantPods returns the pods of podFeatures that rely on feature, sorted.
func reliantPods(feature string, podFeatures map[string][]string) []string {
	var pods []string
	for pod, fs := range podFeatures {
		if slices.Contains(fs, feature) {
			pods = append(pods, pod)
		}
	}
	slices.Sort(pods)
	return pods
}

// formatPods names the pods of a DeclaredFeatures change, bounded.
func formatPods(pods []string) string {
	if len(pods) <= maxReliantPods {
		return strings.Join(pods, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(pods[:maxReliantPods], ", "), len(pods)-maxReliantPods)
}
