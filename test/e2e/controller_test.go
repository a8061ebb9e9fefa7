package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/argocd"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestNodeConfigRolloutAPI: deploy/crds.yaml on a real apiserver keeps
// every field of a rollout as dkc writes it, enforces what only changes
// how, and deploy/roles.yaml gives each role what it says and no more.
func TestNodeConfigRolloutAPI(t *testing.T) {
	c := framework.Setup(t, framework.Options{ControlPlaneOnly: true})
	framework.InstallCRDs(t, c)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	store := &rollout.Store{Client: dyn, Namespace: source.DefaultNamespace}
	ref := func(name string) *corev1.NodeConfigSource {
		return &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: name, KubeletConfigKey: "kubelet"}}
	}
	pin := func(name string) *source.Pin {
		return source.NewPin(ref(name), []byte(name), []string{"host-access"})
	}
	at := metav1.NewMicroTime(time.Date(2026, 11, 26, 3, 0, 0, 123456000, time.UTC))

	t.Run("every field a client writes is kept", func(t *testing.T) {
		want := rollout.New("kube-system", "full", rollout.Spec{
			Config: ref("a"), Pin: pin("a"),
			Targets:    map[string]*corev1.NodeConfigSource{"n2": nil, "n3": ref("b")},
			TargetPins: map[string]*source.Pin{"n3": pin("b")},
			Nodes:      []string{"n1", "n2", "n3", "n4"}, Selector: "pool=a", MaxUnavailable: intstr.FromString("34%"),
			Canary: 1, Soak: metav1.Duration{Duration: 2 * time.Minute}, OrderByLabel: "topology.kubernetes.io/zone",
			Drain:        []string{"n1"},
			DrainOptions: rollout.DrainSpec{Timeout: metav1.Duration{Duration: 5 * time.Minute}, Force: true, DeleteEmptyDirData: true},
			UndoOf:       "earlier", Paused: true,
			Windows: rollout.Windows{{Days: []string{"Mon", "Fri"}, Start: "22:00", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"}},
		})
		created, err := store.Create(ctx, want, false)
		if err != nil {
			t.Fatal(err)
		}
		if created.Status.State != "" {
			t.Errorf("status %+v stored at creation: only the driver writes it", created.Status)
		}
		soak := metav1.NewTime(at.Time)
		created.Status = rollout.Status{State: rollout.Halted, Reason: "node n1 reported an error", Wave: 2, SoakSince: &soak,
			Counts:   rollout.Counts{Waiting: 1, InProgress: 1, Updated: 1, Failed: 1},
			Failures: []rollout.Failure{{Node: "n1", Error: "rolled back"}}}
		written, err := store.UpdateStatus(ctx, created)
		if err != nil {
			t.Fatal(err)
		}
		got, err := store.Get(ctx, "full")
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "spec", want.Spec, got.Spec)
		sameJSON(t, "status", written.Status, got.Status)
		if got.Status.State != rollout.Halted || got.Status.Counts.Failed != 1 || len(got.Status.Failures) != 1 {
			t.Errorf("status read back %+v", got.Status)
		}
	})

	t.Run("a rollout over a selector, halted with the most its status holds, stays under 16 KiB", func(t *testing.T) {
		// Each node's part is on the node, the nodes are the selector's,
		// and what the nodes report is cut: the object's size does not
		// depend on the fleet's.
		created, err := store.Create(ctx, rollout.New("kube-system", "fleet", rollout.Spec{
			Config: ref("kubelet-config-pool-a-8b1d3"), Pin: pin("kubelet-config-pool-a-8b1d3"), Selector: "pool=a", DrainAll: true,
			MaxUnavailable: intstr.FromString("10%"),
		}), false)
		if err != nil {
			t.Fatal(err)
		}
		long := strings.Repeat("x", v1alpha1.MaxMessageBytes)
		created.Status = rollout.Status{State: rollout.Halted, Reason: long, Counts: rollout.Counts{Waiting: 64980, InProgress: 10, Failed: 10}}
		for i := range rollout.MaxFailures {
			created.Status.Failures = append(created.Status.Failures, rollout.Failure{Node: fmt.Sprintf("ip-10-0-0-%d.eu-central-1.compute.internal", i), Error: long})
		}
		updated, err := store.UpdateStatus(ctx, created)
		if err != nil {
			t.Fatal(err)
		}
		u, err := dyn.Resource(rollout.Resource).Namespace("kube-system").Get(ctx, "fleet", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := u.Object["spec"].(map[string]any)["nodes"]; ok {
			t.Errorf("the stored rollout lists nodes")
		}
		data, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rollout stored: %d bytes, managed fields included", len(data))
		if len(data) > 16<<10 {
			t.Errorf("the stored rollout is %d bytes; want at most 16 KiB, whatever the number of nodes", len(data))
		}
		updated.Status.Reason = long + "x"
		if _, err := store.UpdateStatus(ctx, updated); err == nil || !strings.Contains(err.Error(), "Too long") {
			t.Errorf("a reason over %d bytes: %v, want it refused as too long", v1alpha1.MaxMessageBytes, err)
		}
		if _, err := dyn.Resource(rollout.Resource).Namespace("kube-system").Patch(ctx, "fleet", types.MergePatchType, []byte(`{"spec":{"nodes":["n1"]}}`), metav1.PatchOptions{}); err == nil || !strings.Contains(err.Error(), "only paused and aborted change") {
			t.Errorf("listing nodes on a rollout over a selector: %v, want it refused", err)
		}
	})

	t.Run("the apiserver refuses what a rollout must not become", func(t *testing.T) {
		if _, err := store.Create(ctx, rollout.New("kube-system", "r", rollout.Spec{Config: ref("a"), Nodes: []string{"n1"}, MaxUnavailable: intstr.FromInt32(1)}), false); err != nil {
			t.Fatal(err)
		}
		ncr := dyn.Resource(rollout.Resource).Namespace("kube-system")
		for name, tc := range map[string]struct{ patch, want string }{
			"the config does not change": {`{"spec":{"config":{"configMap":{"name":"b"}}}}`, "is immutable"},
			"the nodes do not change":    {`{"spec":{"nodes":["n1","n2"]}}`, "is immutable"},
			"a budget of 0 is no budget": {`{"spec":{"maxUnavailable":0}}`, "must be a count of at least 1 or a percentage"},
			"a budget is a count or a %": {`{"spec":{"maxUnavailable":"half"}}`, "must be a count of at least 1 or a percentage"},
			"a canary is not negative":   {`{"spec":{"canary":-1}}`, "should be greater than or equal to 0"},
			"no rollout without nodes":   {`{"spec":{"nodes":[]}}`, "should have at least 1 items"},
			"the windows do not change":  {`{"spec":{"windows":[{"days":["Mon"],"start":"22:00","duration":"4h"}]}}`, "only paused and aborted change"},
		} {
			t.Run(name, func(t *testing.T) {
				_, err := ncr.Patch(ctx, "r", types.MergePatchType, []byte(tc.patch), metav1.PatchOptions{})
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("patch %s: %v, want an error with %q", tc.patch, err, tc.want)
				}
			})
		}
		t.Run("an aborted rollout stays aborted", func(t *testing.T) {
			if _, err := store.Request(ctx, "r", rollout.Aborted, rollout.Running); err != nil {
				t.Fatal(err)
			}
			_, err := ncr.Patch(ctx, "r", types.MergePatchType, []byte(`{"spec":{"aborted":false}}`), metav1.PatchOptions{})
			if err == nil || !strings.Contains(err.Error(), "an aborted rollout stays aborted") {
				t.Errorf("un-aborting: %v, want it refused", err)
			}
		})
		t.Run("the status is the driver's: an update of the object keeps it", func(t *testing.T) {
			r, err := store.Get(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			r.Status.State = rollout.Done
			u, err := rollout.Encode(r)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ncr.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if got, _ := store.Get(ctx, "r"); got == nil || got.Status.State == rollout.Done {
				t.Errorf("an update of the object wrote its status: %+v", got)
			}
		})
	})

	t.Run("roles: a viewer cannot pause, a ConfigMap writer cannot start, an operator can pause", func(t *testing.T) {
		if err := c.ApplyManifest(ctx, filepath.Join("..", "..", "deploy", "roles.yaml"), false); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createConfigMap(t, c, "roles-cfg", maxPodsConfig(42))
		if _, err := store.Create(ctx, rollout.New("kube-system", "live", rollout.Spec{Config: ref("roles-cfg"), Nodes: []string{"n1"}, MaxUnavailable: intstr.FromInt32(1)}), false); err != nil {
			t.Fatal(err)
		}
		bind(t, c, "viewer", "kubectl-dkc:rollout-viewer")
		bind(t, c, "operator", "kubectl-dkc:rollout-operator")
		// What start needs besides the rollout: the nodes, the ConfigMap
		// it pins and the controller's Lease. Only the rollout is missing.
		createClusterRole(t, c, "cm-writer", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}},
		})
		bind(t, c, "cm-writer", "cm-writer")

		viewer := userKubeconfig(t, c, "viewer")
		if r := dkcAs(t, viewer, "", "rollout", "status", "live"); r.ExitCode != 0 {
			t.Errorf("viewer: rollout status exit %d, want 0", r.ExitCode)
		}
		if r := dkcAs(t, viewer, "", "rollout", "pause", "live"); r.ExitCode != 1 || !strings.Contains(r.Stderr, "forbidden") {
			t.Errorf("viewer: rollout pause exit %d, stderr %q; want 1 and forbidden", r.ExitCode, r.Stderr)
		}
		if got, _ := store.Get(ctx, "live"); got == nil || got.Spec.Paused {
			t.Errorf("the viewer paused the rollout: %+v", got)
		}

		writer := userKubeconfig(t, c, "cm-writer")
		r := dkcAs(t, writer, "", "rollout", "start", "--config", "roles-cfg", "n1", "--name", "by-writer", "--wait")
		if r.ExitCode != 1 || !strings.Contains(r.Stderr, `nodeconfigrollouts.kubectl-dkc.io is forbidden`) {
			t.Errorf("ConfigMap writer: rollout start exit %d, stderr %q; want 1 and nodeconfigrollouts forbidden", r.ExitCode, r.Stderr)
		}
		if _, err := store.Get(ctx, "by-writer"); !errors.Is(err, rollout.ErrNotFound) {
			t.Errorf("the ConfigMap writer's rollout: %v, want none", err)
		}

		operator := userKubeconfig(t, c, "operator")
		if r := dkcAs(t, operator, "", "rollout", "pause", "live"); r.ExitCode != 0 {
			t.Errorf("operator: rollout pause exit %d, want 0", r.ExitCode)
		}
		if got, _ := store.Get(ctx, "live"); got == nil || !got.Spec.Paused || got.State() != rollout.Paused {
			t.Errorf("after the operator's pause: %+v, want spec.paused", got)
		}
	})
}

