package cmd_test

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// TestExitCodes runs every command that reads a state against a fake
// apiserver, and checks the exit code for each state: a node's error for
// its assignment and a halted rollout exit 2 whether the state is read
// once or followed, an aborted rollout 1, a timeout 3. Its codes are those
// of the table in docs/user-guide.md, no more and no fewer.
func TestExitCodes(t *testing.T) {
	const (
		assigned = `{"configMap":{"namespace":"kube-system","name":"cm","kubeletConfigKey":"kubelet"}}`
		nodeErr  = "failed to validate config, see Kubelet log for details"
	)
	node := func(name, status string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{source.AssignedAnnotation: assigned}}}
		if status != "" {
			n.Annotations[source.StatusAnnotation] = status
		}
		return n
	}
	api := &fakeAPIServer{Nodes: []corev1.Node{
		node("active", `{"assigned":`+assigned+`,"active":`+assigned+`,"lastKnownGood":`+assigned+`}`),
		node("failed", `{"assigned":`+assigned+`,"error":"`+nodeErr+`"}`),
		node("pending", ""),
	}}
	for name, state := range map[string]rollout.State{
		"r-done": rollout.Done, "r-running": rollout.Running, "r-paused": rollout.Paused,
		"r-halted": rollout.Halted, "r-aborted": rollout.Aborted,
	} {
		r := rollout.New("kube-system", name, rollout.Spec{Config: &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
			Namespace: "kube-system", Name: "cm", KubeletConfigKey: "kubelet",
		}}, Nodes: []string{"failed"}, MaxUnavailable: intstr.FromInt32(1)})
		r.Status.State = state
		r.Spec.Paused = state == rollout.Paused
		r.Spec.Aborted = state == rollout.Aborted
		if state == rollout.Halted {
			r.Status.Reason = `node "failed" reported an error: ` + nodeErr
		}
		u, err := rollout.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		api.Rollouts = append(api.Rollouts, *u)
	}
	in := runEnv{
		Kubeconfig: api.start(t),
		Dir:        writeFiles(t, map[string]string{"a.yaml": kubeletYAML, "b.yaml": strings.Replace(kubeletYAML, "110", "42", 1)}),
	}

	halted := `error: rollout "r-halted" halted: node "failed" reported an error: ` + nodeErr + `: undo it with kubectl dkc rollout undo r-halted` + "\n"
	tests := map[string]struct {
		args []string
		code int
		// stderr, when set, is the whole of stderr.
		stderr string
	}{
		"status, no error":                     {args: []string{"status", "active", "pending"}, code: 0},
		"status, a node's error":               {args: []string{"status", "active", "failed"}, code: 2, stderr: `error: node "failed": config error: ` + nodeErr + "\n"},
		"status -o name, a node's error":       {args: []string{"status", "failed", "-o", "name"}, code: 2},
		"status -w, a node's error at the end": {args: []string{"status", "-w", "--timeout", "1s"}, code: 2},
		"status -w, no error at the end":       {args: []string{"status", "active", "-w", "--timeout", "1s"}, code: 0},
		"status --wait-for=active, reached":    {args: []string{"status", "active", "--wait-for=active", "--timeout", "10s"}, code: 0},
		"status --wait-for=active, an error":   {args: []string{"status", "active", "failed", "--wait-for=active", "--timeout", "10s"}, code: 2},
		"status --wait-for=active, timeout":    {args: []string{"status", "pending", "--wait-for=active", "--timeout", "1s"}, code: 3},
		"status --wait-for=error, reached":     {args: []string{"status", "failed", "--wait-for=error", "--timeout", "10s"}, code: 0},
		"rollout status, done":                 {args: []string{"rollout", "status", "r-done"}, code: 0},
		"rollout status, running":              {args: []string{"rollout", "status", "r-running"}, code: 0},
		"rollout status, paused":               {args: []string{"rollout", "status", "r-paused"}, code: 0},
		"rollout status, halted":               {args: []string{"rollout", "status", "r-halted"}, code: 2, stderr: halted},
		"rollout status, aborted":              {args: []string{"rollout", "status", "r-aborted"}, code: 1, stderr: `error: rollout "r-aborted": rollout aborted` + "\n"},
		"rollout status -w, done":              {args: []string{"rollout", "status", "r-done", "-w", "--timeout", "10s"}, code: 0},
		"rollout status -w, halted":            {args: []string{"rollout", "status", "r-halted", "-w", "--timeout", "10s"}, code: 2, stderr: halted},
		"rollout status -w, aborted":           {args: []string{"rollout", "status", "r-aborted", "-w", "--timeout", "10s"}, code: 1},
		"rollout status -w, timeout":           {args: []string{"rollout", "status", "r-running", "-w", "--timeout", "1s"}, code: 3},
		"a usage error":                        {args: []string{"rollout", "status", "--frobnicate"}, code: 1},
		"diff, the same":                       {args: []string{"diff", "a.yaml", "a.yaml"}, code: 0},
		"diff, different":                      {args: []string{"diff", "a.yaml", "b.yaml"}, code: 1},
		"diff, an error":                       {args: []string{"diff", "a.yaml", "missing.yaml"}, code: 2},
		"diff, a usage error": {
			args: []string{"diff", "a.yaml", "b.yaml", "--frobnicate"}, code: 2,
			stderr: "error: unknown flag: --frobnicate\nSee 'kubectl dkc diff --help' for usage.\n",
		},
	}
	codes := sets.New[int]()
	for name, tc := range tests {
		if !strings.HasPrefix(tc.args[0], "diff") {
			codes.Insert(tc.code)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := runWith(t, in, dkcBinary, tc.args...)
			if got.Code != tc.code {
				t.Errorf("kubectl-dkc %s: exit %d, want %d; stderr:\n%s", strings.Join(tc.args, " "), got.Code, tc.code, got.Stderr)
			}
			if tc.stderr != "" {
				if diff := cmp.Diff(tc.stderr, got.Stderr); diff != "" {
					t.Errorf("kubectl-dkc %s: stderr (-want +got):\n%s", strings.Join(tc.args, " "), diff)
				}
			}
		})
	}
	t.Run("the table in docs/user-guide.md", func(t *testing.T) {
		documented := documentedExitCodes(t)
		if diff := cmp.Diff(sets.List(codes), documented); diff != "" {
			t.Errorf("the codes the commands exit with (-tested +documented):\n%s", diff)
		}
	})
}

// documentedExitCodes returns the codes in the first column of the table
// under "## Exit codes" in docs/user-guide.md.
func documentedExitCodes(t *testing.T) []int {
	t.Helper()
	f, err := os.Open("../docs/user-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile(`^\| (\d+) \|`)
	var codes []int
	in := false
	for s := bufio.NewScanner(f); s.Scan(); {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Exit codes"
		case in:
			if m := row.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				codes = append(codes, n)
			}
		}
	}
	if len(codes) == 0 {
		t.Fatal(`docs/user-guide.md has no table of exit codes under "## Exit codes"`)
	}
	slices.Sort(codes)
	return slices.Compact(codes)
}
