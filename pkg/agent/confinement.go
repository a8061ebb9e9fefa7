package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// The confinement check: before the agent applies anything, it makes sure
// that the admission policies of deploy/admission-policy.yaml are in force
// for its identity, so that a stolen agent token changes nothing but dkc's
// state on one Node. It asks the apiserver, with server-side dry-runs
// (dryRun=All, nothing is stored), whether its credential may write
// another Node and whether it may set a label on its own Node. While it may,
// it reports ReasonUnconfined (an error log, an Event and the condition) and
// starts no sync; it checks again every Confinement.Interval.
//
// A node's own credential (system:node:NAME, the systemd unit's) is not
// checked: NodeRestriction confines it to its Node, and there the kubelet
// legitimately sets labels.

// ReasonUnconfined (False): the agent's credential may write what the
// admission policies should forbid it (another Node, a label on its own);
// the agent applies no config until they are in force.
const ReasonUnconfined = "Unconfined"

// DefaultConfinementInterval is how often an unconfined agent checks again.
const DefaultConfinementInterval = 30 * time.Second

// confinementProbeKey is the label and annotation the dry-run writes set.
const confinementProbeKey = source.Prefix + "confinement-check"

// IdentityReviewer says who the agent's credential authenticates as.
type IdentityReviewer interface {
	Review(ctx context.Context) (authenticationv1.UserInfo, error)
}

// Confinement configures the start-up check; a nil *Confinement on the
// Agent skips it (--require-admission-policy=false).
type Confinement struct {
	// Reviewer is a SelfSubjectReview client (NewSelfSubjectReviewer).
	Reviewer IdentityReviewer
	// Interval between checks while the agent is unconfined; default
	// DefaultConfinementInterval. A check that fails otherwise is retried
	// sooner, from 1s doubling up to Interval.
	Interval time.Duration
}

// confinement is what one check found.
type confinement struct {
	// user is the agent's user name.
	user string
	// nodeCredential is set for a node's own credential: nothing to check.
	nodeCredential bool
	// can lists what the agent may do that the policies forbid it; none
	// when confined.
	can []string
}

// judgeConfinement decides from the answers to the dry-run writes: an
// admitted write is one the agent can make; Forbidden (or Invalid) is one
// that admission (or RBAC) stops; any other answer leaves it unknown, an
// error. other is the Node written in place of "another Node", "" when the
// cluster has no other Node (that write was not tried).
func judgeConfinement(node, other string, otherErr, labelErr error) ([]string, error) {
	var can []string
	var errs []error
	judge := func(err error, what, tried string) {
		switch {
		case err == nil:
			can = append(can, what)
		case apierrors.IsForbidden(err), apierrors.IsInvalid(err):
		default:
			errs = append(errs, fmt.Errorf("dry-run %s: %w", tried, err))
		}
	}
	if other != "" {
		judge(otherErr, fmt.Sprintf("write Node %q", other), fmt.Sprintf("write of Node %q", other))
	}
	judge(labelErr, fmt.Sprintf("set a label on its own Node %q", node), fmt.Sprintf("label of Node %q", node))
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return can, nil
}

// unconfinedMessage is the condition's, the Event's and the log's message.
func unconfinedMessage(c confinement) string {
	return fmt.Sprintf("the agent's credential (%s) can %s: the admission policy kubectl-dkc-agent-own-node "+
		"(deploy/admission-policy.yaml) does not confine it. Apply it with the agent's ClusterRole "+
		"kubectl-dkc:agent (kubectl dkc install, Kubernetes 1.30+) and bind the agent to no role "+
		"with wildcards; on a cluster without admission policies run the agent with "+
		"--require-admission-policy=false. No config is applied until then",
		c.user, strings.Join(c.can, " and "))
}

// checkConfinement asks who the agent is and, unless it is a node's own
// credential, tries the two writes that the policies must refuse.
func (a *Agent) checkConfinement(ctx context.Context) (confinement, error) {
	user, err := a.Confinement.Reviewer.Review(ctx)
	if err != nil {
		return confinement{}, fmt.Errorf("review the agent's identity (SelfSubjectReview): %w", err)
	}
	c := confinement{user: user.Username}
	if strings.HasPrefix(user.Username, "system:node:") {
		c.nodeCredential = true
		return c, nil
	}
	// Any one other Node: the agent never lists them all.
	list, err := a.Client.Nodes().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermNotEqualSelector("metadata.name", a.NodeName).String(),
		Limit:         1,
	})
	if err != nil {
		return c, fmt.Errorf("find another node: %w", err)
	}
	var other string
	var otherErr error
	for _, n := range list.Items {
		if n.Name != a.NodeName {
			other = n.Name
			otherErr = a.dryRunStatus(ctx, other, "annotations")
			break
		}
	}
	labelErr := a.dryRunStatus(ctx, a.NodeName, "labels")
	c.can, err = judgeConfinement(a.NodeName, other, otherErr, labelErr)
	return c, err
}

