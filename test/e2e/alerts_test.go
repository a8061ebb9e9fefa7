package e2e

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestPauseOnAlerts holds rollouts on a real Alertmanager's alerts: from
// the CLI, then from the controller, which asks only the Alertmanagers of
// its --alertmanager-url. The CLI's subtests run first: once a controller
// leads, rollout start hands the rollout to it.
func TestPauseOnAlerts(t *testing.T) {
	t.Parallel() // docs/development.md, "Tests in parallel"
	c, names, _ := controllerCluster(t)
	ctx := context.Background()
	am := framework.StartAlertmanager(t)
	createConfigMap(t, c, "alerts-a", maxPodsConfig(91))
	nodeDown := map[string]string{"alertname": "NodeDown", "severity": "critical"}
	noisy := map[string]string{"alertname": "Noisy", "severity": "warning"}

	// reasonIs waits until rollout name's status.reason is want.
	reasonIs := func(t *testing.T, name, want string, bg *backgroundDKC) {
		t.Helper()
		got := ""
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			// Before the client created the rollout, status exits 1.
			got = dkc(t, c, "", "rollout", "status", name, "-o", "jsonpath={.status.reason}").Stdout
			return got == want, nil
		}); err != nil {
			stderr := ""
			if bg != nil {
				stderr = bg.stderr()
			}
			t.Fatalf("rollout %s never said %q; last %q: %v; stderr:\n%s", name, want, got, err, stderr)
		}
	}
	// notAssignedFor fails the test if node is assigned config at any
	// moment of d: the Node as read, then every change a watch delivers.
	notAssignedFor := func(t *testing.T, node, config string, d time.Duration) {
		t.Helper()
		check := func(n *corev1.Node) {
			t.Helper()
			if src, _, _ := source.Assigned(n); framework.IsConfigMap(src, config) {
				t.Fatalf("node %s assigned %s while the alert fires", n.Name, config)
			}
		}
		n, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		check(n)
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		w, err := c.Client.CoreV1().Nodes().Watch(wctx, metav1.ListOptions{ResourceVersion: n.ResourceVersion, FieldSelector: "metadata.name=" + node})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok {
				check(n)
			}
		}
		if wctx.Err() == nil {
			t.Fatalf("the watch of node %s ended early", node)
		}
	}

	t.Run("from the CLI: no node starts while a matching alert fires; the rollout names it, and finishes once it clears", func(t *testing.T) {
		n := names[0]
		startUnassigned(t, c, n, time.Minute)
		if err := am.Fire(ctx, nodeDown); err != nil {
			t.Fatal(err)
		}
		if err := am.Fire(ctx, noisy); err != nil {
			t.Fatal(err)
		}
		bg := startDKCBackground(t, c, "rollout", "start", "--config", "alerts-a", n, "--name", "al",
			"--pause-on-alert", am.URL+" severity=critical", "--wait", "--timeout", "5m")
		want := `PausedOnAlert: alert "NodeDown" is firing on ` + am.URL + `; no node starts until it clears`
		reasonIs(t, "al", want, bg)
		if out := readDKC(t, c, "rollout", "status", "al").Stdout; !strings.Contains(out, want) {
			t.Errorf("rollout status does not show the alert:\n%s", out)
		}
		if out := kubectl(t, c, "", "get", "-n", "kube-system", "ncr/al", "-o", "wide"); !strings.Contains(out, "PausedOnAlert") {
			t.Errorf("kubectl get ncr -o wide does not show PausedOnAlert:\n%s", out)
		}
		// Longer than the driver's 15 s between questions: it asked again,
		// and still starts nothing.
		notAssignedFor(t, n, "alerts-a", 20*time.Second)
		if err := am.Resolve(ctx, nodeDown); err != nil {
			t.Fatal(err)
		}
		// The warning still fires: it does not match.
		if code := bg.wait(t, 3*time.Minute); code != 0 {
			t.Fatalf("rollout start --wait: exit %d; stderr:\n%s", code, bg.stderr())
		}
		ro := rolloutObject(t, c, "al")
		if ro.Status.State != rollout.Done || ro.Status.Reason != "" {
			t.Errorf("state %s, reason %q; want Done with no reason", ro.Status.State, ro.Status.Reason)
		}
		eventuallyStatus(t, c, n, 10*time.Second, Active("alerts-a"), NoError())
	})

	t.Run("from the CLI: an Alertmanager that does not answer holds the rollout", func(t *testing.T) {
		n := names[1]
		startUnassigned(t, c, n, time.Minute)
		// A port of 127.0.0.1 that nothing listens on.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gone := "http://" + l.Addr().String()
		l.Close()
		bg := startDKCBackground(t, c, "rollout", "start", "--config", "alerts-a", n, "--name", "al-gone",
			"--pause-on-alert", gone, "--wait", "--timeout", "5m")
		prefix := "AlertsUnknown: no node starts until Alertmanager " + gone + " answers: "
		got := ""
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			got = dkc(t, c, "", "rollout", "status", "al-gone", "-o", "jsonpath={.status.reason}").Stdout
			return strings.HasPrefix(got, prefix), nil
		}); err != nil {
			t.Fatalf("rollout al-gone never said %q...; last %q: %v; stderr:\n%s", prefix, got, err, bg.stderr())
		}
		if !strings.Contains(got, "connection refused") {
			t.Errorf("reason %q does not say why", got)
		}
		notAssignedFor(t, n, "alerts-a", 5*time.Second)
		bg.stop(t)
		mustDKC(t, c, "", "rollout", "abort", "al-gone")
	})

	t.Run("a pool, from the controller: held by an alert on an Alertmanager of --alertmanager-url; a rollout naming another starts no node", func(t *testing.T) {
		kubeconfig := userKubeconfig(t, c, framework.ControllerIdentity)
		if _, err := c.StartController(framework.DKCBinary(), kubeconfig, "alerts", "--alertmanager-url", am.URL); err != nil {
			t.Fatal(err)
		}
		n := names[2]
		startUnassigned(t, c, n, time.Minute)
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(`{"metadata":{"labels":{"pool":"alerts"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := am.Fire(ctx, nodeDown); err != nil {
			t.Fatal(err)
		}
		kubectl(t, c, `apiVersion: kubectl-dkc.io/v1alpha1
kind: NodeConfigPool
metadata:
  name: alerts
  namespace: kube-system
spec:
  nodeSelector:
    matchLabels:
      pool: alerts
  configSource:
    configMap: {namespace: kube-system, name: alerts-a, kubeletConfigKey: kubelet}
  strategy:
    pauseOnAlerts:
      alertmanager: `+am.URL+`
      matchers: ["severity=critical"]
`, "apply", "--server-side", "-f", "-")
		reason := func() string {
			return kubectl(t, c, "", "get", "-n", "kube-system", "ncp/alerts", "-o", `jsonpath={.status.conditions[?(@.type=="Reconciling")].reason}`)
		}
		waitFor(t, time.Minute, "pool alerts Reconciling with reason PausedOnAlert", func() bool { return reason() == "PausedOnAlert" })
		msg := kubectl(t, c, "", "get", "-n", "kube-system", "ncp/alerts", "-o", `jsonpath={.status.conditions[?(@.type=="Reconciling")].message}`)
		if !strings.Contains(msg, `alert "NodeDown" is firing`) {
			t.Errorf("pool's Reconciling message %q does not name the alert", msg)
		}
		notAssignedFor(t, n, "alerts-a", 20*time.Second)
		if err := am.Resolve(ctx, nodeDown); err != nil {
			t.Fatal(err)
		}
		kubectl(t, c, "", "wait", "-n", "kube-system", "--for=condition=Ready", "ncp/alerts", "--timeout=3m")
		eventuallyStatus(t, c, n, 10*time.Second, Active("alerts-a"), NoError())

		// A rollout that names an Alertmanager the controller was not
		// given: the controller asks nothing of it, and starts no node.
		createConfigMap(t, c, "alerts-b", maxPodsConfig(92))
		other := "http://127.0.0.1:" + strconv.Itoa(1)
		r := dkc(t, c, "", "rollout", "start", "--config", "alerts-b", n, "--name", "al-other", "--pause-on-alert", other)
		if r.ExitCode != 0 {
			t.Fatalf("rollout start: exit %d; stderr:\n%s", r.ExitCode, r.Stderr)
		}
		reasonIs(t, "al-other", "AlertmanagerNotAllowed: no node starts: the controller asks only the Alertmanagers it was started with (--alertmanager-url), and "+other+" is not one of them", nil)
		notAssignedFor(t, n, "alerts-b", 5*time.Second)
		mustDKC(t, c, "", "rollout", "abort", "al-other")
	})
}
