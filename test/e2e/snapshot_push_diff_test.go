package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// TestSnapshotPushDiff proves the first steps of the operator workflow
// against real kubelets: snapshot a node's config through the apiserver's
// proxy, push it as a hash-named ConfigMap, and diff nodes, files and
// ConfigMaps.
func TestSnapshotPushDiff(t *testing.T) {
	c := framework.Setup(t, framework.Options{Nodes: 2})
	ctx := context.Background()
	n0, n1 := c.Nodes[0], c.Nodes[1]
	dir := t.TempDir()

	// The node proxy can lag a little behind Ready.
	var snap result
	waitFor(t, 30*time.Second, "a snapshot of "+n0.Name, func() bool {
		snap = dkc(t, c, "", "snapshot", n0.Name)
		return snap.ExitCode == 0
	})
	snapFile := filepath.Join(dir, "kubelet.json")
	if err := os.WriteFile(snapFile, []byte(snap.Stdout), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("snapshot equals the kubelet's config", func(t *testing.T) {
		if snap.Stderr != "" {
			t.Errorf("stderr = %q, want nothing: the harness's kubelets have no weak settings", snap.Stderr)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(snap.Stdout), &got); err != nil {
			t.Fatalf("snapshot is not JSON: %v", err)
		}
		if got["kind"] != "KubeletConfiguration" || got["apiVersion"] != "kubelet.config.k8s.io/v1beta1" {
			t.Errorf("kind, apiVersion = %v, %v; want KubeletConfiguration, kubelet.config.k8s.io/v1beta1", got["kind"], got["apiVersion"])
		}
		file, err := os.ReadFile(n0.ConfigPath)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := yaml.Unmarshal(file, &want); err != nil {
			t.Fatal(err)
		}
		// Every field of the kubelet's --config file is in the snapshot
		// with the same value; configz adds the defaults.
		for _, d := range subsetDiff("", want, got) {
			t.Error(d)
		}
		for _, field := range []string{"address", "maxPods", "cgroupDriver", "authentication", "authorization", "evictionHard"} {
			if _, ok := want[field]; !ok {
				t.Errorf("the node's config file has no %q: the comparison proves less than it claims", field)
			}
		}
		if !strings.HasSuffix(snap.Stdout, "}\n") || !strings.HasPrefix(snap.Stdout, "{\n  \"") {
			t.Errorf("snapshot is not indented like jq's output: %.40q", snap.Stdout)
		}
	})

	t.Run("snapshot -o yaml", func(t *testing.T) {
		r := mustDKC(t, c, "", "snapshot", n0.Name, "-o", "yaml")
		var fromYAML, fromJSON map[string]any
		if err := yaml.Unmarshal([]byte(r.Stdout), &fromYAML); err != nil {
			t.Fatalf("not YAML: %v", err)
		}
		if err := json.Unmarshal([]byte(snap.Stdout), &fromJSON); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fromYAML, fromJSON) {
			t.Errorf("-o yaml and -o json differ in content:\n%s\n%s", r.Stdout, snap.Stdout)
		}
		if !strings.Contains(r.Stdout, "\nkind: KubeletConfiguration\n") {
			t.Errorf("no kind: KubeletConfiguration line in:\n%s", r.Stdout)
		}
	})

	t.Run("snapshot --output-dir", func(t *testing.T) {
		want := []string{n0.Name, n1.Name}
		sort.Strings(want)
		for name, args := range map[string][]string{
			"all":      {"--all"},
			"selector": {"-l", "kubernetes.io/os=linux"},
			"names":    {want[1], want[0]},
		} {
			t.Run(name, func(t *testing.T) {
				out := filepath.Join(dir, "configs-"+name, "sub")
				r := mustDKC(t, c, "", append([]string{"snapshot", "--output-dir", out}, args...)...)
				wantOut := filepath.Join(out, "kubelet_configz_"+want[0]) + "\n" + filepath.Join(out, "kubelet_configz_"+want[1]) + "\n"
				if r.Stdout != wantOut {
					t.Errorf("stdout = %q, want %q", r.Stdout, wantOut)
				}
				for _, node := range want {
					b, err := os.ReadFile(filepath.Join(out, "kubelet_configz_"+node))
					if err != nil {
						t.Fatal(err)
					}
					var cfg map[string]any
					if err := json.Unmarshal(b, &cfg); err != nil {
						t.Fatalf("%s: %v", node, err)
					}
					if got, wantIP := cfg["address"], c.Node(node).IP; got != wantIP {
						t.Errorf("%s: address %v, want %s", node, got, wantIP)
					}
				}
				entries, err := os.ReadDir(out)
				if err != nil {
					t.Fatal(err)
				}
				if len(entries) != 2 {
					t.Errorf("--output-dir holds %d entries, want 2 (no temp files)", len(entries))
				}
			})
		}
		r := mustDKC(t, c, "", "snapshot", "-l", "kubernetes.io/hostname="+n1.Name, "--output-dir", filepath.Join(dir, "one"))
		if want := filepath.Join(dir, "one", "kubelet_configz_"+n1.Name) + "\n"; r.Stdout != want {
			t.Errorf("-l for one node: stdout = %q, want %q", r.Stdout, want)
		}
	})

	t.Run("snapshot --jq", func(t *testing.T) {
		r := mustDKC(t, c, "", "snapshot", "--all", "--jq", ".maxPods")
		if r.Stdout != "110\n110\n" {
			t.Errorf("stdout = %q, want %q", r.Stdout, "110\n110\n")
		}
		r = mustDKC(t, c, "", "snapshot", n1.Name, "--jq", "{address, maxPods}", "-o", "yaml")
		if want := "address: " + n1.IP + "\nmaxPods: 110\n"; r.Stdout != want {
			t.Errorf("stdout = %q, want %q", r.Stdout, want)
		}
		r = dkc(t, c, "", "snapshot", n1.Name, "--jq", ".[")
		if r.ExitCode != 1 || !strings.Contains(r.Stderr, `invalid --jq expression ".["`) {
			t.Errorf("a bad --jq: exit %d, stderr %q; want 1 and a message naming --jq", r.ExitCode, r.Stderr)
		}
	})

	t.Run("snapshot of a missing node", func(t *testing.T) {
		r := dkc(t, c, "", "snapshot", n0.Name, "nope")
		if r.ExitCode != 1 {
			t.Errorf("exit %d, want 1", r.ExitCode)
		}
		if !strings.Contains(r.Stderr, `snapshot node "nope"`) || !strings.Contains(r.Stderr, "not found") {
			t.Errorf("stderr = %q, want it to name the missing node", r.Stderr)
		}
		if r.Stdout != snap.Stdout {
			t.Errorf("the node that exists was not printed; stdout = %.60q", r.Stdout)
		}
	})

	t.Run("snapshot without nodes/proxy", func(t *testing.T) {
		kubeconfig, err := c.UserKubeconfig("alice")
		if err != nil {
			t.Fatal(err)
		}
		r := dkcAs(t, kubeconfig, "", "snapshot", n0.Name)
		if r.ExitCode != 1 {
			t.Errorf("exit %d, want 1", r.ExitCode)
		}
		for _, want := range []string{`cannot get resource "nodes/proxy"`, `reading a kubelet's config needs "get" on "nodes/proxy"`} {
			if !strings.Contains(r.Stderr, want) {
				t.Errorf("stderr = %q, want it to contain %q", r.Stderr, want)
			}
		}
	})

	// The name push gives the snapshot, e2e-config and a hash of its data,
	// is known without a cluster. pushSnapshot creates the ConfigMap for
	// the subtests that read it ("unchanged" when it exists), so each one
	// runs alone.
	pushed, ok := strings.CutPrefix(strings.TrimSuffix(mustDKC(t, c, "", "push", snapFile, "--name", "e2e-config", "--dry-run=client", "-o", "name").Stdout, "\n"), "configmap/")
	if !ok || pushed == "" || strings.ContainsAny(pushed, " \n") {
		t.Fatalf("push --dry-run=client -o name: want configmap/NAME, got %q", pushed)
	}
	// snapDigest is the digest push prints for the snapshot: that of the
	// file's bytes, which the ConfigMap holds unchanged.
	snapDigest := func(t *testing.T) string {
		t.Helper()
		b, err := os.ReadFile(snapFile)
		if err != nil {
			t.Fatal(err)
		}
		return source.Digest(b)
	}
	pushSnapshot := func(t *testing.T) {
		t.Helper()
		mustDKC(t, c, "", "push", snapFile, "--name", "e2e-config")
	}

	t.Run("push names the ConfigMap as kubectl does", func(t *testing.T) {
		want := kubectlHashName(t, "e2e-config", snapFile)
		r := mustDKC(t, c, "", "push", snapFile, "--name", "e2e-config")
		if want := "configmap/" + pushed + " created, digest " + snapDigest(t) + "\n"; r.Stdout != want {
			t.Fatalf("stdout = %q, want %q", r.Stdout, want)
		}
		if want != "" && pushed != want {
			t.Errorf("pushed %q, kubectl create configmap --append-hash names it %q", pushed, want)
		}
		cm, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, pushed, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data["kubelet"] != snap.Stdout {
			t.Errorf("data[kubelet] is not the file's bytes")
		}
		if cm.Labels[source.ConfigLabel] != "true" {
			t.Errorf("labels = %v, want %s=true", cm.Labels, source.ConfigLabel)
		}
		if len(cm.ManagedFields) == 0 || cm.ManagedFields[0].Manager != source.FieldManager {
			t.Errorf("managedFields = %v, want manager %s", cm.ManagedFields, source.FieldManager)
		}

		r = mustDKC(t, c, snap.Stdout, "push", "-", "--name", "e2e-config")
		if want := "configmap/" + pushed + " unchanged, digest " + snapDigest(t) + "\n"; r.Stdout != want {
			t.Errorf("second push: stdout = %q, want %q", r.Stdout, want)
		}
		r = mustDKC(t, c, "", "push", snapFile, "--name", "e2e-config", "-o", "yaml")
		if !strings.Contains(r.Stdout, "kind: ConfigMap\n") || !strings.Contains(r.Stdout, "  name: "+pushed+"\n") || strings.Contains(r.Stdout, "managedFields") {
			t.Errorf("-o yaml: want the ConfigMap with kind and name and without managedFields, got:\n%s", r.Stdout)
		}
		r = mustDKC(t, c, "", "push", snapFile, "--name", "e2e-config", "-o", "name")
		if want := "configmap/" + pushed + "\n"; r.Stdout != want {
			t.Errorf("-o name: stdout = %q, want %q", r.Stdout, want)
		}
	})

	t.Run("push without --append-hash refuses different data", func(t *testing.T) {
		mustDKC(t, c, snap.Stdout, "push", "-", "--name", "e2e-plain", "--append-hash=false")
		edited := strings.Replace(snap.Stdout, `"maxPods": 110`, `"maxPods": 50`, 1)
		r := dkc(t, c, edited, "push", "-", "--name", "e2e-plain", "--append-hash=false")
		if r.ExitCode != 1 || !strings.Contains(r.Stderr, "already exists with different data: push under a new --name, or use --append-hash") {
			t.Errorf("exit %d, stderr %q; want 1 and the fix", r.ExitCode, r.Stderr)
		}
		cm, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "e2e-plain", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data["kubelet"] != snap.Stdout {
			t.Errorf("the refused push changed the ConfigMap")
		}
	})

	t.Run("push refuses invalid configs and creates nothing", func(t *testing.T) {
		before := configNames(t, c)
		noKind := strings.Replace(snap.Stdout, `"kind": "KubeletConfiguration",`, "", 1)
		if noKind == snap.Stdout {
			t.Fatal("the snapshot has no kind line to remove")
		}
		r := dkc(t, c, noKind, "push", "-", "--name", "e2e-nokind")
		if r.ExitCode != 1 || r.Stderr != "error: stdin: load kubelet config: missing \"kind\": add kind: KubeletConfiguration\n" {
			t.Errorf("missing kind: exit %d, stderr %q", r.ExitCode, r.Stderr)
		}
		unknown := strings.Replace(snap.Stdout, `"maxPods": 110`, `"maxPods": 110, "maxPodz": 3`, 1)
		r = dkc(t, c, unknown, "push", "-", "--name", "e2e-unknown")
		if r.ExitCode != 1 || !strings.Contains(r.Stderr, `unknown field "maxPodz" (fix the field, or use --allow-unknown-fields to push it anyway)`) {
			t.Errorf("unknown field: exit %d, stderr %q", r.ExitCode, r.Stderr)
		}
		r = dkc(t, c, strings.Replace(snap.Stdout, `"maxPods": 110`, `"maxPods": -1`, 1), "push", "-", "--name", "e2e-invalid")
		if r.ExitCode != 1 || !strings.Contains(r.Stderr, "maxPods: must be >= 0, got -1") {
			t.Errorf("invalid maxPods: exit %d, stderr %q", r.ExitCode, r.Stderr)
		}
		r = dkc(t, c, snap.Stdout, "push", "-", "--name", "e2e-server-dry", "--dry-run=server")
		if r.ExitCode != 0 || !strings.HasPrefix(r.Stdout, "configmap/e2e-server-dry-") || !strings.Contains(r.Stdout, " created, digest sha256:") || !strings.HasSuffix(r.Stdout, " (server dry run)\n") {
			t.Errorf("--dry-run=server: exit %d, stdout %q", r.ExitCode, r.Stdout)
		}
		if after := configNames(t, c); !reflect.DeepEqual(before, after) {
			t.Errorf("ConfigMaps changed from %v to %v", before, after)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(r.Stdout, "configmap/"), " created")
		if _, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get %s after --dry-run=server: %v, want not found", name, err)
		}

		r = dkc(t, c, unknown, "push", "-", "--name", "e2e-unknown", "--allow-unknown-fields")
		if r.ExitCode != 0 || !strings.HasPrefix(r.Stderr, "Warning: stdin: unknown field \"maxPodz\"\n") {
			t.Errorf("--allow-unknown-fields: exit %d, stderr %q", r.ExitCode, r.Stderr)
		}
		if after := configNames(t, c); len(after) != len(before)+1 {
			t.Errorf("--allow-unknown-fields created %d ConfigMaps, want 1", len(after)-len(before))
		}
	})

	t.Run("push --dry-run=client needs no cluster", func(t *testing.T) {
		r := dkcAs(t, "/nonexistent/kubeconfig", "", "push", snapFile, "--name", "e2e-config", "--dry-run=client", "-o", "yaml")
		if r.ExitCode != 0 {
			t.Fatalf("exit %d: %s", r.ExitCode, r.Stderr)
		}
		var cm struct {
			Kind       string
			APIVersion string `json:"apiVersion"`
			Metadata   struct{ Name, Namespace string }
			Data       map[string]string
		}
		if err := yaml.Unmarshal([]byte(r.Stdout), &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Kind != "ConfigMap" || cm.APIVersion != "v1" || cm.Metadata.Name != pushed || cm.Metadata.Namespace != "kube-system" || cm.Data["kubelet"] != snap.Stdout {
			t.Errorf("dry-run object: kind %q apiVersion %q name %q namespace %q; want ConfigMap v1 %s kube-system and the file as data", cm.Kind, cm.APIVersion, cm.Metadata.Name, cm.Metadata.Namespace, pushed)
		}
	})

	edited := strings.Replace(snap.Stdout, `"maxPods": 110`, `"maxPods": 42`, 1)
	editedFile := filepath.Join(dir, "edited.json")
	if err := os.WriteFile(editedFile, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("diff", func(t *testing.T) {
		pushSnapshot(t)
		r := dkc(t, c, "", "diff", "node/"+n0.Name, snapFile)
		if r.ExitCode != 0 || r.Stdout != "" || r.Stderr != "" {
			t.Errorf("node vs its snapshot: exit %d, stdout %q, stderr %q; want 0 and nothing", r.ExitCode, r.Stdout, r.Stderr)
		}
		r = dkc(t, c, "", "diff", "node/"+n0.Name, editedFile)
		wantHunk := "--- node/" + n0.Name + "\n+++ " + editedFile + "\n"
		if r.ExitCode != 1 || r.Stderr != "" || !strings.HasPrefix(r.Stdout, wantHunk) ||
			!strings.Contains(r.Stdout, "\n-maxPods: 110\n+maxPods: 42\n") || strings.Count(r.Stdout, "\n-") != 1 {
			t.Errorf("node vs edited file: exit %d, stderr %q, stdout:\n%s\nwant exit 1 and only -maxPods: 110 / +maxPods: 42", r.ExitCode, r.Stderr, r.Stdout)
		}
		r = dkc(t, c, "", "diff", "configmap/"+pushed, snapFile)
		if r.ExitCode != 0 || r.Stdout != "" {
			t.Errorf("pushed configmap vs file: exit %d, stdout %q; want 0 and nothing", r.ExitCode, r.Stdout)
		}
		r = dkc(t, c, edited, "diff", "configmap/kube-system/"+pushed, "-")
		if r.ExitCode != 1 || !strings.HasPrefix(r.Stdout, "--- configmap/kube-system/"+pushed+"\n+++ -\n") || !strings.Contains(r.Stdout, "\n-maxPods: 110\n+maxPods: 42\n") {
			t.Errorf("configmap vs edited stdin: exit %d, stdout:\n%s", r.ExitCode, r.Stdout)
		}
		r = dkc(t, c, "", "diff", "node/"+n0.Name, "node/"+n1.Name)
		if r.ExitCode != 1 || !strings.Contains(r.Stdout, "-address: "+n0.IP+"\n+address: "+n1.IP+"\n") {
			t.Errorf("two nodes: exit %d, stdout:\n%s", r.ExitCode, r.Stdout)
		}
		r = dkc(t, c, "", "diff", "configmap/nope", snapFile)
		if r.ExitCode != 2 || !strings.Contains(r.Stderr, `configmaps "nope" not found`) {
			t.Errorf("missing configmap: exit %d, stderr %q; want 2", r.ExitCode, r.Stderr)
		}
	})

	t.Run("diff assigned", func(t *testing.T) {
		pushSnapshot(t)
		r := dkc(t, c, "", "diff", "assigned/"+n1.Name, snapFile)
		if r.ExitCode != 2 || !strings.Contains(r.Stderr, fmt.Sprintf("node %q has no assigned config: it runs its local config", n1.Name)) {
			t.Errorf("no assignment: exit %d, stderr %q; want 2 and the local config named", r.ExitCode, r.Stderr)
		}
		assignment := fmt.Sprintf(`{"configMap":{"namespace":"kube-system","name":%q,"kubeletConfigKey":"kubelet"}}`, pushed)
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{source.AssignedAnnotation: assignment}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, n1.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		r = dkc(t, c, "", "diff", "assigned/"+n1.Name, snapFile)
		if r.ExitCode != 0 || r.Stdout != "" {
			t.Errorf("assigned vs its file: exit %d, stdout %q; want 0 and nothing", r.ExitCode, r.Stdout)
		}
		r = dkc(t, c, "", "diff", "node/"+n1.Name, "assigned/"+n1.Name)
		if r.ExitCode != 1 || !strings.Contains(r.Stdout, "-address: "+n1.IP+"\n+address: "+n0.IP+"\n") {
			t.Errorf("node vs assigned: exit %d, stdout:\n%s", r.ExitCode, r.Stdout)
		}
	})
}

// kubectlHashName is the name `kubectl create configmap NAME
// --from-file=kubelet=FILE --append-hash` gives, or "" without kubectl.
func kubectlHashName(t *testing.T, name, file string) string {
	t.Helper()
	kubectl, err := framework.Kubectl()
	if err != nil {
		t.Logf("no kubectl: the hash is checked against fixed vectors in unit tests only")
		return ""
	}
	cmd := exec.Command(kubectl, "create", "configmap", name, "--from-file=kubelet="+file,
		"--append-hash", "--dry-run=client", "-o", "jsonpath={.metadata.name}")
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent/kubeconfig")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl create configmap --dry-run=client: %v", err)
	}
	return string(out)
}

// configNames lists the ConfigMaps in kube-system.
func configNames(t *testing.T, c *framework.Cluster) []string {
	t.Helper()
	list, err := c.Client.CoreV1().ConfigMaps("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	sort.Strings(names)
	return names
}

// subsetDiff lists where got lacks a value of want or holds a different one:
// maps are compared key by key, anything else as a whole.
func subsetDiff(path string, want, got any) []string {
	wm, ok := want.(map[string]any)
	if !ok {
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: snapshot has %#v, the config file %#v", path, got, want)}
		}
		return nil
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s: snapshot has %#v, the config file an object", path, got)}
	}
	var diffs []string
	keys := make([]string, 0, len(wm))
	for k := range wm {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := strings.TrimPrefix(path+"."+k, ".")
		g, ok := gm[k]
		if !ok {
			// configz omits zero values (omitempty), such as
			// readOnlyPort: 0, the kubelet's default.
			if !isZero(wm[k]) {
				diffs = append(diffs, p+": missing from the snapshot")
			}
			continue
		}
		diffs = append(diffs, subsetDiff(p, wm[k], g)...)
	}
	return diffs
}

func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case float64:
		return v == 0
	case string:
		return v == ""
	case bool:
		return !v
	}
	return false
}
