package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksOnlyTheAgent keeps the node's binary slim: none of the operator
// commands' heavy dependencies may creep back in (docs/performance.md has
// the memory this saves on every node). Nor may client-go's clientset: any
// package under k8s.io/client-go/kubernetes links its scheme, whose init
// registers every API group (about 9 MiB of idle RSS); the agent's client
// is pkg/kubeclient.
func TestLinksOnlyTheAgent(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	forbidden := []string{
		"k8s.io/cli-runtime/pkg/genericclioptions",
		"k8s.io/cli-runtime/pkg/resource",
		"k8s.io/kubectl/",
		"sigs.k8s.io/kustomize/",
		"k8s.io/client-go/kubernetes",
		"k8s.io/client-go/informers",
		"github.com/kubectl-dkc/dkc/pkg/kubeclient/adapt",
		// configz's jq is the operator's (snapshot), not the health gate's.
		"github.com/itchyny/gojq",
		"github.com/kubectl-dkc/dkc/pkg/cmd/assign",
		"github.com/kubectl-dkc/dkc/pkg/cmd/snapshot",
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(d, f)) || strings.HasPrefix(d, f+"/") {
				t.Errorf("kubectl-dkc-agent links %s", d)
			}
		}
	}
	var agent bool
	for _, d := range deps {
		agent = agent || d == "github.com/kubectl-dkc/dkc/pkg/agent"
	}
	if !agent {
		t.Errorf("kubectl-dkc-agent does not link github.com/kubectl-dkc/dkc/pkg/agent")
	}
}
