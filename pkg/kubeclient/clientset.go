package kubeclient

import (
	"fmt"
	"net/http"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
)

// Scheme holds the types the agent sends and receives: core/v1,
// coordination.k8s.io/v1 and the unversioned meta types (Status,
// WatchEvent, options). An event recorder needs it to refer to the Node.
var Scheme = runtime.NewScheme()

var (
	codecs         = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
)

func init() {
	// As client-go's kubernetes/scheme registers them, for these groups only.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	utilruntime.Must(corev1.AddToScheme(Scheme))
	utilruntime.Must(coordinationv1.AddToScheme(Scheme))
}

// Clientset is the Interface over an apiserver: gentype clients, as
// client-go's clientset builds them, speaking protobuf (Protobuf), over one
// REST client per API group that share one HTTP client.
type Clientset struct {
	core, coordination rest.Interface
}

var _ Interface = &Clientset{}

// NewForConfig returns a Clientset for cfg.
func NewForConfig(cfg *rest.Config) (*Clientset, error) {
	cfg = Protobuf(cfg)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("api client: %w", err)
	}
	core, err := restClient(cfg, "/api", corev1.SchemeGroupVersion, httpClient)
	if err != nil {
		return nil, err
	}
	coordination, err := restClient(cfg, "/apis", coordinationv1.SchemeGroupVersion, httpClient)
	if err != nil {
		return nil, err
	}
	return &Clientset{core: core, coordination: coordination}, nil
}

// restClient is a REST client for API group version gv under apiPath.
func restClient(cfg *rest.Config, apiPath string, gv schema.GroupVersion, httpClient *http.Client) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = apiPath
	c.GroupVersion = &gv
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(Scheme, codecs).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("api client for %s: %w", gv, err)
	}
	return client, nil
}

// Nodes returns the client of Nodes.
func (c *Clientset) Nodes() NodeClient {
	return gentype.NewClientWithList("nodes", c.core, parameterCodec, "",
		func() *corev1.Node { return &corev1.Node{} },
		func() *corev1.NodeList { return &corev1.NodeList{} },
		gentype.PrefersProtobuf[*corev1.Node]())
}

// ConfigMaps returns the client of the ConfigMaps in namespace.
func (c *Clientset) ConfigMaps(namespace string) ConfigMapClient {
	return gentype.NewClientWithList("configmaps", c.core, parameterCodec, namespace,
		func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
		func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} },
		gentype.PrefersProtobuf[*corev1.ConfigMap]())
}

// Pods returns the client of the Pods in namespace ("": all namespaces).
func (c *Clientset) Pods(namespace string) PodClient {
	return gentype.NewClientWithList("pods", c.core, parameterCodec, namespace,
		func() *corev1.Pod { return &corev1.Pod{} },
		func() *corev1.PodList { return &corev1.PodList{} },
		gentype.PrefersProtobuf[*corev1.Pod]())
}

// PodTemplates returns the client of the PodTemplates in namespace.
func (c *Clientset) PodTemplates(namespace string) PodTemplateClient {
	return gentype.NewClient("podtemplates", c.core, parameterCodec, namespace,
		func() *corev1.PodTemplate { return &corev1.PodTemplate{} },
		gentype.PrefersProtobuf[*corev1.PodTemplate]())
}

// Leases returns the client of the Leases in namespace.
func (c *Clientset) Leases(namespace string) LeaseClient {
	return gentype.NewClient("leases", c.coordination, parameterCodec, namespace,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		gentype.PrefersProtobuf[*coordinationv1.Lease]())
}

// Events returns the client of the Events in namespace.
func (c *Clientset) Events(namespace string) EventClient {
	return gentype.NewClient("events", c.core, parameterCodec, namespace,
		func() *corev1.Event { return &corev1.Event{} },
		gentype.PrefersProtobuf[*corev1.Event]())
}

// Protobuf returns a copy of cfg whose clients of built-in types speak
// protobuf to the apiserver, as kube-controller-manager and the kubelet do:
// a Node costs the apiserver and the client several times less to encode
// and decode than as JSON, and a rollout moves every Node through every
// watch several times. A content type cfg names is kept. Clients of custom
// resources (client-go's dynamic client) speak JSON whatever cfg says.
func Protobuf(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	if c.ContentType == "" {
		c.ContentType = runtime.ContentTypeProtobuf
		c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	return c
}
