package rollout

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/cmd/util/utiltest"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/rollout/rollouttest"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// TestStartRefusesBeforeWriting checks that start refuses other bytes than
// the reviewed ones, and classes the caller may not use, before it creates
// anything; a server dry run asks as admission would, a client one does not.
func TestStartRefusesBeforeWriting(t *testing.T) {
	const payload = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\n"
	tests := map[string]struct {
		edit    func(o *StartOptions)
		mayUse  []string
		wantErr string
		asked   bool
	}{
		"the reviewed bytes, no class": {edit: func(o *StartOptions) { o.Digest = source.Digest([]byte(payload)) }},
		"other bytes than the reviewed ones": {
			edit:    func(o *StartOptions) { o.Digest = source.Digest([]byte("reviewed")) },
			wantErr: `configmap "kube-system/cfg" holds ` + source.ShortDigest(source.Digest([]byte(payload))) + ` under "kubelet", not the reviewed --digest ` + source.ShortDigest(source.Digest([]byte("reviewed"))) + `: its bytes changed since they were reviewed; review them again and pass their digest, or push the reviewed config under a new name (kubectl dkc push prints its digest)`,
		},
		"a class the caller may not use": {
			edit:    func(o *StartOptions) { o.AllowUnsafe = "security,host-access" },
			mayUse:  []string{"security"},
			wantErr: `start rollout "r": ` + source.UnsafeClassesDenied([]string{"host-access"}),
			asked:   true,
		},
		"classes the caller may use": {
			edit:   func(o *StartOptions) { o.AllowUnsafe = "security" },
			mayUse: []string{"security"},
			asked:  true,
		},
		"a client dry run asks nothing": {
			edit: func(o *StartOptions) { o.AllowUnsafe = "security"; o.DryRun = util.DryRunClient },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cfg", Labels: map[string]string{source.ConfigLabel: "true"}}, Data: map[string]string{"kubelet": payload}},
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
			)
			asked := utiltest.Authorize(client, utiltest.MayUse(tc.mayUse...))
			o := NewStartOptions(genericiooptions.NewTestIOStreamsDiscard())
			o.Config, o.Name, o.Namespace, o.DryRun = "cfg", "r", "kube-system", util.DryRunServer
			o.Nodes.Names = []string{"n1"}
			tc.edit(o)
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			store := rollouttest.NewStore(t, "kube-system")
			o.Client, o.Store = client, store
			err := o.Run(context.Background())
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("Run() error (-want +got):\n%s", diff)
			}
			if got := len(*asked) > 0; got != tc.asked {
				t.Errorf("asked the apiserver: %t, want %t", got, tc.asked)
			}
			if all, err := store.List(context.Background()); err != nil || (tc.wantErr != "" && len(all) > 0) {
				t.Errorf("rollouts after a refusal: %d (%v), want none", len(all), err)
			}
		})
	}
}

// TestUndoRefusesBeforeAborting checks that undo asks for the classes of
// the pins it gives back, and refuses before it aborts the rollout.
func TestUndoRefusesBeforeAborting(t *testing.T) {
	orig := rollout.New("kube-system", "r1", rollout.Spec{Config: cm("b"), Nodes: []string{"n1", "n2"}, MaxUnavailable: intstr.FromInt32(1)})
	orig.UID = "uid-r1"
	orig.Status = rollout.Status{State: rollout.Running}
	// n1 carries r1's mark: r1 started it, over cm a pinned with security.
	mark, err := json.Marshal(rollout.Mark{Rollout: "kube-system/r1", UID: orig.UID, Previous: cm("a"),
		PreviousPin: source.NewPin(cm("a"), []byte("a"), []string{"security"}), Started: metav1.NowMicro()})
	if err != nil {
		t.Fatal(err)
	}
	n1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{rollout.MarkAnnotation: string(mark)}}}
	for name, tc := range map[string]struct {
		mayUse  []string
		wantErr string
	}{
		"a class of a pin given back that the caller may not use": {
			wantErr: `undo rollout "r1": ` + source.UnsafeClassesDenied([]string{"security"}),
		},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(n1)
			asked := utiltest.Authorize(client, utiltest.MayUse(tc.mayUse...))
			store := rollouttest.NewStore(t, "kube-system", orig)
			o := NewUndoOptions(genericiooptions.NewTestIOStreamsDiscard())
			o.Name, o.Wait, o.Client, o.Store = "r1", true, client, store
			err := o.Run(context.Background())
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("Run() error (-want +got):\n%s", diff)
			}
			if len(*asked) != 1 {
				t.Errorf("asked %v, want the use of security", *asked)
			}
			got, err := store.Get(context.Background(), "r1")
			if err != nil || got.Spec.Aborted || got.State() != rollout.Running {
				t.Errorf("rollout r1 after a refused undo: %+v (%v), want it Running, not aborted", got, err)
			}
		})
	}
}

// TestStartRequestsWindows: --window reaches the rollout's request.
func TestStartRequestsWindows(t *testing.T) {
	o := NewStartOptions(genericiooptions.NewTestIOStreamsDiscard())
	o.Windows = []string{"Fri-Sun 22:00 4h Europe/Berlin"}
	want := rollout.Windows{{Days: []string{"Fri", "Sat", "Sun"}, Start: "22:00", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"}}
	if diff := cmp.Diff(want, o.request(nil).Windows); diff != "" {
		t.Errorf("windows (-want +got):\n%s", diff)
	}
}

// TestStartRequestsPauseOnAlerts: --pause-on-alert reaches the rollout's
// request, each matcher apart.
func TestStartRequestsPauseOnAlerts(t *testing.T) {
	o := NewStartOptions(genericiooptions.NewTestIOStreamsDiscard())
	o.PauseOnAlert = "http://127.0.0.1:9093 severity=critical,team=~db|storage"
	want := &rollout.PauseOnAlerts{Alertmanager: "http://127.0.0.1:9093", Matchers: []string{`severity="critical"`, `team=~"db|storage"`}}
	if diff := cmp.Diff(want, o.request(nil).PauseOnAlerts); diff != "" {
		t.Errorf("pauseOnAlerts (-want +got):\n%s", diff)
	}
	o.PauseOnAlert = ""
	if got := o.request(nil).PauseOnAlerts; got != nil {
		t.Errorf("pauseOnAlerts without the flag: %+v, want nil", got)
	}
}
