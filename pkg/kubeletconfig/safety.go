package kubeletconfig

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// SafetyClass names a group of fields that are unsafe to change on a live
// kubelet. Operators opt in to a class by name.
type SafetyClass string

const (
	// ResourceManagers covers cpuManagerPolicy, memoryManagerPolicy and
	// topologyManagerPolicy. A CPU or memory manager policy change needs the
	// manager's state file removed while the kubelet is stopped
	// (see NeedsStateReset), or the kubelet crash-loops.
	ResourceManagers SafetyClass = "resource-managers"
	// CgroupDriver covers cgroupDriver, which must match the container
	// runtime; changing it amounts to replacing the node.
	CgroupDriver SafetyClass = "cgroup-driver"
	// Capacity covers fields that change what the node can admit
	// (maxPods, podsPerCore, kubeReserved, systemReserved, eviction
	// thresholds, enforceNodeAllocatable). The kubelet re-admits pods on
	// restart. Capacity changes are never refused, only reported: changing
	// maxPods is the everyday use of dkc.
	Capacity SafetyClass = "capacity"
	// Security covers changes that weaken the kubelet's security:
	// anonymous authentication turned on, authorization.mode becoming
	// AlwaysAllow, readOnlyPort becoming non-zero, protectKernelDefaults
	// turned off. Strengthening changes are not reported.
	Security SafetyClass = "security"
)

// Change is one unsafe difference between two configs. Old and New hold the
// field's values as written; an unset value is "".
type Change struct {
	Class SafetyClass
	Field string
	Old   string
	New   string
}

// Classify lists the unsafe differences from oldCfg to newCfg, sorted by class and
// then field. Values that the kubelet treats the same (for example an unset
// cpuManagerPolicy and "none") do not count as a difference.
func Classify(oldCfg, newCfg *kubeletconfigv1beta1.KubeletConfiguration) []Change {
	var changes []Change
	add := func(class SafetyClass, field, o, n string) {
		changes = append(changes, Change{Class: class, Field: field, Old: o, New: n})
	}
	policy := func(field, o, n, unset string) {
		if cmp.Or(o, unset) != cmp.Or(n, unset) {
			add(ResourceManagers, field, o, n)
		}
	}
	policy("cpuManagerPolicy", oldCfg.CPUManagerPolicy, newCfg.CPUManagerPolicy, "none")
	policy("memoryManagerPolicy", oldCfg.MemoryManagerPolicy, newCfg.MemoryManagerPolicy, kubeletconfigv1beta1.NoneMemoryManagerPolicy)
	policy("topologyManagerPolicy", oldCfg.TopologyManagerPolicy, newCfg.TopologyManagerPolicy, kubeletconfigv1beta1.NoneTopologyManagerPolicy)

	if cmp.Or(oldCfg.CgroupDriver, "cgroupfs") != cmp.Or(newCfg.CgroupDriver, "cgroupfs") {
		add(CgroupDriver, "cgroupDriver", oldCfg.CgroupDriver, newCfg.CgroupDriver)
	}

	number := func(field string, o, n int32) {
		if o != n {
			add(Capacity, field, strconv.Itoa(int(o)), strconv.Itoa(int(n)))
		}
	}
	number("maxPods", oldCfg.MaxPods, newCfg.MaxPods)
	number("podsPerCore", oldCfg.PodsPerCore, newCfg.PodsPerCore)
	mapped := func(field string, o, n map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(union(o, n))) {
			if o[k] != n[k] {
				add(Capacity, fmt.Sprintf("%s[%q]", field, k), o[k], n[k])
			}
		}
	}
	mapped("kubeReserved", oldCfg.KubeReserved, newCfg.KubeReserved)
	mapped("systemReserved", oldCfg.SystemReserved, newCfg.SystemReserved)
	mapped("evictionHard", oldCfg.EvictionHard, newCfg.EvictionHard)
	mapped("evictionSoft", oldCfg.EvictionSoft, newCfg.EvictionSoft)
	mapped("evictionMinimumReclaim", oldCfg.EvictionMinimumReclaim, newCfg.EvictionMinimumReclaim)
	// nil means the default (["pods"]) while [] means none, so both differ.
	if o, n := list(oldCfg.EnforceNodeAllocatable), list(newCfg.EnforceNodeAllocatable); o != n {
		add(Capacity, "enforceNodeAllocatable", o, n)
	}

	if !isTrue(oldCfg.Authentication.Anonymous.Enabled) && isTrue(newCfg.Authentication.Anonymous.Enabled) {
		add(Security, "authentication.anonymous.enabled", boolPtr(oldCfg.Authentication.Anonymous.Enabled), "true")
	}
	if alwaysAllow := kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow; oldCfg.Authorization.Mode != alwaysAllow && newCfg.Authorization.Mode == alwaysAllow {
		add(Security, "authorization.mode", string(oldCfg.Authorization.Mode), string(alwaysAllow))
	}
	if oldCfg.ReadOnlyPort == 0 && newCfg.ReadOnlyPort != 0 {
		add(Security, "readOnlyPort", "0", strconv.Itoa(int(newCfg.ReadOnlyPort)))
	}
	if oldCfg.ProtectKernelDefaults && !newCfg.ProtectKernelDefaults {
		add(Security, "protectKernelDefaults", "true", "false")
	}

	slices.SortStableFunc(changes, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Class, b.Class), cmp.Compare(a.Field, b.Field))
	})
	return changes
}

