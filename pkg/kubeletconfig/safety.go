package kubeletconfig

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// SafetyClass names a group of KubeletConfiguration fields by what a change
// to them can do to a node. Every field has one (see FieldClasses). The
// classes that are refused by default are the values of --allow-unsafe.
type SafetyClass string

const (
	// HostAccess covers fields that let the config's author run code, read
	// credentials or impersonate on the node: static pods, the volume plugin
	// dir, the kubelet's certificates and client CA, providerID,
	// featureGates. A field that has no class is HostAccess too.
	HostAccess SafetyClass = "host-access"
	// Security covers the kubelet API's authentication, authorization and
	// TLS, what the kubelet writes to its journal (a logging.verbosity at
	// which client-go logs request and response bodies, logging.vmodule),
	// and the isolation the kubelet enforces on pods (seccomp default,
	// unsafe sysctls, protectKernelDefaults). A change that only strengthens
	// (readOnlyPort to 0, anonymous authentication off, authorization.mode
	// Webhook, protectKernelDefaults or seccompDefault on, a verbosity below
	// 8) is Safe.
	Security SafetyClass = "security"
	// Redirect covers fields that point the node's runtime, image service,
	// DNS, packet marks or traces somewhere else; turning tracing on is one.
	Redirect SafetyClass = "redirect"
	// ResourceManagers covers the CPU, memory and topology managers'
	// policies and options. A CPU or memory manager policy change needs the
	// manager's state file removed while the kubelet is stopped
	// (see NeedsStateReset), or the kubelet crash-loops.
	ResourceManagers SafetyClass = "resource-managers"
	// CgroupDriver covers cgroupDriver, which must match the container
	// runtime (changing it amounts to replacing the node), and the cgroup
	// layout that running pods live in.
	CgroupDriver SafetyClass = "cgroup-driver"
	// Isolation covers the protections that keep one pod from taking what
	// the node's other pods need: CPU limits (cpuCFSQuota),
	// ephemeral-storage limits (localStorageCapacityIsolation), hard
	// eviction on memory and the node filesystem, and image garbage
	// collection. Turning one of them off needs an opt-in; turning it on
	// does not (see classify).
	Isolation SafetyClass = "isolation"
	// DeclaredFeatures is not a field's class: a config is in it when its
	// featureGates would change what the node declares in
	// status.declaredFeatures (FeatureChanges). The kubelet rejects the
	// running pods that rely on a feature it stops declaring, and the
	// scheduler places pods by what nodes declare.
	DeclaredFeatures SafetyClass = "declared-features"
	// Capacity covers fields that change what the node can admit (maxPods,
	// reservations, eviction). The kubelet re-admits pods on restart.
	// Capacity changes are never refused, only reported and checked against
	// the node (CheckBounds): changing maxPods is the everyday use of dkc.
	Capacity SafetyClass = "capacity"
	// Availability covers fields whose value can make a live node NotReady
	// or Unknown (status and lease intervals, runtime timeouts). Not
	// refused; CheckBounds catches the values that cannot work.
	Availability SafetyClass = "availability"
	// Safe covers everything else: logging, image garbage collection, rate
	// limits and other tuning.
	Safe SafetyClass = "safe"
)

// Classes returns every class, the refused ones first, in the order help
// text lists them.
func Classes() []SafetyClass {
	return []SafetyClass{HostAccess, Security, Redirect, ResourceManagers, CgroupDriver, Isolation, DeclaredFeatures, Capacity, Availability, Safe}
}

// RefusedByDefault reports whether a change in class c is refused unless the
// assigner allows c. A name that is not a class is refused.
func (c SafetyClass) RefusedByDefault() bool {
	switch c {
	case Capacity, Availability, Safe:
		return false
	}
	return true
}

// optIn lists the classes that need an opt-in, for messages.
func optIn() string {
	var names []string
	for _, c := range Classes() {
		if c.RefusedByDefault() {
			names = append(names, string(c))
		}
	}
	return strings.Join(names, ", ")
}

