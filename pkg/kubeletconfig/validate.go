package kubeletconfig

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// ErrValidate is wrapped by every error from Validate. The node agent
// reports it as upstream's
// "failed to validate config, see Kubelet log for details".
var ErrValidate = errors.New("validate kubelet config")

// The kubelet's defaults for the image GC thresholds, used when only one of
// the pair is set.
const (
	defaultImageGCHighThresholdPercent = 85
	defaultImageGCLowThresholdPercent  = 80
)

// Validate reports clearly invalid values in cfg. It returns every problem
// at once, each naming its JSON field path, in one error wrapping
// ErrValidate, or nil.
//
// It is deliberately incomplete: defaults and full validation live in the
// kubelet, whose start is the final judge. Durations are checked by Decode.
func Validate(cfg *kubeletconfigv1beta1.KubeletConfiguration) error {
	if cfg == nil {
		return fmt.Errorf("%w: config is nil", ErrValidate)
	}
	var v validator
	v.nonNegative("maxPods", cfg.MaxPods)
	v.nonNegative("podsPerCore", cfg.PodsPerCore)
	v.port("port", cfg.Port)
	v.port("readOnlyPort", cfg.ReadOnlyPort)
	if cfg.HealthzPort != nil {
		v.port("healthzPort", *cfg.HealthzPort)
	}
	v.thresholds("evictionHard", cfg.EvictionHard)
	v.thresholds("evictionSoft", cfg.EvictionSoft)
	for _, signal := range slices.Sorted(maps.Keys(cfg.EvictionSoftGracePeriod)) {
		if _, err := time.ParseDuration(cfg.EvictionSoftGracePeriod[signal]); err != nil {
			v.addf("evictionSoftGracePeriod[%q]: must be a duration, got %q", signal, cfg.EvictionSoftGracePeriod[signal])
		}
	}
	v.imageGC(cfg.ImageGCHighThresholdPercent, cfg.ImageGCLowThresholdPercent)
	v.oneOf("cgroupDriver", cfg.CgroupDriver, "cgroupfs", "systemd")
	v.oneOf("cpuManagerPolicy", cfg.CPUManagerPolicy, "none", "static")
	v.oneOf("memoryManagerPolicy", cfg.MemoryManagerPolicy,
		kubeletconfigv1beta1.NoneMemoryManagerPolicy, kubeletconfigv1beta1.StaticMemoryManagerPolicy)
	v.oneOf("topologyManagerPolicy", cfg.TopologyManagerPolicy,
		kubeletconfigv1beta1.NoneTopologyManagerPolicy, kubeletconfigv1beta1.BestEffortTopologyManagerPolicy,
		kubeletconfigv1beta1.RestrictedTopologyManagerPolicy, kubeletconfigv1beta1.SingleNumaNodeTopologyManagerPolicy)
	v.oneOf("authorization.mode", string(cfg.Authorization.Mode),
		string(kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow), string(kubeletconfigv1beta1.KubeletAuthorizationModeWebhook))
	v.nodeAllocatable(cfg.CgroupsPerQOS, cfg.EnforceNodeAllocatable)
	if len(v.problems) > 0 {
		return fmt.Errorf("%w: %s", ErrValidate, JoinBounded(v.problems, "; "))
	}
	return nil
}

// validator collects problems in the order they are found.
type validator struct {
	problems []string
}

func (v *validator) addf(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

func (v *validator) nonNegative(field string, n int32) {
	if n < 0 {
		v.addf("%s: must be >= 0, got %d", field, n)
	}
}

// port accepts 0, which means "default" or "disabled" depending on the field.
func (v *validator) port(field string, n int32) {
	if n < 0 || n > 65535 {
		v.addf("%s: must be between 0 and 65535, got %d", field, n)
	}
}

func (v *validator) oneOf(field, value string, allowed ...string) {
	if value == "" || slices.Contains(allowed, value) {
		return
	}
	v.addf("%s: must be unset or one of %s, got %q", field, strings.Join(allowed, ", "), value)
}

// thresholds checks eviction threshold values the way the kubelet parses
// them: a percentage between 0% and 100%, or a positive quantity.
func (v *validator) thresholds(field string, m map[string]string) {
	for _, signal := range slices.Sorted(maps.Keys(m)) {
		value := m[signal]
		if pct, ok := strings.CutSuffix(value, "%"); ok {
			f, err := strconv.ParseFloat(pct, 32)
			if err != nil || f < 0 || f > 100 {
				v.addf("%s[%q]: must be a percentage between 0%% and 100%%, got %q", field, signal, value)
			}
			continue
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			v.addf("%s[%q]: must be a quantity or a percentage, got %q", field, signal, value)
			continue
		}
		if q.Sign() <= 0 {
			v.addf("%s[%q]: must be a positive quantity, got %q", field, signal, value)
		}
	}
}

// imageGC checks both thresholds are percentages and, as the kubelet does
// after defaulting, that low is below high.
func (v *validator) imageGC(high, low *int32) {
	h, l := int32(defaultImageGCHighThresholdPercent), int32(defaultImageGCLowThresholdPercent)
	hNote, lNote := " (default)", " (default)"
	if high != nil {
		h, hNote = *high, ""
		if h < 0 || h > 100 {
			v.addf("imageGCHighThresholdPercent: must be between 0 and 100, got %d", h)
		}
	}
	if low != nil {
		l, lNote = *low, ""
		if l < 0 || l > 100 {
			v.addf("imageGCLowThresholdPercent: must be between 0 and 100, got %d", l)
		}
	}
	if (high != nil || low != nil) && l >= h {
		v.addf("imageGCLowThresholdPercent: must be less than imageGCHighThresholdPercent %d%s, got %d%s", h, hNote, l, lNote)
	}
}

// nodeAllocatable catches the combination every kubelet refuses at start:
// enforcing allocatable on pods needs QoS cgroups. An absent list defaults
// to [pods], and /configz drops an empty list, so a snapshot of a node with
// cgroupsPerQOS: false and enforceNodeAllocatable: [] pushes as this.
func (v *validator) nodeAllocatable(cgroupsPerQOS *bool, enforce []string) {
	if cgroupsPerQOS == nil || *cgroupsPerQOS {
		return
	}
	switch {
	case enforce == nil:
		v.addf("enforceNodeAllocatable: absent, so the kubelet enforces the default [pods], which needs cgroupsPerQOS: true; set it explicitly (for example [none] on kubelet 1.24+, [] on older ones): /configz leaves out an empty list")
	case slices.Contains(enforce, "pods"):
		v.addf("enforceNodeAllocatable: must not contain \"pods\" when cgroupsPerQOS is false")
	}
}
