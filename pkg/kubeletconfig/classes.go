package kubeletconfig

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// FieldClass is one row of the classification table: the JSON path of a
// KubeletConfiguration field (dot-separated, as in
// "authentication.x509.clientCAFile"), its class, and why. A row covers the
// field and everything under it, unless a longer path has a row of its own.
type FieldClass struct {
	Path  string
	Class SafetyClass
	Why   string
}

// FieldClasses returns the classification table, sorted by path. Every field
// of KubeletConfiguration v1beta1 has a row or an ancestor with one; a field
// that has neither (one added by a newer k8s.io/kubelet) is HostAccess, so
// that what nobody has judged is refused (see TestEveryFieldHasAClass).
func FieldClasses() []FieldClass {
	rows := slices.Clone(fieldClasses)
	slices.SortFunc(rows, func(a, b FieldClass) int { return cmp.Compare(a.Path, b.Path) })
	return rows
}

// unclassified is the class of a field with no row and no classified
// ancestor.
const unclassified = HostAccess

var classByPath = func() map[string]FieldClass {
	m := make(map[string]FieldClass, len(fieldClasses))
	for _, r := range fieldClasses {
		m[r.Path] = r
	}
	return m
}()

// fieldOf is the field path of a changed leaf: a map entry
// `kubeReserved["cpu"]` belongs to the field kubeReserved.
func fieldOf(leaf string) string {
	if i := strings.IndexByte(leaf, '['); i >= 0 {
		return leaf[:i]
	}
	return leaf
}

// classOf resolves path to the class of its nearest classified ancestor
// (itself included).
func classOf(path string) SafetyClass {
	for p := path; ; {
		if r, ok := classByPath[p]; ok {
			return r.Class
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return unclassified
		}
		p = p[:i]
	}
}

// kubeletDefaults holds, for fields where the kubelet's v1beta1 default is a
// constant documented on the type, the default rendered as Classify renders
// values. An unset field and its default are the same value to the kubelet,
// so a change between them is no change. Fields whose default depends on
// something else (imageServiceEndpoint follows containerRuntimeEndpoint) or
// where nil and empty differ (enforceNodeAllocatable, evictionHard) are not
// here.
var kubeletDefaults = map[string]string{
	"cpuManagerPolicy":                           "none",
	"memoryManagerPolicy":                        "None",
	"topologyManagerPolicy":                      "none",
	"topologyManagerScope":                       "container",
	"cgroupDriver":                               "cgroupfs",
	"cgroupsPerQOS":                              "true",
	"failCgroupV1":                               "true",
	"authentication.anonymous.enabled":           "false",
	"authentication.webhook.enabled":             "true",
	"authentication.webhook.cacheTTL":            "2m0s",
	"authorization.mode":                         "Webhook",
	"authorization.webhook.cacheAuthorizedTTL":   "5m0s",
	"authorization.webhook.cacheUnauthorizedTTL": "30s",
	"iptablesMasqueradeBit":                      "14",
	"iptablesDropBit":                            "15",
	"enableServer":                               "true",
	"enableDebuggingHandlers":                    "true",
	"enableProfilingHandler":                     "true",
	"enableDebugFlagsHandler":                    "true",
	"enableSystemLogHandler":                     "true",
	"enableSystemLogQuery":                       "false",
	"seccompDefault":                             "false",
	"address":                                    "0.0.0.0",
	"port":                                       "10250",
	"resolvConf":                                 "/etc/resolv.conf",
	"volumePluginDir":                            "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/",
	"enableControllerAttachDetach":               "true",
	"makeIPTablesUtilChains":                     "true",
	"hairpinMode":                                "promiscuous-bridge",
	"registerNode":                               "true",
	"cpuCFSQuota":                                "true",
	"localStorageCapacityIsolation":              "true",
	"imageGCHighThresholdPercent":                "85",
}

// bodyLogVerbosity is the verbosity at which client-go logs request and
// response bodies (k8s.io/client-go/rest: bodies at 8, whole curl commands
// with their headers at 10): Secrets and pods' ServiceAccount tokens then
// land in the kubelet's journal, which the kubelet serves at /logs/.
const bodyLogVerbosity = 8

