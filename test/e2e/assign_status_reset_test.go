package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestAssignStatusReset drives assign, status and reset against a real
// apiserver 1.37, which drops spec.configSource, so every assignment travels
// in the annotation. No agent runs: the test writes the status annotation
// itself, as the agent would, with the node's own credential.
func TestAssignStatusReset(t *testing.T) {
	c := framework.Setup(t, framework.Options{Nodes: 2})
	ctx := context.Background()
	n0, n1 := c.Nodes[0].Name, c.Nodes[1].Name
	const cmName = "e2e-node-config"
	want := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{
		Namespace: source.DefaultNamespace, Name: cmName, KubeletConfigKey: source.DefaultKey,
	}}

	// The ConfigMap push would create: the node's config with maxPods edited.
	var cfg map[string]any
	if err := yaml.Unmarshal(c.Nodes[0].DefaultKubeletConfig(), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["maxPods"] = 42
	edited, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	createTestConfigMap(t, c.Client, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: source.DefaultNamespace, Name: cmName, Labels: map[string]string{source.ConfigLabel: "true"}},
		Data:       map[string]string{source.DefaultKey: string(edited)},
	})
	// A second pushed ConfigMap, for a fresh assignment and completion.
	createTestConfigMap(t, c.Client, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: source.DefaultNamespace, Name: "e2e-second", Labels: map[string]string{source.ConfigLabel: "true"}},
		Data:       map[string]string{"kubelet": string(edited)},
	})

	// holding is the starting state of a subtest that needs nodes to hold
	// an assignment and the label e2e-pool=canary, as "assign by selector"
	// leaves them: a node that holds none is assigned cmName.
	holding := func(t *testing.T, nodes ...string) {
		t.Helper()
		for _, name := range nodes {
			node := readNode(t, c.Client, name)
			if node.Labels["e2e-pool"] != "canary" {
				patch := `{"metadata":{"labels":{"e2e-pool":"canary"}}}`
				if _, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, ok := node.Annotations[source.AssignedAnnotation]; !ok {
				mustDKC(t, c, "", "assign", name, "--config", cmName)
			}
		}
	}

	t.Run("apiserver drops spec.configSource", func(t *testing.T) {
		patch := `{"spec":{"configSource":{"configMap":{"namespace":"kube-system","name":"` + cmName + `","kubeletConfigKey":"kubelet"}}}}`
		got, err := c.Client.CoreV1().Nodes().Patch(ctx, n0, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "e2e"})
		if err != nil {
			t.Fatalf("real patch of spec.configSource: %v", err)
		}
		if got.Spec.ConfigSource != nil {
			t.Errorf("patch response holds spec.configSource %+v, want it dropped", got.Spec.ConfigSource)
		}
		stored := readNode(t, c.Client, n0)
		if stored.Spec.ConfigSource != nil {
			t.Errorf("stored node holds spec.configSource %+v, want it dropped", stored.Spec.ConfigSource)
		}
		carrier, err := source.Detect(ctx, c.Client.CoreV1().Nodes(), n0)
		if err != nil {
			t.Fatal(err)
		}
		if carrier != source.Annotation {
			t.Errorf("Detect() = %q, want %q", carrier, source.Annotation)
		}
	})

	t.Run("assign auto stores the annotation", func(t *testing.T) {
		r := mustDKC(t, c, "", "assign", n0, "--config", cmName)
		if got, want := r.Stdout, "node/"+n0+" assigned kube-system/"+cmName+" (annotation)\n"; got != want {
			t.Errorf("stdout %q, want %q", got, want)
		}
		// No agent runs here: assign says so at once.
		if want := "Warning: node/" + n0 + ": no dkc agent has reported on this node yet; unless one runs there, nothing will apply the assignment (see docs/install.md)\n"; r.Stderr != want {
			t.Errorf("stderr %q, want only the no-agent warning %q (the ConfigMap has the dkc label)", r.Stderr, want)
		}
		node := readNode(t, c.Client, n0)
		wantJSON := `{"configMap":{"namespace":"kube-system","name":"` + cmName + `","kubeletConfigKey":"kubelet"}}`
		if got := node.Annotations[source.AssignedAnnotation]; got != wantJSON {
			t.Errorf("annotation %s = %s, want %s", source.AssignedAnnotation, got, wantJSON)
		}
		if node.Spec.ConfigSource != nil {
			t.Errorf("spec.configSource = %+v, want nil", node.Spec.ConfigSource)
		}
	})

	t.Run("assign native fails with a clear message", func(t *testing.T) {
		before := readNode(t, c.Client, n0).Annotations[source.AssignedAnnotation]
		r := dkc(t, c, "", "assign", n0, "--config", cmName, "--carrier=native")
		if r.ExitCode != 1 {
			t.Errorf("exit %d, want 1", r.ExitCode)
		}
		wantErr := "Warning: node/" + n0 + ": no dkc agent has reported on this node yet; unless one runs there, nothing will apply the assignment (see docs/install.md)\n" +
			`error: assign node "` + n0 + `": the apiserver dropped spec.configSource (apiservers 1.26 and later drop it silently): use --carrier=annotation, or --carrier=auto` + "\n"
		if r.Stderr != wantErr {
			t.Errorf("stderr %q, want %q", r.Stderr, wantErr)
		}
		if after := readNode(t, c.Client, n0).Annotations[source.AssignedAnnotation]; after != before {
			t.Errorf("failed native assign changed the annotation from %s to %s", before, after)
		}
	})

	t.Run("missing configmap or key", func(t *testing.T) {
		r := dkc(t, c, "", "assign", n1, "--config", "no-such-config")
		if want := `error: configmap "kube-system/no-such-config" not found: push it with kubectl dkc push, or name its namespace with -n` + "\n"; r.ExitCode != 1 || r.Stderr != want {
			t.Errorf("exit %d stderr %q, want exit 1 and %q", r.ExitCode, r.Stderr, want)
		}
		r = dkc(t, c, "", "assign", n1, "--config", cmName, "--key", "config")
		if want := `error: configmap "kube-system/` + cmName + `" has no key "config": it has kubelet; choose one with --key` + "\n"; r.ExitCode != 1 || r.Stderr != want {
			t.Errorf("exit %d stderr %q, want exit 1 and %q", r.ExitCode, r.Stderr, want)
		}
		r = dkc(t, c, "", "assign", n1, "--config", cmName, "-n", "default")
		if want := `error: configmap "default/` + cmName + `" not found: push it with kubectl dkc push, or name its namespace with -n` + "\n"; r.ExitCode != 1 || r.Stderr != want {
			t.Errorf("exit %d stderr %q, want exit 1 and %q", r.ExitCode, r.Stderr, want)
		}
		if _, ok := readNode(t, c.Client, n1).Annotations[source.AssignedAnnotation]; ok {
			t.Errorf("failed assign left annotation %s on %s", source.AssignedAnnotation, n1)
		}
	})

	t.Run("unlabelled configmap warns but assigns", func(t *testing.T) {
		createTestConfigMap(t, c.Client, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: source.DefaultNamespace, Name: "hand-made"},
			Data:       map[string]string{"kubelet": string(edited)},
		})
		r := mustDKC(t, c, "", "assign", n1, "--config", "hand-made", "--dry-run=server")
		// The config is n0's: on n1 it moves n0's own paths and endpoints
		// there, which the dry run names (the fields the kubelet computes,
		// such as its serving certificate, it leaves alone).
		lines := strings.Split(strings.TrimSuffix(r.Stderr, "\n"), "\n")
		if want := []string{
			`Warning: configmap "kube-system/hand-made" has no label ` + source.ConfigLabel + ": it was not pushed by kubectl dkc push",
			"Warning: node/" + n1 + " needs --allow-unsafe=host-access,security,redirect, or its agent refuses the config (no --allow-unsafe given): it changes ",
			"Warning: node/" + n1 + ": no dkc agent has reported on this node yet; unless one runs there, nothing will apply the assignment (see docs/install.md)",
		}; len(lines) != len(want) || lines[0] != want[0] || !strings.HasPrefix(lines[1], want[1]) || lines[2] != want[2] ||
			!strings.Contains(lines[1], `containerRuntimeEndpoint "unix://`) || strings.Contains(lines[1], "tlsCertFile") {
			t.Errorf("stderr %q, want %q (the second line naming containerRuntimeEndpoint, not tlsCertFile)", r.Stderr, want)
		}
		if want := "node/" + n1 + " assigned kube-system/hand-made (annotation) (server dry run)\n"; r.Stdout != want {
			t.Errorf("stdout %q, want %q", r.Stdout, want)
		}
	})

	t.Run("dry-run server and client change nothing", func(t *testing.T) {
		before := readNode(t, c.Client, n1).ResourceVersion
		for _, mode := range []string{"server", "client"} {
			// -v=6 makes client-go log every request it sends.
			r := mustDKC(t, c, "", "assign", n1, "--config", cmName, "--dry-run="+mode, "-v=6")
			suffix := map[string]string{"server": " (server dry run)", "client": " (dry run)"}[mode]
			if want := "node/" + n1 + " assigned kube-system/" + cmName + " (annotation)" + suffix + "\n"; r.Stdout != want {
				t.Errorf("stdout %q, want %q", r.Stdout, want)
			}
			// client-go logs: "Response" verb="PATCH" url="https://..."
			if !strings.Contains(r.Stderr, `verb="GET"`) {
				t.Fatalf("-v=6 logged no request; cannot tell what was sent:\n%s", r.Stderr)
			}
			patched := strings.Contains(r.Stderr, `verb="PATCH"`)
			switch mode {
			case "server":
				if !patched {
					t.Errorf("server dry run sent no PATCH")
				}
			case "client":
				// Not even the server-side dry-run that detects the carrier.
				if patched {
					t.Errorf("client dry run sent a PATCH:\n%s", r.Stderr)
				}
				if !strings.Contains(r.Stderr, "Warning: assuming the annotation carrier: a client dry run sends nothing to the apiserver") {
					t.Errorf("client dry run does not say which carrier it assumed:\n%s", r.Stderr)
				}
			}
		}
		after := readNode(t, c.Client, n1)
		if _, ok := after.Annotations[source.AssignedAnnotation]; ok {
			t.Errorf("dry runs left annotation %s on %s", source.AssignedAnnotation, n1)
		}
		if after.ResourceVersion != before {
			t.Errorf("node %s resourceVersion %s after dry runs, want %s unchanged", n1, after.ResourceVersion, before)
		}
		// -o yaml of a client dry run is the Node as it would be.
		r := mustDKC(t, c, "", "assign", n1, "--config", cmName, "--dry-run=client", "-o", "jsonpath={.kind}/{.metadata.name}: {.metadata.annotations.kubectl-dkc\\.io/config-source}")
		if want := "Node/" + n1 + `: {"configMap":{"namespace":"kube-system","name":"` + cmName + `","kubeletConfigKey":"kubelet"}}`; r.Stdout != want {
			t.Errorf("-o jsonpath of a client dry run %q, want %q", r.Stdout, want)
		}
	})

	t.Run("assign by selector", func(t *testing.T) {
		// n0 holds the assignment ("assign auto stores the annotation").
		mustDKC(t, c, "", "assign", n0, "--config", cmName)
		for _, name := range []string{n0, n1} {
			patch := `{"metadata":{"labels":{"e2e-pool":"canary"}}}`
			if _, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		r := mustDKC(t, c, "", "assign", "-l", "e2e-pool=canary", "--config", cmName, "-o", "name")
		if want := "node/" + n0 + "\nnode/" + n1 + "\n"; r.Stdout != want {
			t.Errorf("-o name: stdout %q, want %q", r.Stdout, want)
		}
		// n0 already has the assignment: only n1 restarts.
		if strings.Contains(r.Stderr, "restart at the same time") {
			t.Errorf("warned about simultaneous restarts with one node changing:\n%s", r.Stderr)
		}
		for _, name := range []string{n0, n1} {
			got, carrier, err := source.Assigned(readNode(t, c.Client, name))
			if err != nil || carrier != source.Annotation || !source.Equal(got, want) {
				t.Errorf("node %s: Assigned() = %+v, %q, %v", name, got, carrier, err)
			}
		}
		r = dkc(t, c, "", "assign", "-l", "e2e-pool=none", "--config", cmName)
		if want := `error: no nodes match selector "e2e-pool=none"` + "\n"; r.ExitCode != 1 || r.Stderr != want {
			t.Errorf("exit %d stderr %q, want exit 1 and %q", r.ExitCode, r.Stderr, want)
		}
	})

	t.Run("status table and json", func(t *testing.T) {
		holding(t, n0, n1)
		r := mustDKC(t, c, "", "status")
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		if len(lines) != 3 {
			t.Fatalf("status printed %d lines, want header and 2 rows:\n%s", len(lines), r.Stdout)
		}
		if got, want := strings.Fields(lines[0]), []string{"NODE", "CARRIER", "ASSIGNED", "ACTIVE", "LAST-KNOWN-GOOD", "AGENT", "ERROR"}; !cmp.Equal(got, want) {
			t.Errorf("header %q, want %q", got, want)
		}
		// No agent has reported yet: the status columns are empty, and AGENT
		// says why.
		if got, want := strings.Fields(lines[1]), []string{n0, "annotation", "<none>", "<none>", "<none>", "none", "<none>"}; !cmp.Equal(got, want) {
			t.Errorf("row %q, want %q", got, want)
		}
		wantWarn := "Warning: node/" + n0 + " has an assignment, but no dkc agent has reported on it; see docs/install.md\n" +
			"Warning: node/" + n1 + " has an assignment, but no dkc agent has reported on it; see docs/install.md\n"
		if r.Stderr != wantWarn {
			t.Errorf("stderr %q, want %q", r.Stderr, wantWarn)
		}
		wide := mustDKC(t, c, "", "status", n1, "-o", "wide")
		if !strings.Contains(wide.Stdout, "REQUESTED") || !strings.Contains(wide.Stdout, "kube-system/"+cmName) {
			t.Errorf("-o wide lacks REQUESTED kube-system/%s:\n%s", cmName, wide.Stdout)
		}

		st := &corev1.NodeConfigStatus{Assigned: withUIDAndRV(want, "7"), Active: withUIDAndRV(want, "7")}
		writeStatusAsAgent(t, c, 0, st)
		r = mustDKC(t, c, "", "status", "-o", "json")
		var list struct {
			Kind       string `json:"kind"`
			APIVersion string `json:"apiVersion"`
			Items      []struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Carrier      string                   `json:"carrier"`
				ConfigSource *corev1.NodeConfigSource `json:"configSource"`
				Status       json.RawMessage          `json:"status"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
			t.Fatal(err)
		}
		if list.Kind != "List" || list.APIVersion != "v1" || len(list.Items) != 2 {
			t.Fatalf("got kind %q apiVersion %q with %d items, want a v1 List of 2", list.Kind, list.APIVersion, len(list.Items))
		}
		item := list.Items[0]
		if item.Kind != status.Kind || item.Metadata.Name != n0 || item.Carrier != "annotation" || !source.Equal(item.ConfigSource, want) {
			t.Errorf("item 0: kind %q name %q carrier %q configSource %+v", item.Kind, item.Metadata.Name, item.Carrier, item.ConfigSource)
		}
		// .status has the shape of the old .status.config.
		var gotStatus map[string]any
		if err := json.Unmarshal(item.Status, &gotStatus); err != nil {
			t.Fatal(err)
		}
		wantStatus := map[string]any{
			"assigned": map[string]any{"configMap": map[string]any{"namespace": "kube-system", "name": cmName, "kubeletConfigKey": "kubelet", "uid": "uid-" + cmName, "resourceVersion": "7"}},
			"active":   map[string]any{"configMap": map[string]any{"namespace": "kube-system", "name": cmName, "kubeletConfigKey": "kubelet", "uid": "uid-" + cmName, "resourceVersion": "7"}},
		}
		if diff := cmp.Diff(wantStatus, gotStatus); diff != "" {
			t.Errorf(".items[0].status (-want +got):\n%s", diff)
		}
		if list.Items[1].Status != nil {
			t.Errorf(".items[1].status = %s, want absent", list.Items[1].Status)
		}
		name := mustDKC(t, c, "", "status", "-l", "e2e-pool=canary", "-o", "name")
		if want := "node/" + n0 + "\nnode/" + n1 + "\n"; name.Stdout != want {
			t.Errorf("-o name %q, want %q", name.Stdout, want)
		}
		jp := mustDKC(t, c, "", "status", n0, "-o", "jsonpath={.items[0].status.active.configMap.name}")
		if jp.Stdout != cmName {
			t.Errorf("-o jsonpath %q, want %q", jp.Stdout, cmName)
		}
	})

	t.Run("node restriction and the status annotation", func(t *testing.T) {
		nodeClient := nodeCredentialClient(t, c, 0)
		// Its own status, through nodes/status, as the agent writes it.
		writeStatusAsAgent(t, c, 0, &corev1.NodeConfigStatus{Assigned: want, Active: want})
		// Its own assignment annotation on the Node itself.
		patch, err := source.AssignPatch(source.Annotation, want, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = nodeClient.CoreV1().Nodes().Patch(ctx, n0, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: source.FieldManager})
		t.Logf("node %s patching its own %s: %v", n0, source.AssignedAnnotation, err)
		if err != nil {
			t.Errorf("NodeRestriction refused node %s its own annotation: %v", n0, err)
		}
		// Another node's status: the Node authorizer refuses it.
		stPatch, err := source.StatusPatch(source.Annotation, &corev1.NodeConfigStatus{Active: want}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = nodeClient.CoreV1().Nodes().Patch(ctx, n1, types.MergePatchType, stPatch, metav1.PatchOptions{FieldManager: source.FieldManager}, "status")
		t.Logf("node %s patching node %s: %v", n0, n1, err)
		if !apierrors.IsForbidden(err) {
			t.Errorf("node %s patched node %s: err %v, want Forbidden", n0, n1, err)
		}
		// What else the agent's credential may do, for docs/carrier.md.
		_, err = nodeClient.CoreV1().ConfigMaps(source.DefaultNamespace).Get(ctx, cmName, metav1.GetOptions{})
		t.Logf("node %s reading configmap %s/%s: %v", n0, source.DefaultNamespace, cmName, err)
		if !apierrors.IsForbidden(err) {
			t.Errorf("node %s read the assigned ConfigMap: err %v, want Forbidden (the Node authorizer has no edge from an annotation)", n0, err)
		}
		_, err = nodeClient.CoreV1().Nodes().Get(ctx, n1, metav1.GetOptions{})
		t.Logf("node %s reading node %s: %v", n0, n1, err)
		// A label outside the kubernetes.io namespaces, on itself.
		_, err = nodeClient.CoreV1().Nodes().Patch(ctx, n0, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+source.Prefix+`e2e":"x"}}}`), metav1.PatchOptions{})
		t.Logf("node %s setting its own label %se2e: %v", n0, source.Prefix, err)
	})

	t.Run("status wait-for", func(t *testing.T) {
		holding(t, n0, n1)
		writeStatusAsAgent(t, c, 0, &corev1.NodeConfigStatus{Assigned: withUIDAndRV(want, "7"), Active: withUIDAndRV(want, "7"), LastKnownGood: nil})
		r := mustDKC(t, c, "", "status", n0, "--wait-for=active", "--timeout=30s")
		if !strings.Contains(r.Stdout, n0) || !strings.Contains(r.Stdout, "kube-system/"+cmName) {
			t.Errorf("final table lacks the active config:\n%s", r.Stdout)
		}

		const loadErr = status.LoadError + ": maxPods: invalid"
		writeStatusAsAgent(t, c, 1, &corev1.NodeConfigStatus{Assigned: withUIDAndRV(want, "7"), Error: loadErr})
		r = dkc(t, c, "", "status", n0, n1, "--wait-for=active", "--timeout=30s")
		if r.ExitCode != status.ExitConfigError {
			t.Errorf("exit %d, want %d", r.ExitCode, status.ExitConfigError)
		}
		if want := `error: node "` + n1 + `": config error: ` + loadErr + "\n"; r.Stderr != want {
			t.Errorf("stderr %q, want %q", r.Stderr, want)
		}
		if !strings.Contains(r.Stdout, loadErr) {
			t.Errorf("final table lacks the error:\n%s", r.Stdout)
		}
		mustDKC(t, c, "", "status", n1, "--wait-for=error", "--timeout=30s")

		// Nothing reported for the assignment: timeout.
		writeStatusAsAgent(t, c, 1, nil)
		began := time.Now()
		r = dkc(t, c, "", "status", n1, "--wait-for=active", "--timeout=2s")
		took := time.Since(began)
		if r.ExitCode != status.ExitTimeout {
			t.Errorf("exit %d, want %d", r.ExitCode, status.ExitTimeout)
		}
		if want := "error: wait for active: timed out waiting for the condition after 2s: pending node/" + n1 + " (no dkc agent has reported on it; see docs/install.md)\n"; r.Stderr != want {
			t.Errorf("stderr %q, want %q", r.Stderr, want)
		}
		if took < 2*time.Second || took > 10*time.Second {
			t.Errorf("timeout after %s, want about 2s", took)
		}
	})

	t.Run("status watch prints a row per change", func(t *testing.T) {
		holding(t, n1)
		w := startDKCBackground(t, c, "status", "-w", n1)
		w.waitForLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "NODE") })
		w.waitForLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, n1+" ") })
		began := time.Now()
		writeStatusAsAgent(t, c, 1, &corev1.NodeConfigStatus{Assigned: want, Error: status.ValidateError})
		row := w.waitForLine(t, 10*time.Second, func(l string) bool { return strings.Contains(l, status.ValidateError) })
		t.Logf("annotation change to new row: %s", time.Since(began).Round(time.Millisecond))
		if got := strings.Fields(row)[:3]; !cmp.Equal(got, []string{n1, "annotation", "kube-system/" + cmName}) {
			t.Errorf("row %q", row)
		}
		// A change that leaves the config state alone prints nothing.
		patch := `{"metadata":{"labels":{"e2e-beat":"1"}}}`
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, n1, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		writeStatusAsAgent(t, c, 1, &corev1.NodeConfigStatus{Assigned: want, Active: want})
		w.waitForLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, n1+" ") && !strings.Contains(l, status.ValidateError) })
		lines := w.stop(t)
		if len(lines) != 4 {
			t.Errorf("watch printed %d lines, want header and 3 rows:\n%s", len(lines), strings.Join(lines, "\n"))
		}
	})

	t.Run("assign wait", func(t *testing.T) {
		// A fresh assignment: the node's status still shows the old one.
		holding(t, n0, n1)
		if statusNow(t, c, n0) == nil {
			writeStatusAsAgent(t, c, 0, &corev1.NodeConfigStatus{Assigned: want, Active: want})
		}
		second := &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "e2e-second", KubeletConfigKey: "kubelet"}}
		a := startDKCBackground(t, c, "assign", n0, "--config", "e2e-second", "--wait", "--timeout=30s")
		a.waitForLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "node/"+n0+" assigned") })
		consistently(t, time.Second, "waiting while the status shows the old assignment", func() bool { return !a.exited() })
		if a.exited() {
			t.Fatalf("assign --wait exited before the status said active")
		}
		began := time.Now()
		writeStatusAsAgent(t, c, 0, &corev1.NodeConfigStatus{Assigned: withUIDAndRV(second, "9"), Active: withUIDAndRV(second, "9"), LastKnownGood: withUIDAndRV(want, "7")})
		code := a.wait(t, 10*time.Second)
		t.Logf("status active to assign --wait exit: %s", time.Since(began).Round(time.Millisecond))
		if code != 0 {
			t.Errorf("assign --wait exit %d, want 0; stderr:\n%s", code, a.stderr())
		}

		// An error for the assignment: exit 2.
		a = startDKCBackground(t, c, "assign", n1, "--config", "e2e-second", "--wait", "--timeout=30s")
		a.waitForLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "node/"+n1+" assigned") })
		writeStatusAsAgent(t, c, 1, &corev1.NodeConfigStatus{Assigned: withUIDAndRV(second, "9"), Active: want, Error: status.ValidateError})
		if code := a.wait(t, 10*time.Second); code != status.ExitConfigError {
			t.Errorf("assign --wait exit %d, want %d", code, status.ExitConfigError)
		}
		if want := `error: node "` + n1 + `": config error: ` + status.ValidateError; !strings.Contains(a.stderr(), want) {
			t.Errorf("stderr %q lacks %q", a.stderr(), want)
		}
	})

	t.Run("reset", func(t *testing.T) {
		holding(t, n0, n1)
		if statusNow(t, c, n1) == nil {
			writeStatusAsAgent(t, c, 1, &corev1.NodeConfigStatus{Assigned: want, Active: want})
		}
		r := mustDKC(t, c, "", "reset", n0, "--dry-run=server")
		if want := "node/" + n0 + " reset to its local config (server dry run)\n"; r.Stdout != want {
			t.Errorf("stdout %q, want %q", r.Stdout, want)
		}
		if _, ok := readNode(t, c.Client, n0).Annotations[source.AssignedAnnotation]; !ok {
			t.Fatalf("server dry run removed the assignment")
		}
		r = mustDKC(t, c, "", "reset", n0)
		if want := "node/" + n0 + " reset to its local config\n"; r.Stdout != want {
			t.Errorf("stdout %q, want %q", r.Stdout, want)
		}
		node := readNode(t, c.Client, n0)
		if v, ok := node.Annotations[source.AssignedAnnotation]; ok {
			t.Errorf("annotation %s still %s after reset", source.AssignedAnnotation, v)
		}
		if node.Spec.ConfigSource != nil {
			t.Errorf("spec.configSource %+v after reset", node.Spec.ConfigSource)
		}
		r = mustDKC(t, c, "", "reset", n0)
		if want := "node/" + n0 + " already on its local config\n"; r.Stdout != want {
			t.Errorf("stdout %q, want %q", r.Stdout, want)
		}
		r = mustDKC(t, c, "", "reset", n0, "-o", "name")
		if want := "node/" + n0 + "\n"; r.Stdout != want {
			t.Errorf("-o name: stdout %q, want %q", r.Stdout, want)
		}

		// --wait: done once the status reports the local config active.
		a := startDKCBackground(t, c, "reset", n1, "--wait", "--timeout=30s")
		a.waitForLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "node/"+n1+" reset") })
		consistently(t, 500*time.Millisecond, "waiting while the status shows an assignment", func() bool { return !a.exited() })
		if a.exited() {
			t.Fatalf("reset --wait exited while the status still showed an assignment")
		}
		writeStatusAsAgent(t, c, 1, &corev1.NodeConfigStatus{LastKnownGood: withUIDAndRV(want, "7")})
		if code := a.wait(t, 10*time.Second); code != 0 {
			t.Errorf("reset --wait exit %d, want 0; stderr:\n%s", code, a.stderr())
		}
	})

	t.Run("an opt-in needs use on its class, asked before anything is written", func(t *testing.T) {
		// An assigner with the rights assign needs, and no class; then the
		// shipped role of one class.
		const user = "e2e-assigner"
		if err := c.ApplyManifest(ctx, filepath.Join("..", "..", "deploy", "roles.yaml"), false); err != nil {
			t.Fatal(err)
		}
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}},
		}}
		bind := func(name, role string) {
			t.Helper()
			crb := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			}
			if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		}
		if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Client.RbacV1().ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{})
		})
		bind(user, user)
		waitFor(t, 30*time.Second, "RBAC to let "+user+" assign without a class", func() bool {
			return dkc(t, c, "", "assign", n1, "--config", "e2e-second", "--dry-run=server", "--as", user).ExitCode == 0
		})

		before := readNode(t, c.Client, n1).Annotations
		r := dkc(t, c, "", "assign", n1, "--config", "e2e-second", "--allow-unsafe=security", "--as", user)
		wantErr := `error: assign configmap "kube-system/e2e-second": ` + source.UnsafeClassesDenied([]string{"security"}) + "\n"
		if r.ExitCode != 1 || !strings.HasSuffix(r.Stderr, wantErr) {
			t.Errorf("assign --allow-unsafe=security without the class's role: exit %d, stderr %q; want exit 1 and %q", r.ExitCode, r.Stderr, wantErr)
		}
		after := readNode(t, c.Client, n1).Annotations
		for _, key := range []string{source.AssignedAnnotation, source.PinAnnotation} {
			if before[key] != after[key] {
				t.Errorf("refused assign changed %s from %q to %q", key, before[key], after[key])
			}
		}

		bind(user+"-security", source.UnsafeClassRole("security"))
		waitFor(t, 30*time.Second, "assign --allow-unsafe=security once "+user+" holds "+source.UnsafeClassRole("security"), func() bool {
			return dkc(t, c, "", "assign", n1, "--config", "e2e-second", "--allow-unsafe=security", "--as", user).ExitCode == 0
		})
		pin, err := source.PinOf(readNode(t, c.Client, n1))
		if err != nil || pin == nil || pin.Name != "e2e-second" || !cmp.Equal(pin.AllowUnsafe, []string{"security"}) {
			t.Errorf("pin after the granted assign: %+v (%v), want e2e-second allowing security", pin, err)
		}
	})

	t.Run("completion", func(t *testing.T) {
		r := mustDKC(t, c, "", "__complete", "assign", n0, "")
		if got, want := completions(r.Stdout), []string{n1}; !cmp.Equal(got, want) {
			t.Errorf("node completions %q, want %q", got, want)
		}
		// Only the ConfigMaps dkc pushed: hand-made has no label.
		r = mustDKC(t, c, "", "__complete", "assign", n0, "--config", "")
		if got, want := completions(r.Stdout), []string{"e2e-node-config", "e2e-second"}; !cmp.Equal(got, want) {
			t.Errorf("--config completions %q, want %q", got, want)
		}
	})
}

