package cmd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const kubeletYAML = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 110\n"

// writeFiles writes each name's content in a new directory, and returns
// it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestConfigMapChains: what push -o name prints, configmap/NAME, names the
// ConfigMap to assign and rollout start, as do NAME and kubectl's other
// types for ConfigMaps; another type is refused.
func TestConfigMapChains(t *testing.T) {
	dir := writeFiles(t, map[string]string{"kubelet.yaml": kubeletYAML})
	in := runEnv{Dir: dir}
	pushed := runWith(t, in, dkcBinary, "push", "kubelet.yaml", "--name", "my-config", "--dry-run=client", "-o", "name")
	ref := strings.TrimSuffix(pushed.Stdout, "\n")
	if pushed.Code != 0 || !strings.HasPrefix(ref, "configmap/my-config-") {
		t.Fatalf("push -o name: %+v", pushed)
	}
	obj := runWith(t, in, dkcBinary, "push", "kubelet.yaml", "--name", "my-config", "--dry-run=client", "-o", "json")
	var cm corev1.ConfigMap
	if err := json.Unmarshal([]byte(obj.Stdout), &cm); err != nil {
		t.Fatalf("push -o json: %v\n%+v", err, obj)
	}
	name := cm.Name
	api := &fakeAPIServer{
		Nodes:      []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}},
		ConfigMaps: []corev1.ConfigMap{cm},
	}
	in.Kubeconfig = api.start(t)

	for _, ref := range []string{ref, "cm/" + name, "ConfigMaps/" + name, name} {
		got := runWith(t, in, dkcBinary, "assign", "n1", "--config", ref, "--dry-run=client", "-o", "name")
		if got.Code != 0 || got.Stdout != "node/n1\n" {
			t.Errorf("assign --config %s: exit %d, stdout %q, stderr:\n%s", ref, got.Code, got.Stdout, got.Stderr)
		}
	}
	got := runWith(t, in, dkcBinary, "assign", "n1", "--config", ref, "--dry-run=client")
	if want := "node/n1 assigned kube-system/" + name + " (annotation) (dry run)\n"; got.Code != 0 || got.Stdout != want {
		t.Errorf("assign --config %s: exit %d, stdout %q, want %q; stderr:\n%s", ref, got.Code, got.Stdout, want, got.Stderr)
	}
	got = runWith(t, in, dkcBinary, "rollout", "start", "n1", "--config", ref, "--name", "r1", "--dry-run=client")
	if want := "rollout/r1 (dry run): Running, kube-system/" + name + " over 1 nodes"; got.Code != 0 || !strings.HasPrefix(got.Stdout, want) {
		t.Errorf("rollout start --config %s: exit %d, stdout %q, want it to start with %q; stderr:\n%s", ref, got.Code, got.Stdout, want, got.Stderr)
	}

	for _, typed := range []string{"my-", "configmap/my-"} {
		got := runWith(t, in, dkcBinary, "__complete", "assign", "n1", "--config", typed)
		want := strings.TrimPrefix(ref, "configmap/")
		if typed == "configmap/my-" {
			want = ref
		}
		if got.Code != 0 || !strings.HasPrefix(got.Stdout, want+"\n:4\n") {
			t.Errorf("__complete assign n1 --config %s: exit %d, stdout %q, want %s first", typed, got.Code, got.Stdout, want)
		}
	}

	for _, args := range [][]string{
		{"assign", "n1", "--config", "secret/" + name},
		{"rollout", "start", "n1", "--config", "secret/" + name},
	} {
		want := result{Code: 1, Stderr: `error: invalid --config "secret/` + name + `": "secret" is not a ConfigMap type: write NAME or configmap/NAME` + "\n"}
		if diff := cmp.Diff(want, runWith(t, in, dkcBinary, args...)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", strings.Join(args, " "), diff)
		}
	}
}

// TestConfigInputs: push takes one KubeletConfiguration a file, and diff
// compares one on each side, merging a drop-in over its base with
// --drop-in.
func TestConfigInputs(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"kubelet.yaml": kubeletYAML + "evictionHard:\n  memory.available: 100Mi\n  nodefs.available: 10%\n",
		"two.yaml":     kubeletYAML + "---\n" + kubeletYAML,
		"framed.yaml":  "# the node's config\n---\n" + kubeletYAML + "---\n",
		"empty.yaml":   "",
		"cm.yaml":      "kind: ConfigMap\napiVersion: v1\n",
		"dropin.yaml":  "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 42\nevictionHard:\n  memory.available: 200Mi\n",
	})
	in := runEnv{Dir: dir}
	tests := map[string]struct {
		args []string
		want result
	}{
		"push two documents": {
			args: []string{"push", "two.yaml", "--name", "c", "--dry-run=client"},
			want: result{Code: 1, Stderr: "error: two.yaml: 2 YAML documents, the second at line 4: push takes one KubeletConfiguration per ConfigMap; push each document from a file of its own\n"},
		},
		"push one document between markers": {
			args: []string{"push", "framed.yaml", "--name", "c", "--dry-run=client", "-o", "name"},
			want: result{Code: 0, Stdout: "configmap/c-2787g5fd4f\n"},
		},
		"diff an empty file": {
			args: []string{"diff", "kubelet.yaml", "empty.yaml"},
			want: result{Code: 2, Stderr: "error: empty.yaml: empty: a KubeletConfiguration is a JSON or YAML object with kind and apiVersion\n"},
		},
		"diff another kind": {
			args: []string{"diff", "cm.yaml", "kubelet.yaml"},
			want: result{Code: 2, Stderr: `error: cm.yaml: load kubelet config: kind "ConfigMap" is not supported: want kind: KubeletConfiguration, apiVersion "v1" is not supported: want apiVersion: kubelet.config.k8s.io/v1beta1` + "\n"},
		},
		"diff two documents": {
			args: []string{"diff", "kubelet.yaml", "-"},
			want: result{Code: 2, Stderr: "error: -: 2 YAML documents, the second at line 4: diff compares one KubeletConfiguration on each side\n"},
		},
		"diff a drop-in over its base": {
			args: []string{"diff", "kubelet.yaml", "dropin.yaml", "--drop-in"},
			want: result{Code: 1, Stdout: `--- kubelet.yaml
+++ dropin.yaml over kubelet.yaml
@@ -1,6 +1,6 @@
 apiVersion: kubelet.config.k8s.io/v1beta1
 evictionHard:
-  memory.available: 100Mi
+  memory.available: 200Mi
   nodefs.available: 10%
 kind: KubeletConfiguration
-maxPods: 110
+maxPods: 42
`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			env := in
			if tc.args[len(tc.args)-1] == "-" {
				env.Stdin = kubeletYAML + "---\n" + kubeletYAML
			}
			if diff := cmp.Diff(tc.want, runWith(t, env, dkcBinary, tc.args...)); diff != "" {
				t.Errorf("kubectl-dkc %s (-want +got):\n%s", strings.Join(tc.args, " "), diff)
			}
		})
	}
}