// classify returns the class of a change of leaf from oldValue to newValue,
// both normalized with kubeletDefaults: the class of its field, unless the
// values decide. This is the one place where values decide a class: a
// change that only makes the node safer needs no opt-in (closing
// readOnlyPort, turning tracing off), and a change to a field that is
// harmless at most values needs one at the values that do harm (a
// verbosity at which client-go logs bodies, imageGCHighThresholdPercent
// 100). Only unambiguous directions are listed. Hard eviction, which the
// kubelet reads from several leaves together, is evictionTurnedOff's.
func classify(leaf, oldValue, newValue string) SafetyClass {
	class := classOf(fieldOf(leaf))
	switch leaf {
	case "readOnlyPort":
		// Closing the port, or moving a port that is already open.
		if newValue == "" || oldValue != "" {
			return Safe
		}
	case "authentication.anonymous.enabled":
		if newValue == "false" {
			return Safe
		}
	case "authorization.mode":
		if newValue == "Webhook" {
			return Safe
		}
	case "protectKernelDefaults", "seccompDefault":
		if newValue == "true" {
			return Safe
		}
	case "logging.verbosity":
		// Raising it to bodyLogVerbosity or above; anything else leaves
		// bodies out of the journal, or already in it.
		if n := level(newValue); n < bodyLogVerbosity || n <= level(oldValue) {
			return Safe
		}
	case "logging.vmodule":
		if !raisesVModule(oldValue, newValue) {
			return Safe
		}
	case "cpuCFSQuota", "localStorageCapacityIsolation":
		// Turning the limits on is what the node admits, not isolation
		// taken away.
		if newValue == "true" {
			return Capacity
		}
	case "imageGCHighThresholdPercent":
		// 100 turns image garbage collection off.
		if newValue != "100" {
			return Safe
		}
	case "tracing":
		// Turning tracing off.
		if newValue == "" {
			return Safe
		}
	}
	return class
}

// level parses a rendered verbosity; unset is 0.
func level(v string) int {
	n, _ := strconv.Atoi(v)
	return n
}

// raisesVModule reports whether a change of logging.vmodule, rendered as
// JSON lists of {filePattern, verbosity}, can raise some file's verbosity:
// a pattern that is new, or whose verbosity grows. A change that only
// removes patterns or lowers them cannot. A value that does not parse can.
func raisesVModule(oldValue, newValue string) bool {
	type item struct {
		FilePattern string `json:"filePattern"`
		Verbosity   int    `json:"verbosity"`
	}
	parse := func(v string) ([]item, bool) {
		var items []item
		if v == "" {
			return nil, true
		}
		return items, json.Unmarshal([]byte(v), &items) == nil
	}
	olds, ok1 := parse(oldValue)
	news, ok2 := parse(newValue)
	if !ok1 || !ok2 {
		return true
	}
	before := make(map[string]int, len(olds))
	for _, o := range olds {
		before[o.FilePattern] = o.Verbosity
	}
	for _, n := range news {
		if v, ok := before[n.FilePattern]; !ok || n.Verbosity > v {
			return true
		}
	}
	return false
}

// isolatingEvictionSignals are the hard eviction signals that keep one pod
// from taking the memory or the node filesystem the node's other pods need.
var isolatingEvictionSignals = []string{"memory.available", "nodefs.available", "nodefs.inodesFree"}

// evictionTurnedOff returns, by leaf (`evictionHard["memory.available"]`),
// the isolating hard eviction signals that the kubelet enforces on oldCfg
// and not on newCfg, with their effective values before and after ("" for
// none): an empty evictionHard (no hard eviction), a threshold of 0 or 0%,
// or an evictionHard that leaves the signal out without
// mergeDefaultEvictionSettings (the kubelet then drops its default). A nil
// config is the kubelet's defaults.
func evictionTurnedOff(oldCfg, newCfg *kubeletconfigv1beta1.KubeletConfiguration) map[string][2]string {
	effective := func(cfg *kubeletconfigv1beta1.KubeletConfiguration) map[string]string {
		if cfg == nil {
			cfg = &kubeletconfigv1beta1.KubeletConfiguration{}
		}
		return effectiveEvictionHard(cfg)
	}
	before, after := effective(oldCfg), effective(newCfg)
	off := map[string][2]string{}
	for _, signal := range isolatingEvictionSignals {
		if evicts(before[signal]) && !evicts(after[signal]) {
			off[fmt.Sprintf("evictionHard[%q]", signal)] = [2]string{before[signal], after[signal]}
		}
	}
	return off
}