// completions are the candidates of a cobra __complete run, without its
// trailing ":directive" line.
func completions(out string) []string {
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, ":") && line != "" {
			got = append(got, line)
		}
	}
	return got
}

// withUIDAndRV is src with a uid and resourceVersion, as a status carries it.
func withUIDAndRV(src *corev1.NodeConfigSource, rv string) *corev1.NodeConfigSource {
	out := src.DeepCopy()
	out.ConfigMap.UID = types.UID("uid-" + out.ConfigMap.Name)
	out.ConfigMap.ResourceVersion = rv
	return out
}

func createTestConfigMap(t *testing.T, client kubernetes.Interface, cm *corev1.ConfigMap) {
	t.Helper()
	if _, err := client.CoreV1().ConfigMaps(cm.Namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func readNode(t *testing.T, client kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	node, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// nodeCredentialClient is a client with node i's own system:node:NAME credential.
func nodeCredentialClient(t *testing.T, c *framework.Cluster, i int) kubernetes.Interface {
	t.Helper()
	return kubeconfigClient(t, c.Nodes[i].KubeconfigPath)
}

// writeStatusAsAgent records st on node i as the agent does: a StatusPatch on
// nodes/status with the node's own credential.
func writeStatusAsAgent(t *testing.T, c *framework.Cluster, i int, st *corev1.NodeConfigStatus) {
	t.Helper()
	patch, err := source.StatusPatch(source.Annotation, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	node, err := nodeCredentialClient(t, c, i).CoreV1().Nodes().Patch(context.Background(), c.Nodes[i].Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: source.FieldManager}, "status")
	if err != nil {
		t.Fatalf("node %s writing its status annotation: %v", c.Nodes[i].Name, err)
	}
	got, _, err := source.Status(node)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, got); diff != "" {
		t.Fatalf("stored status (-want +got):\n%s", diff)
	}
}

// backgroundDKC is the kubectl-dkc binary running in the background.
type backgroundDKC struct {
	cmd  *exec.Cmd
	done chan struct{}
	code int

	mu       sync.Mutex
	lines    []string
	errOut   strings.Builder
	seen     int
	finished bool
	cond     *sync.Cond
}

// startDKCBackground starts the binary against c; the test ends it by its PID.
func startDKCBackground(t *testing.T, c *framework.Cluster, args ...string) *backgroundDKC {
	t.Helper()
	b := &backgroundDKC{cmd: exec.Command(framework.DKCBinary(), args...), done: make(chan struct{})}
	b.cond = sync.NewCond(&b.mu)
	b.cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := b.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("$ kubectl dkc %s &  (pid %d)", strings.Join(args, " "), b.cmd.Process.Pid)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			b.mu.Lock()
			b.lines = append(b.lines, s.Text())
			b.cond.Broadcast()
			b.mu.Unlock()
		}
	}()
	go func() {
		defer readers.Done()
		data, _ := io.ReadAll(stderr)
		b.mu.Lock()
		b.errOut.Write(data)
		b.mu.Unlock()
	}()
	go func() {
		readers.Wait()
		err := b.cmd.Wait()
		b.mu.Lock()
		b.finished = true
		b.code = b.cmd.ProcessState.ExitCode()
		if err != nil && b.code == 0 {
			b.code = -1
		}
		b.cond.Broadcast()
		b.mu.Unlock()
		close(b.done)
	}()
	t.Cleanup(func() {
		if !b.exited() {
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

// waitForLine returns the first line not yet consumed that matches, and
// consumes every line up to it.
func (b *backgroundDKC) waitForLine(t *testing.T, timeout time.Duration, match func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	stop := time.AfterFunc(timeout, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for ; b.seen < len(b.lines); b.seen++ {
			if match(b.lines[b.seen]) {
				b.seen++
				return b.lines[b.seen-1]
			}
		}
		if time.Now().After(deadline) || b.exitedLocked() {
			t.Fatalf("no matching line within %s; stdout:\n%s\nstderr:\n%s", timeout, strings.Join(b.lines, "\n"), b.errOut.String())
		}
		b.cond.Wait()
	}
}

func (b *backgroundDKC) exited() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

func (b *backgroundDKC) exitedLocked() bool { return b.finished }

// wait waits for the process to exit and returns its exit code.
func (b *backgroundDKC) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-b.done:
		return b.code
	case <-time.After(timeout):
		t.Fatalf("still running after %s; stderr:\n%s", timeout, b.stderr())
		return -1
	}
}

// stop kills the process by its PID and returns every line it printed.
func (b *backgroundDKC) stop(t *testing.T) []string {
	t.Helper()
	if err := b.cmd.Process.Kill(); err != nil && !b.exited() {
		t.Fatal(err)
	}
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.lines...)
}

func (b *backgroundDKC) stderr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.errOut.String()
}

