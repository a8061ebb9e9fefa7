package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// configError is a config that cannot be applied, with the status error
// (an upstream string with detail after it) and the condition reason.
type configError struct {
	reason string
	msg    string
}

func (e *configError) Error() string { return e.msg }

func loadError(err error) *configError {
	return &configError{reason: ReasonRefused, msg: status.LoadError + ": " + strings.TrimPrefix(err.Error(), kubeletconfig.ErrLoad.Error()+": ")}
}

func validateError(detail string) *configError {
	return &configError{reason: ReasonRefused, msg: status.ValidateError + ": " + detail}
}

func downloadError(detail string) *configError {
	return &configError{reason: ReasonFailed, msg: status.SyncErrorPrefix + status.DownloadError + ": " + detail}
}

func internalError(err error) *configError {
	return &configError{reason: ReasonFailed, msg: status.SyncErrorPrefix + status.InternalError + ": " + err.Error()}
}

// check decodes and validates payload in the writer's mode, previews the
// effective config and refuses unsafe changes from current (the effective
// config now) unless the assigner allowed their class (allowUnsafe, from
// the pin). It touches nothing.
func (a *Agent) check(payload []byte, current []byte, allowUnsafe []string) *configError {
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
		return &configError{reason: ReasonRefused, msg: status.LoadError + ": effective config: " + strings.TrimPrefix(err.Error(), kubeletconfig.ErrLoad.Error()+": ")}
	}
	if err := kubeletconfig.Validate(cfg); err != nil {
		return validateError(strings.TrimPrefix(err.Error(), kubeletconfig.ErrValidate.Error()+": "))
	}
	old, err := decodeLenient(current)
	if err != nil {
		return internalError(fmt.Errorf("current kubelet config: %w", err))
	}
	allowed := make([]kubeletconfig.SafetyClass, len(allowUnsafe))
	for i, c := range allowUnsafe {
		allowed[i] = kubeletconfig.SafetyClass(c)
	}
	if refused := kubeletconfig.Refused(kubeletconfig.Classify(old, cfg), allowed); len(refused) > 0 {
		return validateError("refused unsafe change: " + kubeletconfig.FormatRefusal(refused))
	}
	return nil
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
