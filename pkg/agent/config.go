package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"
	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/nodehealth"
)

// configError is a config that cannot be applied, with the status error
// (an upstream string with detail after it) and the condition reason.
type configError struct {
	reason string
	msg    string
}

func (e *configError) Error() string { return e.msg }

func loadError(err error) *configError {
	return &configError{reason: ReasonRefused, msg: v1alpha1.LoadError + ": " + strings.TrimPrefix(err.Error(), kubeletconfig.ErrLoad.Error()+": ")}
}

func validateError(detail string) *configError {
	return &configError{reason: ReasonRefused, msg: v1alpha1.ValidateError + ": " + detail}
}

func downloadError(detail string) *configError {
	return &configError{reason: ReasonFailed, msg: v1alpha1.SyncErrorPrefix + v1alpha1.DownloadError + ": " + detail}
}

// missingError is the download error of ConfigMap ns/name (cmName) that
// does not exist.
func missingError(cmName string) *configError {
	return downloadError("configmap " + cmName + " not found")
}

func internalError(err error) *configError {
	return &configError{reason: ReasonFailed, msg: v1alpha1.SyncErrorPrefix + v1alpha1.InternalError + ": " + err.Error()}
}

// check decodes and validates payload in the writer's mode, previews the
// effective config and refuses unsafe changes unless the assigner allowed
// their class (allowUnsafe, from the pin). It touches nothing.
//
// A change is a field whose new value differs both from current (the
// effective config now) and from what the kubelet runs (its /configz, when
// it answers): a config taken from a snapshot spells out values the
// kubelet computed or took from its flags (tlsCertFile under its cert dir,
// a runtime endpoint given as a flag), and setting a field to what the
// kubelet already runs changes nothing it does. A kubelet that does not
// answer leaves the stricter comparison with the file alone.
//
// A config whose featureGates would change the features the node declares
// (kubeletconfig.FeatureChanges, against the gates the kubelet runs with)
// is a declared-features change, which names the running pods that rely on
// a feature it takes away.
//
// Values that cannot be right on this node, whatever the assignment allows
// (kubeletconfig.CheckBounds against facts), are refused first: no opt-in
// would make them apply.
func (a *Agent) check(ctx context.Context, payload []byte, current []byte, allowUnsafe []string, facts kubeletconfig.NodeFacts) *configError {
	if a.Writer.Mode() == kubelet.DropIn {
		partial, _, err := kubeletconfig.DecodePartial(payload, kubeletconfig.DecodeOptions{})
		if err != nil {
			return loadError(err)
		}
		payload = partial
	} else if _, _, err := kubeletconfig.Decode(payload, kubeletconfig.DecodeOptions{}); err != nil {
		return loadError(err)
	}
	effective, err := a.Writer.Preview(payload)
	if err != nil {
		return loadError(err)
	}
	cfg, _, err := kubeletconfig.Decode(effective, kubeletconfig.DecodeOptions{})
	if err != nil {
		return &configError{reason: ReasonRefused, msg: v1alpha1.LoadError + ": effective config: " + strings.TrimPrefix(err.Error(), kubeletconfig.ErrLoad.Error()+": ")}
	}
	if err := kubeletconfig.Validate(cfg); err != nil {
		return validateError(strings.TrimPrefix(err.Error(), kubeletconfig.ErrValidate.Error()+": "))
	}
	old, err := decodeLenient(current)
	if err != nil {
		return internalError(fmt.Errorf("current kubelet config: %w", err))
	}
	changes := kubeletconfig.Classify(old, cfg)
	live := a.running(ctx, current)
	if live != nil {
		changes = alsoChanged(changes, kubeletconfig.Classify(live, cfg))
	} else {
		live = old
	}
	// What the node declares follows the gates the kubelet runs with.
	changes = append(changes, kubeletconfig.FeatureChanges(live, cfg, facts)...)
	allowed := make([]kubeletconfig.SafetyClass, len(allowUnsafe))
	for i, c := range allowUnsafe {
		allowed[i] = kubeletconfig.SafetyClass(c)
	}
	if v := kubeletconfig.CheckBounds(cfg, facts); len(v) > 0 {
		return validateError("refused: cannot be right on this node: " + kubeletconfig.FormatViolations(v))
	}
	if refused := kubeletconfig.Refused(changes, allowed); len(refused) > 0 {
		return validateError("refused unsafe change: " + kubeletconfig.FormatRefusal(refused, kubeletconfig.Refused(changes, nil)))
	}
	return nil
}

// nodeFacts is what the agent knows of node for kubeletconfig.CheckBounds
// and FeatureChanges: its capacity, the pods it runs (of pods, the pods
// bound to it) and the declared features they rely on, the features it
// declares, and the eviction signals measured on it now.
func (a *Agent) nodeFacts(node *corev1.Node, pods []*corev1.Pod) kubeletconfig.NodeFacts {
	f := kubeletconfig.NodeFacts{Capacity: node.Status.Capacity, RunningPods: nodehealth.Running(pods), NodeMonitorGracePeriod: a.nodeMonitorGrace(),
		DeclaredFeatures: node.Status.DeclaredFeatures, PodFeatures: podFeatures(pods)}
	if a.Signals != nil {
		f.Signals = a.Signals()
	}
	return f
}

// nodeMonitorGrace is NodeMonitorGracePeriod, or its default.
func (a *Agent) nodeMonitorGrace() time.Duration {
	if a.NodeMonitorGracePeriod > 0 {
		return a.NodeMonitorGracePeriod
	}
	return kubeletconfig.DefaultNodeMonitorGracePeriod
}

// running returns the config the kubelet runs, from its /configz, or nil
// when the kubelet does not answer or its answer does not decode.
func (a *Agent) running(ctx context.Context, current []byte) *kubeletconfigv1beta1.KubeletConfiguration {
	raw, err := a.Prober.Running(ctx, current)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Judging the change against the kubelet's config file alone: its configz did not answer", "err", err)
		return nil
	}
	cfg := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(raw, cfg); err != nil {
		klog.FromContext(ctx).Info("Judging the change against the kubelet's config file alone: its configz does not decode", "err", err)
		return nil
	}
	return cfg
}

// alsoChanged keeps the changes whose field is among others' fields.
func alsoChanged(changes, others []kubeletconfig.Change) []kubeletconfig.Change {
	fields := make(map[string]bool, len(others))
	for _, c := range others {
		fields[c.Field] = true
	}
	var out []kubeletconfig.Change
	for _, c := range changes {
		if fields[c.Field] {
			out = append(out, c)
		}
	}
	return out
}

// decodeLenient decodes the config the kubelet runs now, which may predate
// dkc and carry fields this version does not know.
func decodeLenient(data []byte) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	cfg, _, err := kubeletconfig.Decode(data, kubeletconfig.DecodeOptions{AllowUnknownFields: true})
	return cfg, err
}

// sameJSON reports whether two JSON (or YAML) documents hold the same
// values.
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if yaml.Unmarshal(a, &x) != nil || yaml.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
