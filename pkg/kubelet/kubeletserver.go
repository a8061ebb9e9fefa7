// Reaching the kubelet: the client that authenticates the agent to the
// kubelet's server and verifies the kubelet, the URLs of that server and of
// the open healthz, a GET of them, its answers, and the healthz check.

package kubelet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
)

// KubeletTLS says how the agent verifies the kubelet's serving certificate.
type KubeletTLS struct {
	// CAFile holds the CA certificates to trust. Default: the CA of the
	// agent's own REST config (the cluster CA, which signs kubelet serving
	// certificates issued through serverTLSBootstrap). A kubelet with a
	// self-signed certificate is verified with that certificate itself: its
	// --cert-dir's kubelet.crt.
	CAFile string
	// ServerName is the name the certificate must carry. Default: the host
	// of the kubelet URL. A self-signed kubelet certificate names the node's
	// hostname, not its address.
	ServerName string
	// Insecure skips verification: the agent's credential then goes to
	// whoever answers at the kubelet's address. Only when set explicitly.
	Insecure bool
}

// NewKubeletClient returns an HTTP client for the kubelet's authenticated
// server that presents the credential of cfg (the agent's: a bearer token,
// re-read from its file as it rotates, or a client certificate) and verifies
// the kubelet as tlsCfg says. It uses no proxy.
func NewKubeletClient(cfg *rest.Config, tlsCfg KubeletTLS) (*http.Client, error) {
	c := rest.CopyConfig(cfg)
	c.TLSClientConfig.ServerName = tlsCfg.ServerName
	switch {
	case tlsCfg.Insecure:
		c.TLSClientConfig.Insecure = true
		c.TLSClientConfig.CAFile, c.TLSClientConfig.CAData = "", nil
	case tlsCfg.CAFile != "":
		c.TLSClientConfig.Insecure = false
		c.TLSClientConfig.CAFile, c.TLSClientConfig.CAData = tlsCfg.CAFile, nil
	}
	c.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	c.Timeout = 0
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubelet client: %w", err)
	}
	return client, nil
}

// kubeletAnswer is a kubelet's HTTP answer that fails a check.
type kubeletAnswer struct {
	url, status string
	code        int
	body        []byte
}

func (e *kubeletAnswer) Error() string {
	return fmt.Sprintf("GET %s: %s: %q", e.url, e.status, e.body)
}

// kubeletCannotAsk reports whether err is the kubelet saying it could not
// check the agent's credential with the apiserver: 401 (a failed
// TokenReview) or 500 "Authorization error" (a failed SubjectAccessReview).
// A 403 is the apiserver's answer, and does not count.
func kubeletCannotAsk(err error) bool {
	var a *kubeletAnswer
	if !errors.As(err, &a) {
		return false
	}
	return a.code == http.StatusUnauthorized ||
		a.code == http.StatusInternalServerError && bytes.HasPrefix(a.body, []byte("Authorization error"))
}

// kubeletURL is KubeletURL, or https://ADDRESS:PORT of the expected config.
func (p *HealthProber) kubeletURL(want map[string]any) (string, error) {
	if p.cfg.KubeletURL != "" {
		return strings.TrimSuffix(p.cfg.KubeletURL, "/"), nil
	}
	host, port, err := configHostPort(want, "address", "port", DefaultKubeletPort)
	if err != nil {
		return "", err
	}
	return "https://" + net.JoinHostPort(host, port), nil
}

// configHostPort reads an address field and a port field of the expected
// config: the address must be an IP, 127.0.0.1 when unset or unspecified;
// the port is defPort when unset.
func configHostPort(want map[string]any, addrField, portField, defPort string) (host, port string, err error) {
	host = "127.0.0.1"
	if s, ok := want[addrField].(string); ok && s != "" {
		ip := net.ParseIP(s)
		if ip == nil {
			return "", "", fmt.Errorf("expected config: %s %q is not an IP address", addrField, s)
		}
		if !ip.IsUnspecified() {
			host = s
		}
	}
	port = defPort
	if v, ok := want[portField]; ok && v != nil {
		n, ok := v.(json.Number)
		if !ok {
			return "", "", fmt.Errorf("expected config: %s %v is not a number", portField, v)
		}
		port = n.String()
	}
	return host, port, nil
}

// openHealthzURL is http://HEALTHZBINDADDRESS:HEALTHZPORT/healthz of the
// expected config, or "" when its healthzPort is 0.
func openHealthzURL(want map[string]any) (string, error) {
	host, port, err := configHostPort(want, "healthzBindAddress", "healthzPort", defaultHealthzPort)
	if err != nil || port == "0" {
		return "", err
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// get reads url with client, at most 64 KiB of it; accept, when given, is
// the request's Accept header.
func (p *HealthProber) get(ctx context.Context, client *http.Client, url string, accept ...string) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range accept {
		req.Header.Add("Accept", a)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return resp, body, nil
}

func (p *HealthProber) checkHealthz(ctx context.Context, client *http.Client, url string) error {
	resp, body, err := p.get(ctx, client, url)
	if err != nil {
		return err
	}
	body = bytes.TrimSpace(body)
	if len(body) > 1024 {
		body = body[:1024]
	}
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return &kubeletAnswer{url: url, status: resp.Status, code: resp.StatusCode, body: body}
	}
	return nil
}
