package check

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/kubectl-dkc/dkc/pkg/flagz"
)

// checkNode checks one node's kubelet: its version, its drop-in directory
// and the flags that set config fields. dropin names the nodes whose agent
// runs with --apply-mode=dropin.
func (o *Options) checkNode(ctx context.Context, n *corev1.Node, dropin map[string]bool) []Result {
	name := "node/" + n.Name
	out := []Result{judgeKubelet(name, n.Status.NodeInfo.KubeletVersion)}
	flags, err := flagz.Read(ctx, o.Client.CoreV1().RESTClient(), n.Name)
	if err != nil {
		why := err.Error()
		hint := ""
		switch {
		case errors.Is(err, flagz.ErrNotServed):
			why = fmt.Sprintf("kubelet %s serves no /flagz", n.Status.NodeInfo.KubeletVersion)
			hint = "kubelets serve /flagz from 1.36 on (feature gate ComponentFlagz)"
		case apierrors.IsForbidden(err):
			hint = "reading a kubelet's /flagz needs get on nodes/proxy"
		}
		return append(out,
			Result{Name: name + " drop-in", Status: Warn, Message: "whether the kubelet has --config-dir cannot be known: " + why, Hint: hint},
			Result{Name: name + " flags", Status: Warn, Message: "which config fields the kubelet's flags set cannot be known: " + why, Hint: hint})
	}
	return append(out, judgeDropIn(name, flags, dropin[n.Name]), judgeFlags(name, flags))
}

// judgeKubelet holds a kubelet's version to the supported range.
func judgeKubelet(name, gitVersion string) Result {
	r := Result{Name: name + " kubelet"}
	v, err := utilversion.ParseGeneric(gitVersion)
	switch {
	case err != nil:
		r.Status, r.Message = Warn, fmt.Sprintf("version %q: not a version dkc can judge", gitVersion)
	case v.LessThan(minKubelet) || maxKubelet.LessThan(utilversion.MajorMinor(v.Major(), v.Minor())):
		r.Status, r.Message = Warn, fmt.Sprintf("%s, outside the supported 1.34 to 1.37", gitVersion)
		r.Hint = "docs/install.md, Versions"
	default:
		r.Status, r.Message = OK, fmt.Sprintf("%s (supported: 1.34 to 1.37)", gitVersion)
	}
	return r
}

// judgeDropIn reads --config-dir from the kubelet's flags: an agent in
// dropin mode needs it.
func judgeDropIn(name string, flags map[string]string, agentDropIn bool) Result {
	r := Result{Name: name + " drop-in"}
	dir := flags[flagz.ConfigDirFlag]
	switch {
	case dir != "":
		r.Status, r.Message = OK, fmt.Sprintf("--config-dir=%s: drop-in and replace mode both work", dir)
	case agentDropIn:
		r.Status, r.Message = Fail, "the agent runs with --apply-mode=dropin, but the kubelet has no --config-dir: its drop-ins are never read"
		r.Hint = "give the kubelet --config-dir (docs/install.md, Enabling the kubelet's --config-dir), or run the agent with --apply-mode=replace"
	default:
		r.Status, r.Message = OK, "no --config-dir: replace mode only"
	}
	return r
}

// judgeFlags names the config fields the kubelet's flags set: no config
// can change them.
func judgeFlags(name string, flags map[string]string) Result {
	r := Result{Name: name + " flags"}
	shadowed := flagz.Shadowed(flags)
	if len(shadowed) == 0 {
		r.Status, r.Message = OK, fmt.Sprintf("no flag sets a config field (of the %d whose flag defaults are known)", len(flagz.Fields))
		return r
	}
	s := make([]string, len(shadowed))
	for i, sh := range shadowed {
		s[i] = sh.String()
	}
	r.Status = Warn
	r.Message = "set by a flag, so no config can change them: " + strings.Join(s, ", ")
	r.Hint = "to manage these fields with dkc, remove the flags from the kubelet's command line (kubeadm: KUBELET_EXTRA_ARGS, kubeletExtraArgs) and set the fields in its config"
	return r
}
