package kubeletconfig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	tracingapi "k8s.io/component-base/tracing/api/v1"
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
		"nil configs are empty ones": {
			old: nil,
			new: &config{},
		},
		"kind and apiVersion are not settings": {
			old: newConfig(func(c *config) { c.TypeMeta = metav1.TypeMeta{} }),
			new: newConfig(),
		},
		"tuning is reported as safe": {
			old: newConfig(),
			new: newConfig(func(c *config) { c.SerializeImagePulls = ptr.To(false); c.HealthzPort = ptr.To[int32](1) }),
			want: []Change{
				{Class: Safe, Field: "healthzPort", Old: "10248", New: "1"},
				{Class: Safe, Field: "serializeImagePulls", Old: "", New: "false"},
			},
		},
		"unset and default policies are the same": {
			old: newConfig(func(c *config) { c.CgroupDriver = "" }),
			new: newConfig(func(c *config) {
				c.CPUManagerPolicy, c.MemoryManagerPolicy, c.TopologyManagerPolicy, c.CgroupDriver = "none", "None", "none", "cgroupfs"
			}),
		},
		"unset and documented defaults are the same": {
			old: newConfig(func(c *config) { c.Authorization.Mode = "" }),
			new: newConfig(func(c *config) {
				c.Authentication.Anonymous.Enabled = ptr.To(false)
				c.Authentication.Webhook.Enabled = ptr.To(true)
				c.ResolverConfig = ptr.To("/etc/resolv.conf")
				c.Port = 10250
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
		"policy options": {
			old: newConfig(),
			new: newConfig(func(c *config) { c.CPUManagerPolicyOptions = map[string]string{"full-pcpus-only": "true"} }),
			want: []Change{
				{Class: ResourceManagers, Field: `cpuManagerPolicyOptions["full-pcpus-only"]`, Old: "", New: "true"},
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
				{Class: Capacity, Field: "enforceNodeAllocatable", Old: `["pods"]`, New: "[]"},
				{Class: Capacity, Field: `evictionHard["memory.available"]`, Old: "100Mi", New: "200Mi"},
				{Class: Capacity, Field: `evictionMinimumReclaim["memory.available"]`, Old: "", New: "0Mi"},
				{Class: Capacity, Field: `evictionSoft["memory.available"]`, Old: "", New: "300Mi"},
				{Class: Capacity, Field: `kubeReserved["cpu"]`, Old: "100m", New: "200m"},
				{Class: Capacity, Field: `kubeReserved["ephemeral-storage"]`, Old: "", New: "1Gi"},
				{Class: Capacity, Field: `kubeReserved["memory"]`, Old: "1Gi", New: ""},
				{Class: Capacity, Field: "maxPods", Old: "110", New: "250"},
				{Class: Capacity, Field: "podsPerCore", Old: "", New: "10"},
				{Class: Capacity, Field: `systemReserved["memory"]`, Old: "", New: "500Mi"},
			},
		},
		"enforceNodeAllocatable nil (default) and empty differ": {
			old:  newConfig(),
			new:  newConfig(func(c *config) { c.EnforceNodeAllocatable = []string{} }),
			want: []Change{{Class: Capacity, Field: "enforceNodeAllocatable", Old: "", New: "[]"}},
		},
		"evictionHard nil (defaults) and empty (none) differ": {
			old: newConfig(func(c *config) { c.EvictionHard = nil }),
			new: newConfig(func(c *config) { c.EvictionHard = map[string]string{} }),
			want: []Change{
				{Class: Capacity, Field: "evictionHard", Old: "", New: "{}"},
				{Class: Isolation, Field: `evictionHard["memory.available"]`, Old: "100Mi", New: ""},
				{Class: Isolation, Field: `evictionHard["nodefs.available"]`, Old: "10%", New: ""},
				{Class: Isolation, Field: `evictionHard["nodefs.inodesFree"]`, Old: "5%", New: ""},
			},
		},
		"an empty resolvConf disables DNS and is not unset": {
			old:  newConfig(),
			new:  newConfig(func(c *config) { c.ResolverConfig = ptr.To("") }),
			want: []Change{{Class: Redirect, Field: "resolvConf", Old: "", New: `""`}},
		},
		"host access, redirect and structured values": {
			old: newConfig(),
			new: newConfig(func(c *config) {
				c.StaticPodPath = "/etc/evil"
				c.ClusterDNS = []string{"10.0.0.53"}
				c.StaticPodURLHeader = map[string][]string{"Authorization": {"Bearer x"}}
				c.FeatureGates = map[string]bool{"AllAlpha": true}
				c.Authentication.X509.ClientCAFile = "/tmp/ca.crt"
				c.NodeLeaseDurationSeconds = 400
				c.Logging.Verbosity = 4
			}),
			want: []Change{
				{Class: Availability, Field: "nodeLeaseDurationSeconds", Old: "", New: "400"},
				{Class: HostAccess, Field: "authentication.x509.clientCAFile", Old: "", New: "/tmp/ca.crt"},
				{Class: HostAccess, Field: `featureGates["AllAlpha"]`, Old: "", New: "true"},
				{Class: HostAccess, Field: "staticPodPath", Old: "", New: "/etc/evil"},
				{Class: HostAccess, Field: `staticPodURLHeader["Authorization"]`, Old: "", New: `["Bearer x"]`},
				{Class: Redirect, Field: "clusterDNS", Old: "", New: `["10.0.0.53"]`},
				{Class: Safe, Field: "logging.verbosity", Old: "", New: "4"},
			},
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
				{Class: Security, Field: "protectKernelDefaults", Old: "true", New: ""},
				{Class: Security, Field: "readOnlyPort", Old: "", New: "10255"},
			},
		},
		"anonymous auth from explicit false": {
			old:  newConfig(func(c *config) { c.Authentication.Anonymous.Enabled = ptr.To(false) }),
			new:  newConfig(func(c *config) { c.Authentication.Anonymous.Enabled = ptr.To(true) }),
			want: []Change{{Class: Security, Field: "authentication.anonymous.enabled", Old: "false", New: "true"}},
		},
		"security strengthening is safe": {
			old: newConfig(func(c *config) {
				c.Authentication.Anonymous.Enabled = ptr.To(true)
				c.Authorization.Mode = "AlwaysAllow"
				c.ReadOnlyPort = 10255
			}),
			new: newConfig(func(c *config) { c.ProtectKernelDefaults = true; c.SeccompDefault = ptr.To(true) }),
			want: []Change{
				{Class: Safe, Field: "authentication.anonymous.enabled", Old: "true", New: ""},
				{Class: Safe, Field: "authorization.mode", Old: "AlwaysAllow", New: "Webhook"},
				{Class: Safe, Field: "protectKernelDefaults", Old: "", New: "true"},
				{Class: Safe, Field: "readOnlyPort", Old: "10255", New: ""},
				{Class: Safe, Field: "seccompDefault", Old: "", New: "true"},
			},
		},
		"moving an open read-only port is not a new weakening": {
			old:  newConfig(func(c *config) { c.ReadOnlyPort = 10255 }),
			new:  newConfig(func(c *config) { c.ReadOnlyPort = 10256 }),
			want: []Change{{Class: Safe, Field: "readOnlyPort", Old: "10255", New: "10256"}},
		},
		"seccompDefault off is a weakening": {
			old:  newConfig(func(c *config) { c.SeccompDefault = ptr.To(true) }),
			new:  newConfig(),
			want: []Change{{Class: Security, Field: "seccompDefault", Old: "true", New: ""}},
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
		{Class: Availability, Field: "nodeStatusUpdateFrequency", Old: "", New: "20s"},
		{Class: Capacity, Field: "maxPods", Old: "110", New: "250"},
		{Class: CgroupDriver, Field: "cgroupDriver", Old: "systemd", New: "cgroupfs"},
		{Class: HostAccess, Field: "staticPodPath", Old: "", New: "/etc/evil"},
		{Class: ResourceManagers, Field: "cpuManagerPolicy", Old: "", New: "static"},
		{Class: Safe, Field: "syncFrequency", Old: "", New: "2m"},
		{Class: Security, Field: "readOnlyPort", Old: "", New: "10255"},
	}
	tests := map[string]struct {
		changes []Change
		allowed []SafetyClass
		want    []Change
	}{
		"nothing allowed refuses all but capacity, availability and safe": {
			changes: changes,
			want:    []Change{changes[2], changes[3], changes[4], changes[6]},
		},
		"one class": {
			changes: changes,
			allowed: []SafetyClass{ResourceManagers},
			want:    []Change{changes[2], changes[3], changes[6]},
		},
		"every class that needs an opt-in": {
			changes: changes,
			allowed: []SafetyClass{HostAccess, Security, Redirect, ResourceManagers, CgroupDriver},
		},
		"an unknown class is refused": {
			changes: []Change{{Class: "made-up", Field: "x"}},
			allowed: []SafetyClass{HostAccess},
			want:    []Change{{Class: "made-up", Field: "x"}},
		},
		"no changes": {},
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

func TestParseClasses(t *testing.T) {
	const optIn = "host-access, security, redirect, resource-managers, cgroup-driver, isolation, declared-features"
	tests := map[string]struct {
		in      string
		want    []SafetyClass
		wantErr string
	}{
		"empty allows nothing":       {in: ""},
		"blank allows nothing":       {in: "  "},
		"one":                        {in: "host-access", want: []SafetyClass{HostAccess}},
		"several with spaces, dedup": {in: "security, cgroup-driver ,security", want: []SafetyClass{Security, CgroupDriver}},
		"star":                       {in: "*", wantErr: `"*" is not a class: name the classes to allow, out of ` + optIn},
		"all":                        {in: "security,all", wantErr: `"all" is not a class: name the classes to allow, out of ` + optIn},
		"unknown":                    {in: "resource-manager", wantErr: `unknown class "resource-manager": name the classes to allow, out of ` + optIn},
		"names are exact":            {in: "Security", wantErr: `unknown class "Security": name the classes to allow, out of ` + optIn},
		"empty element":              {in: "security,,redirect", wantErr: `empty class name in "security,,redirect": name the classes to allow, out of ` + optIn},
		"capacity needs no opt-in":   {in: "capacity", wantErr: "capacity needs no opt-in: only " + optIn + " do"},
		"safe needs no opt-in":       {in: "redirect,safe", wantErr: "safe needs no opt-in: only " + optIn + " do"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseClasses(tc.in)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("ParseClasses(%q) error = %q, want %q", tc.in, gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseClasses(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestClasses(t *testing.T) {
	for _, c := range Classes() {
		if _, err := ParseClasses(string(c)); (err == nil) != c.RefusedByDefault() {
			t.Errorf("ParseClasses(%q) error = %v, but RefusedByDefault() = %t", c, err, c.RefusedByDefault())
		}
	}
	if SafetyClass("made-up").RefusedByDefault() != true {
		t.Errorf("an unknown class is not refused by default")
	}
}

func TestFormatRefusal(t *testing.T) {
	tests := map[string]struct {
		refused, needed []Change
		want            string
	}{
		// A new assignment's pin replaces the classes the old one allowed:
		// the flag names them too.
		"one, beside an allowed one": {
			refused: []Change{{Class: DeclaredFeatures, Field: FieldDeclaredFeatures, Old: "RestartAllContainersOnContainerExits"}},
			needed: []Change{
				{Class: HostAccess, Field: `featureGates["RestartAllContainersOnContainerExits"]`, New: "false"},
				{Class: DeclaredFeatures, Field: FieldDeclaredFeatures, Old: "RestartAllContainersOnContainerExits"},
			},
			want: `declaredFeatures "RestartAllContainersOnContainerExits" -> "" (declared-features); to allow it, assign again with --allow-unsafe=host-access,declared-features`,
		},
		"one": {
			refused: []Change{{Class: ResourceManagers, Field: "cpuManagerPolicy", Old: "", New: "static"}},
			want:    `cpuManagerPolicy "" -> "static" (resource-managers); to allow it, assign again with --allow-unsafe=resource-managers`,
		},
		"several, classes once each in help order": {
			refused: []Change{
				{Class: HostAccess, Field: "staticPodPath", Old: "", New: "/etc/evil"},
				{Class: Redirect, Field: "clusterDNS", Old: `["10.96.0.10"]`, New: `["10.0.0.53"]`},
				{Class: Security, Field: "authorization.mode", Old: "Webhook", New: "AlwaysAllow"},
				{Class: Security, Field: "readOnlyPort", Old: "", New: "10255"},
			},
			want: `staticPodPath "" -> "/etc/evil" (host-access), clusterDNS "[\"10.96.0.10\"]" -> "[\"10.0.0.53\"]" (redirect), ` +
				`authorization.mode "Webhook" -> "AlwaysAllow" (security), readOnlyPort "" -> "10255" (security); ` +
				`to allow them, assign again with --allow-unsafe=host-access,security,redirect`,
		},
		"declared features lost and gained, with the pods that rely on them, at most ten": {
			refused: []Change{
				{Class: HostAccess, Field: `featureGates["RestartAllContainersOnContainerExits"]`, Old: "", New: "false"},
				{Class: DeclaredFeatures, Field: FieldDeclaredFeatures, New: "DRANodeAllocatableResources"},
				{Class: DeclaredFeatures, Field: FieldDeclaredFeatures, Old: "RestartAllContainersOnContainerExits",
					Pods: []string{"a/p0", "a/p1", "a/p2", "a/p3", "a/p4", "a/p5", "a/p6", "a/p7", "a/p8", "a/p9", "b/p10", "b/p11"}},
			},
			want: `featureGates["RestartAllContainersOnContainerExits"] "" -> "false" (host-access), ` +
				`declaredFeatures "" -> "DRANodeAllocatableResources" (declared-features), ` +
				`declaredFeatures "RestartAllContainersOnContainerExits" -> "" (declared-features; relied on by running pods a/p0, a/p1, a/p2, a/p3, a/p4, a/p5, a/p6, a/p7, a/p8, a/p9 and 2 more); ` +
				`to allow them, assign again with --allow-unsafe=host-access,declared-features`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FormatRefusal(tc.refused, tc.needed)); diff != "" {
				t.Errorf("FormatRefusal() mismatch (-want +got):\n%s", diff)
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

// A snapshot writes out the documented constant defaults that a config file
// leaves unset; setting a field to its default changes nothing.
func TestClassifyDocumentedDefaults(t *testing.T) {
	snapshot := `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1",
		"iptablesMasqueradeBit":14,"iptablesDropBit":15,
		"authentication":{"webhook":{"enabled":true,"cacheTTL":"2m0s"}},
		"authorization":{"mode":"Webhook","webhook":{"cacheAuthorizedTTL":"5m0s","cacheUnauthorizedTTL":"30s"}}}`
	cfg := &config{}
	if err := yaml.Unmarshal([]byte(snapshot), cfg); err != nil {
		t.Fatal(err)
	}
	if got := Classify(&config{}, cfg); len(got) != 0 {
		t.Errorf("Classify(unset, defaults) = %+v, want no change", got)
	}
}

// TestClassifyByValue: where the values decide a class (classify,
// evictionTurnedOff), each direction of a change, with its old and new
// value.
func TestClassifyByValue(t *testing.T) {
	base := func(edit ...func(*config)) *config {
		return newConfig(append([]func(*config){func(c *config) { c.EvictionHard = nil }}, edit...)...)
	}
	verbosity := func(v uint32) func(*config) {
		return func(c *config) { c.Logging.Verbosity = logsapi.VerbosityLevel(v) }
	}
	vmodule := func(items ...logsapi.VModuleItem) func(*config) {
		return func(c *config) { c.Logging.VModule = items }
	}
	eviction := func(m map[string]string) func(*config) { return func(c *config) { c.EvictionHard = m } }
	tests := map[string]struct {
		old, new *config
		want     []Change
	}{
		"verbosity raised to 8, where client-go logs bodies": {
			old: base(), new: base(verbosity(8)),
			want: []Change{{Class: Security, Field: "logging.verbosity", Old: "", New: "8"}},
		},
		"verbosity raised from 8 to 10, where it logs curl commands": {
			old: base(verbosity(8)), new: base(verbosity(10)),
			want: []Change{{Class: Security, Field: "logging.verbosity", Old: "8", New: "10"}},
		},
		"verbosity raised below 8": {
			old: base(), new: base(verbosity(7)),
			want: []Change{{Class: Safe, Field: "logging.verbosity", Old: "", New: "7"}},
		},
		"verbosity lowered from 10 to 9": {
			old: base(verbosity(10)), new: base(verbosity(9)),
			want: []Change{{Class: Safe, Field: "logging.verbosity", Old: "10", New: "9"}},
		},
		"vmodule set": {
			old: base(), new: base(vmodule(logsapi.VModuleItem{FilePattern: "round_trippers", Verbosity: 2})),
			want: []Change{{Class: Security, Field: "logging.vmodule", Old: "", New: `[{"filePattern":"round_trippers","verbosity":2}]`}},
		},
		"vmodule raised": {
			old:  base(vmodule(logsapi.VModuleItem{FilePattern: "request", Verbosity: 2})),
			new:  base(vmodule(logsapi.VModuleItem{FilePattern: "request", Verbosity: 8})),
			want: []Change{{Class: Security, Field: "logging.vmodule", Old: `[{"filePattern":"request","verbosity":2}]`, New: `[{"filePattern":"request","verbosity":8}]`}},
		},
		"vmodule lowered and an entry removed": {
			old:  base(vmodule(logsapi.VModuleItem{FilePattern: "request", Verbosity: 9}, logsapi.VModuleItem{FilePattern: "x", Verbosity: 9})),
			new:  base(vmodule(logsapi.VModuleItem{FilePattern: "request", Verbosity: 2})),
			want: []Change{{Class: Safe, Field: "logging.vmodule", Old: `[{"filePattern":"request","verbosity":9},{"filePattern":"x","verbosity":9}]`, New: `[{"filePattern":"request","verbosity":2}]`}},
		},
		"vmodule removed": {
			old:  base(vmodule(logsapi.VModuleItem{FilePattern: "request", Verbosity: 9})),
			new:  base(),
			want: []Change{{Class: Safe, Field: "logging.vmodule", Old: `[{"filePattern":"request","verbosity":9}]`, New: ""}},
		},
		"a memory threshold of 0%": {
			old: base(), new: base(eviction(map[string]string{"memory.available": "0%", "nodefs.available": "10%", "nodefs.inodesFree": "5%"})),
			want: []Change{
				{Class: Capacity, Field: `evictionHard["nodefs.available"]`, Old: "", New: "10%"},
				{Class: Capacity, Field: `evictionHard["nodefs.inodesFree"]`, Old: "", New: "5%"},
				{Class: Isolation, Field: `evictionHard["memory.available"]`, Old: "", New: "0%"},
			},
		},
		"a nodefs threshold of 0": {
			old:  base(eviction(map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"})),
			new:  base(eviction(map[string]string{"memory.available": "100Mi", "nodefs.available": "0", "nodefs.inodesFree": "5%"})),
			want: []Change{{Class: Isolation, Field: `evictionHard["nodefs.available"]`, Old: "10%", New: "0"}},
		},
		"a map that leaves out nodefs drops its defaults": {
			old: base(), new: base(eviction(map[string]string{"memory.available": "200Mi"})),
			want: []Change{
				{Class: Capacity, Field: `evictionHard["memory.available"]`, Old: "", New: "200Mi"},
				{Class: Isolation, Field: `evictionHard["nodefs.available"]`, Old: "10%", New: ""},
				{Class: Isolation, Field: `evictionHard["nodefs.inodesFree"]`, Old: "5%", New: ""},
			},
		},
		"a map that leaves out nodefs, merged with the defaults": {
			old: base(),
			new: base(eviction(map[string]string{"memory.available": "200Mi"}), func(c *config) { c.MergeDefaultEvictionSettings = ptr.To(true) }),
			want: []Change{
				{Class: Capacity, Field: `evictionHard["memory.available"]`, Old: "", New: "200Mi"},
				{Class: Capacity, Field: "mergeDefaultEvictionSettings", Old: "", New: "true"},
			},
		},
		"hard eviction turned back on": {
			old:  base(eviction(map[string]string{})),
			new:  base(),
			want: []Change{{Class: Capacity, Field: "evictionHard", Old: "{}", New: ""}},
		},
		"cpuCFSQuota off": {
			old: base(), new: base(func(c *config) { c.CPUCFSQuota = ptr.To(false) }),
			want: []Change{{Class: Isolation, Field: "cpuCFSQuota", Old: "", New: "false"}},
		},
		"cpuCFSQuota on": {
			old: base(func(c *config) { c.CPUCFSQuota = ptr.To(false) }), new: base(func(c *config) { c.CPUCFSQuota = ptr.To(true) }),
			want: []Change{{Class: Capacity, Field: "cpuCFSQuota", Old: "false", New: "true"}},
		},
		"cpuCFSQuota true is its default": {
			old: base(), new: base(func(c *config) { c.CPUCFSQuota = ptr.To(true) }),
		},
		"localStorageCapacityIsolation off": {
			old: base(), new: base(func(c *config) { c.LocalStorageCapacityIsolation = ptr.To(false) }),
			want: []Change{{Class: Isolation, Field: "localStorageCapacityIsolation", Old: "", New: "false"}},
		},
		"image garbage collection off": {
			old: base(), new: base(func(c *config) { c.ImageGCHighThresholdPercent = ptr.To[int32](100) }),
			want: []Change{{Class: Isolation, Field: "imageGCHighThresholdPercent", Old: "85", New: "100"}},
		},
		"image garbage collection back on": {
			old: base(func(c *config) { c.ImageGCHighThresholdPercent = ptr.To[int32](100) }), new: base(),
			want: []Change{{Class: Safe, Field: "imageGCHighThresholdPercent", Old: "100", New: "85"}},
		},
		"tracing turned on towards the default endpoint": {
			old: base(), new: base(func(c *config) { c.Tracing = &tracingapi.TracingConfiguration{} }),
			want: []Change{{Class: Redirect, Field: "tracing", Old: "", New: "{}"}},
		},
		"tracing turned on with a sampling rate only": {
			old: base(), new: base(func(c *config) {
				c.Tracing = &tracingapi.TracingConfiguration{SamplingRatePerMillion: ptr.To[int32](5)}
			}),
			want: []Change{
				{Class: Redirect, Field: "tracing", Old: "", New: "{}"},
				{Class: Safe, Field: "tracing.samplingRatePerMillion", Old: "", New: "5"},
			},
		},
		"tracing turned off": {
			old: base(func(c *config) { c.Tracing = &tracingapi.TracingConfiguration{} }), new: base(),
			want: []Change{{Class: Safe, Field: "tracing", Old: "{}", New: ""}},
		},
		"an empty userNamespaces is its defaults": {
			old: base(), new: base(func(c *config) { c.UserNamespaces = &kubeletconfigv1beta1.UserNamespaces{} }),
			want: []Change{{Class: Safe, Field: "userNamespaces", Old: "", New: "{}"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Classify(tc.old, tc.new)); diff != "" {
				t.Errorf("Classify() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// What assign and rollout start --dry-run say for one node: a snapshot of
// the node itself needs no opt-in, nor does a config that leaves out what the
// kubelet computes; a changed path needs exactly its class, and the text
// says whether the given --allow-unsafe is enough.
func TestOptInReport(t *testing.T) {
	live := &config{StaticPodPath: "/etc/kubernetes/manifests", ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
		ClusterDNS: []string{"10.96.0.10"}, MaxPods: 110, TLSCertFile: "/var/lib/kubelet/pki/kubelet.crt",
		Authorization:  kubeletconfigv1beta1.KubeletAuthorization{Mode: "Webhook"},
		Authentication: kubeletconfigv1beta1.KubeletAuthentication{X509: kubeletconfigv1beta1.KubeletX509Authentication{ClientCAFile: "/etc/kubernetes/pki/ca.crt"}}}
	const head = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n"
	snapshot, err := yaml.Marshal(live)
	if err != nil {
		t.Fatal(err)
	}
	const moved = head + "staticPodPath: /srv/pods\nmaxPods: 50\n"
	tests := map[string]struct {
		payload     string
		allowed     []SafetyClass
		facts       NodeFacts
		wantText    string
		wantRefused bool
	}{
		"the node's own snapshot": {
			payload:  head + string(snapshot),
			wantText: "needs no --allow-unsafe: the config changes no field of a class that needs one",
		},
		// The kubelet computes tlsCertFile again, and keeps the client CA
		// beside the webhook setting.
		"a config that leaves out what the node runs": {
			payload:  head + "maxPods: 50\nauthentication:\n  webhook:\n    enabled: true\n",
			wantText: "needs no --allow-unsafe: the config changes no field of a class that needs one",
		},
		"a moved static pod path, nothing allowed": {
			payload:     moved,
			wantText:    `needs --allow-unsafe=host-access, or its agent refuses the config (no --allow-unsafe given): it changes staticPodPath "/etc/kubernetes/manifests" -> "/srv/pods" (host-access)`,
			wantRefused: true,
		},
		"a moved static pod path, another class allowed": {
			payload:     moved,
			allowed:     []SafetyClass{Redirect},
			wantText:    `needs --allow-unsafe=host-access, or its agent refuses the config (given --allow-unsafe=redirect): it changes staticPodPath "/etc/kubernetes/manifests" -> "/srv/pods" (host-access)`,
			wantRefused: true,
		},
		"a moved static pod path, allowed": {
			payload:  moved,
			allowed:  []SafetyClass{HostAccess, Redirect},
			wantText: `needs --allow-unsafe=host-access: it changes staticPodPath "/etc/kubernetes/manifests" -> "/srv/pods" (host-access)`,
		},
		// The gate is host-access like any other; the feature it takes
		// away from the node is declared-features, named with the pod
		// that needs it.
		"a gate turned off that the node's declared feature needs": {
			payload: head + "featureGates:\n  RestartAllContainersOnContainerExits: false\n",
			allowed: []SafetyClass{HostAccess},
			facts: NodeFacts{DeclaredFeatures: []string{"ExtendWebSocketsToKubelet", "RestartAllContainersOnContainerExits"},
				PodFeatures: map[string][]string{"default/restart-all": {"RestartAllContainersOnContainerExits"}}},
			wantText: `needs --allow-unsafe=host-access,declared-features, or its agent refuses the config (given --allow-unsafe=host-access): it changes ` +
				`featureGates["RestartAllContainersOnContainerExits"] "" -> "false" (host-access), ` +
				`declaredFeatures "RestartAllContainersOnContainerExits" -> "" (declared-features; relied on by running pods default/restart-all)`,
			wantRefused: true,
		},
		"the same gate on a node that declares nothing": {
			payload:     head + "featureGates:\n  RestartAllContainersOnContainerExits: false\n",
			allowed:     []SafetyClass{HostAccess},
			wantText:    `needs --allow-unsafe=host-access: it changes featureGates["RestartAllContainersOnContainerExits"] "" -> "false" (host-access)`,
			wantRefused: false,
		},
		"a field set to null goes back to its default": {
			payload:     head + "staticPodPath: null\n",
			wantText:    `needs --allow-unsafe=host-access, or its agent refuses the config (no --allow-unsafe given): it changes staticPodPath "/etc/kubernetes/manifests" -> "" (host-access)`,
			wantRefused: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			changes, err := NeedsOptIn(live, []byte(tc.payload), tc.facts)
			if err != nil {
				t.Fatal(err)
			}
			text, refused := OptInReport(changes, tc.allowed)
			if diff := cmp.Diff(tc.wantText, text); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
			if refused != tc.wantRefused {
				t.Errorf("refused = %v, want %v", refused, tc.wantRefused)
			}
		})
	}
	if _, err := NeedsOptIn(live, []byte("maxPods: 50\n"), NodeFacts{}); err == nil {
		t.Error("NeedsOptIn of a payload without kind: no error")
	}
}

func TestUnusedClasses(t *testing.T) {
	changes := []Change{{Class: HostAccess, Field: "staticPodPath"}, {Class: HostAccess, Field: "volumePluginDir"}}
	got := UnusedClasses([]SafetyClass{HostAccess, Security, Redirect}, changes)
	if diff := cmp.Diff([]SafetyClass{Security, Redirect}, got); diff != "" {
		t.Errorf("UnusedClasses (-want +got):\n%s", diff)
	}
	if got := UnusedClasses(nil, changes); got != nil {
		t.Errorf("UnusedClasses(nil) = %v, want nil", got)
	}
}
