// Command image builds kubectl-dkc's container images as OCI image archives,
// with no Docker daemon and nothing pulled from a registry:
//
//	go run . agent -root ../.. -o ../../_output/image/kubectl-dkc-agent.oci.tar
//	go run . controller -root ../.. -o ../../_output/image/kubectl-dkc-controller.oci.tar
//	go run . pause -o ../../_output/image/kubectl-dkc-pause.oci.tar
//	go run . probe -o ../../_output/image/kubectl-dkc-probe.oci.tar
//
// and pushes such an archive's image index to a registry (push.go):
//
//	go run . push -image ../../_output/image/kubectl-dkc-agent.oci.tar -ref HOST/PATH/kubectl-dkc-agent:TAG
//
// Each image is one layer on an empty base, for every -platforms entry, in
// one OCI image index. Builds are reproducible: the binaries are built with
// -trimpath and fixed ldflags, and every timestamp is -epoch (the commit's
// time in `make image`), so the same commit gives the same digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Default image names, the ones deploy/ and the harness use.
const (
	DefaultAgentRepo      = "registry.example/kubectl-dkc-agent"
	DefaultControllerRepo = "registry.example/kubectl-dkc-controller"
	DefaultPauseRef       = "registry.example/kubectl-dkc-pause:v1"
	DefaultProbeRef       = "registry.example/kubectl-dkc-probe:v1"
)

const sourceURL = "https://github.com/kubectl-dkc/dkc"

// options are the flags of every subcommand.
type options struct {
	Kind      string // agent, controller, pause or probe
	Root      string // the kubectl-dkc repository (agent, controller)
	Binary    string // a prebuilt agent binary, for one platform
	Out       string
	Ref       string
	Version   string
	Commit    string
	Epoch     int64
	Platforms string
}

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "push" {
		return runPush(ctx, args[1:])
	}
	if len(args) == 0 || (args[0] != "agent" && args[0] != "controller" && args[0] != "pause" && args[0] != "probe") {
		return fmt.Errorf("usage: image agent|controller|pause|probe|push [flags]")
	}
	o := options{Kind: args[0]}
	fs := flag.NewFlagSet("image "+o.Kind, flag.ContinueOnError)
	fs.StringVar(&o.Root, "root", "../..", "The kubectl-dkc repository, whose programs the agent and controller images hold.")
	fs.StringVar(&o.Binary, "binary", "", "Use this agent or controller binary (static, as dkcBinary names it) instead of building one; needs a single -platforms entry.")
	fs.StringVar(&o.Out, "o", "", "The OCI image archive to write (required).")
	fs.StringVar(&o.Ref, "name", "", "The image's name in the archive (default "+DefaultAgentRepo+":VERSION, "+DefaultControllerRepo+":VERSION, "+DefaultPauseRef+" or "+DefaultProbeRef+").")
	fs.StringVar(&o.Version, "version", "v0.0.0-dev", "Version stamped into the agent or controller binary, and its image's tag.")
	fs.StringVar(&o.Commit, "commit", "unknown", "Git commit stamped into the agent or controller binary.")
	fs.Int64Var(&o.Epoch, "epoch", 0, "Unix time of every timestamp in the image, such as the commit's.")
	fs.StringVar(&o.Platforms, "platforms", "linux/amd64,linux/arm64", "Comma-separated os/arch list.")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if o.Out == "" {
		return fmt.Errorf("-o is required: the archive to write")
	}
	if o.Ref == "" {
		o.Ref = defaultRef(o.Kind, o.Version)
	}
	d, err := build(ctx, o)
	if err != nil {
		return err
	}
	st, err := os.Stat(o.Out)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s %s (%d bytes)\n", o.Out, o.Ref, d, st.Size())
	return nil
}

// defaultRef is the name of kind's image when -name is not given.
func defaultRef(kind, version string) string {
	switch kind {
	case "agent":
		return DefaultAgentRepo + ":" + version
	case "controller":
		return DefaultControllerRepo + ":" + version
	case "probe":
		return DefaultProbeRef
	}
	return DefaultPauseRef
}

