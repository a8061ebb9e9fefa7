package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// settle keeps the assigned config, which the kubelet runs (decideSettle):
// it gates the config in trial on the kubelet's health once after the agent
// started (d.verify), or else holds the node to its baseline during the
// trial (d.trialCheck), rolling back when either fails, then promotes the
// config when its trial is over (trial) and reports it.
func (a *Agent) settle(ctx context.Context, node *corev1.Node, o *observed, d decision) outcome {
	st, c := o.st, o.carrier
	if d.verify && a.verify != nil {
		// The agent started during this config's trial, perhaps killed
		// between a restart and its health gate: gate it now.
		since := *a.verify
		a.verify = nil
		klog.FromContext(ctx).Info("Verifying the kubelet's health on the config in trial", "assigned", describe(st.Assigned))
		err := a.probe(ctx, o.file.effective, since, nil)
		if err == nil {
			err = a.awaitPods(ctx, st.Baseline, since)
		}
		if err != nil {
			if ctx.Err() != nil {
				return outcome{err: ctx.Err()}
			}
			return a.rollback(ctx, c, st.Assigned, a.Clock.Now(), err)
		}
	}
	a.verify = nil
	if d.trialCheck {
		// In trial: the node must stay as fine as before the restart.
		if err := a.checkTrial(ctx, node, st.Baseline); err != nil {
			return a.rollback(ctx, c, st.Assigned, a.Clock.Now(), err)
		}
	}
	requeue, st, err := a.trial(ctx, st)
	if err != nil {
		return outcome{err: err}
	}
	r := a.okReport(c, st, o.file)
	return outcome{requeue: requeue, report: &r}
}
