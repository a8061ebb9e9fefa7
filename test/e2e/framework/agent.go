package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// AgentIdentity is the user the dkc agent runs as in the harness: the
// ServiceAccount of deploy/rbac.yaml, as a client certificate's user name,
// which RBAC's ServiceAccount subjects match.
const AgentIdentity = "system:serviceaccount:kube-system:dkc-agent"

// ApplyManifest creates every object of a multi-document YAML file, such as
// deploy/rbac.yaml. With dryRun the apiserver validates and admits each
// object without storing it.
func (c *Cluster) ApplyManifest(ctx context.Context, path string, dryRun bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	opts := metav1.CreateOptions{FieldManager: "dkc-harness"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: %s %s: %w", path, gvk.Kind, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := ri.Create(ctx, &obj, opts); err != nil {
			return fmt.Errorf("%s: create %s %s/%s: %w", path, gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// AgentOptions are the flags that differ between agents in the harness.
type AgentOptions struct {
	// Kubeconfig of the agent; see Cluster.UserKubeconfig(AgentIdentity).
	Kubeconfig string
	// ApplyMode is replace (default) or dropin.
	ApplyMode string
	// HealthTimeout and TrialDuration default to 20s and 10m.
	HealthTimeout time.Duration
	TrialDuration time.Duration
	// RequireAdmissionPolicy keeps the agent's default
	// --require-admission-policy=true: it applies nothing until
	// deploy/admission-policy.yaml confines its credential. Without it the
	// agent runs with --require-admission-policy=false, for the clusters
	// that have no policy installed (most tests).
	RequireAdmissionPolicy bool
	// Extra flags, appended last.
	Extra []string
}

// AgentStoreDir is where the node's agent keeps its checkpoint store.
func (n *Node) AgentStoreDir() string { return filepath.Join(n.Dir, "dkc") }

// AgentArgs returns the arguments of `kubectl-dkc agent` for this node in
// exec mode: the harness's restart command, the node's kubelet config and
// config dir, metrics and healthz on the node's address (ports 10390/10391),
// and --require-admission-policy=false unless o.RequireAdmissionPolicy.
func (n *Node) AgentArgs(o AgentOptions) []string {
	if o.ApplyMode == "" {
		o.ApplyMode = "replace"
	}
	if o.HealthTimeout == 0 {
		o.HealthTimeout = 20 * time.Second
	}
	if o.TrialDuration == 0 {
		o.TrialDuration = 10 * time.Minute
	}
	args := []string{"agent",
		"--kubeconfig", o.Kubeconfig,
		"--node-name", n.Name,
		"--dynamic-config-dir", n.AgentStoreDir(),
		"--kubelet-config", n.ConfigPath,
		"--kubelet-config-dir", n.ConfigDir,
		"--kubelet-root-dir", filepath.Join(n.Dir, "kubelet"),
		"--apply-mode", o.ApplyMode,
		"--restart=exec", "--restart-command", n.RestartCommand,
		"--health-timeout", o.HealthTimeout.String(),
		"--trial-duration", o.TrialDuration.String(),
		"--metrics-bind-address", n.IP + ":10390",
		"--health-bind-address", n.IP + ":10391",
		"--kubelet-certificate-authority", n.KubeletCAFile(),
		"--kubelet-tls-server-name", n.Name,
	}
	if !o.RequireAdmissionPolicy {
		args = append(args, "--require-admission-policy=false")
	}
	return append(args, o.Extra...)
}

// KubeletCAFile is the kubelet's self-signed serving certificate, which the
// kubelet writes to its --cert-dir at its first start and keeps. It verifies
// the kubelet (as its own CA) under the node's name, not its address.
func (n *Node) KubeletCAFile() string { return filepath.Join(n.Dir, "pki", "kubelet.crt") }

// Agent is a dkc agent process the harness started in a node's namespaces.
type Agent struct {
	LogPath string
	p       *process
}

// StartAgent starts binary with args inside the node's network and mount
// namespace, logging to the node's agent.log. The cluster's Stop ends it.
func (n *Node) StartAgent(binary string, args []string) (*Agent, error) {
	cmd := n.Command(binary, args...)
	p := n.cluster.newProcess(n.Name+"-agent", cmd.Args, false)
	p.logPath = filepath.Join(n.Dir, "agent.log")
	if err := p.start(); err != nil {
		return nil, err
	}
	a := &Agent{LogPath: p.logPath, p: p}
	n.agents = append(n.agents, a)
	return a, nil
}

// PID is the agent's PID, or 0 once it ended.
func (a *Agent) PID() int { return a.p.pid() }

// Stop ends the agent with SIGTERM (SIGKILL after 15s) and waits for it.
func (a *Agent) Stop() error { return a.p.stop(15 * time.Second) }

// Kill ends the agent with SIGKILL, as a crash would, and waits for it.
func (a *Agent) Kill() error {
	_ = a.p.signal(syscall.SIGKILL)
	return a.p.stop(15 * time.Second)
}

// InstallCRDs applies the CustomResourceDefinitions of path (such as
// deploy/crds.yaml) and waits until the apiserver serves each of them.
func (c *Cluster) InstallCRDs(ctx context.Context, path string) error {
	if err := c.ApplyManifest(ctx, path, false); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	list, err := crds.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, crd := range list.Items {
		name := crd.GetName()
		err := poll(ctx, 30*time.Second, func() (bool, error) {
			got, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, cond := range conds {
				if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("crd %s not established: %w", name, err)
		}
	}
	return nil
}