// TestController: rollouts driven by `kubectl dkc controller` on three real
// kubelets, with no CLI process alive: start and undo return at once, a
// killed leader's standby finishes the rollout without restarting any node
// twice or breaking the budget, and pause and resume reach it through the
// rollout's spec.
func TestController(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	c, names, store := controllerCluster(t)
	ctx := context.Background()
	for name, maxPods := range map[string]int{"ctl-a": 61, "ctl-b": 62, "ctl-c": 63} {
		createConfigMap(t, c, name, maxPodsConfig(maxPods))
	}

	t.Run("without a controller, start and undo without --wait refuse at once, and say how to drive the rollout", func(t *testing.T) {
		r := dkc(t, c, "", "rollout", "start", "--config", "ctl-a", "--all", "--name", "undriven")
		if r.ExitCode != 1 || !strings.Contains(r.Stderr, "no controller runs in namespace kube-system") || !strings.Contains(r.Stderr, "pass --wait") {
			t.Errorf("start: exit %d, stderr %q; want 1, naming the missing controller and --wait", r.ExitCode, r.Stderr)
		}
		if _, err := store.Get(ctx, "undriven"); !errors.Is(err, rollout.ErrNotFound) {
			t.Errorf("start without a driver created the rollout: %v", err)
		}
		r = dkc(t, c, "", "rollout", "undo", "--latest")
		if r.ExitCode != 1 || !strings.Contains(r.Stderr, "no controller runs in namespace kube-system") {
			t.Errorf("undo: exit %d, stderr %q; want 1, naming the missing controller", r.ExitCode, r.Stderr)
		}
	})

	t.Run("one node's config for many: refused before anything starts, naming the node-specific fields", func(t *testing.T) {
		n := c.Node(names[0])
		createConfigMap(t, c, "snap-"+n.Name, nodeConfig(t, n, nil))
		for _, dryRun := range []string{"--dry-run=client", "--wait"} {
			r := dkc(t, c, "", "rollout", "start", "--config", "snap-"+n.Name, "--all", "--name", "snap", dryRun)
			if r.ExitCode != 1 || !strings.Contains(r.Stderr, "sets node-specific fields to one node's values") ||
				!strings.Contains(r.Stderr, `address "`+n.IP+`" (the value of `+n.Name) {
				t.Errorf("rollout start %s: exit %d, stderr %q; want 1, naming the address %s as %s's", dryRun, r.ExitCode, r.Stderr, n.IP, n.Name)
			}
		}
		if _, err := store.Get(ctx, "snap"); !errors.Is(err, rollout.ErrNotFound) {
			t.Errorf("the refused rollout exists: %v", err)
		}
	})

	kubeconfig, err := c.UserKubeconfig(framework.ControllerIdentity)
	if err != nil {
		t.Fatal(err)
	}
	replicas := map[string]*framework.Controller{}
	startReplica := func(t *testing.T, identity string) {
		t.Helper()
		ctl, err := c.StartController(framework.DKCBinary(), kubeconfig, identity)
		if err != nil {
			t.Fatal(err)
		}
		replicas[identity] = ctl
	}
	startReplica(t, "replica-1")
	startReplica(t, "replica-2")
	leaderNow := func(t *testing.T) string { return waitLeader(t, c, 30*time.Second, "") }
	t.Logf("leader: %s", leaderNow(t))

	t.Run("start without --wait returns, and the controller rolls the config out", func(t *testing.T) {
		began := time.Now()
		r := mustDKC(t, c, "", "rollout", "start", "--config", "ctl-a", "--all", "--name", "ctl-a", "--max-unavailable", "1")
		if !strings.Contains(r.Stderr, "drives rollout/ctl-a") {
			t.Errorf("start did not say who drives the rollout: %q", r.Stderr)
		}
		followToDone(t, c, "ctl-a")
		ro := rolloutObject(t, c, "ctl-a")
		checkApplyWindows(t, c, applyWindows(t, ro, names, time.Now()), began)
		for _, n := range names {
			eventuallyStatus(t, c, n, 10*time.Second, Active("ctl-a"), NoError())
		}
	})

	t.Run("the leader killed mid-rollout: the standby finishes it, no node restarts twice, the budget holds", func(t *testing.T) {
		began := time.Now()
		mustDKC(t, c, "", "rollout", "start", "--config", "ctl-b", "--all", "--name", "ctl-b", "--max-unavailable", "1")
		waitFor(t, 3*time.Minute, "the rollout's second node to start", func() bool {
			r, err := liveGet(ctx, c, store, "ctl-b")
			return err == nil && r.NodeStatus(names[1]).Phase == rollout.InProgress
		})
		old := leaderNow(t)
		if err := replicas[old].Kill(); err != nil {
			t.Fatal(err)
		}
		t.Logf("killed the leader %s (SIGKILL)", old)
		followToDone(t, c, "ctl-b")
		now := leaderNow(t)
		if now == old {
			t.Errorf("leader %s still holds the lease after it was killed", now)
		}
		ro := rolloutObject(t, c, "ctl-b")
		checkApplyWindows(t, c, applyWindows(t, ro, names, time.Now()), began)
		startReplica(t, "replica-3") // a standby again
	})

	t.Run("pause and resume reach the controller through the rollout's spec", func(t *testing.T) {
		mustDKC(t, c, "", "rollout", "start", "--config", "ctl-c", "--all", "--name", "ctl-c", "--max-unavailable", "1", "--soak", "15s")
		waitFor(t, 3*time.Minute, "the canary to finish", func() bool {
			r, err := liveGet(ctx, c, store, "ctl-c")
			return err == nil && r.NodeStatus(names[0]).Phase == rollout.Succeeded
		})
		mustDKC(t, c, "", "rollout", "pause", "ctl-c")
		waitFor(t, 30*time.Second, "the controller to record Paused", func() bool {
			r, err := store.Get(ctx, "ctl-c")
			return err == nil && r.Status.State == rollout.Paused
		})
		// The soak ends while paused: until a second after it would have,
		// no further node starts.
		r, err := store.Get(ctx, "ctl-c")
		if err != nil || r.Status.SoakSince == nil {
			t.Fatalf("the paused rollout records no soak: %v %+v", err, r)
		}
		until := r.Status.SoakSince.Add(16 * time.Second)
		err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Until(until), true, func(ctx context.Context) (bool, error) {
			r, err := liveGet(ctx, c, store, "ctl-c")
			if err != nil {
				return false, err
			}
			for _, n := range names[1:] {
				if ph := r.NodeStatus(n).Phase; ph != rollout.Waiting {
					return false, fmt.Errorf("node %s is %s in a paused rollout, want Waiting", n, ph)
				}
			}
			return false, nil
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("while paused: %v", err)
		}
		// resume follows the controller's work to the end.
		res := dkc(t, c, "", "rollout", "resume", "ctl-c", "--wait", "--timeout", "4m")
		if res.ExitCode != 0 || !strings.Contains(res.Stdout, "rollout/ctl-c Done") {
			t.Fatalf("resume: exit %d, want 0 and Done", res.ExitCode)
		}
	})

	t.Run("undo without --wait completes", func(t *testing.T) {
		// The starting state: a finished rollout of ctl-c over nodes that
		// ran ctl-b before it, as the subtests above leave it; rolled out
		// here when they did not run, or did not finish it.
		base := "ctl-c"
		if r, err := store.Get(ctx, base); err != nil || r.Status.State != rollout.Done {
			for _, n := range names {
				startFrom(t, c, n, "ctl-b", time.Minute)
			}
			base = fmt.Sprintf("ctl-c-%d", time.Now().Unix())
			mustDKC(t, c, "", "rollout", "start", "--config", "ctl-c", "--all", "--name", base, "--canary", "0", "--max-unavailable", "3")
			followToDone(t, c, base)
		}
		r := mustDKC(t, c, "", "rollout", "undo", base, "--canary", "0", "--max-unavailable", "3")
		m := regexp.MustCompile(`nodeconfigrollout\.kubectl-dkc\.io/(\S+) started`).FindStringSubmatch(r.Stdout)
		if m == nil {
			t.Fatalf("undo printed no rollout: %q", r.Stdout)
		}
		followToDone(t, c, m[1])
		for _, n := range names {
			eventuallyStatus(t, c, n, 10*time.Second, Active("ctl-b"), NoError())
		}
	})
}