// evicts reports whether an eviction threshold makes the kubelet evict at
// some point: it is set and above zero. A value that does not parse is
// Validate's to report and counts as set.
func evicts(threshold string) bool {
	if threshold == "" {
		return false
	}
	if p, ok := percent(threshold); ok {
		return p > 0
	}
	q, err := resource.ParseQuantity(threshold)
	return err != nil || q.Sign() > 0
}

// Why texts say what a hostile value does, which is what the class guards.
var fieldClasses = []FieldClass{
	// Run code, read credentials or impersonate on the node.
	{"staticPodPath", HostAccess, "the kubelet runs every manifest in this directory as a static pod, privileged if it says so, without admission or Pod Security"},
	{"staticPodURL", HostAccess, "the kubelet runs the pods served at this URL as static pods, without admission or Pod Security"},
	{"staticPodURLHeader", HostAccess, "HTTP headers sent to staticPodURL, which may carry credentials; part of the static pod source"},
	{"volumePluginDir", HostAccess, "the kubelet executes flexvolume drivers from this directory as root"},
	{"podLogsDir", HostAccess, "a host directory the kubelet writes, rotates and deletes container logs in, and serves through kubectl logs"},
	{"tlsCertFile", HostAccess, "the serving certificate of the kubelet API: whoever holds its key can impersonate the kubelet to the apiserver and to clients"},
	{"tlsPrivateKeyFile", HostAccess, "the serving key of the kubelet API; see tlsCertFile"},
	{"authentication.x509.clientCAFile", HostAccess, "any client certificate this CA signs is authenticated by the kubelet API, with the groups the certificate names (system:masters)"},
	{"providerID", HostAccess, "names the cloud instance behind the node: another instance's ID lets this node impersonate it to the cloud provider"},
	{"registerWithTaints", HostAccess, "the taints that keep pods off the node when it registers; dropping a dedicated-node taint lets any pod land on the host"},
	{"enableControllerAttachDetach", HostAccess, "false makes the kubelet attach any volume its pods name by itself, with credentials on the node, instead of the attach/detach controller"},
	{"featureGates", HostAccess, "a gate can turn on any alpha behaviour, including ones that open the node; dkc cannot judge each gate. A gate that changes what the node declares in status.declaredFeatures is declared-features too"},

	// The kubelet API's authentication, authorization and TLS, and the
	// isolation the kubelet enforces on pods.
	{"enableServer", Security, "whether the kubelet serves its API at all"},
	{"address", Security, "the address the kubelet API listens on: who can reach it"},
	{"port", Security, "the port the kubelet API listens on"},
	{"readOnlyPort", Security, "a port that serves pods and node stats without authentication; opening it is refused, closing or moving it is safe"},
	{"tlsCipherSuites", Security, "the kubelet API's TLS cipher suites; a weak suite exposes its traffic"},
	{"tlsCurvePreferences", Security, "the kubelet API's TLS key exchanges"},
	{"tlsMinVersion", Security, "the kubelet API's minimum TLS version"},
	{"rotateCertificates", Security, "how the kubelet renews its client certificate: false lets it expire"},
	{"serverTLSBootstrap", Security, "whether the kubelet API's serving certificate comes from the certificates API or is self-signed"},
	{"authentication.anonymous.enabled", Security, "true lets unauthenticated requests reach the kubelet API; turning it off is safe"},
	{"authentication.webhook.enabled", Security, "whether bearer tokens are checked with the apiserver's TokenReview"},
	{"authentication.webhook.cacheTTL", Security, "how long a token review is cached: a revoked token keeps working this long"},
	{"authorization.mode", Security, "AlwaysAllow authorizes every authenticated request to the kubelet API (exec into any pod); Webhook is safe"},
	{"authorization.webhook.cacheAuthorizedTTL", Security, "how long an allow is cached: a revoked permission keeps working this long"},
	{"authorization.webhook.cacheUnauthorizedTTL", Security, "how long a deny is cached"},
	{"enableDebuggingHandlers", Security, "the exec, attach, port-forward, logs and run endpoints of the kubelet API"},
	{"enableContentionProfiling", Security, "block profiling on the debugging handlers"},
	{"enableProfilingHandler", Security, "the /debug/pprof endpoints of the kubelet API"},
	{"enableDebugFlagsHandler", Security, "the /debug/flags/v endpoint, which changes the kubelet's log verbosity over the API"},
	{"logging.verbosity", Security, "at 8 and above client-go logs request and response bodies (at 10 whole curl commands), so Secrets and pods' ServiceAccount tokens land in the journal, which the kubelet serves at /logs/; a verbosity below 8, or lowered, is safe"},
	{"logging.vmodule", Security, "per-file verbosities: any file raised to 8 logs bodies as logging.verbosity does; a change that only removes or lowers entries is safe"},
	{"enableSystemLogHandler", Security, "the /logs/ endpoint, which serves the node's /var/log over the API"},
	{"enableSystemLogQuery", Security, "queries of the node's journal through /logs/"},
	{"protectKernelDefaults", Security, "false lets the kubelet change kernel settings instead of failing; true is safe"},
	{"seccompDefault", Security, "false leaves pods without a seccomp profile unconfined; true (RuntimeDefault) is safe"},
	{"allowedUnsafeSysctls", Security, "sysctls pods may set that are not isolated per pod and can affect the node and other pods"},
	{"defaultPodSysctls", Security, "sysctls set in every pod that does not set them itself, unsafe ones included, which changes how every pod's kernel namespaces behave"},
	{"userNamespaces", Safe, "set with nothing in it, the kubelet's defaults; idsPerPod has a row of its own"},
	{"userNamespaces.idsPerPod", Security, "the size of the user-namespace ID range each pod gets, which keeps pods' IDs apart from each other and the host"},
	{"imagePullCredentialsVerificationPolicy", Security, "whether a pod must hold the credentials of a private image that another pod pulled to the node"},
	{"preloadedImagesVerificationAllowlist", Security, "images any pod may use without the pull credentials"},

	// The node's runtime, image service, DNS and network paths.
	{"containerRuntimeEndpoint", Redirect, "the CRI socket: a rogue runtime sees every container's environment, mounts and pull credentials"},
	{"imageServiceEndpoint", Redirect, "the CRI image socket: a rogue image service receives every pull credential and chooses what runs"},
	{"clusterDNS", Redirect, "the nameservers written into pods' resolv.conf: a rogue server answers all their lookups"},
	{"clusterDomain", Redirect, "the search domain written into pods' resolv.conf: service names resolve elsewhere"},
	{"resolvConf", Redirect, "the host resolver file that Default-DNS pods and the upstream search path come from"},
	{"podCIDR", Redirect, "the pod address range in standalone mode; can overlap and capture other networks' traffic"},
	{"hairpinMode", Redirect, "how pod traffic to its own service loops back; promiscuous-bridge makes the bridge see all pod traffic"},
	{"makeIPTablesUtilChains", Redirect, "whether the kubelet keeps its iptables utility chains"},
	{"iptablesMasqueradeBit", Redirect, "the packet mark for SNAT, shared with kube-proxy: a mismatch misroutes service traffic"},
	{"iptablesDropBit", Redirect, "the packet mark for dropped packets, shared with kube-proxy"},
	{"tracing", Redirect, "setting it turns tracing on: the kubelet sends its spans, which name pods, containers and images, to tracing.endpoint, by default localhost:4317, where any host-network pod may listen; unsetting it is safe"},
	{"tracing.endpoint", Redirect, "where the kubelet sends its spans, which name pods, containers and images"},

	// Resource managers: their state files record the policy.
	{"cpuManagerPolicy", ResourceManagers, "a change needs the CPU manager state file removed while the kubelet is stopped, and running pods keep their old CPUs"},
	{"cpuManagerPolicyOptions", ResourceManagers, "options of the CPU manager policy; changing them on a live node leaves pods with assignments the new options forbid"},
	{"reservedSystemCPUs", ResourceManagers, "CPUs taken out of the static CPU manager's pool; the state file disagrees after a change"},
	{"memoryManagerPolicy", ResourceManagers, "a change needs the memory manager state file removed while the kubelet is stopped"},
	{"reservedMemory", ResourceManagers, "per-NUMA reservations of the static memory manager; the state file disagrees after a change"},
	{"topologyManagerPolicy", ResourceManagers, "NUMA alignment that admitted pods were placed under"},
	{"topologyManagerScope", ResourceManagers, "whether alignment is per container or per pod"},
	{"topologyManagerPolicyOptions", ResourceManagers, "options of the topology manager policy"},

	// The cgroup layout, which must match the runtime and the host.
	{"cgroupDriver", CgroupDriver, "must match the container runtime's; changing it amounts to replacing the node"},
	{"cgroupRoot", CgroupDriver, "the root cgroup of pods; running pods stay under the old one"},
	{"cgroupsPerQOS", CgroupDriver, "the QoS cgroup hierarchy that running pods live in"},
	{"kubeletCgroups", CgroupDriver, "the cgroup the kubelet moves itself into"},
	{"systemCgroups", CgroupDriver, "the cgroup the kubelet moves non-kernel processes not in a cgroup into"},
	{"kubeReservedCgroup", CgroupDriver, "the cgroup kubeReserved is enforced on; a wrong one limits other processes"},
	{"systemReservedCgroup", CgroupDriver, "the cgroup systemReserved is enforced on; a wrong one limits other processes"},
	{"failCgroupV1", CgroupDriver, "whether the kubelet starts on a cgroup v1 host at all"},

	// What the node admits. Reported, never refused; see CheckBounds.
	{"maxPods", Capacity, "how many pods the node admits"},
	{"podsPerCore", Capacity, "how many pods per core the node admits"},
	{"kubeReserved", Capacity, "resources kept from pods for Kubernetes daemons"},
	{"systemReserved", Capacity, "resources kept from pods for the system"},
	{"qosReserved", Capacity, "memory kept from lower QoS classes"},
	{"enforceNodeAllocatable", Capacity, "which reservations are enforced with cgroups; unset means [pods], [] means none"},
	{"evictionHard", Capacity, "thresholds at which pods are killed at once; unset means the kubelet's defaults, {} means none. Turning off hard eviction of memory.available, nodefs.available or nodefs.inodesFree ({}, a threshold of 0 or 0%, or a map without the signal and without mergeDefaultEvictionSettings) is isolation: one pod can then exhaust the node for all"},
	{"evictionSoft", Capacity, "thresholds at which pods are evicted after a grace period"},
	{"evictionSoftGracePeriod", Capacity, "how long a soft threshold must hold"},
	{"evictionPressureTransitionPeriod", Capacity, "how long a pressure condition lasts"},
	{"evictionMaxPodGracePeriod", Capacity, "the termination grace evicted pods get"},
	{"evictionMinimumReclaim", Capacity, "how much an eviction frees beyond the threshold"},
	{"mergeDefaultEvictionSettings", Capacity, "whether the defaults fill in eviction signals left out"},
	{"podPidsLimit", Capacity, "the PIDs each pod may use; running pods above it fail to fork. A limit below 16 is refused (a bound): it applies to every pod, the node's DaemonSets included, and counts threads; the pause process and runc init take about ten before a container's first process runs"},
	{"cpuCFSQuota", Isolation, "false stops enforcing CPU limits: any pod can take every CPU from the node's other pods and its daemons; true is capacity"},
	{"cpuCFSQuotaPeriod", Capacity, "the CFS period CPU limits are enforced over"},
	{"memorySwap.swapBehavior", Capacity, "whether pods may use swap"},
	{"memoryThrottlingFactor", Capacity, "where memory.high is set under a limit (MemoryQoS)"},
	{"memoryReservationPolicy", Capacity, "whether pods' memory requests are locked with memory.min (MemoryQoS)"},
	{"singleProcessOOMKill", Capacity, "whether an OOM kills one process or the whole container"},
	{"localStorageCapacityIsolation", Isolation, "false stops enforcing ephemeral-storage limits: any pod can fill the node filesystem that the other pods and the kubelet write to; true is capacity"},

	// Whether a live node stays Ready.
	{"nodeStatusUpdateFrequency", Availability, "how often the kubelet computes and posts node status, up to 4% later (jitter); two intervals at or beyond the node monitor grace period (one failed post) turn the node Unknown, and are refused (a bound)"},
	{"nodeStatusReportFrequency", Availability, "how often an unchanged node status is posted"},
	{"nodeLeaseDurationSeconds", Availability, "the node lease, renewed every quarter of it, up to 4% later (jitter); two renewal intervals at or beyond the node monitor grace period (one failed renewal) turn the node Unknown, and are refused (a bound)"},
	{"runtimeRequestTimeout", Availability, "a short timeout fails CRI calls and makes the runtime look down (NotReady)"},
	{"oomScoreAdj", Availability, "how readily the kernel OOM-kills the kubelet"},
	{"maxOpenFiles", Availability, "the kubelet's own file limit; too low and it fails"},
	{"failSwapOn", Availability, "true stops the kubelet from starting on a host with swap on"},
	{"runOnce", Availability, "true makes the kubelet run its pods once and exit"},
	{"registerNode", Availability, "false keeps the kubelet from registering its Node again if it is deleted"},

	// Everything else: tuning that neither opens the node nor takes it down.
	{"syncFrequency", Safe, "how often running pods are synced"},
	{"fileCheckFrequency", Safe, "how often staticPodPath is re-read"},
	{"httpCheckFrequency", Safe, "how often staticPodURL is re-fetched"},
	{"healthzPort", Safe, "the port of /healthz, which reports only ok"},
	{"healthzBindAddress", Safe, "the address of /healthz"},
	{"registryPullQPS", Safe, "image pull rate limit"},
	{"registryBurst", Safe, "image pull burst"},
	{"eventRecordQPS", Safe, "event rate limit"},
	{"eventBurst", Safe, "event burst"},
	{"kubeAPIQPS", Safe, "apiserver rate limit (the heartbeat client is not limited)"},
	{"kubeAPIBurst", Safe, "apiserver burst"},
	{"contentType", Safe, "the encoding of requests to the apiserver"},
	{"streamingConnectionIdleTimeout", Safe, "idle timeout of exec, attach and port-forward streams"},
	{"imageMinimumGCAge", Safe, "image garbage collection"},
	{"imageMaximumGCAge", Safe, "image garbage collection"},
	{"imageGCHighThresholdPercent", Isolation, "100 turns image garbage collection off: images fill the disk the node's pods share until the kubelet evicts them; below 100 is safe"},
	{"imageGCLowThresholdPercent", Safe, "image garbage collection"},
	{"serializeImagePulls", Safe, "image pull parallelism"},
	{"maxParallelImagePulls", Safe, "image pull parallelism"},
	{"nodeStatusMaxImages", Safe, "how many images node status lists"},
	{"volumeStatsAggPeriod", Safe, "how often volume usage is computed"},
	{"cpuManagerReconcilePeriod", Safe, "how often the CPU manager reconciles; not part of its state"},
	{"containerLogMaxSize", Safe, "container log rotation. A size below 16Ki is refused (a bound): smaller than one CRI log line (containerd splits lines at 16 KiB), every rotation destroys the logs"},
	{"containerLogMaxFiles", Safe, "container log rotation"},
	{"containerLogMaxWorkers", Safe, "container log rotation"},
	{"containerLogMonitorInterval", Safe, "container log rotation"},
	{"configMapAndSecretChangeDetectionStrategy", Safe, "how pods see ConfigMap and Secret updates"},
	{"showHiddenMetricsForVersion", Safe, "metrics exposure"},
	{"kernelMemcgNotification", Safe, "how memory pressure is detected"},
	{"logging", Safe, "the kubelet's own log format and flushing"},
	{"tracing.samplingRatePerMillion", Safe, "how many spans are sampled"},
	{"shutdownGracePeriod", Safe, "graceful node shutdown"},
	{"shutdownGracePeriodCriticalPods", Safe, "graceful node shutdown"},
	{"shutdownGracePeriodByPodPriority", Safe, "graceful node shutdown"},
	{"crashLoopBackOff.maxContainerRestartPeriod", Safe, "the longest back-off between container restarts"},
}