// ParseClasses parses the value of --allow-unsafe: comma-separated class
// names. "" allows nothing. There is no wildcard: each class is named, so
// that a new class is never allowed by an old assignment.
func ParseClasses(s string) ([]SafetyClass, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	known := map[SafetyClass]bool{}
	for _, c := range Classes() {
		known[c] = true
	}
	var classes []SafetyClass
	for _, name := range strings.Split(s, ",") {
		c := SafetyClass(strings.TrimSpace(name))
		switch {
		case c == "":
			return nil, fmt.Errorf("empty class name in %q: name the classes to allow, out of %s", s, optIn())
		case c == "*" || c == "all":
			return nil, fmt.Errorf("%q is not a class: name the classes to allow, out of %s", c, optIn())
		case !known[c]:
			return nil, fmt.Errorf("unknown class %q: name the classes to allow, out of %s", c, optIn())
		case !c.RefusedByDefault():
			return nil, fmt.Errorf("%s needs no opt-in: only %s do", c, optIn())
		}
		if !slices.Contains(classes, c) {
			classes = append(classes, c)
		}
	}
	return classes, nil
}

// Change is one difference between two configs. Field is the JSON path of
// the field, with the key for a map entry (`kubeReserved["cpu"]`). Old and
// New are the values rendered compactly: strings and durations as they are
// written, structured values as JSON, and "" for unset. A DeclaredFeatures
// change is of the node's status.declaredFeatures (FieldDeclaredFeatures),
// with the feature as Old when the node stops declaring it and as New when
// it starts to.
type Change struct {
	Class SafetyClass
	Field string
	Old   string
	New   string
	// Pods names (namespace/name) the running pods that rely on the
	// declared feature a DeclaredFeatures change takes away: the kubelet
	// rejects them when it starts.
	Pods []string
}

// Classify lists every difference from oldCfg to newCfg with its class,
// sorted by class and then field. Values that the kubelet treats the same
// do not count: an unset field and its documented constant default (an
// unset cpuManagerPolicy and "none", an unset authorization.mode and
// "Webhook"). A nil and an empty list or map do count, because for
// enforceNodeAllocatable and evictionHard nil means the default and empty
// means none; so does a set struct with nothing in it (tracing: {} turns
// tracing on). Where the values decide a class, classify says so. An
// isolating hard eviction signal that the kubelet enforces on oldCfg and
// not on newCfg is an Isolation change of its evictionHard entry, with the
// effective thresholds as Old and New, even when newCfg drops it without
// naming it.
func Classify(oldCfg, newCfg *kubeletconfigv1beta1.KubeletConfiguration) []Change {
	o, n := flatten(oldCfg), flatten(newCfg)
	evictionOff := evictionTurnedOff(oldCfg, newCfg)
	var changes []Change
	for _, leaf := range slices.Sorted(maps.Keys(union(o, n))) {
		ov, nv := o[leaf], n[leaf]
		on, nn := ov, nv
		if d, ok := kubeletDefaults[leaf]; ok {
			on, nn = cmp.Or(ov, d), cmp.Or(nv, d)
		}
		if on == nn {
			continue
		}
		class := classify(leaf, on, nn)
		if _, ok := evictionOff[leaf]; ok {
			class = Isolation
			delete(evictionOff, leaf)
		}
		changes = append(changes, Change{Class: class, Field: leaf, Old: ov, New: nv})
	}
	for leaf, v := range evictionOff {
		changes = append(changes, Change{Class: Isolation, Field: leaf, Old: v[0], New: v[1]})
	}
	slices.SortStableFunc(changes, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Class, b.Class), cmp.Compare(a.Field, b.Field))
	})
	return changes
}

// Refused returns the changes whose class is refused by default and not in
// allowed (see ParseClasses).
func Refused(changes []Change, allowed []SafetyClass) []Change {
	var refused []Change
	for _, c := range changes {
		if c.Class.RefusedByDefault() && !slices.Contains(allowed, c.Class) {
			refused = append(refused, c)
		}
	}
	return refused
}

