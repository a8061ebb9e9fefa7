package kubeletconfig

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	tracingapi "k8s.io/component-base/tracing/api/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// typeFields walks the KubeletConfiguration type by reflection, as the JSON
// encoding names it: it descends into structs (through pointers and
// embedded structs) except those with their own JSON encoding, and treats
// maps and lists as leaves. It returns every path it meets, struct or leaf,
// and which of them are leaves. TypeMeta (kind, apiVersion) is not a
// setting and is skipped.
func typeFields() (all, leaves []string) {
	var visit func(t reflect.Type, path string)
	// fields visits the fields of struct t; an embedded struct without a
	// JSON name (inline) adds its fields at path.
	fields := func(t reflect.Type, path string) {
		var inline func(t reflect.Type)
		inline = func(t reflect.Type) {
			for i := range t.NumField() {
				f := t.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				switch {
				case !f.IsExported() || name == "-" || f.Type == reflect.TypeFor[metav1.TypeMeta]():
				case name == "" && f.Anonymous:
					inline(f.Type)
				case name == "":
					visit(f.Type, join(path, f.Name))
				default:
					visit(f.Type, join(path, name))
				}
			}
		}
		inline(t)
	}
	visit = func(t reflect.Type, path string) {
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if path != "" {
			all = append(all, path)
		}
		if t.Kind() != reflect.Struct || t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
			leaves = append(leaves, path)
			return
		}
		fields(t, path)
	}
	visit(reflect.TypeFor[kubeletconfigv1beta1.KubeletConfiguration](), "")
	return all, leaves
}

// TestEveryFieldHasAClass fails for each field of KubeletConfiguration that
// has no row in the table, neither its own nor an ancestor's: when
// k8s.io/kubelet gains a field, this test names it, and until it has a row
// Classify treats it as host-access. It also fails for rows that name no
// field.
func TestEveryFieldHasAClass(t *testing.T) {
	all, leaves := typeFields()
	for _, leaf := range leaves {
		classified := false
		for p := leaf; p != ""; {
			if _, ok := classByPath[p]; ok {
				classified = true
				break
			}
			i := strings.LastIndexByte(p, '.')
			if i < 0 {
				break
			}
			p = p[:i]
		}
		if !classified {
			t.Errorf("field %s has no class: add a row to fieldClasses (classes.go)", leaf)
		}
	}
	seen := map[string]bool{}
	for _, r := range fieldClasses {
		if !slices.Contains(all, r.Path) {
			t.Errorf("row %q names no field of KubeletConfiguration", r.Path)
		}
		if seen[r.Path] {
			t.Errorf("row %q is in the table twice", r.Path)
		}
		seen[r.Path] = true
		if !slices.Contains(Classes(), r.Class) {
			t.Errorf("row %q has the unknown class %q", r.Path, r.Class)
		}
		if r.Why == "" {
			t.Errorf("row %q does not say why", r.Path)
		}
	}
	for p := range kubeletDefaults {
		if !slices.Contains(leaves, p) {
			t.Errorf("kubeletDefaults[%q] names no leaf field", p)
		}
	}
}

func TestFieldsWithoutAClassAreRefused(t *testing.T) {
	for _, path := range []string{"noSuchField", "authentication.noSuchField", `noSuchMap["k"]`} {
		if got := classOf(fieldOf(path)); got != HostAccess {
			t.Errorf("classOf(%q) = %q, want %q", path, got, HostAccess)
		}
	}
	if got := classOf("logging.options.json.infoBufferSize"); got != Safe {
		t.Errorf("a field under a classified struct: classOf() = %q, want %q", got, Safe)
	}
}

