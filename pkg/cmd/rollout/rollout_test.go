package rollout

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestStartValidate(t *testing.T) {
	valid := func(edit func(o *StartOptions)) *StartOptions {
		o := NewStartOptions(genericiooptions.NewTestIOStreamsDiscard())
		o.Config = "cfg-5fd8t4bhgb"
		o.Nodes.All = true
		if edit != nil {
			edit(o)
		}
		return o
	}
	tests := map[string]struct {
		opts    *StartOptions
		wantErr string
	}{
		"valid":                            {opts: valid(nil)},
		"to-local":                         {opts: valid(func(o *StartOptions) { o.Config, o.ToLocal = "", true })},
		"no config":                        {opts: valid(func(o *StartOptions) { o.Config = "" }), wantErr: "--config is required: name the ConfigMap that holds the kubelet config (kubectl dkc push prints it), or use --to-local"},
		"both":                             {opts: valid(func(o *StartOptions) { o.ToLocal = true }), wantErr: "--config and --to-local exclude each other: roll out a config, or go back to local"},
		"config as push -o name prints it": {opts: valid(func(o *StartOptions) { o.Config = "configmap/cfg-5fd8t4bhgb" })},
		"config of another type": {opts: valid(func(o *StartOptions) { o.Config = "secret/cfg" }),
			wantErr: `invalid --config "secret/cfg": "secret" is not a ConfigMap type: write NAME or configmap/NAME`},
		"no nodes":        {opts: valid(func(o *StartOptions) { o.Nodes.All = false }), wantErr: "no nodes given: name them as arguments, or use -l/--selector or --all"},
		"bad budget":      {opts: valid(func(o *StartOptions) { o.MaxUnavailable = "0" }), wantErr: `invalid --max-unavailable "0": must be at least 1 (or 1%)`},
		"negative canary": {opts: valid(func(o *StartOptions) { o.Canary = -1 }), wantErr: "invalid --canary -1: must not be negative (0 means no canary)"},
		"negative soak":   {opts: valid(func(o *StartOptions) { o.Soak = -time.Second }), wantErr: "--soak, --timeout and --drain-timeout must not be negative"},
		"wait and dry run": {opts: valid(func(o *StartOptions) { o.Wait, o.DryRun = true, util.DryRunClient }),
			wantErr: "--wait cannot be used with --dry-run: nothing would change to wait for"},
		"digest and to-local": {opts: valid(func(o *StartOptions) { o.Config, o.ToLocal, o.Digest = "", true, source.Digest(nil) }),
			wantErr: "--digest cannot be used with --to-local: a node's local config has no bytes in a ConfigMap to check"},
		"a short digest": {opts: valid(func(o *StartOptions) { o.Digest = "sha256:6f1ed002ab55" }),
			wantErr: `invalid --digest "sha256:6f1ed002ab55": write the full digest, "sha256:" and 64 lowercase hex digits, as kubectl dkc push prints it`},
		"windows": {opts: valid(func(o *StartOptions) { o.Windows = []string{"Mon-Fri 22:00 4h Europe/Berlin", "Sat,Sun 00:00 48h"} })},
		"a bad window": {opts: valid(func(o *StartOptions) { o.Windows = []string{"Mon-Fri 22:00 4h", "weekends 10:00 2h"} }),
			wantErr: `invalid --window: window "weekends 10:00 2h": day "weekends" is not one of Mon, Tue, Wed, Thu, Fri, Sat, Sun: the form is ` + rollout.WindowForm},
		"pause on alerts": {opts: valid(func(o *StartOptions) {
			o.PauseOnAlert = `http://alertmanager.monitoring:9093 severity=critical,alertname=~"Node.*"`
		})},
		"an Alertmanager that is no http URL": {opts: valid(func(o *StartOptions) { o.PauseOnAlert = "alertmanager:9093 severity=critical" }),
			wantErr: `invalid --pause-on-alert: pauseOnAlerts.alertmanager: "alertmanager:9093" is not an http or https URL without user, query or fragment, such as http://alertmanager.monitoring:9093: the form is ` + rollout.PauseOnAlertForm},
		"a bad alert matcher": {opts: valid(func(o *StartOptions) {
			o.PauseOnAlert = "http://alertmanager.monitoring:9093 severity=critical,severity"
		}),
			wantErr: `invalid --pause-on-alert: alert matchers "severity=critical,severity": bad matcher format: severity: the form is ` + rollout.PauseOnAlertForm},
		"force without drain": {opts: valid(func(o *StartOptions) { o.DrainForce = true }), wantErr: "--drain-force and --drain-delete-emptydir-data need --drain"},
		"bad name":            {opts: valid(func(o *StartOptions) { o.Name = "Bad_Name" }), wantErr: `invalid --name "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantErr, errString(tc.opts.Validate())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func cm(name string) *corev1.NodeConfigSource {
	return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: source.DefaultNamespace, Name: name, KubeletConfigKey: source.DefaultKey,
	}}
}

// TestProgressLines checks the lines scripts parse when stdout is not a
// terminal: one per phase change, and per change of the state or its
// reason, none for a repeat.
func TestProgressLines(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf)
	r := rollout.New("kube-system", "r1", rollout.Spec{Config: cm("a"), Nodes: []string{"n1", "n2"}, Canary: 1, MaxUnavailable: intstr.FromInt32(1)})
	set := func(n string, ph rollout.Phase, errText string) {
		if r.Status.Nodes == nil {
			r.Status.Nodes = map[string]rollout.NodeStatus{}
		}
		r.Status.Nodes[n] = rollout.NodeStatus{Phase: ph, Error: errText}
	}
	p.update(r)
	r.Status.Reason = "OutsideWindow: no node starts before the next maintenance window, at 2026-11-30T22:00:00Z"
	p.update(r)
	p.update(r)
	r.Status.Reason = ""
	set("n1", rollout.InProgress, "")
	p.update(r)
	p.update(r)
	set("n1", rollout.Succeeded, "")
	set("n2", rollout.InProgress, "")
	p.update(r)
	set("n2", rollout.Failed, "rolled\nback")
	r.Status.State, r.Status.Reason = rollout.Halted, "node/n2: rolled\nback"
	p.update(r)
	p.finish(r)
	want := `rollout/r1 Running
rollout/r1 Running reason=OutsideWindow: no node starts before the next maintenance window, at 2026-11-30T22:00:00Z
rollout/r1 node/n1 InProgress wave=0
rollout/r1 Running
rollout/r1 node/n1 Done wave=0
rollout/r1 node/n2 InProgress wave=1
rollout/r1 node/n2 Failed wave=1 error=rolled back
rollout/r1 Halted reason=node/n2: rolled back
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// A client whose first sight is the end (another client drove the
	// rollout) prints the node lines, then the end: the last line is the
	// end state.
	buf.Reset()
	p = newProgress(&buf)
	set("n1", rollout.Succeeded, "")
	set("n2", rollout.Succeeded, "")
	r.Status.State, r.Status.Reason = rollout.Done, ""
	p.update(r)
	p.finish(r)
	want = `rollout/r1 node/n1 Done wave=0
rollout/r1 node/n2 Done wave=1
rollout/r1 Done
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("first sight is the end (-want +got):\n%s", diff)
	}
}

func TestPrintTable(t *testing.T) {
	r := rollout.New("kube-system", "r1", rollout.Spec{Config: cm("a"), Nodes: []string{"n1", "n2", "n3", "n4"}, Canary: 1, MaxUnavailable: intstr.FromInt32(2)})
	r.Status.Nodes = map[string]rollout.NodeStatus{"n1": {Phase: rollout.Succeeded}, "n2": {Phase: rollout.InProgress}}
	var buf bytes.Buffer
	if err := rollout.PrintTable(&buf, r); err != nil {
		t.Fatal(err)
	}
	want := `rollout/r1: Running, kube-system/a over 4 nodes, max unavailable 2 (2), canary 1, no soak: a freed slot goes at once to the next node
WAVE         STATE         DONE   IN-PROGRESS   WAITING   FAILED   NODES
0 (canary)   done          1      0             0         0        n1(Done)
1            in progress   0      1             2         0        n2(InProgress),n3,n4
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestProgressTerminal checks that a terminal gets the table redrawn in
// place: the cursor goes up over the previous table, which is cleared.
func TestProgressTerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf)
	p.tty = true
	r := rollout.New("kube-system", "r1", rollout.Spec{Config: cm("a"), Nodes: []string{"n1", "n2"}, Canary: 1, MaxUnavailable: intstr.FromInt32(1)})
	p.update(r)
	first := buf.String()
	if got := bytes.Count([]byte(first), []byte("\n")); got != 4 {
		t.Fatalf("first table has %d lines, want 4:\n%s", got, first)
	}
	r.Status.Nodes = map[string]rollout.NodeStatus{"n1": {Phase: rollout.InProgress}}
	p.update(r)
	second := buf.String()[len(first):]
	if want := "\x1b[4A\x1b[J"; !bytes.HasPrefix([]byte(second), []byte(want)) {
		t.Errorf("redraw starts with %q, want %q", second[:min(len(second), 10)], want)
	}
	if !bytes.Contains([]byte(second), []byte("0 (canary)   in progress")) {
		t.Errorf("redrawn table lacks the canary in progress:\n%s", second)
	}
}

func TestPrintPlan(t *testing.T) {
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	o := NewStartOptions(streams)
	o.DryRun = util.DryRunClient
	spec := rollout.Spec{Config: cm("a"), Nodes: []string{"n1", "n2", "n3"}, Canary: 1, MaxUnavailable: intstr.FromInt32(2), Drain: []string{"n3"}}
	for _, s := range []string{"Mon-Fri 22:00 4h Europe/Berlin", "Sun 10:00 90m"} {
		w, err := rollout.ParseWindow(s)
		if err != nil {
			t.Fatal(err)
		}
		spec.Windows = append(spec.Windows, w)
	}
	spec.PauseOnAlerts = &rollout.PauseOnAlerts{Alertmanager: "http://am:9093", Matchers: []string{"severity=critical", "team=~db|storage"}}
	if err := o.printPlan(rollout.New("kube-system", "r1", spec), nil); err != nil {
		t.Fatal(err)
	}
	want := `rollout/r1 (dry run): Running, kube-system/a over 3 nodes, max unavailable 2 (2), canary 1, no soak: a freed slot goes at once to the next node, drains 1 nodes, starts nodes only in the windows Mon,Tue,Wed,Thu,Fri 22:00 4h0m0s Europe/Berlin; Sun 10:00 1h30m0s, starts no node while an alert fires on http://am:9093 matching severity=critical, team=~db|storage
WAVE         NODES   DRAIN
0 (canary)   n1      
1            n2,n3   n3
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestWithRateLimit(t *testing.T) {
	type limit struct {
		QPS     float32
		Burst   int
		Limiter bool
	}
	tests := map[string]struct {
		in   *rest.Config
		want limit
	}{
		"client-go's default is raised": {in: &rest.Config{}, want: limit{QPS: clientQPS, Burst: clientBurst}},
		"a set limit is kept":           {in: &rest.Config{QPS: 20, Burst: 30}, want: limit{QPS: 20, Burst: 30}},
		"no limit is kept":              {in: &rest.Config{QPS: -1}, want: limit{QPS: -1}},
		"a rate limiter is kept":        {in: &rest.Config{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}, want: limit{Limiter: true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := withRateLimit(tc.in)
			if diff := cmp.Diff(tc.want, limit{got.QPS, got.Burst, got.RateLimiter != nil}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got == tc.in {
				t.Error("withRateLimit changed its argument; want a copy")
			}
		})
	}
}

func TestNameOrLatest(t *testing.T) {
	const unnamed = "name the rollout (kubectl get nodeconfigrollouts -n kube-system lists them), or pass --latest to act on the newest"
	const both = "NAME and --latest exclude each other: name the rollout, or pass --latest to act on the newest"
	tests := map[string]struct {
		name    string
		latest  bool
		wantErr string
	}{
		"NAME":           {name: "r1"},
		"--latest":       {latest: true},
		"neither":        {wantErr: unnamed},
		"NAME, --latest": {name: "r1", latest: true, wantErr: both},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for verb, o := range map[string]interface{ Validate() error }{
				"pause":  &StateOptions{Name: tc.name, Latest: tc.latest, Namespace: source.DefaultNamespace, verb: pauseVerb},
				"abort":  &StateOptions{Name: tc.name, Latest: tc.latest, Namespace: source.DefaultNamespace, verb: abortVerb},
				"resume": &ResumeOptions{Name: tc.name, Latest: tc.latest, Namespace: source.DefaultNamespace},
				"undo": func() *UndoOptions {
					o := NewUndoOptions(genericiooptions.NewTestIOStreamsDiscard())
					o.Name, o.Latest = tc.name, tc.latest
					return o
				}(),
			} {
				if diff := cmp.Diff(tc.wantErr, errString(o.Validate())); diff != "" {
					t.Errorf("%s (-want +got):\n%s", verb, diff)
				}
			}
		})
	}
}

func TestTimeoutWithoutWait(t *testing.T) {
	const want = "--timeout has no effect without --wait: add --wait, or drop --timeout"
	start := NewStartOptions(genericiooptions.NewTestIOStreamsDiscard())
	start.Config, start.Nodes.All, start.TimeoutSet = "cfg-5fd8t4bhgb", true, true
	if diff := cmp.Diff(want, errString(start.Validate())); diff != "" {
		t.Errorf("start (-want +got):\n%s", diff)
	}
	start.Wait = true
	if err := start.Validate(); err != nil {
		t.Errorf("start --wait --timeout: %v", err)
	}

	undo := NewUndoOptions(genericiooptions.NewTestIOStreamsDiscard())
	undo.Name, undo.TimeoutSet = "r1", true
	if diff := cmp.Diff(want, errString(undo.Validate())); diff != "" {
		t.Errorf("undo (-want +got):\n%s", diff)
	}
	undo.Wait = true
	if err := undo.Validate(); err != nil {
		t.Errorf("undo --wait --timeout: %v", err)
	}

	resume := &ResumeOptions{Name: "r1", Namespace: source.DefaultNamespace, TimeoutSet: true}
	if diff := cmp.Diff(want, errString(resume.Validate())); diff != "" {
		t.Errorf("resume (-want +got):\n%s", diff)
	}
	resume.Wait = true
	if err := resume.Validate(); err != nil {
		t.Errorf("resume --wait --timeout: %v", err)
	}

	status := &StatusOptions{TimeoutSet: true}
	if diff := cmp.Diff("--timeout has no effect without -w/--watch: add -w, or drop --timeout", errString(status.Validate())); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

// TestUndoCanaryHelp keeps --canary's default, the undone rollout's, out
// of the help as a number.
func TestUndoCanaryHelp(t *testing.T) {
	cmd := NewCmdUndo(nil, genericiooptions.NewTestIOStreamsDiscard())
	found := false
	for _, line := range strings.Split(cmd.Flags().FlagUsages(), "\n") {
		if strings.Contains(line, "--canary") {
			found = true
			if diff := cmp.Diff("      --canary int                    As for rollout start (default: the undone rollout's canary).", line); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		}
	}
	if !found {
		t.Errorf("no --canary in the help")
	}
	if err := cmd.Flags().Parse([]string{"--canary", "0"}); err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("canary").Value.String(); got != "0" {
		t.Errorf("--canary 0 reads %q", got)
	}
}
