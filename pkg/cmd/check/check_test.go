package check

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/flagz/flagztest"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

func TestJudgeVersions(t *testing.T) {
	tests := map[string]struct {
		got  Result
		want Status
	}{
		"apiserver 1.37":     {got: judgeAPIServer("v1.37.2"), want: OK},
		"apiserver 1.30":     {got: judgeAPIServer("v1.30.0"), want: OK},
		"apiserver 1.29":     {got: judgeAPIServer("v1.29.9"), want: Warn},
		"apiserver garbage":  {got: judgeAPIServer("x"), want: Warn},
		"kubelet 1.34":       {got: judgeKubelet("node/a", "v1.34.12"), want: OK},
		"kubelet 1.37 patch": {got: judgeKubelet("node/a", "v1.37.9"), want: OK},
		"kubelet 1.33":       {got: judgeKubelet("node/a", "v1.33.1"), want: Warn},
		"kubelet 1.38":       {got: judgeKubelet("node/a", "v1.38.0"), want: Warn},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.got.Status != tc.want {
				t.Errorf("%s: %s, want %s", tc.got.Message, tc.got.Status, tc.want)
			}
		})
	}
}

func TestJudgeNodeFlags(t *testing.T) {
	// Every flag as /flagz lists it: with its default unless given.
	with := flagztest.Listed
	tests := map[string]struct {
		flags       map[string]string
		agentDropIn bool
		dropIn      Status
		flagsStatus Status
		flagsSay    string
	}{
		"defaults": {flags: with(), dropIn: OK, flagsStatus: OK},
		"config-dir": {flags: with("config-dir", "/etc/kubernetes/kubelet.conf.d"), agentDropIn: true,
			dropIn: OK, flagsStatus: OK},
		"dropin agent without config-dir": {flags: with(), agentDropIn: true, dropIn: Fail, flagsStatus: OK},
		"max-pods given": {flags: with("max-pods", "42"), dropIn: OK, flagsStatus: Warn,
			flagsSay: "maxPods (set by --max-pods=42)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := judgeDropIn("node/a", tc.flags, tc.agentDropIn); got.Status != tc.dropIn {
				t.Errorf("drop-in %s (%s), want %s", got.Status, got.Message, tc.dropIn)
			}
			got := judgeFlags("node/a", tc.flags)
			if got.Status != tc.flagsStatus || !strings.Contains(got.Message, tc.flagsSay) {
				t.Errorf("flags %s (%s), want %s saying %q", got.Status, got.Message, tc.flagsStatus, tc.flagsSay)
			}
		})
	}
}

func TestCheckAgents(t *testing.T) {
	node := func(name string, reported bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if reported {
			n.Annotations = map[string]string{source.StatusAnnotation: `{}`}
		}
		return n
	}
	pod := func(node, image string, ready bool) corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "agent-" + node, Namespace: "kube-system"},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Image: image}}},
			Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
		}
	}
	const v = "v0.1.0"
	tests := map[string]struct {
		nodes []corev1.Node
		pods  []corev1.Pod
		want  Result
	}{
		"one Ready agent per node": {
			nodes: []corev1.Node{node("a", true), node("b", true)},
			pods:  []corev1.Pod{pod("a", "r.example:5000/kubectl-dkc-agent:v0.1.0", true), pod("b", "r/kubectl-dkc-agent:v0.1.0@sha256:00", true)},
			want:  Result{Name: "agents", Status: OK, Message: "2 of 2 nodes run a Ready agent at v0.1.0"},
		},
		"an old agent, a missing one, one not Ready": {
			nodes: []corev1.Node{node("a", true), node("b", false), node("c", true)},
			pods:  []corev1.Pod{pod("a", "r.example:5000/kubectl-dkc-agent:v0.0.9", true), pod("c", "r/kubectl-dkc-agent:v0.1.0", false)},
			want: Result{Name: "agents", Status: Fail,
				Message: "no agent on b; agent not Ready on c; agent at another version than v0.1.0 on a (v0.0.9)",
				Hint: "run the agent on every node (docs/install.md); kubectl describe pod -A -l app.kubernetes.io/name=dkc-agent says why one is not Ready; " +
					"run the agent image of the same version as kubectl dkc (docs/install.md, The image)"},
		},
		"systemd agents": {
			nodes: []corev1.Node{node("a", true)},
			want: Result{Name: "agents", Status: Warn,
				Message: "agents without a pod (systemd units) report on a: their version cannot be known from the API",
				Hint:    "on each node: kubectl-dkc-agent version"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, checkAgents(tc.nodes, tc.pods, v, time.Now())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunFails runs every check against fake clients, where nothing is
// installed and every forged write is admitted: check prints each check
// and exits 2.
func TestRunFails(t *testing.T) {
	client := fake.NewSimpleClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"}}})
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{pool.Resource: "NodeConfigPoolList"})
	var out bytes.Buffer
	o := &Options{Namespace: source.DefaultNamespace, Client: client, Dynamic: dyn, Version: "v0.1.0", Now: time.Now,
		IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &out}}
	err := o.Run(context.Background())
	if util.ExitCode(err) != 2 {
		t.Fatalf("exit %d (%v), want 2", util.ExitCode(err), err)
	}
	for _, want := range []string{
		"✓ client version: kubectl dkc v0.1.0",
		"✓ apiserver version: v1.37.2",
		"✗ custom resources: not served",
		"! controller: no controller runs in namespace kube-system",
		"✗ agents: no agent on a",
		"✗ admission policies: missing: kubectl-dkc-node-assignment,",
		"✗ forged writes refused: admitted: an assignment through node/a's status; a pool in namespace default",
		"✓ node/a kubelet: v1.37.2",
		"! node/a flags: which config fields the kubelet's flags set cannot be known",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	o.Output = "json"
	out.Reset()
	_ = o.Run(context.Background())
	if !strings.HasPrefix(out.String(), "{\n  \"checks\": [\n    {\n      \"name\": \"client version\",\n      \"status\": \"ok\"") {
		t.Errorf("-o json:\n%s", out.String())
	}
}

// TestPoliciesAreDeploys holds Policies to deploy/admission-policy.yaml: the
// same policies, each with its binding.
func TestPoliciesAreDeploys(t *testing.T) {
	raw, err := os.ReadFile("../../../deploy/admission-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var policies, bound []string
	for _, d := range strings.Split(string(raw), "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				PolicyName string `json:"policyName"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "ValidatingAdmissionPolicy":
			policies = append(policies, obj.Metadata.Name)
		case "ValidatingAdmissionPolicyBinding":
			bound = append(bound, obj.Spec.PolicyName)
		}
	}
	if diff := cmp.Diff(Policies, policies); diff != "" {
		t.Errorf("policies (-check +deploy):\n%s", diff)
	}
	if diff := cmp.Diff(Policies, bound); diff != "" {
		t.Errorf("bindings (-check +deploy):\n%s", diff)
	}
}