// TestRefusedSingleChanges changes one field at a time to a hostile value
// and checks that the change is refused by default and allowed by its class
// and by no other.
func TestRefusedSingleChanges(t *testing.T) {
	tests := map[string]struct {
		change func(*config)
		class  SafetyClass
	}{
		"staticPodPath":                    {func(c *config) { c.StaticPodPath = "/etc/evil" }, HostAccess},
		"staticPodURL":                     {func(c *config) { c.StaticPodURL = "http://evil/pods" }, HostAccess},
		"staticPodURLHeader":               {func(c *config) { c.StaticPodURLHeader = map[string][]string{"X": {"y"}} }, HostAccess},
		"volumePluginDir":                  {func(c *config) { c.VolumePluginDir = "/tmp/plugins" }, HostAccess},
		"podLogsDir":                       {func(c *config) { c.PodLogsDir = "/etc" }, HostAccess},
		"tlsCertFile":                      {func(c *config) { c.TLSCertFile = "/tmp/cert" }, HostAccess},
		"tlsPrivateKeyFile":                {func(c *config) { c.TLSPrivateKeyFile = "/tmp/key" }, HostAccess},
		"authentication.x509.clientCAFile": {func(c *config) { c.Authentication.X509.ClientCAFile = "/tmp/ca" }, HostAccess},
		"providerID":                       {func(c *config) { c.ProviderID = "aws:///us-east-1a/i-other" }, HostAccess},
		"registerWithTaints":               {func(c *config) { c.RegisterWithTaints = []corev1.Taint{{Key: "k", Effect: "NoSchedule"}} }, HostAccess},
		"enableControllerAttachDetach":     {func(c *config) { c.EnableControllerAttachDetach = ptr.To(false) }, HostAccess},
		"featureGates":                     {func(c *config) { c.FeatureGates = map[string]bool{"AllAlpha": true} }, HostAccess},

		"containerRuntimeEndpoint": {func(c *config) { c.ContainerRuntimeEndpoint = "unix:///tmp/evil.sock" }, Redirect},
		"imageServiceEndpoint":     {func(c *config) { c.ImageServiceEndpoint = "unix:///tmp/evil.sock" }, Redirect},
		"clusterDNS":               {func(c *config) { c.ClusterDNS = []string{"10.0.0.53"} }, Redirect},
		"clusterDomain":            {func(c *config) { c.ClusterDomain = "evil.example" }, Redirect},
		"resolvConf":               {func(c *config) { c.ResolverConfig = ptr.To("/tmp/resolv.conf") }, Redirect},
		"podCIDR":                  {func(c *config) { c.PodCIDR = "10.0.0.0/8" }, Redirect},
		"hairpinMode":              {func(c *config) { c.HairpinMode = "hairpin-veth" }, Redirect},
		"makeIPTablesUtilChains":   {func(c *config) { c.MakeIPTablesUtilChains = ptr.To(false) }, Redirect},
		"iptablesMasqueradeBit":    {func(c *config) { c.IPTablesMasqueradeBit = ptr.To[int32](3) }, Redirect},
		"iptablesDropBit":          {func(c *config) { c.IPTablesDropBit = ptr.To[int32](3) }, Redirect},
		"tracing.endpoint":         {func(c *config) { c.Tracing = &tracingapi.TracingConfiguration{Endpoint: ptr.To("evil:4317")} }, Redirect},

		"enableServer":                               {func(c *config) { c.EnableServer = ptr.To(false) }, Security},
		"address":                                    {func(c *config) { c.Address = "192.0.2.1" }, Security},
		"port":                                       {func(c *config) { c.Port = 10251 }, Security},
		"readOnlyPort":                               {func(c *config) { c.ReadOnlyPort = 10255 }, Security},
		"tlsCipherSuites":                            {func(c *config) { c.TLSCipherSuites = []string{"TLS_RSA_WITH_RC4_128_SHA"} }, Security},
		"tlsCurvePreferences":                        {func(c *config) { c.TLSCurvePreferences = []int32{23} }, Security},
		"tlsMinVersion":                              {func(c *config) { c.TLSMinVersion = "VersionTLS10" }, Security},
		"rotateCertificates":                         {func(c *config) { c.RotateCertificates = true }, Security},
		"serverTLSBootstrap":                         {func(c *config) { c.ServerTLSBootstrap = true }, Security},
		"authentication.anonymous.enabled":           {func(c *config) { c.Authentication.Anonymous.Enabled = ptr.To(true) }, Security},
		"authentication.webhook.enabled":             {func(c *config) { c.Authentication.Webhook.Enabled = ptr.To(false) }, Security},
		"authentication.webhook.cacheTTL":            {func(c *config) { c.Authentication.Webhook.CacheTTL = metav1.Duration{Duration: 1e12} }, Security},
		"authorization.mode":                         {func(c *config) { c.Authorization.Mode = "AlwaysAllow" }, Security},
		"authorization.webhook.cacheAuthorizedTTL":   {func(c *config) { c.Authorization.Webhook.CacheAuthorizedTTL = metav1.Duration{Duration: 1e12} }, Security},
		"authorization.webhook.cacheUnauthorizedTTL": {func(c *config) { c.Authorization.Webhook.CacheUnauthorizedTTL = metav1.Duration{Duration: 1e12} }, Security},
		"enableDebuggingHandlers":                    {func(c *config) { c.EnableDebuggingHandlers = ptr.To(false) }, Security},
		"enableContentionProfiling":                  {func(c *config) { c.EnableContentionProfiling = true }, Security},
		"enableProfilingHandler":                     {func(c *config) { c.EnableProfilingHandler = ptr.To(false) }, Security},
		"enableDebugFlagsHandler":                    {func(c *config) { c.EnableDebugFlagsHandler = ptr.To(false) }, Security},
		"enableSystemLogHandler":                     {func(c *config) { c.EnableSystemLogHandler = ptr.To(false) }, Security},
		"enableSystemLogQuery":                       {func(c *config) { c.EnableSystemLogQuery = ptr.To(true) }, Security},
		"allowedUnsafeSysctls":                       {func(c *config) { c.AllowedUnsafeSysctls = []string{"kernel.*"} }, Security},
		"userNamespaces.idsPerPod": {func(c *config) {
			c.UserNamespaces = &kubeletconfigv1beta1.UserNamespaces{IDsPerPod: ptr.To[int64](1 << 16)}
		}, Security},
		"imagePullCredentialsVerificationPolicy": {func(c *config) { c.ImagePullCredentialsVerificationPolicy = "NeverVerify" }, Security},
		"preloadedImagesVerificationAllowlist":   {func(c *config) { c.PreloadedImagesVerificationAllowlist = []string{"registry.example/*"} }, Security},

		"cpuManagerPolicyOptions": {func(c *config) { c.CPUManagerPolicyOptions = map[string]string{"full-pcpus-only": "true"} }, ResourceManagers},
		"reservedSystemCPUs":      {func(c *config) { c.ReservedSystemCPUs = "0-1" }, ResourceManagers},
		"reservedMemory":          {func(c *config) { c.ReservedMemory = []kubeletconfigv1beta1.MemoryReservation{{NumaNode: 0}} }, ResourceManagers},
		"topologyManagerScope":    {func(c *config) { c.TopologyManagerScope = "pod" }, ResourceManagers},
		"topologyManagerPolicyOptions": {func(c *config) {
			c.TopologyManagerPolicyOptions = map[string]string{"prefer-closest-numa-nodes": "true"}
		}, ResourceManagers},

		"cgroupRoot":           {func(c *config) { c.CgroupRoot = "/evil" }, CgroupDriver},
		"cgroupsPerQOS":        {func(c *config) { c.CgroupsPerQOS = ptr.To(false) }, CgroupDriver},
		"kubeletCgroups":       {func(c *config) { c.KubeletCgroups = "/evil" }, CgroupDriver},
		"systemCgroups":        {func(c *config) { c.SystemCgroups = "/evil" }, CgroupDriver},
		"kubeReservedCgroup":   {func(c *config) { c.KubeReservedCgroup = "/evil" }, CgroupDriver},
		"systemReservedCgroup": {func(c *config) { c.SystemReservedCgroup = "/evil" }, CgroupDriver},
		"failCgroupV1":         {func(c *config) { c.FailCgroupV1 = ptr.To(false) }, CgroupDriver},

		"cpuCFSQuota":                      {func(c *config) { c.CPUCFSQuota = ptr.To(false) }, Isolation},
		"localStorageCapacityIsolation":    {func(c *config) { c.LocalStorageCapacityIsolation = ptr.To(false) }, Isolation},
		"imageGCHighThresholdPercent":      {func(c *config) { c.ImageGCHighThresholdPercent = ptr.To[int32](100) }, Isolation},
		`evictionHard["memory.available"]`: {func(c *config) { c.EvictionHard["memory.available"] = "0%" }, Isolation},
		`evictionHard["nodefs.available"]`: {func(c *config) { c.EvictionHard["nodefs.available"] = "0" }, Isolation},

		"logging.verbosity": {func(c *config) { c.Logging.Verbosity = 8 }, Security},
		"logging.vmodule": {func(c *config) {
			c.Logging.VModule = logsapi.VModuleConfiguration{{FilePattern: "request", Verbosity: 10}}
		}, Security},
		"tracing": {func(c *config) { c.Tracing = &tracingapi.TracingConfiguration{} }, Redirect},
	}
	// starts holds the starting config of a change that needs one: a field
	// of a struct that is set already.
	starts := map[string]func(*config){
		"tracing.endpoint":         func(c *config) { c.Tracing = &tracingapi.TracingConfiguration{} },
		"userNamespaces.idsPerPod": func(c *config) { c.UserNamespaces = &kubeletconfigv1beta1.UserNamespaces{} },
	}
	optIn := slices.DeleteFunc(Classes(), func(c SafetyClass) bool { return !c.RefusedByDefault() })
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old := newConfig()
			if before, ok := starts[name]; ok {
				old = newConfig(before)
			}
			changes := Classify(old, newConfig(tc.change))
			if len(changes) != 1 || changes[0].Field != name && fieldOf(changes[0].Field) != name || changes[0].Class != tc.class {
				t.Fatalf("Classify() = %+v, want one change of %s in class %s", changes, name, tc.class)
			}
			if len(Refused(changes, nil)) != 1 {
				t.Errorf("refused by default: got no, want yes")
			}
			if got := Refused(changes, []SafetyClass{tc.class}); len(got) != 0 {
				t.Errorf("allowed by %s: got refused %+v", tc.class, got)
			}
			others := slices.DeleteFunc(slices.Clone(optIn), func(c SafetyClass) bool { return c == tc.class })
			if len(Refused(changes, others)) != 1 {
				t.Errorf("allowed by %v, which does not include %s", others, tc.class)
			}
		})
	}
}

