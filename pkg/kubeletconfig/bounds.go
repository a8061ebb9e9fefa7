package kubeletconfig

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// NodeFacts is what CheckBounds and FeatureChanges know about the node a
// config is for.
type NodeFacts struct {
	// Capacity is node.status.capacity (cpu, memory, ephemeral-storage,
	// pods). A missing resource skips the bounds that need it.
	Capacity corev1.ResourceList
	// RunningPods counts the non-terminal pods bound to the node; 0 means
	// unknown and skips the bounds that need it.
	RunningPods int
	// NodeMonitorGracePeriod is kube-controller-manager's
	// --node-monitor-grace-period (the agent's flag of the same name); 0
	// means DefaultNodeMonitorGracePeriod.
	NodeMonitorGracePeriod time.Duration
	// Signals are the eviction signals measured on the node now, by name
	// ("memory.available", "nodefs.available", "nodefs.inodesFree"). A
	// signal that is missing skips the bound that needs it.
	Signals map[string]Signal
	// DeclaredFeatures is node.status.declaredFeatures: the features the
	// node's kubelet declares now (FeatureChanges).
	DeclaredFeatures []string
	// PodFeatures holds, by namespace/name, the declared features each
	// running pod bound to the node relies on (PodFeatures); a pod that
	// relies on none may be left out.
	PodFeatures map[string][]string
}

// Signal is an eviction signal's value on the node now: how much of
// Capacity is available.
type Signal struct {
	Available resource.Quantity
	Capacity  resource.Quantity
}

// Violation is a config value that cannot be right on the node: Field and
// Value as in Change, and Bound the bound it breaks, in words.
type Violation struct {
	Field string
	Value string
	Bound string
}

const (
	// DefaultNodeMonitorGracePeriod is kube-controller-manager's default
	// --node-monitor-grace-period: 50s since Kubernetes 1.32 (it was 40s),
	// and still in 1.37 (k8s.io/kubernetes v1.37.2,
	// pkg/controller/nodelifecycle/config/v1alpha1/defaults.go; see also
	// kubernetes/kubernetes#127352, which discusses the 50s default). A node
	// whose kubelet neither renews its lease nor posts status for this long
	// turns Unknown.
	DefaultNodeMonitorGracePeriod = 50 * time.Second

	// The kubelet renews its node lease every quarter of
	// nodeLeaseDurationSeconds (k8s.io/kubernetes v1.37.2, pkg/kubelet:
	// nodeLeaseRenewIntervalFraction = 0.25).
	leaseRenewFraction = 0.25
	// heartbeatJitter is how much later than its interval the kubelet may
	// renew its lease (k8s.io/component-helpers/apimachinery/lease:
	// wait.JitterUntil with a factor of 0.04) or sync its node status
	// (pkg/kubelet, syncNodeStatus, the same factor).
	heartbeatJitter = 0.04
	// heartbeatsInGrace is how many heartbeat intervals, jitter included,
	// must fit in the node monitor grace period: one renewal may fail (an
	// apiserver restart, a leader change, a slow etcd) and the next one
	// still lands in time. With one, a single failure turns the node
	// Unknown and evicts its pods.
	heartbeatsInGrace = 2

	// minPodPidsLimit is the lowest podPidsLimit at which a pod can start
	// at all. The limit applies to every pod, the node's own DaemonSets
	// included, and counts threads, not only processes: the pause process,
	// and runc init (a Go program of several threads) starting each
	// container inside the pod's cgroup, take about ten before the
	// container's first process runs. Below it no pod starts; -1 and 0 mean
	// unlimited. Whether a pod's own image fits above it is not a bound:
	// the health gate's new pod shows it on the node.
	minPodPidsLimit = 16
	// minContainerLogMaxSize is the lowest containerLogMaxSize that keeps
	// logs: one CRI log line, which containerd splits at 16 KiB
	// (max_container_log_line_size). A smaller file is rotated on every
	// line, and kubectl logs shows almost nothing.
	minContainerLogMaxSize = 16 << 10

	// The kubelet's v1beta1 defaults for unset fields (documented on
	// KubeletConfiguration).
	defaultNodeLeaseDurationSeconds  = 40
	defaultNodeStatusUpdateFrequency = 10 * time.Second
	defaultMaxPods                   = 110
)

// defaultEvictionHard is the kubelet's evictionHard on Linux when the field
// is unset, or the signals it fills in when mergeDefaultEvictionSettings is
// true (k8s.io/kubernetes v1.37.2, pkg/kubelet/eviction/defaults_linux.go,
// applied by cmd/kubelet when it loads the config).
var defaultEvictionHard = map[string]string{
	"memory.available":   "100Mi",
	"nodefs.available":   "10%",
	"nodefs.inodesFree":  "5%",
	"imagefs.available":  "15%",
	"imagefs.inodesFree": "5%",
}

