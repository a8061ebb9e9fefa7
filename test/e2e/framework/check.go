package framework

import (
	"fmt"
	"io"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// HTTPGet returns the body of url, such as an agent's or a kubelet's
// /healthz or /metrics, asked directly (no proxy) with a 5 s timeout; a
// status other than 200 is an error that comes with the body.
func HTTPGet(url string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), err
}

// IsConfigMap reports whether src is a ConfigMap named name.
func IsConfigMap(src *corev1.NodeConfigSource, name string) bool {
	return src != nil && src.ConfigMap != nil && src.ConfigMap.Name == name
}
