package install

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/install"
)

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		edit    func(o *Options)
		wantErr string
	}{
		"the defaults and a repository": {},
		"no repository": {
			edit:    func(o *Options) { o.ImageRepository = "" },
			wantErr: "--image-repository is required: no registry publishes dkc's images yet; push them with make image push IMAGE_REPO=HOST/PATH and name HOST/PATH here",
		},
		"a repository with a scheme": {
			edit:    func(o *Options) { o.ImageRepository = "https://r.test/dkc" },
			wantErr: `invalid --image-repository "https://r.test/dkc": name HOST/PATH, without a scheme`,
		},
		"an unknown agent": {
			edit:    func(o *Options) { o.Agent = "static" },
			wantErr: `invalid --agent "static": must be "daemonset" or "systemd"`,
		},
		"another namespace": {
			edit:    func(o *Options) { o.Namespace = "dkc" },
			wantErr: "install puts dkc in kube-system, not in -n dkc: drop -n, or render with --dry-run=client -o yaml and change the namespace yourself",
		},
		"-n kube-system": {edit: func(o *Options) { o.Namespace = "kube-system" }},
		"a bad dry run": {
			edit:    func(o *Options) { o.DryRun = "yes" },
			wantErr: `invalid --dry-run "yes": must be "none", "client", or "server"`,
		},
		"--wait with a dry run": {
			edit:    func(o *Options) { o.DryRun, o.WaitSet = util.DryRunClient, true },
			wantErr: "--wait cannot be used with --dry-run: nothing would change to wait for",
		},
		"a dry run, --wait not given": {edit: func(o *Options) { o.DryRun = util.DryRunServer }},
		"--timeout with --wait=false": {
			edit:    func(o *Options) { o.Wait, o.WaitSet, o.TimeoutSet = false, true, true },
			wantErr: util.ErrTimeoutWithoutWait.Error(),
		},
		"a negative timeout": {
			edit:    func(o *Options) { o.Timeout = -time.Second },
			wantErr: "invalid --timeout -1s: must not be negative (0 means forever)",
		},
		"a bad -o": {
			edit:    func(o *Options) { *o.PrintFlags.OutputFormat = "table" },
			wantErr: `invalid --output "table": must be one of json, yaml, kyaml, name, go-template, go-template-file, template, templatefile, jsonpath, jsonpath-as-json, jsonpath-file`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := NewInstallOptions(genericiooptions.NewTestIOStreamsDiscard())
			o.ImageRepository, o.Version = "r.test/dkc", "v1.2.3"
			if tc.edit != nil {
				tc.edit(o)
			}
			var got string
			if err := o.Validate(); err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("Validate() = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// TestDryRunClient: --dry-run=client prints, without a cluster, every
// object install would apply; -o yaml as one stream that reads back as
// those objects.
func TestDryRunClient(t *testing.T) {
	for _, agent := range install.Agents {
		t.Run(agent, func(t *testing.T) {
			want, err := install.Render(install.Options{ImageRepository: "r.test/dkc", Version: "v1.2.3", Agent: agent})
			if err != nil {
				t.Fatal(err)
			}
			run := func(output string) string {
				streams, _, out, _ := genericiooptions.NewTestIOStreams()
				o := NewInstallOptions(streams)
				o.ImageRepository, o.Version, o.Agent, o.DryRun = "r.test/dkc", "v1.2.3", agent, util.DryRunClient
				*o.PrintFlags.OutputFormat = output
				if err := o.Validate(); err != nil {
					t.Fatal(err)
				}
				if err := o.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				return out.String()
			}
			got, err := install.Decode([]byte(run("yaml")))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("-o yaml (-rendered +printed):\n%s", diff)
			}
			lines := strings.Split(strings.TrimSpace(run("")), "\n")
			if len(lines) != len(want) {
				t.Fatalf("printed %d lines for %d objects:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
			}
			if w := "customresourcedefinition.apiextensions.k8s.io/nodeconfigrollouts.kubectl-dkc.io serverside-applied (dry run)"; lines[0] != w {
				t.Errorf("first line %q, want %q", lines[0], w)
			}
			var b bytes.Buffer
			for _, l := range lines {
				if !strings.HasSuffix(l, " serverside-applied (dry run)") {
					b.WriteString(l + "\n")
				}
			}
			if b.Len() > 0 {
				t.Errorf("lines without the dry run's operation:\n%s", b.String())
			}
		})
	}
}
