// Package flagz reads a kubelet's command-line flags from its /flagz
// endpoint (through the apiserver's node proxy) and tells which
// KubeletConfiguration fields a flag sets. A flag overrides the config file
// and every drop-in, so a field set by a flag never changes through a config:
// the agent's check that /configz shows the written value would fail, and the
// config would be rolled back.
//
// The kubelet serves /flagz from 1.36 on (feature gate ComponentFlagz, beta
// and on by default; alpha and off from 1.32), authorized as nodes/configz
// under fine-grained kubelet authorization. It lists every flag with its
// value, set or not, so a flag is known to be set only where its value
// differs from the kubelet's default: Fields lists the flags whose default is
// verified against the kubelet's source (cmd/kubelet/app/options and
// pkg/kubelet/apis/config/v1beta1/defaults.go, 1.34 to 1.37). Of any other
// flag it cannot be known.
package flagz

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// Field is a KubeletConfiguration field that a kubelet flag also sets.
type Field struct {
	// Flag is the flag's name, without the dashes.
	Flag string
	// Field is the field's JSON name in KubeletConfiguration.
	Field string
	// Default is the flag's value when it is not given, as /flagz prints it.
	Default string
}

// Fields are the flags whose field and default are verified; the kubelet
// names its flags after the fields for most, but not all (registry-qps is
// registryPullQPS, event-qps eventRecordQPS, pod-max-pids podPidsLimit).
var Fields = []Field{
	{Flag: "max-pods", Field: "maxPods", Default: "110"},
	{Flag: "pod-max-pids", Field: "podPidsLimit", Default: "-1"},
	{Flag: "container-log-max-files", Field: "containerLogMaxFiles", Default: "5"},
	{Flag: "container-log-max-size", Field: "containerLogMaxSize", Default: "10Mi"},
	{Flag: "image-gc-high-threshold", Field: "imageGCHighThresholdPercent", Default: "85"},
	{Flag: "image-gc-low-threshold", Field: "imageGCLowThresholdPercent", Default: "80"},
	{Flag: "registry-qps", Field: "registryPullQPS", Default: "5"},
	{Flag: "registry-burst", Field: "registryBurst", Default: "10"},
	{Flag: "event-qps", Field: "eventRecordQPS", Default: "50"},
	{Flag: "event-burst", Field: "eventBurst", Default: "100"},
	{Flag: "kube-api-qps", Field: "kubeAPIQPS", Default: "50"},
	{Flag: "kube-api-burst", Field: "kubeAPIBurst", Default: "100"},
	{Flag: "cpu-manager-policy", Field: "cpuManagerPolicy", Default: "none"},
	{Flag: "memory-manager-policy", Field: "memoryManagerPolicy", Default: "None"},
	{Flag: "topology-manager-policy", Field: "topologyManagerPolicy", Default: "none"},
	{Flag: "cgroup-driver", Field: "cgroupDriver", Default: "cgroupfs"},
	{Flag: "fail-swap-on", Field: "failSwapOn", Default: "true"},
	{Flag: "max-open-files", Field: "maxOpenFiles", Default: "1000000"},
	{Flag: "node-status-max-images", Field: "nodeStatusMaxImages", Default: "50"},
}

// ConfigDirFlag is the kubelet's drop-in directory flag, --config-dir.
const ConfigDirFlag = "config-dir"

// ErrNotServed means the kubelet does not serve /flagz (before 1.36, or with
// the ComponentFlagz feature gate off): which flags it was given cannot be
// known.
var ErrNotServed = errors.New("the kubelet does not serve /flagz (kubelet 1.36 and later do, with the feature gate ComponentFlagz on, its default)")

// Path is the apiserver path of node nodeName's flagz.
func Path(nodeName string) string {
	return "/api/v1/nodes/" + nodeName + "/proxy/flagz"
}

