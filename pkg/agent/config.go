package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/kubelet"
	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/status"
)

// Previewer tells which full config the kubelet would load if payload were
// applied, before anything is written: the check of a new config happens on
// the config the kubelet will really run.
type Previewer interface {
	// Preview returns the effective config as JSON for payload; a nil
	// payload means the node's local config.
	Preview(payload []byte) ([]byte, error)
}

// FilePreviewer previews the kubelet's --config and --config-dir as the
// kubelet merges them (each *.conf drop-in, in lexical order, as a JSON merge
// patch over --config), with dkc's part replaced by the payload: the whole
// --config in replace mode, kubelet.DropInName in drop-in mode.
type FilePreviewer struct {
	Mode       kubelet.ApplyMode
	ConfigPath string
	ConfigDir  string
	// Local is the node's local --config in replace mode (Writer.Local).
	Local func() ([]byte, error)
}

var _ Previewer = &FilePreviewer{}

// Preview implements Previewer.
func (p *FilePreviewer) Preview(payload []byte) ([]byte, error) {
	var base []byte
	var err error
	switch {
	case p.Mode == kubelet.DropIn:
		base, err = os.ReadFile(p.ConfigPath)
	case payload != nil:
		base = payload
	default:
		base, err = p.Local()
	}
	if err != nil {
		return nil, fmt.Errorf("preview kubelet config: %w", err)
	}
	merged, err := yaml.YAMLToJSON(base)
	if err != nil {
		return nil, fmt.Errorf("preview kubelet config: %w", err)
	}
	dropIns, err := p.dropIns()
	if err != nil {
		return nil, fmt.Errorf("preview kubelet config: %w", err)
	}
	if p.Mode == kubelet.DropIn && payload != nil {
		dropIns[kubelet.DropInName] = payload
	} else if p.Mode == kubelet.DropIn {
		delete(dropIns, kubelet.DropInName)
	}
	names := make([]string, 0, len(dropIns))
	for name := range dropIns {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		patch, err := yaml.YAMLToJSON(dropIns[name])
		if err != nil {
			return nil, fmt.Errorf("preview kubelet config: drop-in %s: %w", name, err)
		}
		if merged, err = kubeletconfig.MergePatch(merged, patch); err != nil {
			return nil, fmt.Errorf("preview kubelet config: drop-in %s: %w", name, err)
		}
	}
	return merged, nil
}

// dropIns reads the *.conf files of ConfigDir by name.
func (p *FilePreviewer) dropIns() (map[string][]byte, error) {
	out := map[string][]byte{}
	if p.ConfigDir == "" {
		return out, nil
	}
	entries, err := os.ReadDir(p.ConfigDir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".conf") {
			continue
		}
		path := filepath.Join(p.ConfigDir, e.Name())
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		out[e.Name()] = data
	}
	return out, nil
}

// identityPreviewer is the Previewer of a kubelet with no drop-ins in
// replace mode: the payload is the config.
type identityPreviewer struct{ w kubelet.Writer }

func (p identityPreviewer) Preview(payload []byte) ([]byte, error) {
	if payload == nil {
		return p.w.Local()
	}
	return payload, nil
}

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
// config now) unless allowUnsafe opts in to them. It touches nothing.
func (a *Agent) check(payload []byte, current []byte, allowUnsafe, cmName string) *configError {
	if a.Writer.Mode() == kubelet.DropIn {
		partial, _, err := kubeletconfig.DecodePartial(payload, kubeletconfig.DecodeOptions{})
		if err != nil {
			return loadError(err)
		}
		payload = partial
	} else if _, _, err := kubeletconfig.Decode(payload, kubeletconfig.DecodeOptions{}); err != nil {
		return loadError(err)
	}
	effective, err := a.previewer().Preview(payload)
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
	if refused := kubeletconfig.Refused(kubeletconfig.Classify(old, cfg), allowUnsafe); len(refused) > 0 {
		return refusedError(refused, cmName)
	}
	return nil
}

func refusedError(refused []kubeletconfig.Change, cmName string) *configError {
	var parts, classes []string
	seen := map[kubeletconfig.SafetyClass]bool{}
	for _, c := range refused {
		parts = append(parts, fmt.Sprintf("%s %q -> %q (%s)", c.Field, c.Old, c.New, c.Class))
		if !seen[c.Class] {
			seen[c.Class] = true
			classes = append(classes, string(c.Class))
		}
	}
	return validateError(fmt.Sprintf("refused unsafe change: %s; to allow it, annotate ConfigMap %s with %s=%s",
		strings.Join(parts, ", "), cmName, source.AllowUnsafeAnnotation, strings.Join(classes, ",")))
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