// Refused returns the changes that allowed does not opt in to. allowed is
// the value of the opt-in annotation: a comma-separated list of class names,
// or "*" for all. Capacity changes are never refused.
func Refused(changes []Change, allowed string) []Change {
	opted := map[SafetyClass]bool{}
	for _, name := range strings.Split(allowed, ",") {
		opted[SafetyClass(strings.TrimSpace(name))] = true
	}
	var refused []Change
	for _, c := range changes {
		if c.Class == Capacity || opted["*"] || opted[c.Class] {
			continue
		}
		refused = append(refused, c)
	}
	return refused
}

// NeedsStateReset reports whether the CPU and memory manager state files
// (/var/lib/kubelet/{cpu,memory}_manager_state) must be removed, while the
// kubelet is stopped, before it starts on newCfg. That is only when the
// policy really changes; removing them on every restart would be wrong.
func NeedsStateReset(oldCfg, newCfg *kubeletconfigv1beta1.KubeletConfiguration) (cpu, memory bool) {
	cpu = cmp.Or(oldCfg.CPUManagerPolicy, "none") != cmp.Or(newCfg.CPUManagerPolicy, "none")
	memory = cmp.Or(oldCfg.MemoryManagerPolicy, kubeletconfigv1beta1.NoneMemoryManagerPolicy) !=
		cmp.Or(newCfg.MemoryManagerPolicy, kubeletconfigv1beta1.NoneMemoryManagerPolicy)
	return cpu, memory
}

// WeakSecurity returns a human warning for each weak security setting in
// cfg. A snapshot copies such settings from the node, so snapshot warns.
func WeakSecurity(cfg *kubeletconfigv1beta1.KubeletConfiguration) []string {
	var warnings []string
	if isTrue(cfg.Authentication.Anonymous.Enabled) {
		warnings = append(warnings, "authentication.anonymous.enabled is true: anonymous requests reach the kubelet API")
	}
	if cfg.Authorization.Mode == kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow {
		warnings = append(warnings, "authorization.mode is AlwaysAllow: every authenticated request is authorized")
	}
	if cfg.ReadOnlyPort != 0 {
		warnings = append(warnings, fmt.Sprintf("readOnlyPort is %d: the kubelet serves an unauthenticated read-only port", cfg.ReadOnlyPort))
	}
	return warnings
}

// UnprotectedKernelDefaults is the warning for a document that sets
// protectKernelDefaults to false in so many words.
const UnprotectedKernelDefaults = "protectKernelDefaults is false: the kubelet changes kernel settings it disagrees with instead of failing"

// WeakSecurityDoc returns WeakSecurity(cfg) for the document data that cfg
// was decoded from, plus UnprotectedKernelDefaults when data sets
// protectKernelDefaults to false explicitly. An unset field is false too
// (the kubelet's default) but is not reported: most configs leave it out,
// /configz omits it when false, so only an explicit false, which someone
// wrote, says something. data that is not a JSON or YAML object adds
// nothing.
func WeakSecurityDoc(data []byte, cfg *kubeletconfigv1beta1.KubeletConfiguration) []string {
	warnings := WeakSecurity(cfg)
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return warnings
	}
	if v, ok := doc["protectKernelDefaults"].(bool); ok && !v {
		warnings = append(warnings, UnprotectedKernelDefaults)
	}
	return warnings
}

func isTrue(b *bool) bool {
	return b != nil && *b
}

func boolPtr(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

// list renders a string list so that nil ("") and empty ("[]") differ.
func list(l []string) string {
	if l == nil {
		return ""
	}
	return "[" + strings.Join(l, ",") + "]"
}

func union(a, b map[string]string) map[string]string {
	u := maps.Clone(a)
	if u == nil {
		u = map[string]string{}
	}
	maps.Copy(u, b)
	return u
}