// Accept asks for the structured form: the text form "is not meant to be
// machine parseable" and changes its separator at random.
const Accept = "application/json;as=Flagz;v=v1beta1;g=config.k8s.io, application/json;as=Flagz;v=v1alpha1;g=config.k8s.io"

// Fetch returns node nodeName's kubelet flags, by name, read through the
// apiserver's node proxy (get on nodes/proxy). A kubelet that does not serve
// /flagz is ErrNotServed. Pass a core/v1 client:
// clientset.CoreV1().RESTClient().
func Fetch(ctx context.Context, client rest.Interface, nodeName string) (map[string]string, error) {
	res := client.Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "flagz").SetHeader("Accept", Accept).Do(ctx)
	raw, err := res.Raw()
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get %s: %w", Path(nodeName), ErrNotServed)
		}
		return nil, fmt.Errorf("get %s: %w", Path(nodeName), res.Error())
	}
	return Parse(raw)
}

// ReadTimeout bounds Read: a node whose kubelet is down must not hold up a
// command for the proxy's own dial timeout.
const ReadTimeout = 10 * time.Second

// Read is Fetch within ReadTimeout. Pass a core/v1 client:
// clientset.CoreV1().RESTClient(); a fake clientset's, which is nil, reads
// nothing: ErrNotServed.
func Read(ctx context.Context, rc rest.Interface, nodeName string) (map[string]string, error) {
	if rc == nil || reflect.ValueOf(rc).IsNil() {
		return nil, fmt.Errorf("no REST client to read %s with: %w", Path(nodeName), ErrNotServed)
	}
	ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
	defer cancel()
	return Fetch(ctx, rc, nodeName)
}

// Parse reads a structured /flagz response (kind Flagz, config.k8s.io
// v1beta1 or v1alpha1).
func Parse(raw []byte) (map[string]string, error) {
	var f struct {
		Kind  string            `json:"kind"`
		Flags map[string]string `json:"flags"`
	}
	if err := json.Unmarshal(raw, &f); err != nil || f.Kind != "Flagz" {
		return nil, fmt.Errorf("%w: its answer is not a Flagz object", ErrNotServed)
	}
	return f.Flags, nil
}

// Shadow is a field that a kubelet's flag sets.
type Shadow struct {
	Field string `json:"field"`
	Flag  string `json:"flag"`
	Value string `json:"value"`
}

func (s Shadow) String() string {
	return fmt.Sprintf("%s (set by --%s=%s)", s.Field, s.Flag, s.Value)
}

// Shadowed returns the fields of Fields that flags set to other than their
// default, by field name.
func Shadowed(flags map[string]string) []Shadow {
	var out []Shadow
	for _, f := range Fields {
		if v, ok := flags[f.Flag]; ok && v != f.Default {
			out = append(out, Shadow{Field: f.Field, Flag: f.Flag, Value: v})
		}
	}
	return out
}

// Conflicts returns the shadowed fields that payload, a KubeletConfiguration
// (whole or a drop-in), sets to another value than the flag: a change that
// cannot take effect. A payload that does not decode has none: the agents
// refuse it.
func Conflicts(payload []byte, shadowed []Shadow) []Shadow {
	return conflicts(flagFields(payload), shadowed)
}

// conflicts is Conflicts of a decoded payload.
func conflicts(set map[string]any, shadowed []Shadow) []Shadow {
	var out []Shadow
	for _, s := range shadowed {
		v, ok := set[s.Field]
		if ok && format(v) != s.Value {
			out = append(out, s)
		}
	}
	return out
}