// dryRunStatus patches confinementProbeKey into the Node's metadata.field
// through nodes/status, as a dry run.
func (a *Agent) dryRunStatus(ctx context.Context, node, field string) error {
	patch := fmt.Sprintf(`{"metadata":{%q:{%q:"dry-run"}}}`, field, confinementProbeKey)
	_, err := a.Client.Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: source.FieldManager, DryRun: []string{metav1.DryRunAll}}, "status")
	return err
}

// awaitConfinement returns true once the admission policies confine the
// agent's identity (at once without a Confinement, or for a node's own
// credential), false when ctx ends first.
func (a *Agent) awaitConfinement(ctx context.Context) bool {
	if a.Confinement == nil {
		return true
	}
	logger := klog.FromContext(ctx)
	interval := a.Confinement.Interval
	if interval <= 0 {
		interval = DefaultConfinementInterval
	}
	retry := time.Second
	reported := ""
	for {
		c, err := a.checkConfinement(ctx)
		wait := interval
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return false
			}
			wait = retry
			retry = min(2*retry, interval)
			logger.Error(err, "Cannot check that the admission policies confine the agent; applying no config until it can", "retryIn", wait)
		case c.nodeCredential:
			logger.Info("Not checking the admission policies: the agent runs with a node's own credential, which NodeRestriction confines to its Node, where the kubelet may set labels", "user", c.user)
			return true
		case len(c.can) == 0:
			logger.Info("The admission policies confine the agent to dkc's state on its own Node", "user", c.user)
			return true
		default:
			retry = time.Second
			msg := unconfinedMessage(c)
			logger.Error(nil, "Unconfined: applying no config", "message", msg, "checkAgainIn", wait)
			if msg != reported {
				if err := a.reportUnconfined(ctx, msg); err != nil {
					logger.Error(err, "Could not report the agent as unconfined on its Node")
				} else {
					reported = msg
				}
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-a.Clock.After(wait):
		}
	}
}

// reportUnconfined sets the condition to ReasonUnconfined and records an
// Event on the Node.
func (a *Agent) reportUnconfined(ctx context.Context, msg string) error {
	node, err := a.Client.Nodes().Get(ctx, a.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %q: %w", a.NodeName, err)
	}
	want := corev1.NodeCondition{Type: source.ConditionType, Status: ConditionStatus(ReasonUnconfined), Reason: ReasonUnconfined, Message: msg}
	cond := source.Condition(source.SetCondition(node.Status.Conditions, want, metav1.NewTime(a.Clock.Now())))
	patch, err := source.ConditionPatch(*cond)
	if err != nil {
		return fmt.Errorf("condition patch: %w", err)
	}
	if _, err := a.Client.Nodes().Patch(ctx, a.NodeName, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: source.FieldManager}, "status"); err != nil {
		return fmt.Errorf("patch node %q status: %w", a.NodeName, err)
	}
	if a.Recorder != nil {
		ref := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
		a.Recorder.Event(ref, corev1.EventTypeWarning, ReasonUnconfined, msg)
	}
	return nil
}

// reviewScheme holds the one type the SelfSubjectReview client sends and
// receives, and meta's Status for errors.
var reviewScheme = runtime.NewScheme()

func init() {
	metav1.AddToGroupVersion(reviewScheme, authenticationv1.SchemeGroupVersion)
	utilruntime.Must(authenticationv1.AddToScheme(reviewScheme))
}

// selfSubjectReviewer asks the apiserver who its credential is:
// POST /apis/authentication.k8s.io/v1/selfsubjectreviews (GA in 1.28).
type selfSubjectReviewer struct {
	client rest.Interface
}

var _ IdentityReviewer = selfSubjectReviewer{}

// NewSelfSubjectReviewer returns an IdentityReviewer for the credential of
// cfg.
func NewSelfSubjectReviewer(cfg *rest.Config) (IdentityReviewer, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/apis"
	c.GroupVersion = &authenticationv1.SchemeGroupVersion
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(reviewScheme).WithoutConversion()
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("self subject review client: %w", err)
	}
	return selfSubjectReviewer{client: client}, nil
}

// Review returns the user the apiserver authenticated.
func (r selfSubjectReviewer) Review(ctx context.Context) (authenticationv1.UserInfo, error) {
	var out authenticationv1.SelfSubjectReview
	err := r.client.Post().Resource("selfsubjectreviews").Body(&authenticationv1.SelfSubjectReview{}).Do(ctx).Into(&out)
	return out.Status.UserInfo, err
}
