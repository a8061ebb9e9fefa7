// The flags read: the kubelet's /flagz, at the address its config gives,
// authorized as /configz is; the agent records from it which config
// fields a flag sets (pkg/flagz).

package kubelet

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/kubectl-dkc/dkc/pkg/flagz"
)

// Flags reads the kubelet's /flagz once, at the address of current, in its
// structured form.
func (p *HealthProber) Flags(ctx context.Context, current []byte) (map[string]string, error) {
	base, err := p.runningURL(current)
	if err != nil {
		return nil, err
	}
	url := base + "/flagz"
	resp, raw, err := p.get(ctx, p.cfg.KubeletClient, url, flagz.Accept)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return flagz.Parse(raw)
	case http.StatusNotFound:
		return nil, fmt.Errorf("GET %s: %w", url, flagz.ErrNotServed)
	}
	return nil, &kubeletAnswer{url: url, status: resp.Status, code: resp.StatusCode, body: bytes.TrimSpace(raw)}
}