// controllerCluster is rolloutCluster with deploy/controller.yaml applied
// (its ServiceAccount and RBAC; the tests start the replicas), and a store
// of the rollouts.
func controllerCluster(t *testing.T) (*framework.Cluster, []string, *rollout.Store) {
	t.Helper()
	c, names := rolloutCluster(t, nil)
	if err := c.ApplyManifest(context.Background(), filepath.Join("..", "..", "deploy", "controller.yaml"), false); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	return c, names, &rollout.Store{Client: dyn, Namespace: source.DefaultNamespace}
}

// followToDone follows rollout name with rollout status -w until it is
// Done, and fails the test otherwise.
func followToDone(t *testing.T, c *framework.Cluster, name string) {
	t.Helper()
	w := dkc(t, c, "", "rollout", "status", name, "-w", "--timeout", "4m")
	if w.ExitCode != 0 || !strings.Contains(w.Stdout, "rollout/"+name+" Done") {
		t.Fatalf("rollout status %s -w: exit %d, want 0 and Done", name, w.ExitCode)
	}
}

// sameJSON fails the test unless want and got encode to the same JSON.
func sameJSON(t *testing.T, what string, want, got any) {
	t.Helper()
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(w) != string(g) {
		t.Errorf("%s read back differs:\nwrote %s\nread  %s", what, w, g)
	}
}

