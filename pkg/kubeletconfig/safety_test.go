package kubeletconfig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

type config = kubeletconfigv1beta1.KubeletConfiguration

func TestClassify(t *testing.T) {
	tests := map[string]struct {
		old, new *config
		want     []Change
	}{
		"identical": {
			old: newConfig(),
			new: newConfig(),
		},
		"unrelated fields are not reported": {
			old: newConfig(),
			new: newConfig(func(c *config) { c.SerializeImagePulls = ptr.To(false); c.HealthzPort = ptr.To[int32](1) }),
		},
		"unset and default policies are the same": {
			old: newConfig(func(c *config) { c.CgroupDriver = "" }),
			new: newConfig(func(c *config) {
				c.CPUManagerPolicy, c.MemoryManagerPolicy, c.TopologyManagerPolicy, c.CgroupDriver = "none", "None", "none", "cgroupfs"
			}),
		},
		"resource managers and cgroup driver": {
			old: newConfig(),
			new: newConfig(func(c *config) {
				c.CPUManagerPolicy, c.MemoryManagerPolicy, c.TopologyManagerPolicy, c.CgroupDriver = "static", "Static", "restricted", "cgroupfs"
			}),
			want: []Change{
				{Class: CgroupDriver, Field: "cgroupDriver", Old: "systemd", New: "cgroupfs"},
				{Class: ResourceManagers, Field: "cpuManagerPolicy", Old: "", New: "static"},
				{Class: ResourceManagers, Field: "memoryManagerPolicy", Old: "", New: "Static"},
				{Class: ResourceManagers, Field: "topologyManagerPolicy", Old: "", New: "restricted"},
			},
		},
		"capacity": {
			old: newConfig(func(c *config) {
				c.KubeReserved = map[string]string{"cpu": "100m", "memory": "1Gi"}
				c.EnforceNodeAllocatable = []string{"pods"}
			}),
			new: newConfig(func(c *config) {
				c.MaxPods = 250
				c.PodsPerCore = 10
				c.KubeReserved = map[string]string{"cpu": "200m", "ephemeral-storage": "1Gi"}
				c.SystemReserved = map[string]string{"memory": "500Mi"}
				c.EvictionHard = map[string]string{"memory.available": "200Mi", "nodefs.available": "10%"}
				c.EvictionSoft = map[string]string{"memory.available": "300Mi"}
				c.EvictionMinimumReclaim = map[string]string{"memory.available": "0Mi"}
				c.EnforceNodeAllocatable = []string{}
			}),
			want: []Change{
				{Class: Capacity, Field: "enforceNodeAllocatable", Old: "[pods]", New: "[]"},
				{Class: Capacity, Field: `evictionHard["memory.available"]`, Old: "100Mi", New: "200Mi"},
				{Class: Capacity, Field: `evictionMinimumReclaim["memory.available"]`, Old: "", New: "0Mi"},
				{Class: Capacity, Field: `evictionSoft["memory.available"]`, Old: "", New: "300Mi"},
				{Class: Capacity, Field: `kubeReserved["cpu"]`, Old: "100m", New: "200m"},
				{Class: Capacity, Field: `kubeReserved["ephemeral-storage"]`, Old: "", New: "1Gi"},
				{Class: Capacity, Field: `kubeReserved["memory"]`, Old: "1Gi", New: ""},
				{Class: Capacity, Field: "maxPods", Old: "110", New: "250"},
				{Class: Capacity, Field: "podsPerCore", Old: "0", New: "10"},
				{Class: Capacity, Field: `systemReserved["memory"]`, Old: "", New: "500Mi"},
			},
		},
		"enforceNodeAllocatable nil (default) and empty differ": {
			old:  newConfig(),
			new:  newConfig(func(c *config) { c.EnforceNodeAllocatable = []string{} }),
			want: []Change{{Class: Capacity, Field: "enforceNodeAllocatable", Old: "", New: "[]"}},
		},
		"security weakening": {
			old: newConfig(func(c *config) { c.ProtectKernelDefaults = true }),
			new: newConfig(func(c *config) {
				c.Authentication.Anonymous.Enabled = ptr.To(true)
				c.Authorization.Mode = "AlwaysAllow"
				c.ReadOnlyPort = 10255
				c.ProtectKernelDefaults = false
			}),
			want: []Change{
				{Class: Security, Field: "authentication.anonymous.enabled", Old: "", New: "true"},
				{Class: Security, Field: "authorization.mode", Old: "Webhook", New: "AlwaysAllow"},
				{Class: Security, Field: "protectKernelDefaults", Old: "true", New: "false"},
				{Class: Security, Field: "readOnlyPort", Old: "0", New: "10255"},
			},
		},
		"anonymous auth from explicit false": {
			old:  newConfig(func(c *config) { c.Authentication.Anonymous.Enabled = ptr.To(false) }),
			new:  newConfig(func(c *config) { c.Authentication.Anonymous.Enabled = ptr.To(true) }),
			want: []Change{{Class: Security, Field: "authentication.anonymous.enabled", Old: "false", New: "true"}},
		},
		"security strengthening is not reported": {
			old: newConfig(func(c *config) {
				c.Authentication.Anonymous.Enabled = ptr.To(true)
				c.Authorization.Mode = "AlwaysAllow"
				c.ReadOnlyPort = 10255
			}),
			new: newConfig(func(c *config) { c.ProtectKernelDefaults = true }),
		},
		"moving an open read-only port is not a new weakening": {
			old: newConfig(func(c *config) { c.ReadOnlyPort = 10255 }),
			new: newConfig(func(c *config) { c.ReadOnlyPort = 10256 }),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Classify(tc.old, tc.new)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Classify() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefused(t *testing.T) {
	changes := []Change{
		{Class: Capacity, Field: "maxPods", Old: "110", New: "250"},
		{Class: CgroupDriver, Field: "cgroupDriver", Old: "systemd", New: "cgroupfs"},
		{Class: ResourceManagers, Field: "cpuManagerPolicy", Old: "", New: "static"},
		{Class: ResourceManagers, Field: "memoryManagerPolicy", Old: "", New: "Static"},
		{Class: Security, Field: "readOnlyPort", Old: "0", New: "10255"},
	}
	tests := map[string]struct {
		changes []Change
		allowed string
		want    []Change
	}{
		"nothing allowed refuses all but capacity": {
			changes: changes,
			allowed: "",
			want:    changes[1:],
		},
		"one class": {
			changes: changes,
			allowed: "resource-managers",
			want:    []Change{changes[1], changes[4]},
		},
		"several classes with spaces": {
			changes: changes,
			allowed: "security, cgroup-driver ,resource-managers",
		},
		"star allows all": {
			changes: changes,
			allowed: "*",
		},
		"names are exact": {
			changes: changes,
			allowed: "Security,resource-manager",
			want:    changes[1:],
		},
		"capacity needs no opt-in": {
			changes: changes[:1],
			allowed: "",
		},
		"no changes": {
			allowed: "",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Refused(tc.changes, tc.allowed)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Refused() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNeedsStateReset(t *testing.T) {
	policies := func(cpu, memory string) *config {
		return newConfig(func(c *config) { c.CPUManagerPolicy, c.MemoryManagerPolicy = cpu, memory })
	}
	tests := map[string]struct {
		old, new            *config
		wantCPU, wantMemory bool
	}{
		"unchanged":                   {old: policies("static", "Static"), new: policies("static", "Static")},
		"unset and none are the same": {old: policies("", ""), new: policies("none", "None")},
		"none and unset are the same": {old: policies("none", "None"), new: policies("", "")},
		"cpu only":                    {old: policies("", "Static"), new: policies("static", "Static"), wantCPU: true},
		"memory only":                 {old: policies("static", ""), new: policies("static", "Static"), wantMemory: true},
		"both, back to the default":   {old: policies("static", "Static"), new: policies("", ""), wantCPU: true, wantMemory: true},
		"other fields do not matter":  {old: policies("static", "Static"), new: newConfig(func(c *config) { c.CPUManagerPolicy, c.MemoryManagerPolicy, c.MaxPods = "static", "Static", 5 })},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cpu, memory := NeedsStateReset(tc.old, tc.new)
			if cpu != tc.wantCPU || memory != tc.wantMemory {
				t.Errorf("NeedsStateReset() = (%t, %t), want (%t, %t)", cpu, memory, tc.wantCPU, tc.wantMemory)
			}
		})
	}
}

func TestWeakSecurity(t *testing.T) {
	tests := map[string]struct {
		cfg  *config
		want []string
	}{
		"defaults are not weak": {
			cfg: &config{},
		},
		"explicitly safe": {
			cfg: newConfig(func(c *config) { c.Authentication.Anonymous.Enabled = ptr.To(false) }),
		},
		"all weak": {
			cfg: newConfig(func(c *config) {
				c.Authentication.Anonymous.Enabled = ptr.To(true)
				c.Authorization.Mode = "AlwaysAllow"
				c.ReadOnlyPort = 10255
			}),
			want: []string{
				"authentication.anonymous.enabled is true: anonymous requests reach the kubelet API",
				"authorization.mode is AlwaysAllow: every authenticated request is authorized",
				"readOnlyPort is 10255: the kubelet serves an unauthenticated read-only port",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, WeakSecurity(tc.cfg)); diff != "" {
				t.Errorf("WeakSecurity() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWeakSecurityDoc(t *testing.T) {
	tests := map[string]struct {
		doc  string
		want []string
	}{
		"protectKernelDefaults unset":    {doc: "kind: KubeletConfiguration\n"},
		"protectKernelDefaults true":     {doc: "protectKernelDefaults: true\n"},
		"protectKernelDefaults false":    {doc: "protectKernelDefaults: false\n", want: []string{UnprotectedKernelDefaults}},
		"protectKernelDefaults as JSON":  {doc: `{"protectKernelDefaults":false}`, want: []string{UnprotectedKernelDefaults}},
		"not an object adds nothing":     {doc: "- a\n"},
		"not even YAML adds nothing":     {doc: "{"},
		"string false is not a boolean":  {doc: `protectKernelDefaults: "false"`},
		"weak cfg and an explicit false": {doc: "readOnlyPort: 10255\nprotectKernelDefaults: false\n", want: []string{"readOnlyPort is 10255: the kubelet serves an unauthenticated read-only port", UnprotectedKernelDefaults}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := &config{}
			_ = yaml.Unmarshal([]byte(tc.doc), cfg)
			if diff := cmp.Diff(tc.want, WeakSecurityDoc([]byte(tc.doc), cfg)); diff != "" {
				t.Errorf("WeakSecurityDoc() (-want +got):\n%s", diff)
			}
		})
	}
}