// TestAgentColumn runs a real agent on the first of two kubelets and none on
// the second: status shows AGENT ready and none, assign warns about the node
// without an agent at once, and assign --wait names that cause when it
// times out. The assignment's age, which tells a stale agent, comes from the
// Node's managedFields as the real apiserver writes them.
func TestAgentColumn(t *testing.T) {
	c := framework.Setup(t, framework.Options{Nodes: 2})
	ctx := context.Background()
	n0, n1 := c.Nodes[0], c.Nodes[1]
	if err := c.ApplyManifest(ctx, filepath.Join("..", "..", "deploy", "rbac.yaml"), false); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := c.UserKubeconfig(framework.AgentIdentity)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := n0.StartAgent(framework.DKCBinary(), n0.AgentArgs(framework.AgentOptions{Kubeconfig: kubeconfig, TrialDuration: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(n0.DefaultKubeletConfig(), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["maxPods"] = 43
	edited, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const cmName = "e2e-agent-column"
	createTestConfigMap(t, c.Client, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: source.DefaultNamespace, Name: cmName, Labels: map[string]string{source.ConfigLabel: "true"}},
		Data:       map[string]string{source.DefaultKey: string(edited)},
	})
	agentOf := func(t *testing.T, r result) map[string]string {
		t.Helper()
		var list status.NodeConfigList
		if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
			t.Fatalf("status -o json: %v\n%s", err, r.Stdout)
		}
		got := map[string]string{}
		for _, item := range list.Items {
			got[item.Name] = string(item.Agent)
		}
		return got
	}
	// agentReady is the starting state of the subtests: the agent on n0
	// has reported. A new agent with nothing to do reports at its first
	// sync.
	agentReady := func(t *testing.T) {
		t.Helper()
		waitFor(t, 30*time.Second, "the agent on "+n0.Name+" to report", func() bool {
			return agentOf(t, mustDKC(t, c, "", "status", "-o", "json"))[n0.Name] == "ready"
		})
	}

	t.Run("the node with an agent is ready before its first assignment", func(t *testing.T) {
		agentReady(t)
		got := agentOf(t, mustDKC(t, c, "", "status", "-o", "json"))
		if diff := cmp.Diff(map[string]string{n0.Name: "ready", n1.Name: "none"}, got); diff != "" {
			t.Fatalf("agent states before any assignment (-want +got):\n%s", diff)
		}
		r := mustDKC(t, c, "", "assign", n0.Name, "--config", cmName, "--wait", "--timeout=90s")
		if strings.Contains(r.Stderr, "no dkc agent") {
			t.Errorf("assign to the node with an agent warned: %q", r.Stderr)
		}
		r = mustDKC(t, c, "", "status", "-o", "json")
		if diff := cmp.Diff(map[string]string{n0.Name: "ready", n1.Name: "none"}, agentOf(t, r)); diff != "" {
			t.Errorf("agent states (-want +got):\n%s", diff)
		}
	})

	t.Run("the node without an agent says so", func(t *testing.T) {
		agentReady(t)
		began := time.Now()
		r := dkc(t, c, "", "assign", n1.Name, "--config", cmName, "--wait", "--timeout=3s")
		if r.ExitCode != status.ExitTimeout {
			t.Errorf("assign --wait exit %d, want %d", r.ExitCode, status.ExitTimeout)
		}
		// The warning comes at once, the cause again with the timeout.
		wantErr := "Warning: node/" + n1.Name + ": no dkc agent has reported on this node yet; unless one runs there, nothing will apply the assignment (see docs/install.md)\n" +
			"error: wait for active: timed out waiting for the condition after 3s: pending node/" + n1.Name + " (no dkc agent has reported on it; see docs/install.md)\n"
		if r.Stderr != wantErr {
			t.Errorf("stderr %q, want %q", r.Stderr, wantErr)
		}
		t.Logf("assign --wait timed out after %s", time.Since(began).Round(time.Millisecond))

		r = mustDKC(t, c, "", "status")
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		if len(lines) != 3 {
			t.Fatalf("status printed %d lines, want header and 2 rows:\n%s", len(lines), r.Stdout)
		}
		rows := map[string][]string{}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			rows[f[0]] = f
		}
		if got := rows[n0.Name][5]; got != "ready" {
			t.Errorf("AGENT of %s is %q, want ready:\n%s", n0.Name, got, r.Stdout)
		}
		if got := rows[n1.Name][5]; got != "none" {
			t.Errorf("AGENT of %s is %q, want none:\n%s", n1.Name, got, r.Stdout)
		}
		if want := "Warning: node/" + n1.Name + " has an assignment, but no dkc agent has reported on it; see docs/install.md\n"; r.Stderr != want {
			t.Errorf("stderr %q, want %q", r.Stderr, want)
		}
	})

	t.Run("an agent that stops taking assignments up turns stale", func(t *testing.T) {
		agentReady(t)
		if err := agent.Stop(); err != nil {
			t.Fatal(err)
		}
		createTestConfigMap(t, c.Client, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: source.DefaultNamespace, Name: cmName + "-2", Labels: map[string]string{source.ConfigLabel: "true"}},
			Data:       map[string]string{source.DefaultKey: string(edited)},
		})
		mustDKC(t, c, "", "assign", n0.Name, "--config", cmName+"-2")
		node := readNode(t, c.Client, n0.Name)
		if got := status.Agent(node, time.Now()); got != status.AgentReady {
			t.Errorf("right after the assignment: agent %q, want ready", got)
		}
		// The real apiserver's managedFields date the assignment: past
		// StaleAfter, with the agent still silent, it is stale.
		later := time.Now().Add(status.StaleAfter + 10*time.Second)
		if got := status.Agent(node, later); got != status.AgentStale {
			var entries []string
			for _, e := range node.ManagedFields {
				entries = append(entries, e.Manager+"/"+e.Subresource+"@"+e.Time.String()+" "+string(e.FieldsV1.Raw))
			}
			t.Errorf("%s later: agent %q, want stale; managedFields:\n%s", status.StaleAfter, got, strings.Join(entries, "\n"))
		}
	})
}