// userKubeconfig returns a kubeconfig of user on c.
func userKubeconfig(t *testing.T, c *framework.Cluster, user string) string {
	t.Helper()
	kc, err := c.UserKubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// createClusterRole creates ClusterRole name with rules.
func createClusterRole(t *testing.T, c *framework.Cluster, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	if _, err := c.Client.RbacV1().ClusterRoles().Create(context.Background(), &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bind binds ClusterRole role to user, cluster-wide.
func bind(t *testing.T, c *framework.Cluster, user, role string) {
	t.Helper()
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + strings.ReplaceAll(role, ":", "-")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestNodeConfigPool: GitOps on three real kubelets. A pool applied with
// kubectl alone rolls its config out over the nodes it selects, with no dkc
// process outside the cluster's controller; kubectl wait sees it Ready; a
// change of its config rolls out as a second revision; and a node whose
// labels come to match the pool gets its config.
func TestNodeConfigPool(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	c, names, _ := controllerCluster(t)
	ctx := context.Background()
	kubeconfig := userKubeconfig(t, c, framework.ControllerIdentity)
	for _, id := range []string{"replica-1", "replica-2"} {
		if _, err := c.StartController(framework.DKCBinary(), kubeconfig, id); err != nil {
			t.Fatal(err)
		}
	}
	createConfigMap(t, c, "pool-a", maxPodsConfig(81))
	createConfigMap(t, c, "pool-b", maxPodsConfig(82))
	label := func(t *testing.T, node, value string) {
		t.Helper()
		patch := `{"metadata":{"labels":{"pool":"` + value + `"}}}`
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label(t, names[0], "workers")
	label(t, names[1], "workers")
	applyPool := func(t *testing.T, config string) {
		t.Helper()
		manifest := `apiVersion: kubectl-dkc.io/v1alpha1
kind: NodeConfigPool
metadata:
  name: workers
  namespace: kube-system
spec:
  nodeSelector:
    matchLabels:
      pool: workers
  configSource:
    configMap: {namespace: kube-system, name: ` + config + `, kubeletConfigKey: kubelet}
  strategy:
    maxUnavailable: 1
    canary: 1
`
		kubectl(t, c, manifest, "apply", "--server-side", "-f", "-")
	}
	waitReady := func(t *testing.T, generation int64) {
		t.Helper()
		kubectl(t, c, "", "wait", "-n", "kube-system", "--for=condition=Ready", "ncp/workers", "--timeout=4m")
		// kubectl wait reads the condition's observedGeneration: Ready of
		// an older spec does not count.
		out := kubectl(t, c, "", "get", "-n", "kube-system", "ncp/workers", "-o", "jsonpath={.status.observedGeneration}")
		if out != strconv.FormatInt(generation, 10) {
			t.Fatalf("Ready at observedGeneration %s, want %d", out, generation)
		}
	}
	active := func(t *testing.T, config string, nodes ...string) {
		t.Helper()
		for _, n := range nodes {
			eventuallyStatus(t, c, n, 30*time.Second, Active(config), NoError())
		}
	}

	// The pool's story, in the order of its subtests: revision 1 (pool-a)
	// over the first two nodes, revision 2 (pool-b), then the third node
	// joins. Each subtest starts from the state the ones before it leave,
	// and brings the pool there itself when they did not run: atRevision
	// applies the story's configs the pool has not seen yet.
	story := []string{"pool-a", "pool-b"}
	atRevision := func(t *testing.T, revision int) {
		t.Helper()
		generation := 0
		if out, err := kubectlRun(c, "", "get", "-n", "kube-system", "ncp/workers", "-o", "jsonpath={.metadata.generation}"); err == nil {
			if generation, err = strconv.Atoi(out); err != nil {
				t.Fatalf("generation of ncp/workers: %v", err)
			}
		}
		for ; generation < revision; generation++ {
			applyPool(t, story[generation])
			waitReady(t, int64(generation+1))
		}
	}
	joined := func(t *testing.T) {
		t.Helper()
		atRevision(t, 2)
		if readNode(t, c.Client, names[2]).Labels["pool"] == "workers" {
			return
		}
		label(t, names[2], "workers")
		active(t, "pool-b", names[2])
	}

	t.Run("a pool of one node's snapshot stalls before any node starts, naming the node-specific fields", func(t *testing.T) {
		n := c.Node(names[0])
		createConfigMap(t, c, "snap-"+n.Name, nodeConfig(t, n, nil))
		kubectl(t, c, `apiVersion: kubectl-dkc.io/v1alpha1
kind: NodeConfigPool
metadata:
  name: snap
  namespace: kube-system
spec:
  nodeSelector:
    matchLabels:
      kubernetes.io/os: linux
  configSource:
    configMap: {namespace: kube-system, name: snap-`+n.Name+`, kubeletConfigKey: kubelet}
`, "apply", "--server-side", "-f", "-")
		kubectl(t, c, "", "wait", "-n", "kube-system", "--for=condition=Stalled", "ncp/snap", "--timeout=1m")
		out := kubectl(t, c, "", "get", "-n", "kube-system", "ncp/snap", "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].reason} {.status.conditions[?(@.type=="Stalled")].message}`)
		if !strings.HasPrefix(out, "NodeSpecificConfig ") || !strings.Contains(out, `address "`+n.IP+`" (the value of `+n.Name) {
			t.Errorf("the pool's Stalled condition %q: want NodeSpecificConfig, naming %s's address %s", out, n.Name, n.IP)
		}
		if h := argoHealth(t, c, "ncp/snap"); h.Status != "Degraded" {
			t.Errorf("Argo CD health of the stalled pool: %+v, want Degraded", h)
		}
		if out := kubectl(t, c, "", "get", "-n", "kube-system", "ncr", "-l", "kubectl-dkc.io/pool=snap", "-o", "name"); out != "" {
			t.Errorf("the stalled pool created rollouts: %s", out)
		}
		kubectl(t, c, "", "delete", "-n", "kube-system", "ncp/snap", "--wait")
	})

	t.Run("a pool applied before its ConfigMap waits for it, and goes on once it exists", func(t *testing.T) {
		// GitOps applies objects in an order of its own. The pool selects
		// no node: only the controller's view of the ConfigMap is tried.
		kubectl(t, c, `apiVersion: kubectl-dkc.io/v1alpha1
kind: NodeConfigPool
metadata:
  name: early
  namespace: kube-system
spec:
  nodeSelector:
    matchLabels:
      pool: early
  configSource:
    configMap: {namespace: kube-system, name: pool-early, kubeletConfigKey: kubelet}
`, "apply", "--server-side", "-f", "-")
		kubectl(t, c, "", "wait", "-n", "kube-system", "--for=condition=Stalled", "ncp/early", "--timeout=1m")
		if out := kubectl(t, c, "", "get", "-n", "kube-system", "ncp/early", "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].reason}`); out != "ConfigUnavailable" {
			t.Fatalf("the pool without its ConfigMap: Stalled reason %q, want ConfigUnavailable", out)
		}
		// Nothing else changes in the cluster meanwhile: only a watch of
		// the ConfigMaps brings the pool on.
		createConfigMap(t, c, "pool-early", maxPodsConfig(83))
		kubectl(t, c, "", "wait", "-n", "kube-system", "--for=condition=Ready", "ncp/early", "--timeout=30s")
		kubectl(t, c, "", "delete", "-n", "kube-system", "ncp/early", "--wait")
	})

	t.Run("a pool applied with kubectl rolls its config out over the nodes it selects, and is Ready", func(t *testing.T) {
		began := time.Now()
		applyPool(t, "pool-a")
		waitReady(t, 1)
		active(t, "pool-a", names[0], names[1])
		if st := nodeStatus(t, c, names[2]); st != nil && st.Assigned != nil {
			t.Errorf("node %s, which the pool does not select, was assigned %v", names[2], st.Assigned)
		}
		t.Logf("kubectl apply to Ready: %s", time.Since(began).Round(time.Millisecond))
		t.Log(kubectl(t, c, "", "get", "-n", "kube-system", "nodeconfigpools,nodeconfigrollouts"))
		// Argo CD's view, through docs/rollout.md's health checks.
		for _, obj := range []string{"ncp/workers", "ncr/workers-1"} {
			if h := argoHealth(t, c, obj); h.Status != "Healthy" {
				t.Errorf("Argo CD health of %s: %+v, want Healthy", obj, h)
			}
		}
	})

	t.Run("a changed config rolls out as the pool's next revision", func(t *testing.T) {
		atRevision(t, 1)
		began := time.Now()
		applyPool(t, "pool-b")
		waitReady(t, 2)
		active(t, "pool-b", names[0], names[1])
		out := kubectl(t, c, "", "get", "-n", "kube-system", "ncr", "-l", "kubectl-dkc.io/pool=workers",
			"-o", `jsonpath={range .items[*]}{.metadata.name}={.status.state} {end}`)
		for _, want := range []string{"workers-1=Done", "workers-2=Done"} {
			if !strings.Contains(out, want) {
				t.Errorf("the pool's rollouts %q: want %s", out, want)
			}
		}
		t.Logf("kubectl apply of a new config to Ready: %s", time.Since(began).Round(time.Millisecond))
	})

	t.Run("a node whose labels come to match the pool gets its config", func(t *testing.T) {
		atRevision(t, 2)
		label(t, names[2], "workers")
		active(t, "pool-b", names[2])
		waitReady(t, 2)
		out := kubectl(t, c, "", "get", "-n", "kube-system", "ncp/workers", "-o", "jsonpath={.status.nodes.selected} {.status.nodes.updated}")
		if out != "3 3" {
			t.Errorf("selected and updated %q, want 3 3", out)
		}
		if _, err := kubectlRun(c, "", "get", "-n", "kube-system", "ncr/workers-2-2"); err != nil {
			t.Errorf("the joining node's rollout workers-2-2: %v", err)
		}
	})

	t.Run("kubectl dkc reads the pool: status, history, list", func(t *testing.T) {
		joined(t)
		st := mustDKC(t, c, "", "rollout", "status", "ncp/workers")
		if !strings.Contains(st.Stdout, "nodeconfigpool/workers: Ready") || !strings.Contains(st.Stdout, "3 nodes selected, 3 updated") {
			t.Errorf("rollout status ncp/workers:\n%s", st.Stdout)
		}
		h := mustDKC(t, c, "", "rollout", "history", "ncp/workers")
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^1 +kube-system/pool-a +sha256:\w+ +<none> +workers-1 +Done`),
			regexp.MustCompile(`(?m)^2 \(current\) +kube-system/pool-b +sha256:\w+ +<none> +workers-2,workers-2-2 +Done`),
		} {
			if !want.MatchString(h.Stdout) {
				t.Errorf("rollout history ncp/workers does not match %s:\n%s", want, h.Stdout)
			}
		}
		l := mustDKC(t, c, "", "rollout", "list")
		// The joining node's rollout covers the pool's selector: the two
		// nodes that ran the revision already are skipped.
		if !regexp.MustCompile(`(?m)^workers-2-2 +Done +workers +2 +kube-system/pool-b +3 +3 `).MatchString(l.Stdout) {
			t.Errorf("rollout list:\n%s", l.Stdout)
		}
	})

	t.Run("rollout undo ncp/POOL goes back to the previous revision's bytes, as the next revision", func(t *testing.T) {
		joined(t)
		r := mustDKC(t, c, "", "rollout", "undo", "ncp/workers", "--wait", "--timeout", "4m")
		if !strings.Contains(r.Stdout, "rolled back to revision 1 (kube-system/pool-a") || !strings.Contains(r.Stdout, "nodeconfigpool/workers: Ready") {
			t.Errorf("rollout undo ncp/workers:\n%s", r.Stdout)
		}
		active(t, "pool-a", names...)
		if out := kubectl(t, c, "", "get", "-n", "kube-system", "ncp/workers", "-o", "jsonpath={.status.revision}"); out != "3" {
			t.Errorf("revision %s after the undo, want 3", out)
		}
	})

	t.Run("a pool's ConfigMap edited in place stalls the pool and restarts no kubelet, until the pool's spec changes", func(t *testing.T) {
		joined(t)
		get := func(jsonpath string) string {
			t.Helper()
			return kubectl(t, c, "", "get", "-n", "kube-system", "ncp/workers", "-o", "jsonpath="+jsonpath)
		}
		config, revision, old := get("{.spec.configSource.configMap.name}"), get("{.status.revision}"), get("{.status.digest}")
		generation, err := strconv.ParseInt(get("{.metadata.generation}"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		waitReady(t, generation)
		poolRollouts := func() string {
			return kubectl(t, c, "", "get", "-n", "kube-system", "ncr", "-l", "kubectl-dkc.io/pool=workers", "-o", "name")
		}
		rolloutsBefore := poolRollouts()
		type kubelet struct{ pid, starts int }
		kubelets := func() map[string]kubelet {
			m := map[string]kubelet{}
			for _, n := range names {
				m[n] = kubelet{c.Node(n).KubeletPID(), c.Node(n).KubeletStarts()}
			}
			return m
		}
		before := kubelets()

		edited := maxPodsConfig(85)
		cm, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, config, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["kubelet"] = edited
		if _, err := c.Client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		digest := source.Digest([]byte(edited))
		kubectl(t, c, "", "wait", "-n", "kube-system", "--for=condition=Stalled", "ncp/workers", "--timeout=2m")
		out := get(`{.status.conditions[?(@.type=="Stalled")].reason} {.status.conditions[?(@.type=="Stalled")].message}`)
		if !strings.HasPrefix(out, "DigestMismatch ") || !strings.Contains(out, source.ShortDigest(digest)) || !strings.Contains(out, source.ShortDigest(old)) {
			t.Errorf("the pool's Stalled condition %q: want DigestMismatch naming %s (the new bytes) and %s (revision %s's)", out, source.ShortDigest(digest), source.ShortDigest(old), revision)
		}
		consistently(t, 5*time.Second, "no kubelet restart and no new rollout after an in-place edit", func() bool {
			return maps.Equal(before, kubelets()) && poolRollouts() == rolloutsBefore
		})
		if after := kubelets(); !maps.Equal(before, after) {
			t.Errorf("kubelets (PID, starts) %v after the edit, want %v", after, before)
		}
		if r := get("{.status.revision}"); r != revision {
			t.Errorf("revision %s after the edit, want %s", r, revision)
		}

		// The pool's author reviews the new bytes and names them.
		kubectl(t, c, "", "patch", "-n", "kube-system", "ncp/workers", "--type=merge", "-p", `{"spec":{"digest":"`+digest+`"}}`)
		waitReady(t, generation+1)
		if r, d := get("{.status.revision}"), get("{.status.digest}"); r == revision || d != digest {
			t.Errorf("revision %s, digest %s after spec.digest was set: want a new revision of %s", r, d, digest)
		}
		if got := configz(t, c, names[0])["maxPods"]; got != float64(85) {
			t.Errorf("configz maxPods of %s %v, want 85", names[0], got)
		}
	})
}

// argoHealth is the Argo CD health of the live object (TYPE/NAME in
// kube-system), by the check docs/rollout.md gives for its kind.
func argoHealth(t *testing.T, c *framework.Cluster, obj string) argocd.Health {
	t.Helper()
	checks, err := argocd.Checks(filepath.Join("..", "..", "docs", "rollout.md"))
	if err != nil {
		t.Fatal(err)
	}
	var u map[string]any
	if err := json.Unmarshal([]byte(kubectl(t, c, "", "get", "-n", "kube-system", obj, "-o", "json")), &u); err != nil {
		t.Fatal(err)
	}
	kind, _ := u["kind"].(string)
	h, err := argocd.Run(checks[kind], u)
	if err != nil {
		t.Fatalf("Argo CD health check of %s: %v", kind, err)
	}
	return h
}

// kubectl runs the pinned kubectl as the admin of c, with stdin, and
// returns its stdout; it fails the test on an error.
func kubectl(t *testing.T, c *framework.Cluster, stdin string, args ...string) string {
	t.Helper()
	out, err := kubectlRun(c, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func kubectlRun(c *framework.Cluster, stdin string, args ...string) (string, error) {
	bin, err := framework.Kubectl()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return stdout.String(), nil
}

// TestControllerKilledAtEachPhase kills the leading controller (SIGKILL)
// at each phase of a rollout on three real kubelets: just after it
// took the rollout's Lease, just after it marked and assigned a node, while
// a node is in its health gate, and just after it recorded a halt. The controller
// talks to the apiserver through a proxy on loopback that kills it as soon
// as the apiserver answered the write of the phase, before the controller
// sees the answer. A new replica then takes over: the rollout completes,
// or stays halted, as if nothing had happened: every kubelet restarts once,
// never two at a time under a budget of one, and a halted rollout starts
// no further node.
func TestControllerKilledAtEachPhase(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	c, names, store := controllerCluster(t)
	ctx := context.Background()
	direct := userKubeconfig(t, c, framework.ControllerIdentity)
	seq := 0
	replica := func() string { seq++; return fmt.Sprintf("replica-%d", seq) }

	for _, tc := range []struct {
		phase string
		// kill matches the request after whose answer the controller dies.
		kill func(r *http.Request, body []byte) bool
		// bad: the config fails its health gate on the canary, and the
		// rollout halts.
		bad bool
	}{
		{phase: "took the rollout's Lease", kill: func(r *http.Request, body []byte) bool {
			return (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.Contains(r.URL.Path, "/leases") && bytes.Contains(body, []byte(rollout.LeaseName("kill-")))
		}},
		{phase: "marked and assigned a node", kill: func(r *http.Request, _ []byte) bool {
			return r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/api/v1/nodes/") && r.URL.Query().Get("dryRun") == ""
		}},
		{phase: "waiting for a node's health gate"},
		{phase: "recorded the halt", bad: true, kill: func(r *http.Request, body []byte) bool {
			return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/status") && bytes.Contains(body, []byte(`"Halted"`))
		}},
	} {
		t.Run(tc.phase, func(t *testing.T) {
			name := "kill-" + strconv.Itoa(seq+1)
			config := maxPodsConfig(90 + seq)
			if tc.bad {
				config = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\ncontainerRuntimeEndpoint: unix:///nonexistent.sock\n"
			}
			createConfigMap(t, c, name, config)
			var victim *framework.Controller
			killed := make(chan struct{})
			var once sync.Once
			kubeconfig := direct
			if tc.kill != nil {
				kubeconfig = killingProxy(t, c, direct, func(r *http.Request, body []byte) {
					if !tc.kill(r, body) {
						return
					}
					once.Do(func() {
						if err := victim.Kill(); err != nil {
							t.Error(err)
						}
						close(killed)
					})
				})
			}
			var err error
			if victim, err = c.StartController(framework.DKCBinary(), kubeconfig, replica()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = victim.Stop() })
			waitLeader(t, c, 30*time.Second, victim.Identity)
			began := time.Now()
			args := []string{"rollout", "start", "--config", name, "--all", "--name", name, "--max-unavailable", "1"}
			if tc.bad {
				args = append(args, "--allow-unsafe=redirect")
			}
			mustDKC(t, c, "", args...)
			if tc.kill == nil {
				waitFor(t, 2*time.Minute, "a node assigned, in its apply or gate", func() bool {
					r, err := liveGet(ctx, c, store, name)
					if err != nil || r.NodeStatus(names[1]).Phase != rollout.InProgress {
						return false
					}
					assigned, _, err := source.Assigned(readNode(t, c.Client, names[1]))
					return err == nil && framework.IsConfigMap(assigned, name)
				})
				if err := victim.Kill(); err != nil {
					t.Fatal(err)
				}
				close(killed)
			}
			select {
			case <-killed:
			case <-time.After(2 * time.Minute):
				t.Fatalf("the controller never reached %q", tc.phase)
			}
			t.Logf("killed %s after it %s", victim.Identity, tc.phase)
			next, err := c.StartController(framework.DKCBinary(), direct, replica())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = next.Stop() }()

			w := dkc(t, c, "", "rollout", "status", name, "-w", "--timeout", "4m")
			if tc.bad {
				if w.ExitCode != 2 {
					t.Fatalf("rollout status -w: exit %d, want 2 (halted)", w.ExitCode)
				}
				r, err := liveGet(ctx, c, store, name)
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range names[1:] {
					if ph := r.NodeStatus(n).Phase; ph != rollout.Waiting {
						t.Errorf("node %s is %s after the halt, want Waiting", n, ph)
					}
				}
				return
			}
			if w.ExitCode != 0 {
				t.Fatalf("rollout status -w: exit %d, want 0", w.ExitCode)
			}
			checkApplyWindows(t, c, applyWindows(t, rolloutObject(t, c, name), names, time.Now()), began)
		})
	}
}

// killingProxy serves the apiserver on loopback over plain HTTP with the
// credential of kubeconfig, and returns a kubeconfig for it. Before it
// hands the controller an answer, it calls after with the request and its
// body: a test kills the controller there, when the write has landed and
// the controller has not seen it.
func killingProxy(t *testing.T, c *framework.Cluster, kubeconfig string, after func(r *http.Request, body []byte)) string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	proxy.FlushInterval = -1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.URL.Query().Get("watch") == "true" {
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		after(r, body)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "proxy.kubeconfig")
	k := clientcmdapi.NewConfig()
	k.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL}
	k.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	k.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	k.CurrentContext = "proxy"
	if err := clientcmd.WriteToFile(*k, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// liveGet reads rollout name with each node's phase as its Node shows it,
// as rollout status does.
func liveGet(ctx context.Context, c *framework.Cluster, store *rollout.Store, name string) (*rollout.Rollout, error) {
	r, err := store.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return rollout.LiveStatus(ctx, c.Client, r)
}