// FormatRefusal is the one text for refused changes, wherever an agent
// refuses them: FormatChanges of refused, then the --allow-unsafe value to
// assign again with (AllowFlag of needed: every change of a class that needs
// an opt-in, allowed or not, since a new assignment's pin replaces the old
// one's classes).
func FormatRefusal(refused, needed []Change) string {
	them := "them"
	if len(refused) == 1 {
		them = "it"
	}
	return fmt.Sprintf("%s; to allow %s, assign again with %s", FormatChanges(refused), them, AllowFlag(append(slices.Clone(refused), needed...)))
}

// FormatChanges shows each change as `field "old" -> "new" (class)`,
// comma-separated, bounded (JoinBounded, with long values shortened). A
// change with Pods names them after its class:
// `(declared-features; relied on by running pods ns/a, ns/b)`.
func FormatChanges(changes []Change) string {
	parts := make([]string, len(changes))
	for i, c := range changes {
		class := string(c.Class)
		if len(c.Pods) > 0 {
			class += "; relied on by running pods " + formatPods(c.Pods)
		}
		parts[i] = fmt.Sprintf("%s %q -> %q (%s)", shortValue(c.Field), shortValue(c.Old), shortValue(c.New), class)
	}
	return JoinBounded(parts, ", ")
}

// NeedsOptIn lists the changes that the config document payload makes to
// live, the config a node's kubelet runs (its /configz), in a class that
// the node's agent refuses unless the assignment allows it: what assign and
// rollout start --dry-run show for each node. payload is laid over live as
// the kubelet lays a drop-in over its config (MergePatch): a field payload
// leaves out keeps what the node runs, as the kubelet computes it again (a
// serving certificate under its cert dir) or takes it from a flag or a
// drop-in. (An agent in replace mode also counts a field that the node's
// config file sets and payload leaves out, and refuses it naming the flag.)
// A snapshot of the node needs none: it sets the node's own values. The
// declared features the config would change on the node (facts, see
// FeatureChanges) come last.
func NeedsOptIn(live *kubeletconfigv1beta1.KubeletConfiguration, payload []byte, facts NodeFacts) ([]Change, error) {
	patch, _, err := DecodePartial(payload, DecodeOptions{AllowUnknownFields: true})
	if err != nil {
		return nil, err
	}
	base, err := json.Marshal(live)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLoad, err)
	}
	merged, err := MergePatch(base, patch)
	if err != nil {
		return nil, err
	}
	cfg, _, err := Decode(merged, DecodeOptions{AllowUnknownFields: true})
	if err != nil {
		return nil, err
	}
	return append(Refused(Classify(live, cfg), nil), FeatureChanges(live, cfg, facts)...), nil
}

// OptInReport is the one text, for one node, of what NeedsOptIn found and
// allowed (the assignment's --allow-unsafe) does with it: the exact
// --allow-unsafe the config needs there, or none. refused says whether
// the node's agent would refuse the config as allowed stands.
func OptInReport(changes []Change, allowed []SafetyClass) (text string, refused bool) {
	if len(changes) == 0 {
		return "needs no --allow-unsafe: the config changes no field of a class that needs one", false
	}
	flag := AllowFlag(changes)
	if missing := Refused(changes, allowed); len(missing) > 0 {
		return fmt.Sprintf("needs %s, or its agent refuses the config (%s): it changes %s", flag, givenFlag(allowed), FormatChanges(changes)), true
	}
	return fmt.Sprintf("needs %s: it changes %s", flag, FormatChanges(changes)), false
}

// givenFlag names the --allow-unsafe given, or says that none was.
func givenFlag(allowed []SafetyClass) string {
	if len(allowed) == 0 {
		return "no --allow-unsafe given"
	}
	names := make([]string, len(allowed))
	for i, c := range allowed {
		names[i] = string(c)
	}
	return "given --allow-unsafe=" + strings.Join(names, ",")
}