// evictionCapacity maps an eviction signal measured in bytes to the node
// capacity it is a part of. imagefs and containerfs are compared with the
// node filesystem (ephemeral-storage) because node status reports no other;
// a separate, larger image filesystem could take a threshold that this
// bound refuses.
var evictionCapacity = map[string]corev1.ResourceName{
	"memory.available":      corev1.ResourceMemory,
	"nodefs.available":      corev1.ResourceEphemeralStorage,
	"imagefs.available":     corev1.ResourceEphemeralStorage,
	"containerfs.available": corev1.ResourceEphemeralStorage,
}

// CheckBounds returns the values of cfg that cannot be right on a live node
// described by facts: eviction thresholds the node always crosses or crosses
// right now, lease and status intervals that leave no margin under the node
// monitor grace period (two intervals, jitter included, so that one failed
// heartbeat does not turn the node Unknown), a pod limit below the pods the
// node runs, a podPidsLimit below minPodPidsLimit, a containerLogMaxSize
// below minContainerLogMaxSize, and reservations that leave nothing
// allocatable. The kubelet accepts all of them and stays Ready at first;
// the node then evicts its pods, turns Unknown, or rejects pods at
// re-admission. Unset fields count with the kubelet's defaults. Values that
// do not parse are left to Validate.
func CheckBounds(cfg *kubeletconfigv1beta1.KubeletConfiguration, facts NodeFacts) []Violation {
	var out []Violation
	hard := effectiveEvictionHard(cfg)
	out = append(out, evictionBounds("evictionHard", hard, facts)...)
	out = append(out, evictionBounds("evictionSoft", cfg.EvictionSoft, facts)...)

	grace := facts.NodeMonitorGracePeriod
	if grace <= 0 {
		grace = DefaultNodeMonitorGracePeriod
	}
	lease := int64(cfg.NodeLeaseDurationSeconds)
	if lease == 0 {
		lease = defaultNodeLeaseDurationSeconds
	}
	renew := time.Duration(float64(lease) * leaseRenewFraction * float64(time.Second))
	if gap := heartbeatGap(renew); gap >= grace {
		out = append(out, Violation{Field: "nodeLeaseDurationSeconds", Value: strconv.FormatInt(lease, 10),
			Bound: fmt.Sprintf("renewed every %s (a quarter of it) plus up to 4%% jitter: after one failed renewal the next lands %s later, at or beyond the node monitor grace period %s", renew, gap, grace)})
	}
	status := cfg.NodeStatusUpdateFrequency.Duration
	if status == 0 {
		status = defaultNodeStatusUpdateFrequency
	}
	if gap := heartbeatGap(status); gap >= grace {
		out = append(out, Violation{Field: "nodeStatusUpdateFrequency", Value: status.String(),
			Bound: fmt.Sprintf("plus up to 4%% jitter: after one failed update the next lands %s later, at or beyond the node monitor grace period %s", gap, grace)})
	}

	if cfg.PodPidsLimit != nil && *cfg.PodPidsLimit > 0 && *cfg.PodPidsLimit < minPodPidsLimit {
		out = append(out, Violation{Field: "podPidsLimit", Value: strconv.FormatInt(*cfg.PodPidsLimit, 10),
			Bound: fmt.Sprintf("below %d: no pod, the node's DaemonSets included, can start its containers", minPodPidsLimit)})
	}
	if q, err := resource.ParseQuantity(cfg.ContainerLogMaxSize); err == nil && q.Sign() > 0 && q.Value() < minContainerLogMaxSize {
		out = append(out, Violation{Field: "containerLogMaxSize", Value: cfg.ContainerLogMaxSize,
			Bound: "below 16Ki, one CRI log line: every rotation destroys the containers' logs"})
	}

	if facts.RunningPods > 0 {
		maxPods := int64(cfg.MaxPods)
		if maxPods == 0 {
			maxPods = defaultMaxPods
		}
		if maxPods < int64(facts.RunningPods) {
			out = append(out, Violation{Field: "maxPods", Value: strconv.FormatInt(maxPods, 10),
				Bound: fmt.Sprintf("the node runs %d pods now", facts.RunningPods)})
		}
		if cpu, ok := facts.Capacity[corev1.ResourceCPU]; ok && cfg.PodsPerCore > 0 && !cpu.IsZero() {
			if room := int64(cfg.PodsPerCore) * cpu.Value(); room < int64(facts.RunningPods) {
				out = append(out, Violation{Field: "podsPerCore", Value: strconv.Itoa(int(cfg.PodsPerCore)),
					Bound: fmt.Sprintf("the node runs %d pods now and has %s CPUs, room for %d", facts.RunningPods, cpu.String(), room)})
			}
		}
	}

	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if v, ok := reservationBound(cfg, hard, r, facts.Capacity); ok {
			out = append(out, v)
		}
	}
	return out
}

// heartbeatGap is the longest time between two heartbeats sent every
// interval when one of them fails: heartbeatsInGrace intervals, each up to
// heartbeatJitter late.
func heartbeatGap(interval time.Duration) time.Duration {
	return time.Duration(float64(interval) * (1 + heartbeatJitter) * heartbeatsInGrace).Round(time.Millisecond)
}