// format prints a config value as the flag prints it.
func format(v any) string {
	switch v := v.(type) {
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case string:
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// ShadowError is the refusal of a config that changes fields the kubelets'
// flags set, by node.
type ShadowError struct {
	Nodes map[string][]Shadow
}

func (e *ShadowError) Error() string {
	names := make([]string, 0, len(e.Nodes))
	for n := range e.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		s := make([]string, len(e.Nodes[n]))
		for j, sh := range e.Nodes[n] {
			s[j] = sh.String()
		}
		parts[i] = fmt.Sprintf("node %q: %s", n, strings.Join(s, ", "))
	}
	return "the config changes fields that a kubelet flag sets, and a flag always wins over a config: " +
		strings.Join(parts, "; ") +
		": remove the flag from the kubelet's command line (kubeadm: KUBELET_EXTRA_ARGS, kubeletExtraArgs), or leave the field out of the config"
}

// Parallel is how many kubelets CheckNodes reads at once: over a fleet,
// one after another, each read's round trip through the apiserver's node
// proxy adds up (a thousand nodes took 18 s).
const Parallel = 16

// CheckNodes refuses payload when it changes, on one of nodes, a field that
// the node's kubelet sets by a flag, naming each node, field and flag
// (Check), with the flags of the nodes that do not record theirs read
// through the apiserver's node proxy (ReadUnrecorded). Pass a core/v1
// client: clientset.CoreV1().RESTClient().
func CheckNodes(ctx context.Context, client rest.Interface, nodes []corev1.Node, payload []byte) error {
	ptrs := source.NodePointers(nodes)
	return Check(payload, ptrs, ReadUnrecorded(ctx, client, ptrs, payload))
}

// Check refuses payload when it changes, on one of nodes, a field that the
// node's kubelet sets by a flag, naming each node, field and flag: a
// *ShadowError. A node's flags are what its agent recorded on it (OnNode)
// when it did, else read[node]; a node whose flags are known neither way
// is left out: of it, that cannot be known.
func Check(payload []byte, nodes []*corev1.Node, read map[string][]Shadow) error {
	set := flagFields(payload)
	if set == nil {
		return nil
	}
	found := map[string][]Shadow{}
	for _, n := range nodes {
		shadowed, ok := OnNode(n)
		if !ok {
			shadowed, ok = read[n.Name]
		}
		if !ok {
			continue
		}
		if c := conflicts(set, shadowed); len(c) > 0 {
			found[n.Name] = c
		}
	}
	if len(found) > 0 {
		return &ShadowError{Nodes: found}
	}
	return nil
}

// ReadUnrecorded reads, through the apiserver's node proxy, Parallel at a
// time, the flags of the nodes that do not record theirs (OnNode), when
// payload sets a field of Fields: the fields they set, by node. A node
// whose flags cannot be read (no /flagz, no permission, unreachable) is
// left out. Pass a core/v1 client: clientset.CoreV1().RESTClient().
func ReadUnrecorded(ctx context.Context, client rest.Interface, nodes []*corev1.Node, payload []byte) map[string][]Shadow {
	if flagFields(payload) == nil {
		return nil
	}
	var unknown []string
	for _, n := range nodes {
		if _, ok := OnNode(n); !ok {
			unknown = append(unknown, n.Name)
		}
	}
	read := map[string][]Shadow{}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	next := make(chan string)
	for range min(Parallel, len(unknown)) {
		wg.Go(func() {
			for name := range next {
				flags, err := Read(ctx, client, name)
				if err != nil {
					continue
				}
				mu.Lock()
				read[name] = Shadowed(flags)
				mu.Unlock()
			}
		})
	}
	for _, name := range unknown {
		next <- name
	}
	close(next)
	wg.Wait()
	return read
}

// flagFields decodes payload, a KubeletConfiguration (whole or a drop-in),
// when it sets a field of Fields: only then can a flag shadow it, and are
// the nodes asked. It returns nil otherwise, and for a payload that does
// not decode, which the agents refuse.
func flagFields(payload []byte) map[string]any {
	var set map[string]any
	if err := yaml.Unmarshal(payload, &set); err != nil {
		return nil
	}
	for _, f := range Fields {
		if _, ok := set[f.Field]; ok {
			return set
		}
	}
	return nil
}
