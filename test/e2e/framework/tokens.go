package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// The agent's ServiceAccount, as deploy/rbac.yaml creates it.
const (
	AgentNamespace      = "kube-system"
	AgentServiceAccount = "dkc-agent"
)

// ServiceAccountRef names a ServiceAccount.
type ServiceAccountRef struct {
	Namespace, Name string
}

// AgentSA is the agent's ServiceAccount, as deploy/rbac.yaml creates it; an
// overlay may rename it.
var AgentSA = ServiceAccountRef{Namespace: AgentNamespace, Name: AgentServiceAccount}

// AgentPod creates a Pod object named name in AgentNamespace that runs as
// the agent's ServiceAccount and is bound to node (spec.nodeName), as a pod
// of the agent's DaemonSet would be. It never runs: its nodeSelector matches
// no node, so the kubelet rejects it at admission. The Pod object stays,
// and that is all a token bound to it needs.
func (c *Cluster) AgentPod(ctx context.Context, name, node string) (*corev1.Pod, error) {
	return c.ServiceAccountPod(ctx, AgentSA, name, node)
}

// ServiceAccountPod is AgentPod for the ServiceAccount sa, in its namespace.
func (c *Cluster) ServiceAccountPod(ctx context.Context, sa ServiceAccountRef, name, node string) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sa.Namespace, Labels: map[string]string{"app.kubernetes.io/name": "dkc-agent"}},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			ServiceAccountName:           sa.Name,
			AutomountServiceAccountToken: ptr.To(false),
			NodeSelector:                 map[string]string{"kubectl-dkc.io/e2e-never-runs": "true"},
			Containers:                   []corev1.Container{{Name: "agent", Image: "kubectl-dkc:e2e"}},
		},
	}
	created, err := c.Client.CoreV1().Pods(sa.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s on %s: %w", sa.Namespace, name, node, err)
	}
	return created, nil
}

// AgentToken requests a token of the agent's ServiceAccount through the
// TokenRequest API, bound to pod when pod is not nil. A token bound to a pod
// on a node carries authentication.kubernetes.io/node-name; one not bound
// to a pod carries no node.
func (c *Cluster) AgentToken(ctx context.Context, pod *corev1.Pod) (string, error) {
	return c.ServiceAccountToken(ctx, AgentSA, pod)
}

// ServiceAccountToken is AgentToken for the ServiceAccount sa.
func (c *Cluster) ServiceAccountToken(ctx context.Context, sa ServiceAccountRef, pod *corev1.Pod) (string, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if pod != nil {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	resp, err := c.Client.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request a token of %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return resp.Status.Token, nil
}

// TokenKubeconfig writes a kubeconfig named name that presents token, and
// returns its path.
func (c *Cluster) TokenKubeconfig(name, token string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["dkc"] = &clientcmdapi.Cluster{Server: c.APIServerURL, CertificateAuthority: c.pki.caFile()}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["dkc"] = &clientcmdapi.Context{Cluster: "dkc", AuthInfo: name}
	cfg.CurrentContext = "dkc"
	path := filepath.Join(c.Dir, "token-"+strings.NewReplacer(":", "-", "/", "-").Replace(name)+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}
