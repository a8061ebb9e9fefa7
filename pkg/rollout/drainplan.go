package rollout

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubectl-dkc/dkc/pkg/configz"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// DrainNeed is one node whose config change needs it drained.
type DrainNeed struct {
	Node    string
	Changes []kubeletconfig.Change
}

// DrainPlanner finds the nodes a rollout must drain: those where the
// target config changes a resource manager policy (DrainClass) from what
// the node runs now. What a node runs is read from the ConfigMap its status
// names active, or, for a node on its local config, from its /configz
// (only when the target sets such a policy at all, so that a fleet that
// needs no drain costs no configz call).
type DrainPlanner struct {
	Client kubernetes.Interface
	// Warn receives what the planner could not find out.
	Warn func(format string, args ...any)

	// cache holds each ConfigMap's decoded config, and failed what could
	// not be read for good: a ConfigMap that does not exist or does not
	// decode. A fleet whose nodes report a deleted ConfigMap active then
	// costs one GET, not one per node.
	cache  map[string]*kubeletconfigv1beta1.KubeletConfiguration
	failed map[string]error
}

// Plan returns the nodes among nodes that need a drain to go from what they
// run to target (nil: their local config, which the planner cannot read:
// then only a policy the node runs now counts as a change).
func (p *DrainPlanner) Plan(ctx context.Context, nodes []corev1.Node, target *corev1.NodeConfigSource) ([]DrainNeed, error) {
	var newCfg *kubeletconfigv1beta1.KubeletConfiguration
	if target != nil {
		cfg, err := p.configMapConfig(ctx, target)
		if err != nil {
			return nil, err
		}
		newCfg = cfg
	}
	var needs []DrainNeed
	for i := range nodes {
		node := &nodes[i]
		oldCfg, err := p.running(ctx, node, SetsDrainField(newCfg))
		if err != nil {
			return nil, err
		}
		if changes := DrainChanges(oldCfg, newCfg); len(changes) > 0 {
			needs = append(needs, DrainNeed{Node: node.Name, Changes: changes})
		}
	}
	return needs, nil
}

// running returns the config node runs: its active ConfigMap's, or with
// askKubelet its /configz, or nil (the defaults).
func (p *DrainPlanner) running(ctx context.Context, node *corev1.Node, askKubelet bool) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	st, _, err := source.Status(node)
	if err != nil {
		return nil, err
	}
	if st != nil && st.Active != nil && st.Active.ConfigMap != nil {
		active := st.Active.DeepCopy()
		active.ConfigMap.UID, active.ConfigMap.ResourceVersion = "", ""
		cfg, err := p.configMapConfig(ctx, active)
		if err != nil {
			p.warn("node/%s: cannot read the config it runs (%v); assuming the kubelet's defaults", node.Name, err)
			return nil, nil
		}
		return cfg, nil
	}
	if !askKubelet {
		return nil, nil
	}
	cfg, err := p.kubeletConfig(ctx, node)
	if err != nil {
		p.warn("node/%s: cannot read its local config through /configz (%v); assuming the kubelet's defaults", node.Name, err)
		return nil, nil
	}
	return cfg, nil
}

// kubeletConfig returns the config node's kubelet runs, read from its
// /configz through the apiserver's node proxy.
func (p *DrainPlanner) kubeletConfig(ctx context.Context, node *corev1.Node) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	return configz.Running(ctx, p.Client.CoreV1().RESTClient(), node.Name)
}

// configMapConfig decodes the kubelet config src names, once per ConfigMap.
// A ConfigMap that is missing or does not decode is asked for once too;
// other errors (perhaps passing) are not remembered.
func (p *DrainPlanner) configMapConfig(ctx context.Context, src *corev1.NodeConfigSource) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	key := status.FormatSource(src, false)
	if cfg, ok := p.cache[key]; ok {
		return cfg, nil
	}
	if err, ok := p.failed[key]; ok {
		return nil, err
	}
	fail := func(err error) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
		if p.failed == nil {
			p.failed = map[string]error{}
		}
		p.failed[key] = err
		return nil, err
	}
	ref := src.ConfigMap
	cm, err := p.Client.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		err = fmt.Errorf("get configmap %s/%s: %w", ref.Namespace, ref.Name, err)
		if apierrors.IsNotFound(err) {
			return fail(err)
		}
		return nil, err
	}
	payload, err := source.Payload(cm, ref.KubeletConfigKey)
	if err != nil {
		return fail(err)
	}
	cfg, _, err := kubeletconfig.Decode(payload, kubeletconfig.DecodeOptions{AllowUnknownFields: true})
	if err != nil {
		return fail(fmt.Errorf("configmap %s/%s: %w", ref.Namespace, ref.Name, err))
	}
	if p.cache == nil {
		p.cache = map[string]*kubeletconfigv1beta1.KubeletConfiguration{}
	}
	p.cache[key] = cfg
	return cfg, nil
}

func (p *DrainPlanner) warn(format string, args ...any) {
	if p.Warn != nil {
		p.Warn(format, args...)
	}
}
