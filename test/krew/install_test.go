package krew

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kubectl-dkc/dkc/test/e2e/framework"
)

// krewTools builds krew and its manifest validator from Go modules
// (hack/build-components-krew.sh, cached) and returns their directory.
func krewTools(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("../../hack/build-components-krew.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("hack/build-components-krew.sh: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// TestKrewValidator runs krew's own validator (validate-krew-manifest, as
// krew-index's CI does) on plugins/dkc.yaml. Its install step downloads
// each platform's release, which needs the network, so it is skipped here;
// TestKrewInstall installs the host's platform from a local archive.
func TestKrewValidator(t *testing.T) {
	tools := krewTools(t)
	out, err := exec.Command(filepath.Join(tools, "validate-krew-manifest"), "-manifest", "../../plugins/dkc.yaml", "-skip-install").CombinedOutput()
	if err != nil {
		t.Fatalf("validate-krew-manifest plugins/dkc.yaml: %v\n%s", err, out)
	}
	for _, want := range []string{"structural validation OK", "all spec.platform[] items are used", "no overlapping spec.platform[].selector"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("validator output lacks %q:\n%s", want, out)
		}
	}
}

// TestKrewInstall installs the plugin as a user would, with the real krew
// under the pinned kubectl: `kubectl krew install --manifest=plugins/dkc.yaml
// --archive=ARCHIVE` into an empty KREW_ROOT, where ARCHIVE is the host's
// release archive that hack/dist.sh builds from this commit. The manifest
// is plugins/dkc.yaml with only the host platform's sha256 set to that
// archive's, so krew checks the committed manifest's bin and files against
// the archive's real layout. Then `kubectl dkc version` runs the installed
// plugin through kubectl's plugin discovery, and kubectl completes
// "kubectl dkc rollout ab" once the commands of completion --help put
// kubectl_complete-dkc on the PATH (krew links only kubectl-dkc).
func TestKrewInstall(t *testing.T) {
	kubectl := filepath.Join(framework.DefaultBinDir(), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		msg := "missing " + kubectl + ": run `make components` (hack/build-components.sh)"
		if framework.InCI() {
			t.Fatalf("CI=true: %s", msg)
		}
		t.Skipf("skipping (set CI=true to make this a failure): %s", msg)
	}
	tools := krewTools(t)
	m := load(t, "../../plugins/dkc.yaml")
	version := m.Spec.Version
	var hostSHA string
	for _, p := range m.Spec.Platforms {
		if p.Selector.MatchLabels["os"] == runtime.GOOS && p.Selector.MatchLabels["arch"] == runtime.GOARCH {
			hostSHA = p.SHA256
		}
	}
	if hostSHA == "" {
		t.Fatalf("plugins/dkc.yaml has no platform for %s/%s", runtime.GOOS, runtime.GOARCH)
	}

	tmp := t.TempDir()
	dist := filepath.Join(tmp, "dist")
	build := exec.Command("../../hack/dist.sh", version)
	build.Env = append(os.Environ(), "DIST_OUT="+dist, "DIST_PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH)
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/dist.sh: %v\n%s", err, out)
	}
	archive := filepath.Join(dist, "kubectl-dkc_"+version+"_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz")
	var archiveSHA string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == archive {
			archiveSHA = f[1]
		}
	}
	if archiveSHA == "" {
		t.Fatalf("hack/dist.sh did not report %s:\n%s", archive, out)
	}
	committed, err := os.ReadFile("../../plugins/dkc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(tmp, "dkc.yaml") // krew wants NAME.yaml
	if err := os.WriteFile(manifest, []byte(strings.Replace(string(committed), hostSHA, archiveSHA, 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	krewRoot := filepath.Join(tmp, "krew")
	env := append(os.Environ(),
		"KREW_ROOT="+krewRoot,
		"KREW_NO_UPGRADE_CHECK=1",
		"PATH="+strings.Join([]string{filepath.Join(krewRoot, "bin"), tools, filepath.Dir(kubectl), "/usr/bin", "/bin"}, ":"),
		"HOME="+tmp,
	)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out2 := run("krew", "install", "--manifest="+manifest, "--archive="+archive)
	if !strings.Contains(out2, `Installed plugin: dkc`) {
		t.Errorf("krew install did not say it installed dkc:\n%s", out2)
	}
	if _, err := os.Stat(filepath.Join(krewRoot, "receipts", "dkc.yaml")); err != nil {
		t.Errorf("krew wrote no receipt for dkc: %v", err)
	}
	// list and uninstall want a default index, which `krew update` clones
	// from GitHub; an empty git repository stands in for it.
	if out, err := exec.Command("git", "init", "-q", filepath.Join(krewRoot, "index", "default")).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	if list := run("krew", "list"); !strings.Contains(list, "dkc") {
		t.Errorf("kubectl krew list does not list dkc:\n%s", list)
	}
	linked := filepath.Join(krewRoot, "bin", "kubectl-dkc")
	if _, err := os.Lstat(linked); err != nil {
		t.Fatalf("krew installed no %s: %v", linked, err)
	}
	if plugins := run("plugin", "list"); !strings.Contains(plugins, linked) {
		t.Errorf("kubectl plugin list does not show %s:\n%s", linked, plugins)
	}
	if v := run("dkc", "version"); !strings.Contains(v, version) {
		t.Errorf("kubectl dkc version printed %q, want it to name %s", v, version)
	}
	// The completion script krew extracted next to the binary.
	if _, err := os.Stat(filepath.Join(krewRoot, "store", "dkc", version, "kubectl_complete-dkc")); err != nil {
		t.Errorf("kubectl_complete-dkc not installed: %v", err)
	}
	// kubectl completes "kubectl dkc ..." through kubectl_complete-dkc on
	// the PATH, which krew does not link (one bin per manifest): before
	// the commands of completion --help, kubectl offers no subcommand;
	// after them, it completes through the plugin.
	complete := func() string { return run("__complete", "dkc", "rollout", "ab") }
	if got := complete(); strings.Contains(got, "abort") {
		t.Errorf("kubectl completed the plugin before kubectl_complete-dkc was on the PATH; the test proves nothing:\n%s", got)
	}
	var setup []string
	for _, line := range strings.Split(run("dkc", "completion", "--help"), "\n") {
		if strings.Contains(line, "KREW_ROOT") {
			setup = append(setup, strings.TrimSpace(line))
		}
	}
	if len(setup) == 0 {
		t.Fatal("kubectl dkc completion --help gives no commands for a krew install")
	}
	sh := exec.Command("/bin/sh", "-ec", strings.Join(setup, "\n"))
	sh.Env = env
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the commands of kubectl dkc completion --help: %v\n%s", err, out)
	}
	if got := complete(); !strings.Contains(got, "\nabort\t") {
		t.Errorf("kubectl __complete dkc rollout ab after the commands of completion --help:\n%s\nwant abort", got)
	}
	run("krew", "uninstall", "dkc")
	if _, err := os.Lstat(linked); !os.IsNotExist(err) {
		t.Errorf("after krew uninstall, %s is still there (%v)", linked, err)
	}
}
