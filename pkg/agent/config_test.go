package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kubectl-dkc/dkc/pkg/kubelet"
)

func TestFilePreviewer(t *testing.T) {
	const (
		base     = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nmaxPods: 110\nport: 10250\n"
		operator = `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","port":10251}`
		late     = `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":7}`
		ours     = `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":42,"port":null}`
		payload  = `{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":50}`
	)
	tests := map[string]struct {
		mode    kubelet.ApplyMode
		dropIns map[string]string
		payload []byte
		want    string
	}{
		"replace: payload with the operator's drop-ins over it": {
			mode:    kubelet.Replace,
			dropIns: map[string]string{"10-operator.conf": operator, "ignored.yaml": late},
			payload: []byte(payload),
			want:    `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":50,"port":10251}`,
		},
		"replace: local config": {
			mode: kubelet.Replace,
			want: `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":110,"port":10250}`,
		},
		"dropin: payload replaces dkc's drop-in, in lexical order": {
			mode:    kubelet.DropIn,
			dropIns: map[string]string{"10-operator.conf": operator, kubelet.DropInName: ours, "90-late.conf": late},
			payload: []byte(payload),
			want:    `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":7,"port":10251}`,
		},
		"dropin: local config drops dkc's drop-in": {
			mode:    kubelet.DropIn,
			dropIns: map[string]string{"10-operator.conf": operator, kubelet.DropInName: ours},
			want:    `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":110,"port":10251}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			configPath := filepath.Join(dir, "config.yaml")
			configDir := filepath.Join(dir, "conf.d")
			must(t, os.WriteFile(configPath, []byte(base), 0o600))
			must(t, os.Mkdir(configDir, 0o700))
			for name, data := range tc.dropIns {
				must(t, os.WriteFile(filepath.Join(configDir, name), []byte(data), 0o600))
			}
			p := &FilePreviewer{Mode: tc.mode, ConfigPath: configPath, ConfigDir: configDir,
				Local: func() ([]byte, error) { return os.ReadFile(configPath) }}
			got, err := p.Preview(tc.payload)
			if err != nil {
				t.Fatal(err)
			}
			diff(t, "effective config", tc.want, string(got))
		})
	}
}
