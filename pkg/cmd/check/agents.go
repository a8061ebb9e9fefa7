package check

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/nodehealth"
	"github.com/kubectl-dkc/dkc/pkg/source"
	dkcstatus "github.com/kubectl-dkc/dkc/pkg/status"
)

// checkAgents checks one Ready agent per node, at version v. An agent
// whose version cannot be read from a pod (a systemd agent) but that
// reports on its node is a warning.
func checkAgents(nodes []corev1.Node, pods []corev1.Pod, v string, now time.Time) Result {
	r := Result{Name: "agents"}
	byNode := map[string]*corev1.Pod{}
	for i := range pods {
		if n := pods[i].Spec.NodeName; n != "" && pods[i].DeletionTimestamp == nil {
			byNode[n] = &pods[i]
		}
	}
	var missing, notReady, other, unknown []string
	for i := range nodes {
		n := &nodes[i]
		p, ok := byNode[n.Name]
		switch {
		case !ok && dkcstatus.Agent(n, now) != dkcstatus.AgentNone:
			unknown = append(unknown, n.Name)
		case !ok:
			missing = append(missing, n.Name)
		case !nodehealth.PodReady(p):
			notReady = append(notReady, n.Name)
		default:
			if got := imageTag(p); got != v {
				other = append(other, fmt.Sprintf("%s (%s)", n.Name, orUnknown(got)))
			}
		}
	}
	var msgs, hints []string
	if len(missing) > 0 {
		msgs = append(msgs, "no agent on "+strings.Join(missing, ", "))
		hints = append(hints, "run the agent on every node (docs/install.md)")
	}
	if len(notReady) > 0 {
		msgs = append(msgs, "agent not Ready on "+strings.Join(notReady, ", "))
		hints = append(hints, "kubectl describe pod -A -l "+agentSelector+" says why one is not Ready")
	}
	if len(other) > 0 {
		msgs = append(msgs, "agent at another version than "+v+" on "+strings.Join(other, ", "))
		hints = append(hints, "run the agent image of the same version as kubectl dkc (docs/install.md, The image)")
	}
	switch {
	case len(msgs) > 0:
		r.Status, r.Message, r.Hint = Fail, strings.Join(msgs, "; "), strings.Join(hints, "; ")
	case len(unknown) > 0:
		r.Status = Warn
		r.Message = fmt.Sprintf("agents without a pod (systemd units) report on %s: their version cannot be known from the API", strings.Join(unknown, ", "))
		r.Hint = "on each node: kubectl-dkc-agent version"
	default:
		r.Status, r.Message = OK, fmt.Sprintf("%d of %d nodes run a Ready agent at %s", len(nodes), len(nodes), v)
	}
	return r
}

// imageTag is the tag of a pod's first container's image, "" without one.
func imageTag(p *corev1.Pod) string {
	if len(p.Spec.Containers) == 0 {
		return ""
	}
	image, _, _ := strings.Cut(p.Spec.Containers[0].Image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "no tag"
	}
	return s
}

// agentForbidden are what the agent's ServiceAccount must not be allowed
// (docs/security.md, "The agent's permissions").
var agentForbidden = []struct {
	verb, group, resource, sub, namespace string
}{
	{verb: "get", resource: "secrets"},
	{verb: "list", resource: "secrets"},
	{verb: "get", resource: "nodes", sub: "proxy"},
	{verb: "update", resource: "nodes"},
	{verb: "delete", resource: "nodes"},
	{verb: "create", resource: "pods", sub: "exec"},
	{verb: "create", resource: "serviceaccounts", sub: "token"},
	{verb: "update", resource: "configmaps", namespace: source.DefaultNamespace},
	{verb: "create", group: "kubectl-dkc.io", resource: "nodeconfigrollouts", namespace: source.DefaultNamespace},
}

// checkAgentPermissions asks the apiserver (SubjectAccessReviews) whether
// the agents' ServiceAccount may do what it must not.
func (o *Options) checkAgentPermissions(ctx context.Context, agents []corev1.Pod) Result {
	r := Result{Name: "agent permissions"}
	accounts := map[string]bool{}
	for _, p := range agents {
		sa := p.Spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		accounts["system:serviceaccount:"+p.Namespace+":"+sa] = true
	}
	if len(accounts) == 0 {
		r.Status, r.Message = Warn, "no agent pod: the permissions of a systemd agent's credential cannot be known from here"
		return r
	}
	var wider []string
	for user := range accounts {
		ns := strings.Split(user, ":")[2]
		for _, f := range agentForbidden {
			groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
			allowed, err := mayDo(ctx, o.Client, user, groups, &authorizationv1.ResourceAttributes{
				Verb: f.verb, Group: f.group, Resource: f.resource, Subresource: f.sub, Namespace: f.namespace,
			})
			if err != nil {
				r.Status, r.Message = Warn, fmt.Sprintf("cannot be known: %v", err)
				r.Hint = "run check with a credential that may create subjectaccessreviews"
				return r
			}
			if allowed {
				what := f.resource
				if f.sub != "" {
					what += "/" + f.sub
				}
				wider = append(wider, fmt.Sprintf("%s may %s %s", user, f.verb, what))
			}
		}
	}
	if len(wider) > 0 {
		r.Status, r.Message = Fail, "wider than documented: "+strings.Join(wider, "; ")
		r.Hint = "bind the agent's ServiceAccount to deploy/rbac.yaml's roles only (docs/security.md, \"The agent's permissions\")"
		return r
	}
	r.Status, r.Message = OK, fmt.Sprintf("no wider than documented (%d denials checked)", len(agentForbidden))
	return r
}

// appliesDropIn reports whether an agent pod runs with --apply-mode=dropin.
func appliesDropIn(agents []corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, p := range agents {
		for _, c := range p.Spec.Containers {
			for _, a := range c.Args {
				if a == "--apply-mode=dropin" {
					out[p.Spec.NodeName] = true
				}
			}
		}
	}
	return out
}

// mayDo asks the apiserver whether user, in groups, may do attrs.
func mayDo(ctx context.Context, client kubernetes.Interface, user string, groups []string, attrs *authorizationv1.ResourceAttributes) (bool, error) {
	r, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: attrs},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}