// build writes the archive and returns the image index's digest.
func build(ctx context.Context, o options) (v1.Hash, error) {
	platforms, err := parsePlatforms(o.Platforms)
	if err != nil {
		return v1.Hash{}, err
	}
	if o.Binary != "" && len(platforms) != 1 {
		return v1.Hash{}, fmt.Errorf("-binary needs exactly one -platforms entry, got %q", o.Platforms)
	}
	epoch := time.Unix(o.Epoch, 0).UTC()
	work, err := os.MkdirTemp("", "dkc-image-bin-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(work)
	here, err := os.Getwd()
	if err != nil {
		return v1.Hash{}, err
	}
	images := map[platform]v1.Image{}
	for _, p := range platforms {
		var spec imageSpec
		switch o.Kind {
		case "agent", "controller":
			spec, err = dkcSpec(ctx, o, p, epoch, work)
		case "probe":
			spec, err = programSpec(ctx, here, "probe", "kubectl-dkc-probe", p, epoch, work)
		default:
			spec, err = programSpec(ctx, here, "pause", "kubectl-dkc-pause", p, epoch, work)
		}
		if err != nil {
			return v1.Hash{}, err
		}
		if images[p], err = newImage(spec); err != nil {
			return v1.Hash{}, fmt.Errorf("image for %s: %w", p, err)
		}
	}
	idx, err := newIndex(images, platforms)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := writeArchive(o.Out, idx, o.Ref, epoch); err != nil {
		return v1.Hash{}, fmt.Errorf("write %s: %w", o.Out, err)
	}
	return idx.Digest()
}

// dkcBinary is the program of kind's image. The agent's is the slim
// kubectl-dkc-agent (./cmd/kubectl-dkc-agent) when the repository has it,
// else kubectl-dkc with the agent subcommand; the controller's is
// kubectl-dkc with the controller subcommand. Either way a pod's args are
// the program's flags only.
func dkcBinary(root, kind string) (pkg, name string, entrypoint []string) {
	if kind == "controller" {
		return ".", "kubectl-dkc", []string{"/kubectl-dkc", "controller"}
	}
	if st, err := os.Stat(filepath.Join(root, "cmd", "kubectl-dkc-agent")); err == nil && st.IsDir() {
		return "./cmd/kubectl-dkc-agent", "kubectl-dkc-agent", []string{"/kubectl-dkc-agent"}
	}
	return ".", "kubectl-dkc", []string{"/kubectl-dkc", "agent"}
}

// dkcSpec is the agent's or the controller's image: its binary
// (dkcBinary), plus an /etc/passwd and /etc/group that name root and
// nobody, and a /tmp. No shell, no package manager, no CA bundle: both
// reach the apiserver with the pod's service account CA.
func dkcSpec(ctx context.Context, o options, p platform, epoch time.Time, work string) (imageSpec, error) {
	pkg, name, entrypoint := dkcBinary(o.Root, o.Kind)
	bin := o.Binary
	if bin == "" {
		bin = filepath.Join(work, name+"-"+p.OS+"-"+p.Arch)
		ldflags := "-s -w" +
			" -X github.com/kubectl-dkc/dkc/pkg/version.version=" + o.Version +
			" -X github.com/kubectl-dkc/dkc/pkg/version.gitCommit=" + o.Commit +
			" -X github.com/kubectl-dkc/dkc/pkg/version.buildDate=" + epoch.Format(time.RFC3339)
		if err := goBuild(ctx, o.Root, pkg, p, ldflags, bin); err != nil {
			return imageSpec{}, err
		}
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return imageSpec{}, err
	}
	return imageSpec{
		Platform: p,
		Epoch:    epoch,
		Files: []file{
			{Name: "etc", Mode: 0o755, Dir: true},
			{Name: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
			{Name: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
			{Name: "tmp", Mode: 0o1777, Dir: true},
			{Name: name, Mode: 0o755, Data: b},
		},
		Entrypoint: entrypoint,
		Labels: map[string]string{
			"org.opencontainers.image.title":    "kubectl-dkc-" + o.Kind,
			"org.opencontainers.image.source":   sourceURL,
			"org.opencontainers.image.version":  o.Version,
			"org.opencontainers.image.revision": o.Commit,
			"org.opencontainers.image.created":  epoch.Format(time.RFC3339),
		},
	}, nil
}

// programSpec is the image of one static program of this module, the main
// package ./name, as /name and the image's entrypoint: the CRI sandbox
// image (pause) and the readiness-probe target of the e2e tests (probe).
func programSpec(ctx context.Context, here, name, title string, p platform, epoch time.Time, work string) (imageSpec, error) {
	bin := filepath.Join(work, name+"-"+p.OS+"-"+p.Arch)
	if err := goBuild(ctx, here, "./"+name, p, "-s -w", bin); err != nil {
		return imageSpec{}, err
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return imageSpec{}, err
	}
	return imageSpec{
		Platform:   p,
		Epoch:      epoch,
		Files:      []file{{Name: name, Mode: 0o755, Data: b}},
		Entrypoint: []string{"/" + name},
		Labels: map[string]string{
			"org.opencontainers.image.title":   title,
			"org.opencontainers.image.source":  sourceURL,
			"org.opencontainers.image.created": epoch.Format(time.RFC3339),
		},
	}, nil
}
