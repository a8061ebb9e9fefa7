package kubeletconfig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// The registry of k8s.io/component-helpers v0.37 names each feature after
// its gate; a feature it does not know is taken to do the same.
func TestFeatureGates(t *testing.T) {
	tests := map[string][]string{
		"RestartAllContainersOnContainerExits":         {"RestartAllContainersOnContainerExits"},
		"InPlacePodLevelResourcesVerticalScaling":      {"InPlacePodLevelResourcesVerticalScaling"},
		"InPlacePodVerticalScalingInitContainers":      {"InPlacePodVerticalScalingInitContainers"},
		"ExtendWebSocketsToKubelet":                    {"ExtendWebSocketsToKubelet"},
		"InPlacePodVerticalScalingMemoryBackedVolumes": {"InPlacePodVerticalScalingMemoryBackedVolumes"},
		"UserNamespacesHostNetworkSupport":             {"UserNamespacesHostNetworkSupport"},
		"VolumeBindMountOptions":                       {"VolumeBindMountOptions"},
		"DRANodeAllocatableResources":                  {"DRANodeAllocatableResources"},
		"DRAOptionalNodeOperations":                    {"DRAOptionalNodeOperations"},
		"AFeatureOfANewerKubelet":                      {"AFeatureOfANewerKubelet"},
	}
	for feature, want := range tests {
		t.Run(feature, func(t *testing.T) {
			if diff := cmp.Diff(want, FeatureGates(feature)); diff != "" {
				t.Errorf("FeatureGates(%q) (-want +got):\n%s", feature, diff)
			}
		})
	}
}

func TestPodFeatures(t *testing.T) {
	never := corev1.ContainerRestartPolicyNever
	no := false
	restartAll := corev1.Container{Name: "c", RestartPolicy: &never, RestartPolicyRules: []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}}
	tests := map[string]struct {
		spec corev1.PodSpec
		want []string
	}{
		"a plain pod relies on none": {
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		},
		"a container rule that restarts all containers": {
			spec: corev1.PodSpec{Containers: []corev1.Container{restartAll}},
			want: []string{"RestartAllContainersOnContainerExits"},
		},
		"a container rule that restarts its own container": {
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", RestartPolicy: &never, RestartPolicyRules: []corev1.ContainerRestartRule{{
				Action: corev1.ContainerRestartRuleActionRestart,
			}}}}},
		},
		"host network in a user namespace, and a restart-all rule": {
			spec: corev1.PodSpec{HostNetwork: true, HostUsers: &no, Containers: []corev1.Container{restartAll}},
			want: []string{"RestartAllContainersOnContainerExits", "UserNamespacesHostNetworkSupport"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PodFeatures(&corev1.Pod{Spec: tc.spec})); diff != "" {
				t.Errorf("PodFeatures() (-want +got):\n%s", diff)
			}
		})
	}
}

// What a featureGates change does to what the node declares: a feature is
// lost when one of its gates is turned off or left to a default that dkc
// does not know, gained when one is turned on and none off; other gates,
// and nodes that declare nothing, change nothing.
func TestFeatureChanges(t *testing.T) {
	const (
		restartAll = "RestartAllContainersOnContainerExits"
		webSockets = "ExtendWebSocketsToKubelet"
		dra        = "DRANodeAllocatableResources"
		bindMount  = "VolumeBindMountOptions"
	)
	gates := func(g map[string]bool) *config { return newConfig(func(c *config) { c.FeatureGates = g }) }
	declared := []string{restartAll, webSockets}
	lost := func(f string, pods ...string) Change {
		return Change{Class: DeclaredFeatures, Field: FieldDeclaredFeatures, Old: f, Pods: pods}
	}
	gained := func(f string) Change { return Change{Class: DeclaredFeatures, Field: FieldDeclaredFeatures, New: f} }
	pods := map[string][]string{"default/b": {restartAll}, "default/a": {restartAll, "UserNamespacesHostNetworkSupport"}, "default/c": nil}
	tests := map[string]struct {
		old, new *config
		declared []string
		want     []Change
	}{
		"no gates": {old: gates(nil), new: gates(nil), declared: declared},
		"a gate of no declared feature": {
			old: gates(nil), new: gates(map[string]bool{"SomeOtherGate": false}), declared: declared,
		},
		"a declared feature's gate turned off, with its pods": {
			old: gates(nil), new: gates(map[string]bool{restartAll: false}), declared: declared,
			want: []Change{lost(restartAll, "default/a", "default/b")},
		},
		"a declared feature's gate turned on changes nothing": {
			old: gates(nil), new: gates(map[string]bool{restartAll: true}), declared: declared,
		},
		"a gate that stays off changes nothing": {
			old: gates(map[string]bool{dra: false}), new: gates(map[string]bool{dra: false}), declared: declared,
		},
		"a gate turned on left to its default: the default is not known": {
			old: gates(map[string]bool{webSockets: true}), new: gates(nil), declared: declared,
			want: []Change{lost(webSockets)},
		},
		"NodeDeclaredFeatures turned off takes every feature away": {
			old: gates(nil), new: gates(map[string]bool{NodeDeclaredFeaturesGate: false}), declared: declared,
			want: []Change{lost(webSockets), lost(restartAll, "default/a", "default/b")},
		},
		"a feature's gate turned on": {
			old: gates(nil), new: gates(map[string]bool{dra: true}), declared: declared,
			want: []Change{gained(dra)},
		},
		"a gate turned off left to its default": {
			old: gates(map[string]bool{dra: false}), new: gates(nil), declared: declared,
			want: []Change{gained(dra)},
		},
		"a feature that needs the runtime too counts": {
			old: gates(nil), new: gates(map[string]bool{bindMount: true}), declared: declared,
			want: []Change{gained(bindMount)},
		},
		"lost and gained at once, sorted by feature": {
			old: gates(map[string]bool{restartAll: true}), new: gates(map[string]bool{restartAll: false, dra: true}), declared: declared,
			want: []Change{gained(dra), lost(restartAll, "default/a", "default/b")},
		},
		"a node that declares nothing": {
			old: gates(nil), new: gates(map[string]bool{restartAll: false, dra: true}),
		},
		"a feature unknown to the registry, by the gate of its name": {
			old: gates(nil), new: gates(map[string]bool{"AFeatureOfANewerKubelet": false}), declared: []string{"AFeatureOfANewerKubelet"},
			want: []Change{lost("AFeatureOfANewerKubelet")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := FeatureChanges(tc.old, tc.new, NodeFacts{DeclaredFeatures: tc.declared, PodFeatures: pods})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FeatureChanges() (-want +got):\n%s", diff)
			}
			for _, c := range got {
				if !c.Class.RefusedByDefault() || len(Refused([]Change{c}, []SafetyClass{DeclaredFeatures})) != 0 {
					t.Errorf("change %+v: want refused by default and allowed by %s", c, DeclaredFeatures)
				}
			}
		})
	}
}
