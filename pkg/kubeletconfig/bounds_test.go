package kubeletconfig

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// node is a 4-CPU, 8Gi, 100Gi node running 12 pods, with the default node
// monitor grace period.
func node(opts ...func(*NodeFacts)) NodeFacts {
	f := NodeFacts{
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("4"),
			corev1.ResourceMemory:           resource.MustParse("8Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
			corev1.ResourcePods:             resource.MustParse("110"),
		},
		RunningPods: 12,
	}
	for _, o := range opts {
		o(&f)
	}
	return f
}

func TestCheckBounds(t *testing.T) {
	tests := map[string]struct {
		cfg   *config
		facts NodeFacts
		want  []Violation
	}{
		"a valid config on a roomy node": {
			cfg:   newConfig(),
			facts: node(),
		},
		"an empty config (all defaults)": {
			cfg:   &config{},
			facts: node(),
		},
		"nothing known about the node": {
			cfg:   newConfig(func(c *config) { c.MaxPods = 1; c.KubeReserved = map[string]string{"memory": "1Ti"} }),
			facts: NodeFacts{},
		},
		"eviction thresholds the node crosses right now": {
			cfg: newConfig(func(c *config) {
				c.EvictionHard = map[string]string{"memory.available": "6Gi", "nodefs.available": "50%", "nodefs.inodesFree": "5%"}
				c.EvictionSoft = map[string]string{"nodefs.available": "30%"}
			}),
			facts: func() NodeFacts {
				f := node()
				f.Signals = map[string]Signal{
					"memory.available":  {Available: resource.MustParse("5Gi"), Capacity: resource.MustParse("8Gi")},
					"nodefs.available":  {Available: resource.MustParse("40Gi"), Capacity: resource.MustParse("100Gi")},
					"nodefs.inodesFree": {Available: resource.MustParse("900k"), Capacity: resource.MustParse("1M")},
				}
				return f
			}(),
			want: []Violation{
				{Field: `evictionHard["memory.available"]`, Value: "6Gi", Bound: "the node has 5Gi of 8Gi available now: it would evict at once"},
				{Field: `evictionHard["nodefs.available"]`, Value: "50%", Bound: "the node has 40Gi of 100Gi available now: it would evict at once"},
			},
		},
		"eviction percentages at or above 100%": {
			cfg: newConfig(func(c *config) {
				c.EvictionHard = map[string]string{"memory.available": "100%", "nodefs.inodesFree": "99.9%"}
				c.EvictionSoft = map[string]string{"imagefs.available": "150%"}
			}),
			facts: NodeFacts{},
			want: []Violation{
				{Field: `evictionHard["memory.available"]`, Value: "100%", Bound: "at or above 100%: the node always crosses it"},
				{Field: `evictionSoft["imagefs.available"]`, Value: "150%", Bound: "at or above 100%: the node always crosses it"},
			},
		},
		"eviction quantities at or above capacity": {
			cfg: newConfig(func(c *config) {
				c.EvictionHard = map[string]string{"memory.available": "8Gi", "nodefs.available": "99Gi", "pid.available": "1000"}
				c.EvictionSoft = map[string]string{"imagefs.available": "200Gi"}
			}),
			facts: node(func(f *NodeFacts) { f.Capacity[corev1.ResourceMemory] = resource.MustParse("16Gi") }),
			want: []Violation{
				{Field: `evictionSoft["imagefs.available"]`, Value: "200Gi", Bound: "at or above capacity ephemeral-storage=100Gi"},
			},
		},
		"memory threshold equal to capacity": {
			cfg:   newConfig(func(c *config) { c.EvictionHard = map[string]string{"memory.available": "8Gi"} }),
			facts: node(),
			want: []Violation{
				{Field: `evictionHard["memory.available"]`, Value: "8Gi", Bound: "at or above capacity memory=8Gi"},
			},
		},
		"a lease renewed just inside the grace period, but not after one failed renewal": {
			// 49.75s, up to 51.74s with jitter: one renewal, not two, fits
			// in 50s.
			cfg:   newConfig(func(c *config) { c.NodeLeaseDurationSeconds = 199 }),
			facts: node(),
			want: []Violation{
				{Field: "nodeLeaseDurationSeconds", Value: "199", Bound: "renewed every 49.75s (a quarter of it) plus up to 4% jitter: after one failed renewal the next lands 1m43.48s later, at or beyond the node monitor grace period 50s"},
			},
		},
		"a lease whose renewal after one failure lands past the grace period": {
			cfg:   newConfig(func(c *config) { c.NodeLeaseDurationSeconds = 97 }),
			facts: node(),
			want: []Violation{
				{Field: "nodeLeaseDurationSeconds", Value: "97", Bound: "renewed every 24.25s (a quarter of it) plus up to 4% jitter: after one failed renewal the next lands 50.44s later, at or beyond the node monitor grace period 50s"},
			},
		},
		"a lease whose renewal after one failure lands inside the grace period": {
			cfg:   newConfig(func(c *config) { c.NodeLeaseDurationSeconds = 96 }),
			facts: node(),
		},
		"a shorter grace period from the cluster": {
			cfg:   newConfig(),
			facts: node(func(f *NodeFacts) { f.NodeMonitorGracePeriod = 20 * time.Second }),
			want: []Violation{
				{Field: "nodeLeaseDurationSeconds", Value: "40", Bound: "renewed every 10s (a quarter of it) plus up to 4% jitter: after one failed renewal the next lands 20.8s later, at or beyond the node monitor grace period 20s"},
				{Field: "nodeStatusUpdateFrequency", Value: "10s", Bound: "plus up to 4% jitter: after one failed update the next lands 20.8s later, at or beyond the node monitor grace period 20s"},
			},
		},
		"a longer grace period from the cluster": {
			cfg:   newConfig(func(c *config) { c.NodeLeaseDurationSeconds = 199 }),
			facts: node(func(f *NodeFacts) { f.NodeMonitorGracePeriod = 2 * time.Minute }),
		},
		"status updates whose second lands past the grace period": {
			cfg:   newConfig(func(c *config) { c.NodeStatusUpdateFrequency = metav1.Duration{Duration: 25 * time.Second} }),
			facts: node(),
			want:  []Violation{{Field: "nodeStatusUpdateFrequency", Value: "25s", Bound: "plus up to 4% jitter: after one failed update the next lands 52s later, at or beyond the node monitor grace period 50s"}},
		},
		"status updates whose second lands inside the grace period": {
			cfg:   newConfig(func(c *config) { c.NodeStatusUpdateFrequency = metav1.Duration{Duration: 24 * time.Second} }),
			facts: node(),
		},
		"a podPidsLimit that lets no pod fork": {
			cfg:   newConfig(func(c *config) { c.PodPidsLimit = ptr.To[int64](1) }),
			facts: NodeFacts{},
			want:  []Violation{{Field: "podPidsLimit", Value: "1", Bound: "below 16: no pod, the node's DaemonSets included, can start its containers"}},
		},
		"a podPidsLimit at the floor": {
			cfg:   newConfig(func(c *config) { c.PodPidsLimit = ptr.To[int64](16) }),
			facts: NodeFacts{},
		},
		"podPidsLimit unlimited": {
			cfg:   newConfig(func(c *config) { c.PodPidsLimit = ptr.To[int64](-1) }),
			facts: NodeFacts{},
		},
		"podPidsLimit 0, the kubelet's default": {
			cfg:   newConfig(func(c *config) { c.PodPidsLimit = ptr.To[int64](0) }),
			facts: NodeFacts{},
		},
		"a containerLogMaxSize that destroys logs": {
			cfg:   newConfig(func(c *config) { c.ContainerLogMaxSize = "1" }),
			facts: NodeFacts{},
			want:  []Violation{{Field: "containerLogMaxSize", Value: "1", Bound: "below 16Ki, one CRI log line: every rotation destroys the containers' logs"}},
		},
		"a containerLogMaxSize at the floor": {
			cfg:   newConfig(func(c *config) { c.ContainerLogMaxSize = "16Ki" }),
			facts: NodeFacts{},
		},
		"maxPods below the running pods": {
			cfg:   newConfig(func(c *config) { c.MaxPods = 11 }),
			facts: node(),
			want:  []Violation{{Field: "maxPods", Value: "11", Bound: "the node runs 12 pods now"}},
		},
		"maxPods equal to the running pods": {
			cfg:   newConfig(func(c *config) { c.MaxPods = 12 }),
			facts: node(),
		},
		"unset maxPods is 110": {
			cfg:   newConfig(func(c *config) { c.MaxPods = 0 }),
			facts: node(func(f *NodeFacts) { f.RunningPods = 111 }),
			want:  []Violation{{Field: "maxPods", Value: "110", Bound: "the node runs 111 pods now"}},
		},
		"running pods unknown": {
			cfg:   newConfig(func(c *config) { c.MaxPods = 1; c.PodsPerCore = 1 }),
			facts: node(func(f *NodeFacts) { f.RunningPods = 0 }),
		},
		"podsPerCore leaves too little room": {
			cfg:   newConfig(func(c *config) { c.PodsPerCore = 2 }),
			facts: node(),
			want:  []Violation{{Field: "podsPerCore", Value: "2", Bound: "the node runs 12 pods now and has 4 CPUs, room for 8"}},
		},
		"reservations at capacity": {
			cfg: newConfig(func(c *config) {
				c.KubeReserved = map[string]string{"cpu": "2", "memory": "4Gi"}
				c.SystemReserved = map[string]string{"cpu": "2", "memory": "4Gi", "ephemeral-storage": "50Gi"}
			}),
			facts: node(),
			want: []Violation{
				{Field: `kubeReserved["cpu"]+systemReserved["cpu"]`, Value: "2+2", Bound: "at or above capacity cpu=4"},
				{Field: `kubeReserved["memory"]+systemReserved["memory"]+evictionHard["memory.available"]`, Value: "4Gi+4Gi+100Mi", Bound: "at or above capacity memory=8Gi"},
			},
		},
		"a percentage eviction threshold counts against capacity": {
			cfg: newConfig(func(c *config) {
				c.SystemReserved = map[string]string{"ephemeral-storage": "91Gi"}
			}),
			facts: node(),
			want: []Violation{
				{Field: `systemReserved["ephemeral-storage"]+evictionHard["nodefs.available"]`, Value: "91Gi+10%", Bound: "at or above capacity ephemeral-storage=100Gi"},
			},
		},
		"unset evictionHard uses the defaults": {
			cfg:   newConfig(func(c *config) { c.EvictionHard = nil; c.KubeReserved = map[string]string{"memory": "7.95Gi"} }),
			facts: node(),
			want: []Violation{
				{Field: `kubeReserved["memory"]+evictionHard["memory.available"]`, Value: "7.95Gi+100Mi", Bound: "at or above capacity memory=8Gi"},
			},
		},
		"an empty evictionHard has no threshold": {
			cfg: newConfig(func(c *config) {
				c.EvictionHard = map[string]string{}
				c.KubeReserved = map[string]string{"memory": "7.95Gi"}
			}),
			facts: node(),
		},
		"mergeDefaultEvictionSettings fills in the defaults": {
			cfg: newConfig(func(c *config) {
				c.EvictionHard = map[string]string{"nodefs.available": "5%"}
				c.MergeDefaultEvictionSettings = ptr.To(true)
				c.KubeReserved = map[string]string{"memory": "7.95Gi"}
			}),
			facts: node(),
			want: []Violation{
				{Field: `kubeReserved["memory"]+evictionHard["memory.available"]`, Value: "7.95Gi+100Mi", Bound: "at or above capacity memory=8Gi"},
			},
		},
		"values that do not parse are left to Validate": {
			cfg: newConfig(func(c *config) {
				c.EvictionHard = map[string]string{"memory.available": "lots", "nodefs.available": "x%"}
				c.KubeReserved = map[string]string{"memory": "most"}
			}),
			facts: node(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := CheckBounds(tc.cfg, tc.facts)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CheckBounds() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormatViolations(t *testing.T) {
	tests := map[string]struct {
		in   []Violation
		want string
	}{
		"none": {},
		"two": {
			in: []Violation{
				{Field: "maxPods", Value: "5", Bound: "the node runs 12 pods now"},
				{Field: `evictionHard["memory.available"]`, Value: "3Gi", Bound: "at or above capacity memory=2Gi"},
			},
			want: `maxPods 5 (the node runs 12 pods now); evictionHard["memory.available"] 3Gi (at or above capacity memory=2Gi)`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FormatViolations(tc.in)); diff != "" {
				t.Errorf("FormatViolations() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