// fieldClassTable renders the table as Markdown, for docs/security.md.
func fieldClassTable() []byte {
	var b bytes.Buffer
	b.WriteString("| Field | Class | Why |\n|---|---|---|\n")
	for _, r := range FieldClasses() {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.Path, r.Class, strings.ReplaceAll(r.Why, "|", `\|`))
	}
	return b.Bytes()
}

const (
	docsBegin = "<!-- BEGIN FIELD CLASSES (generated: go test ./pkg/kubeletconfig -run TestFieldClassDocs -update) -->\n"
	docsEnd   = "<!-- END FIELD CLASSES -->\n"
)

// TestFieldClassDocs keeps testdata/field-classes.md and the generated
// section of docs/security.md equal to the table. -update rewrites both.
func TestFieldClassDocs(t *testing.T) {
	table := fieldClassTable()
	golden := filepath.Join("testdata", "field-classes.md")
	docs := filepath.Join("..", "..", "docs", "security.md")
	doc, err := os.ReadFile(docs)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := bytes.Cut(doc, []byte(docsBegin))
	if !ok {
		t.Fatalf("%s has no line %q", docs, strings.TrimSpace(docsBegin))
	}
	section, after, ok := bytes.Cut(rest, []byte(docsEnd))
	if !ok {
		t.Fatalf("%s has no line %q after the begin marker", docs, strings.TrimSpace(docsEnd))
	}
	if *update {
		if err := os.WriteFile(golden, table, 0o644); err != nil {
			t.Fatal(err)
		}
		updated := slices.Concat(before, []byte(docsBegin), table, []byte(docsEnd), after)
		if err := os.WriteFile(docs, updated, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(table)); diff != "" {
		t.Errorf("%s is stale, run with -update (-want +got):\n%s", golden, diff)
	}
	if diff := cmp.Diff(string(table), string(section)); diff != "" {
		t.Errorf("%s: the generated section is stale, run with -update (-want +got):\n%s", docs, diff)
	}
}
