package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// TestNodeSpecific: one rule, whether the caller read the kubelets'
// /configz (live) or sees only the Node objects.
func TestNodeSpecific(t *testing.T) {
	node := func(name, ip, providerID string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.NodeSpec{ProviderID: providerID},
			Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}},
		}
	}
	cfg := func(address, cert string) *kubeletconfigv1beta1.KubeletConfiguration {
		return &kubeletconfigv1beta1.KubeletConfiguration{Address: address, TLSCertFile: cert}
	}
	fleet := []*corev1.Node{node("n1", "10.0.0.1", "aws:///eu-west-1a/i-1"), node("n2", "10.0.0.2", "aws:///eu-west-1a/i-2"), node("n3", "10.0.0.3", "aws:///eu-west-1a/i-3")}
	live := map[string]*kubeletconfigv1beta1.KubeletConfiguration{
		"n1": cfg("10.0.0.1", "/var/lib/kubelet/pki/n1.crt"),
		"n2": cfg("10.0.0.2", "/var/lib/kubelet/pki/n2.crt"),
		"n3": cfg("10.0.0.3", "/var/lib/kubelet/pki/n3.crt"),
	}
	kubeadm := map[string]*kubeletconfigv1beta1.KubeletConfiguration{
		"n1": cfg("0.0.0.0", "/var/lib/kubelet/pki/kubelet.crt"),
		"n2": cfg("0.0.0.0", "/var/lib/kubelet/pki/kubelet.crt"),
	}
	for name, tc := range map[string]struct {
		payload string
		nodes   []*corev1.Node
		live    map[string]*kubeletconfigv1beta1.KubeletConfiguration
		want    []NodeSpecificValue
	}{
		"a snapshot of one node, with /configz read: its address and certificate": {
			payload: "kind: KubeletConfiguration\naddress: 10.0.0.1\ntlsCertFile: /var/lib/kubelet/pki/n1.crt\nmaxPods: 50\n",
			nodes:   fleet, live: live,
			want: []NodeSpecificValue{
				{Field: "address", Value: `"10.0.0.1"`, Of: []string{"n1"}, Others: 2},
				{Field: "tlsCertFile", Value: `"/var/lib/kubelet/pki/n1.crt"`, Of: []string{"n1"}, Others: 2},
			},
		},
		"a snapshot of one node, from the Node objects alone: address, healthz address and provider ID, no certificate": {
			payload: "kind: KubeletConfiguration\naddress: 10.0.0.1\nhealthzBindAddress: 10.0.0.1\nproviderID: aws:///eu-west-1a/i-1\ntlsCertFile: /pki/n1.crt\n",
			nodes:   fleet,
			want: []NodeSpecificValue{
				{Field: "address", Value: `"10.0.0.1"`, Of: []string{"n1"}, Others: 2},
				{Field: "healthzBindAddress", Value: `"10.0.0.1"`, Of: []string{"n1"}, Others: 2},
				{Field: "providerID", Value: `"aws:///eu-west-1a/i-1"`, Of: []string{"n1"}, Others: 2},
			},
		},
		"a node whose /configz was not read counts by its Node object": {
			payload: "kind: KubeletConfiguration\naddress: 10.0.0.1\ntlsCertFile: /var/lib/kubelet/pki/n1.crt\n",
			nodes:   fleet, live: map[string]*kubeletconfigv1beta1.KubeletConfiguration{"n1": live["n1"]},
			want: []NodeSpecificValue{
				{Field: "address", Value: `"10.0.0.1"`, Of: []string{"n1"}, Others: 2},
			},
		},
		"a kubelet on 0.0.0.0 still holds its node's address": {
			payload: "kind: KubeletConfiguration\naddress: 10.0.0.1\n",
			nodes:   fleet[:2], live: kubeadm,
			want: []NodeSpecificValue{{Field: "address", Value: `"10.0.0.1"`, Of: []string{"n1"}, Others: 1}},
		},
		"a value that is no node's own (0.0.0.0 on every node) passes": {
			payload: "kind: KubeletConfiguration\naddress: 0.0.0.0\nhealthzBindAddress: 127.0.0.1\n",
			nodes:   fleet, live: live,
		},
		"fields every node shares (kubeadm's paths) pass": {
			payload: "kind: KubeletConfiguration\naddress: 0.0.0.0\ntlsCertFile: /var/lib/kubelet/pki/kubelet.crt\n",
			nodes:   fleet[:2], live: kubeadm,
		},
		"one node's own values for that node alone pass": {
			payload: "kind: KubeletConfiguration\naddress: 10.0.0.1\n",
			nodes:   fleet[:1], live: live,
		},
		"a config without node-specific fields passes": {
			payload: "kind: KubeletConfiguration\nmaxPods: 50\n",
			nodes:   fleet, live: live,
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, nodeSpecific([]byte(tc.payload), tc.nodes, tc.live)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