// UnusedClasses returns the classes of allowed that no change of changes
// (every node's NeedsOptIn) is in: an opt-in wider than the config needs.
func UnusedClasses(allowed []SafetyClass, changes []Change) []SafetyClass {
	used := map[SafetyClass]bool{}
	for _, c := range changes {
		used[c.Class] = true
	}
	var unused []SafetyClass
	for _, c := range allowed {
		if !used[c] {
			unused = append(unused, c)
		}
	}
	return unused
}

// AllowFlag is the --allow-unsafe flag that allows every change of
// changes: --allow-unsafe=CLASS[,CLASS], each class once, in help order.
func AllowFlag(changes []Change) string {
	seen := map[SafetyClass]bool{}
	for _, c := range changes {
		seen[c.Class] = true
	}
	var classes []string
	for _, c := range Classes() {
		if seen[c] {
			classes = append(classes, string(c))
		}
	}
	// A class that Classes does not know cannot come from Classify, but
	// would otherwise be dropped from the flag silently.
	for _, c := range slices.Sorted(maps.Keys(seen)) {
		if !slices.Contains(Classes(), c) {
			classes = append(classes, string(c))
		}
	}
	return "--allow-unsafe=" + strings.Join(classes, ",")
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

var (
	marshalerType = reflect.TypeFor[json.Marshaler]()
	typeMetaType  = reflect.TypeFor[metav1.TypeMeta]()
)

// flatten renders cfg's set fields by JSON path, as Change shows them:
// structs are walked, map entries are keyed `field["key"]`, and lists,
// structured map values and types with their own JSON encoding (durations,
// quantities) are leaves. A zero value not reached through a pointer is
// unset and absent, as omitempty would drop it; a nil and an empty list or
// map differ (the empty one is "[]" or "{}"), and a set struct pointer is a
// leaf "{}" of its own beside its fields. TypeMeta is not a setting and is
// left out.
func flatten(cfg *kubeletconfigv1beta1.KubeletConfiguration) map[string]string {
	out := map[string]string{}
	if cfg != nil {
		walk(reflect.ValueOf(cfg).Elem(), "", false, out)
	}
	return out
}

func walk(v reflect.Value, path string, viaPointer bool, out map[string]string) {
	t := v.Type()
	switch {
	case t == typeMetaType:
		return
	case t.Kind() == reflect.Pointer:
		if v.IsNil() {
			return
		}
		if e := t.Elem(); e.Kind() == reflect.Struct && !e.Implements(marshalerType) && !t.Implements(marshalerType) {
			// A set struct is a leaf of its own, so that setting one with
			// nothing in it (tracing: {}) counts.
			out[path] = "{}"
		}
		walk(v.Elem(), path, true, out)
		return
	case t.Kind() == reflect.Struct && !t.Implements(marshalerType) && !reflect.PointerTo(t).Implements(marshalerType):
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			p := path
			if name != "" {
				p = join(path, name)
			} else if !f.Anonymous {
				p = join(path, f.Name)
			}
			walk(v.Field(i), p, false, out)
		}
		return
	case t.Kind() == reflect.Map:
		if v.IsNil() {
			return
		}
		if v.Len() == 0 {
			out[path] = "{}"
			return
		}
		for _, k := range v.MapKeys() {
			out[fmt.Sprintf("%s[%q]", path, fmt.Sprint(k.Interface()))] = render(v.MapIndex(k))
		}
		return
	case t.Kind() == reflect.Slice:
		if !v.IsNil() {
			out[path] = render(v)
		}
		return
	}
	if viaPointer || !v.IsZero() {
		out[path] = render(v)
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// render shows a value as compact JSON, but a non-empty JSON string without
// its quotes ("systemd", "10s", "100Mi").
func render(v reflect.Value) string {
	data, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprintf("%v", v.Interface())
	}
	var s string
	if json.Unmarshal(data, &s) == nil && s != "" {
		return s
	}
	return string(data)
}

func union(a, b map[string]string) map[string]string {
	u := maps.Clone(a)
	maps.Copy(u, b)
	return u
}
