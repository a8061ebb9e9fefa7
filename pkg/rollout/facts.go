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
	"github.com/kubectl-dkc/dkc/pkg/flagz"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// FactsReader gathers, from the apiserver, the Facts that Plan needs: the
// configs of the ConfigMaps the nodes report active and of an undo's
// targets, and, when it may (Kubelets), what the kubelets run, from their
// /configz, and the flags of those whose Node does not record them, from
// their /flagz. A kubelet is asked only when its answer can change the
// plan: /configz when the config sets node-specific fields (every node is
// read), or when a target sets a resource manager policy and the node runs
// no ConfigMap that could be read; /flagz when the config sets a field a
// flag can set (flagz.ReadUnrecorded). What it cannot read it leaves out of
// the facts, with a warning for /configz; Plan treats it as the rules say.
type FactsReader struct {
	Client kubernetes.Interface
	// Kubelets allows reading /configz and /flagz through the apiserver's
	// node proxy (the CLI; the controller holds no nodes/proxy).
	Kubelets bool
	// Warn receives what the reader could not find out.
	Warn func(format string, args ...any)

	// cache holds each ConfigMap's decoded config, and failed what could
	// not be read for good: a ConfigMap that does not exist or does not
	// decode. A fleet whose nodes report a deleted ConfigMap active then
	// costs one GET, not one per node.
	cache  map[string]*kubeletconfigv1beta1.KubeletConfiguration
	failed map[string]error
}

// Read returns the facts about nodes for a rollout of payload (the
// config's bytes; nil for local configs or an undo) or of targets (an
// undo's, per node). Its only error is a node's carrier status that does
// not parse.
func (p *FactsReader) Read(ctx context.Context, nodes []corev1.Node, payload []byte, targets []*corev1.NodeConfigSource) (Facts, error) {
	facts := Facts{Nodes: nodes, Payload: payload, Configs: map[string]*kubeletconfigv1beta1.KubeletConfiguration{}}
	setsDrain := false
	if cfg, _, err := kubeletconfig.Decode(payload, kubeletconfig.DecodeOptions{AllowUnknownFields: true}); err == nil && payload != nil {
		setsDrain = SetsDrainField(cfg)
	}
	for _, t := range targets {
		if t == nil || t.ConfigMap == nil {
			continue
		}
		cfg, err := p.configMapConfig(ctx, t)
		if err != nil {
			p.warn("cannot read %s, a target of the rollout (%v); assuming the kubelet's defaults", DescribeTarget(t), err)
			continue
		}
		facts.Configs[ConfigKey(t)] = cfg
		setsDrain = setsDrain || SetsDrainField(cfg)
	}
	if p.Kubelets && payload != nil {
		facts.Flags = flagz.ReadUnrecorded(ctx, p.Client.CoreV1().RESTClient(), source.NodePointers(nodes), payload)
	}
	askAll := p.Kubelets && len(nodes) > 1 && len(setNodeSpecific(payload)) > 0
	for i := range nodes {
		node := &nodes[i]
		known := false
		st, _, err := source.Status(node)
		if err != nil {
			return facts, err
		}
		if st != nil && st.Active != nil && st.Active.ConfigMap != nil {
			active := st.Active.DeepCopy()
			active.ConfigMap.UID, active.ConfigMap.ResourceVersion = "", ""
			if cfg, err := p.configMapConfig(ctx, active); err != nil {
				p.warn("node/%s: cannot read the config it runs (%v); assuming the kubelet's defaults", node.Name, err)
			} else {
				facts.Configs[ConfigKey(active)] = cfg
				known = true
			}
		}
		if !p.Kubelets || !(askAll || (setsDrain && !known)) {
			continue
		}
		cfg, err := p.kubeletConfig(ctx, node)
		if err != nil {
			p.warn("node/%s: cannot read its config through /configz (%v); it is left out of the check for node-specific fields, and a change of a resource manager policy drains it", node.Name, err)
			continue
		}
		if facts.Live == nil {
			facts.Live = map[string]*kubeletconfigv1beta1.KubeletConfiguration{}
		}
		facts.Live[node.Name] = cfg
	}
	return facts, nil
}

// kubeletConfig returns the config node's kubelet runs, read from its
// /configz through the apiserver's node proxy.
func (p *FactsReader) kubeletConfig(ctx context.Context, node *corev1.Node) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	return configz.Running(ctx, p.Client.CoreV1().RESTClient(), node.Name)
}

// configMapConfig decodes the kubelet config src names, once per ConfigMap.
// A ConfigMap that is missing or does not decode is asked for once too;
// other errors (perhaps passing) are not remembered.
func (p *FactsReader) configMapConfig(ctx context.Context, src *corev1.NodeConfigSource) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
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

func (p *FactsReader) warn(format string, args ...any) {
	if p.Warn != nil {
		p.Warn(format, args...)
	}
}
