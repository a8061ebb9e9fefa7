package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestCompareNodeSpecific(t *testing.T) {
	node := func(address, cert string) *kubeletconfigv1beta1.KubeletConfiguration {
		return &kubeletconfigv1beta1.KubeletConfiguration{Address: address, TLSCertFile: cert}
	}
	fleet := map[string]*kubeletconfigv1beta1.KubeletConfiguration{
		"n1": node("10.0.0.1", "/var/lib/kubelet/pki/n1.crt"),
		"n2": node("10.0.0.2", "/var/lib/kubelet/pki/n2.crt"),
		"n3": node("10.0.0.3", "/var/lib/kubelet/pki/n3.crt"),
	}
	kubeadm := map[string]*kubeletconfigv1beta1.KubeletConfiguration{
		"n1": node("0.0.0.0", "/var/lib/kubelet/pki/kubelet.crt"),
		"n2": node("0.0.0.0", "/var/lib/kubelet/pki/kubelet.crt"),
	}
	for name, tc := range map[string]struct {
		payload string
		live    map[string]*kubeletconfigv1beta1.KubeletConfiguration
		want    []NodeSpecificValue
	}{
		"a snapshot of one node names its address and certificate": {
			payload: "kind: KubeletConfiguration\naddress: 10.0.0.1\ntlsCertFile: /var/lib/kubelet/pki/n1.crt\nmaxPods: 50\n",
			live:    fleet,
			want: []NodeSpecificValue{
				{Field: "address", Value: `"10.0.0.1"`, Of: []string{"n1"}, Others: 2},
				{Field: "tlsCertFile", Value: `"/var/lib/kubelet/pki/n1.crt"`, Of: []string{"n1"}, Others: 2},
			},
		},
		"a partial config without node-specific fields passes": {
			payload: "kind: KubeletConfiguration\nmaxPods: 50\n",
			live:    fleet,
		},
		"a value that is no node's own (0.0.0.0 on every node) passes": {
			payload: "kind: KubeletConfiguration\naddress: 0.0.0.0\n",
			live:    fleet,
		},
		"fields every node shares (kubeadm's paths) pass": {
			payload: "kind: KubeletConfiguration\naddress: 0.0.0.0\ntlsCertFile: /var/lib/kubelet/pki/kubelet.crt\n",
			live:    kubeadm,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := CompareNodeSpecific([]byte(tc.payload), tc.live)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
