// The configz check: the config the kubelet says it runs, compared with the
// expected one (compare.go); Running reads it once.

package kubelet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
)

// Running reads the kubelet's /configz once, at the address of current.
func (p *HealthProber) Running(ctx context.Context, current []byte) ([]byte, error) {
	base, err := p.runningURL(current)
	if err != nil {
		return nil, err
	}
	return p.configz(ctx, base+"/configz")
}

// runningURL is the base URL of the kubelet that runs current, which
// KubeletClient reaches.
func (p *HealthProber) runningURL(current []byte) (string, error) {
	cur, err := decodeGeneric(current)
	if err != nil {
		return "", fmt.Errorf("current config: %w", err)
	}
	base, err := p.kubeletURL(cur)
	if err != nil {
		return "", err
	}
	if p.cfg.KubeletClient == nil {
		return "", fmt.Errorf("no client for the kubelet at %s", base)
	}
	return base, nil
}

// configz returns the kubeletconfig object of the kubelet's /configz at url.
func (p *HealthProber) configz(ctx context.Context, url string) ([]byte, error) {
	resp, raw, err := p.get(ctx, p.cfg.KubeletClient, url)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &kubeletAnswer{url: url, status: resp.Status, code: resp.StatusCode, body: bytes.TrimSpace(raw)}
	}
	var body struct {
		KubeletConfig json.RawMessage `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	if len(body.KubeletConfig) == 0 || string(body.KubeletConfig) == "null" {
		return nil, kubeletconfig.ErrNoKubeletConfig
	}
	return body.KubeletConfig, nil
}

func (p *HealthProber) checkConfigz(ctx context.Context, url string, want map[string]any) error {
	running, err := p.configz(ctx, url)
	if err != nil {
		return err
	}
	got, err := decodeGeneric(running)
	if err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return mismatchError(compareConfig(want, got))
}

// decodeGeneric decodes a YAML or JSON object, keeping numbers as
// json.Number.
func decodeGeneric(data []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not an object")
	}
	return m, nil
}

// mismatchError names the first few mismatches, or returns nil.
func mismatchError(ms []string) error {
	if len(ms) == 0 {
		return nil
	}
	var b bytes.Buffer
	for i, m := range ms {
		if i == maxMismatches {
			b.WriteString("; and " + strconv.Itoa(len(ms)-maxMismatches) + " more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(m)
	}
	return errors.New(b.String())
}
