package cmd_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// TestDocsAuthorityTable holds docs/security.md's authority table to the
// end-to-end tests it cites: every test it names exists, with each
// subtest's name in the test's file, and every subtest of TestAuthority,
// which proves the table on real components, is cited by a row. A row
// that claims something names a test, but for root on a node.
func TestDocsAuthorityTable(t *testing.T) {
	d := docsByPath(t)["docs/security.md"]
	begin, end := -1, -1
	for i, l := range d.lines {
		switch strings.TrimSpace(l) {
		case "<!-- BEGIN AUTHORITY TABLE -->":
			begin = i
		case "<!-- END AUTHORITY TABLE -->":
			end = i
		}
	}
	if begin < 0 || end < begin {
		t.Fatal("docs/security.md: no authority table between <!-- BEGIN AUTHORITY TABLE --> and <!-- END AUTHORITY TABLE -->")
	}
	sub := doc{path: d.path, lines: d.lines[begin:end]}
	tables := sub.tables()
	if len(tables) != 1 || len(tables[0].header) != 5 || tables[0].header[4] != "Proven by" {
		t.Fatalf("docs/security.md:%d: want one table whose last of five columns is Proven by, got %d tables", begin+1, len(tables))
	}
	sources := e2eSources(t)
	cited := map[string]bool{}
	testName := regexp.MustCompile("`(Test[A-Za-z0-9]+(?:/[^`]+)?)`")
	for _, r := range tables[0].rows {
		at := d.at(begin + r.line)
		names := testName.FindAllStringSubmatch(r.cells[4], -1)
		if len(names) == 0 && !strings.Contains(r.cells[0], "Root on a node") {
			t.Errorf("%s: row %s cites no test", at, r.cells[0])
		}
		for _, m := range names {
			parts := strings.Split(m[1], "/")
			file, ok := definingFile(sources, parts[0])
			if !ok {
				t.Errorf("%s: %s: no func %s in test/e2e", at, m[1], parts[0])
				continue
			}
			for _, p := range parts[1:] {
				if !strings.Contains(sources[file], `"`+p+`"`) {
					t.Errorf("%s: %s: %s has no subtest or case %q", at, m[1], file, p)
				}
			}
			if parts[0] == "TestAuthority" && len(parts) == 2 {
				cited[parts[1]] = true
			}
		}
	}
	file, ok := definingFile(sources, "TestAuthority")
	if !ok {
		t.Fatal("no func TestAuthority in test/e2e")
	}
	for _, m := range regexp.MustCompile(`t\.Run\("([^"]+)"`).FindAllStringSubmatch(sources[file], -1) {
		if !cited[m[1]] {
			t.Errorf("docs/security.md: the authority table cites no TestAuthority/%s (%s)", m[1], file)
		}
	}
}

// e2eSources returns the Go files of test/e2e by name.
func e2eSources(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("../test/e2e/*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(p, "../")] = string(b)
	}
	return out
}

// definingFile returns the file of sources that defines func name.
func definingFile(sources map[string]string, name string) (string, bool) {
	for f, src := range sources {
		if strings.Contains(src, "\nfunc "+name+"(t *testing.T)") {
			return f, true
		}
	}
	return "", false
}

// TestUnsafeClassRoles holds deploy/ to the classes: every class that needs
// an opt-in has its ClusterRole in deploy/roles.yaml, granting use on that
// class alone, and the rollout policy lists the classes in --allow-unsafe's
// order.
func TestUnsafeClassRoles(t *testing.T) {
	raw, err := os.ReadFile("../deploy/roles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]rbacv1.ClusterRole{}
	for _, d := range strings.Split(string(raw), "\n---\n") {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(d), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "ClusterRole" {
			roles[r.Name] = r
		}
	}
	var refused []string
	for _, c := range kubeletconfig.Classes() {
		if !c.RefusedByDefault() {
			continue
		}
		refused = append(refused, "'"+string(c)+"'")
		name := source.UnsafeClassRole(string(c))
		want := []rbacv1.PolicyRule{{APIGroups: []string{source.Group}, Resources: []string{source.UnsafeClassesResource},
			ResourceNames: []string{string(c)}, Verbs: []string{source.UseVerb}}}
		got, ok := roles[name]
		if !ok {
			t.Errorf("deploy/roles.yaml has no ClusterRole %s for class %s", name, c)
			continue
		}
		if diff := cmp.Diff(want, got.Rules); diff != "" {
			t.Errorf("ClusterRole %s (-want +got):\n%s", name, diff)
		}
	}
	policy, err := os.ReadFile("../deploy/admission-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Policies 3 to 5 (pin, rollout, pool) each know the classes, and
	// check each with a message of its own.
	if want := "[" + strings.Join(refused, ", ") + "]"; strings.Count(string(policy), want) != 3 {
		t.Errorf("deploy/admission-policy.yaml: want the three opt-in policies to list the known classes as %s", want)
	}
	for _, c := range refused {
		c = strings.Trim(c, "'")
		check := "name('" + c + "').check('use')"
		msg := source.UnsafeClassDenied(c)
		if strings.Count(string(policy), check) != 3 || strings.Count(string(policy), msg) != 3 {
			t.Errorf("deploy/admission-policy.yaml: want three checks %s with the message %q, got %d and %d",
				check, msg, strings.Count(string(policy), check), strings.Count(string(policy), msg))
		}
	}
}

// TestPoolNamespacePolicy holds the policy kubectl-dkc-pool-namespace to
// deploy/controller.yaml: it admits pools only in the namespace the
// controller's Deployment runs in, and refuses the others with
// pool.NamespaceDenied's words, which the e2e test looks for.
func TestPoolNamespacePolicy(t *testing.T) {
	raw, err := os.ReadFile("../deploy/controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ns := ""
	for _, d := range strings.Split(string(raw), "\n---\n") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind == "Deployment" {
			ns = obj.Metadata.Namespace
		}
	}
	if ns == "" {
		t.Fatal("deploy/controller.yaml: no Deployment with a namespace")
	}
	raw, err = os.ReadFile("../deploy/admission-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, d := range strings.Split(string(raw), "\n---\n") {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		if err := yaml.Unmarshal([]byte(d), &p); err != nil {
			t.Fatal(err)
		}
		if p.Kind != "ValidatingAdmissionPolicy" || p.Name != "kubectl-dkc-pool-namespace" {
			continue
		}
		found = true
		if len(p.Spec.Validations) != 1 {
			t.Fatalf("policy %s: %d validations, want 1", p.Name, len(p.Spec.Validations))
		}
		v := p.Spec.Validations[0]
		if want := "request.namespace == '" + ns + "'"; v.Expression != want {
			t.Errorf("policy %s: expression %q, want %q (the controller's namespace)", p.Name, v.Expression, want)
		}
		if want := pool.NamespaceDenied(ns); !strings.Contains(v.MessageExpression, want) {
			t.Errorf("policy %s: message %q does not say %q", p.Name, v.MessageExpression, want)
		}
	}
	if !found {
		t.Error("deploy/admission-policy.yaml: no ValidatingAdmissionPolicy kubectl-dkc-pool-namespace")
	}
}