// FormatViolations shows violations as `field value (bound)`, separated by
// semicolons, bounded (JoinBounded, with long values shortened).
func FormatViolations(v []Violation) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%s %s (%s)", shortValue(x.Field), shortValue(x.Value), x.Bound)
	}
	return JoinBounded(parts, "; ")
}

// effectiveEvictionHard is evictionHard as the kubelet runs it: the
// defaults when unset, filled in with them when mergeDefaultEvictionSettings
// is true, and as written otherwise (an empty map means no hard eviction).
func effectiveEvictionHard(cfg *kubeletconfigv1beta1.KubeletConfiguration) map[string]string {
	if cfg.EvictionHard == nil {
		return defaultEvictionHard
	}
	if !isTrue(cfg.MergeDefaultEvictionSettings) {
		return cfg.EvictionHard
	}
	merged := maps.Clone(defaultEvictionHard)
	maps.Copy(merged, cfg.EvictionHard)
	return merged
}

func evictionBounds(field string, thresholds map[string]string, facts NodeFacts) []Violation {
	capacity := facts.Capacity
	var out []Violation
	for _, signal := range slices.Sorted(maps.Keys(thresholds)) {
		value := thresholds[signal]
		name := fmt.Sprintf("%s[%q]", field, signal)
		if v, ok := crossedNow(value, facts.Signals[signal]); ok {
			out = append(out, Violation{Field: name, Value: value, Bound: v})
			continue
		}
		if p, ok := percent(value); ok {
			if p >= 100 {
				out = append(out, Violation{Field: name, Value: value, Bound: "at or above 100%: the node always crosses it"})
			}
			continue
		}
		r, ok := evictionCapacity[signal]
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(value)
		c, known := capacity[r]
		if err != nil || !known || c.IsZero() {
			continue
		}
		if q.Cmp(c) >= 0 {
			out = append(out, Violation{Field: name, Value: value, Bound: fmt.Sprintf("at or above capacity %s=%s", r, c.String())})
		}
	}
	return out
}

// crossedNow reports, when the node measured the signal (its capacity is
// known), whether the threshold value is crossed by what is available now,
// and the bound in words.
func crossedNow(value string, s Signal) (string, bool) {
	if s.Capacity.IsZero() {
		return "", false
	}
	var threshold resource.Quantity
	if p, ok := percent(value); ok {
		threshold = *resource.NewQuantity(int64(float64(s.Capacity.Value())*p/100), s.Capacity.Format)
	} else {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return "", false
		}
		threshold = q
	}
	if s.Available.Cmp(threshold) >= 0 {
		return "", false
	}
	return fmt.Sprintf("the node has %s of %s available now: it would evict at once", s.Available.String(), s.Capacity.String()), true
}

// reservationBound checks that kubeReserved, systemReserved and, for memory
// and ephemeral-storage, the hard eviction threshold leave some of resource
// r allocatable. Without a reservation there is nothing to add up.
func reservationBound(cfg *kubeletconfigv1beta1.KubeletConfiguration, hard map[string]string, r corev1.ResourceName, capacity corev1.ResourceList) (Violation, bool) {
	c, ok := capacity[r]
	if !ok || c.IsZero() {
		return Violation{}, false
	}
	var fields, values []string
	sum := resource.Quantity{Format: c.Format}
	add := func(field, value string, q resource.Quantity) {
		fields, values = append(fields, field), append(values, value)
		sum.Add(q)
	}
	for _, m := range []struct {
		field    string
		reserved map[string]string
	}{{"kubeReserved", cfg.KubeReserved}, {"systemReserved", cfg.SystemReserved}} {
		if v, ok := m.reserved[string(r)]; ok {
			if q, err := resource.ParseQuantity(v); err == nil {
				add(fmt.Sprintf("%s[%q]", m.field, r), v, q)
			}
		}
	}
	if len(fields) == 0 {
		// A threshold alone at capacity is evictionBounds' to report.
		return Violation{}, false
	}
	signal := map[corev1.ResourceName]string{corev1.ResourceMemory: "memory.available", corev1.ResourceEphemeralStorage: "nodefs.available"}[r]
	if v, ok := hard[signal]; ok && signal != "" {
		field := fmt.Sprintf("evictionHard[%q]", signal)
		if p, ok := percent(v); ok {
			q := *resource.NewQuantity(int64(float64(c.Value())*p/100), c.Format)
			add(field, v, q)
		} else if q, err := resource.ParseQuantity(v); err == nil {
			add(field, v, q)
		}
	}
	if sum.Cmp(c) < 0 {
		return Violation{}, false
	}
	return Violation{
		Field: strings.Join(fields, "+"),
		Value: strings.Join(values, "+"),
		Bound: fmt.Sprintf("at or above capacity %s=%s", r, c.String()),
	}, true
}

// percent parses an eviction threshold written as a percentage ("10%").
func percent(v string) (float64, bool) {
	s, ok := strings.CutSuffix(v, "%")
	if !ok {
		return 0, false
	}
	p, err := strconv.ParseFloat(s, 64)
	return p, err == nil
}
