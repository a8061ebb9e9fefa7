package check

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/controller"
	"github.com/kubectl-dkc/dkc/pkg/nodehealth"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
)

// checkCRDs checks that the apiserver serves dkc's custom resources.
func (o *Options) checkCRDs() Result {
	r := Result{Name: "custom resources"}
	gv := rollout.Resource.GroupVersion().String()
	list, err := o.Client.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil && !apierrors.IsNotFound(err) {
		r.Status, r.Message = Fail, fmt.Sprintf("discover %s: %v", gv, err)
		return r
	}
	served := map[string]bool{}
	if list != nil {
		for _, res := range list.APIResources {
			served[res.Name] = true
		}
	}
	var missing []string
	for _, res := range []string{rollout.Resource.Resource, pool.Resource.Resource} {
		if !served[res] {
			missing = append(missing, res+"."+rollout.Resource.Group)
		}
	}
	if len(missing) > 0 {
		r.Status, r.Message, r.Hint = Fail, "not served: "+strings.Join(missing, ", "), installHint
		return r
	}
	r.Status, r.Message = OK, fmt.Sprintf("%s and %s served (%s)", rollout.Resource.Resource, pool.Resource.Resource, gv)
	return r
}

// checkController checks that a controller holds a fresh Lease and that
// its pods are Ready. Without any controller the CLI drives rollouts with
// --wait, and pools are not driven: a warning.
func (o *Options) checkController(ctx context.Context) Result {
	r := Result{Name: "controller"}
	lead, err := controller.Leader(ctx, o.Client, o.Namespace, o.Now())
	if err != nil {
		r.Status, r.Message = Fail, err.Error()
		return r
	}
	pods, err := o.Client.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: controllerSelector})
	if err != nil {
		r.Status, r.Message = Fail, fmt.Sprintf("list the controller's pods: %v", err)
		return r
	}
	ready := 0
	for i := range pods.Items {
		if nodehealth.PodReady(&pods.Items[i]) {
			ready++
		}
	}
	total := len(pods.Items)
	switch {
	case lead == "" && total == 0:
		r.Status = Warn
		r.Message = fmt.Sprintf("no controller runs in namespace %s: rollouts run only with --wait, and no pool is driven", o.Namespace)
		r.Hint = installHint
	case lead == "":
		r.Status = Fail
		r.Message = fmt.Sprintf("no replica holds the Lease %s/%s (%d of %d pods Ready)", o.Namespace, controller.LeaseName, ready, total)
		r.Hint = fmt.Sprintf("read its log: kubectl -n %s logs -l %s", o.Namespace, controllerSelector)
	case ready < total:
		r.Status = Warn
		r.Message = fmt.Sprintf("%s leads; %d of %d pods Ready", lead, ready, total)
		r.Hint = fmt.Sprintf("kubectl -n %s get pods -l %s", o.Namespace, controllerSelector)
	default:
		r.Status, r.Message = OK, fmt.Sprintf("%s leads (Lease %s/%s fresh); %d of %d pods Ready", lead, o.Namespace, controller.LeaseName, ready, total)
	}
	return r
}
