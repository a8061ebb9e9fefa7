// Package framework starts real Kubernetes components for dkc's e2e tests
// (test/e2e), its benchmarks (test/bench) and the local cluster: etcd and
// kube-apiserver on the host, and N kubelets on containerd, each in its own
// network and mount namespace.
//
// Nothing of the host changes: components see private copies of /etc/hosts,
// /etc/resolv.conf and the /proc/sys files the kubelet writes; the kubelet's
// iptables rules land inside its own netns; every process is ended by its
// PID and every namespace, link and mount is removed by Stop. See
// docs/development.md.
package framework

import (
	"context"

	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configures a cluster. The zero value starts two v1.37.2 nodes.
type Options struct {
	// Nodes is how many kubelets to start; default 2.
	Nodes int
	// ControlPlaneOnly starts etcd and the apiserver and no kubelet, for
	// benchmarks that create Node objects through the API.
	ControlPlaneOnly bool
	// BinDir holds etcd, kube-apiserver and kubelet. Default: $DKC_BIN_DIR,
	// else ~/.cache/kubectl-dkc/bin/v1.37.2 (hack/build-components.sh).
	BinDir string
	// KubeletBinDir holds the kubelet when it differs from BinDir.
	KubeletBinDir string
	// EtcdBinDir holds etcd when it differs from BinDir, as when BinDir
	// holds the v1.23.17 components (hack/build-components-v1.23.sh builds
	// no etcd).
	EtcdBinDir string
	// Dir holds all state. Default: a new directory under $TMPDIR.
	Dir string
	// NodeNamePrefix names node i PREFIX<i>; default "dkc-node-".
	NodeNamePrefix string
	// APIServerFlags and KubeletFlags are appended to the defaults.
	APIServerFlags []string
	KubeletFlags   []string
	// NodeKubeletFlags, when set, returns flags for node n's kubelet, appended
	// after KubeletFlags: for per-node paths such as --dynamic-config-dir.
	NodeKubeletFlags func(n *Node) []string
	// KubeletConfig edits each node's generated config before it is written.
	KubeletConfig func(n *Node, cfg map[string]any)
	// LegacyKubelet starts kubelets older than 1.27, which take the runtime
	// endpoint as a flag rather than a config field.
	LegacyKubelet bool
	// RestartDelay is how long the supervisor waits before starting a kubelet
	// that exited, like systemd's RestartSec; default 200ms.
	RestartDelay time.Duration
	// Logf receives progress lines; default discards them.
	Logf func(format string, args ...any)
	// Pods runs kube-controller-manager and kube-scheduler, and sets nodes
	// up to run hostNetwork pods, such as the agent's DaemonSet (pods.go),
	// whose images they pull from the cluster's registry (registry.go).
	Pods bool
	// RegistryBinary is distribution's registry, run for Pods. Default:
	// DefaultRegistryBinary().
	RegistryBinary string
	// Kubeadm readies the control plane for nodes that kubeadm joins
	// (StartKubeadmNode, kubeadm.go): bootstrap token authentication, and
	// kube-controller-manager's bootstrap signer, token cleaner and CSR
	// approver and signer.
	Kubeadm bool
}

// Cluster is a running control plane with its nodes.
type Cluster struct {
	Dir string
	// Kubeconfig is an admin (system:masters) kubeconfig.
	Kubeconfig string
	RESTConfig *rest.Config
	Client     kubernetes.Interface
	Nodes      []*Node
	// KubeadmNodes are the nodes StartKubeadmNode joined.
	KubeadmNodes []*KubeadmNode
	// APIServerURL is the apiserver's address on the node network.
	APIServerURL string
	// Registry is HOST:PORT of the cluster's image registry (Pods only),
	// 127.0.0.1:PORT on the host and in every node's netns: images pushed
	// there (PushImages) are named REGISTRY/NAME:TAG, and the nodes pull
	// them.
	Registry string

	opts      Options
	pki       *pki
	net       *network
	etcd      *process
	apiserver *process
	etcdURL   string
	registry  *registry
	// services forwards the kubernetes Service's ClusterIP in kubeadm
	// nodes' network namespaces to the apiserver (kubeadm.go).
	services *forwarder
	// controllers are kube-controller-manager and kube-scheduler (Pods).
	controllers []*process
	// dkcControllers are dkc's controllers (StartController).
	dkcControllers dkcControllers
	hostCgroups    map[string]bool // cgroup parents the host had (Pods)
	kubeadm        kubeadmState
	logf           func(string, ...any)
	stopOnce       sync.Once
}

// DefaultBinDir is where hack/build-components.sh puts the components.
func DefaultBinDir() string {
	if d := os.Getenv("DKC_BIN_DIR"); d != "" {
		return d
	}
	return filepath.Join(CacheBinDir(), "v1.37.2")
}

// LegacyVersion is the last release whose kubelet runs Dynamic Kubelet
// Configuration itself (hack/build-components-v1.23.sh); LegacyBinDir holds
// its components.
const LegacyVersion = "v1.23.17"

// CacheBinDir is where the hack/build-components*.sh scripts put what they
// build, one directory per version: ~/.cache/kubectl-dkc/bin.
func CacheBinDir() string {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = filepath.Join(os.TempDir(), "cache")
	}
	return filepath.Join(cache, "kubectl-dkc", "bin")
}

// Preflight says why this machine cannot run the harness, or returns nil.
func Preflight(opts Options) error {
	var problems []string
	if os.Geteuid() != 0 {
		problems = append(problems, "must run as root: the harness creates network namespaces and runs kubelets (run `sudo make test`, or use a root shell)")
	}
	binDir := opts.BinDir
	if binDir == "" {
		binDir = DefaultBinDir()
	}
	kubeletDir := opts.KubeletBinDir
	if kubeletDir == "" {
		kubeletDir = binDir
	}
	etcdDir := opts.EtcdBinDir
	if etcdDir == "" {
		etcdDir = binDir
	}
	for _, p := range []string{filepath.Join(etcdDir, "etcd"), filepath.Join(binDir, "kube-apiserver"), filepath.Join(kubeletDir, "kubelet")} {
		if _, err := os.Stat(p); err != nil {
			problems = append(problems, fmt.Sprintf("missing %s: run `make components` (hack/build-components.sh)", p))
		}
	}
	if opts.Kubeadm {
		if _, err := os.Stat(filepath.Join(binDir, "kubeadm")); err != nil {
			problems = append(problems, fmt.Sprintf("missing %s: run `make components` (hack/build-components.sh)", filepath.Join(binDir, "kubeadm")))
		}
		if err := PreflightSystemd(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	for _, tool := range []string{"containerd", "runc", "ip", "nsenter", "unshare", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			problems = append(problems, fmt.Sprintf("missing %s on PATH: run `make test-deps` (apt-get install containerd runc containernetworking-plugins iptables iproute2 util-linux)", tool))
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		problems = append(problems, "missing /usr/lib/cni/bridge: run `make test-deps` (containernetworking-plugins)")
	}
	if opts.Pods {
		reg := opts.RegistryBinary
		if reg == "" {
			reg = DefaultRegistryBinary()
		}
		if _, err := os.Stat(reg); err != nil {
			problems = append(problems, fmt.Sprintf("missing %s: run `make components-registry` (hack/build-components-registry.sh)", reg))
		}
	}
	if len(problems) > 0 {
		return errors.New("cannot start the real components:\n  - " + strings.Join(problems, "\n  - "))
	}
	return nil
}

// Start brings up etcd, the apiserver and the nodes, and waits until every
// node is Ready. On error everything started so far is stopped again, and
// the returned Cluster, if not nil, only serves to read the logs.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts.ControlPlaneOnly {
		opts.Nodes = 0
	} else if opts.Nodes == 0 {
		opts.Nodes = 2
	}
	if opts.BinDir == "" {
		opts.BinDir = DefaultBinDir()
	}
	if opts.KubeletBinDir == "" {
		opts.KubeletBinDir = opts.BinDir
	}
	if opts.EtcdBinDir == "" {
		opts.EtcdBinDir = opts.BinDir
	}
	if opts.NodeNamePrefix == "" {
		opts.NodeNamePrefix = "dkc-node-"
	}
	if opts.RestartDelay == 0 {
		opts.RestartDelay = 200 * time.Millisecond
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.RegistryBinary == "" {
		opts.RegistryBinary = DefaultRegistryBinary()
	}
	if err := Preflight(opts); err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		// Short paths: unix socket paths are limited to 108 bytes.
		if opts.Dir, err = os.MkdirTemp("", "dkc-"); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "libmount"), 0o755); err != nil {
		return nil, err
	}
	c = &Cluster{Dir: opts.Dir, opts: opts, logf: opts.Logf}
	defer func() {
		if err != nil {
			// Keep c, stopped, so that callers can still read its logs.
			c.Stop()
		}
	}()
	began := time.Now()
	if c.net, err = newNetwork(c.logf); err != nil {
		return c, err
	}
	if c.pki, err = newPKI(filepath.Join(c.Dir, "pki")); err != nil {
		return c, err
	}
	if err := c.startEtcd(ctx); err != nil {
		return c, err
	}
	if err := c.startAPIServer(ctx); err != nil {
		return c, err
	}
	c.logf("control plane ready after %s", time.Since(began).Round(time.Millisecond))
	if opts.Pods || opts.Kubeadm {
		if err := c.startPodControllers(ctx); err != nil {
			return c, err
		}
		if err := c.startRegistry(ctx); err != nil {
			return c, err
		}
	}
	for i := 1; i <= opts.Nodes; i++ {
		n, err := c.addNode(i)
		if err != nil {
			return c, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		if err := n.start(); err != nil {
			return c, err
		}
	}
	if err := c.WaitForNodesReady(ctx, 2*time.Minute); err != nil {
		return c, err
	}
	c.logf("%d nodes Ready %s after start", len(c.Nodes), time.Since(began).Round(time.Millisecond))
	return c, nil
}

func (c *Cluster) newProcess(name string, argv []string, supervise bool) *process {
	return &process{
		name:         name,
		argv:         argv,
		logPath:      filepath.Join(c.Dir, "logs", name+".log"),
		supervise:    supervise,
		restartDelay: c.opts.RestartDelay,
		logf:         c.logf,
	}
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Join(c.Dir, "logs"), 0o755); err != nil {
		return err
	}
	clientPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	peerPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	c.etcd = c.newProcess("etcd", []string{
		filepath.Join(c.opts.EtcdBinDir, "etcd"),
		"--name=dkc",
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=dkc=" + peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}, false)
	if err := c.etcd.start(); err != nil {
		return err
	}
	etcdURL := clientURL + "/health"
	err = poll(ctx, 30*time.Second, func() (bool, error) {
		resp, err := http.Get(etcdURL)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("etcd did not become healthy (log: %s): %w", c.etcd.logPath, err)
	}
	c.etcdURL = clientURL
	return nil
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	host := c.net.hostIP
	port, err := freePort(host)
	if err != nil {
		return err
	}
	c.APIServerURL = "https://" + net.JoinHostPort(host, strconv.Itoa(port))
	p := c.pki
	if err := p.issue("apiserver", "kube-apiserver", nil, []net.IP{net.ParseIP(host), net.ParseIP("127.0.0.1"), net.ParseIP(KubernetesServiceIP)}, []string{"kubernetes", "kubernetes.default", "localhost"}, true); err != nil {
		return err
	}
	if err := p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil, false); err != nil {
		return err
	}
	if err := p.issue("admin", "dkc-admin", []string{"system:masters"}, nil, nil, false); err != nil {
		return err
	}
	if err := p.writeKey("service-account"); err != nil {
		return err
	}
	etcHosts, resolv, err := c.writeNameFiles()
	if err != nil {
		return err
	}
	argv := []string{
		filepath.Join(c.opts.BinDir, "kube-apiserver"),
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=" + host,
		"--advertise-address=" + host,
		"--secure-port=" + strconv.Itoa(port),
		"--endpoint-reconciler-type=none",
		"--client-ca-file=" + p.caFile(),
		"--tls-cert-file=" + p.certFile("apiserver"),
		"--tls-private-key-file=" + p.keyFile("apiserver"),
		"--kubelet-client-certificate=" + p.certFile("apiserver-kubelet-client"),
		"--kubelet-client-key=" + p.keyFile("apiserver-kubelet-client"),
		"--kubelet-preferred-address-types=InternalIP",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(p.dir, "service-account.pub"),
		"--service-account-signing-key-file=" + p.keyFile("service-account"),
		"--service-cluster-ip-range=" + serviceSubnet,
		"--allow-privileged=true",
		"--profiling=false",
	}
	if c.opts.Kubeadm {
		argv = append(argv, "--enable-bootstrap-token-auth")
	}
	argv = append(argv, c.opts.APIServerFlags...)
	c.apiserver = c.newProcess("kube-apiserver", wrapArgv("", c.utab(), []bindMount{{etcHosts, "/etc/hosts"}, {resolv, "/etc/resolv.conf"}}, argv), false)
	if err := c.apiserver.start(); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := c.writeKubeconfig(c.Kubeconfig, "admin"); err != nil {
		return err
	}
	if c.RESTConfig, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return err
	}
	if c.Client, err = kubernetes.NewForConfig(c.RESTConfig); err != nil {
		return err
	}
	return c.waitAPIServerReady(ctx)
}

// waitAPIServerReady waits until the apiserver's /readyz says ok.
func (c *Cluster) waitAPIServerReady(ctx context.Context) error {
	err := poll(ctx, time.Minute, func() (bool, error) {
		if c.apiserver.pid() == 0 {
			return false, errors.New("kube-apiserver exited")
		}
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver did not become ready (log: %s): %w", c.apiserver.logPath, err)
	}
	return nil
}

// writeNameFiles writes the private /etc/hosts that names every node, and a
// resolv.conf that points at loopback, so no DNS query leaves the machine.
func (c *Cluster) writeNameFiles() (hosts, resolv string, err error) {
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n::1 localhost\n")
	for i := 1; i <= c.opts.Nodes; i++ {
		fmt.Fprintf(&b, "%s %s%d\n", c.net.nodeIP(i), c.opts.NodeNamePrefix, i)
	}
	hosts = filepath.Join(c.Dir, "hosts")
	resolv = filepath.Join(c.Dir, "resolv.conf")
	if err := os.WriteFile(hosts, []byte(b.String()), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		return "", "", err
	}
	return hosts, resolv, nil
}

// writeKubeconfig writes a kubeconfig for the client certificate name.
func (c *Cluster) writeKubeconfig(path, certName string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["dkc"] = &clientcmdapi.Cluster{Server: c.APIServerURL, CertificateAuthority: c.pki.caFile()}
	cfg.AuthInfos[certName] = &clientcmdapi.AuthInfo{ClientCertificate: c.pki.certFile(certName), ClientKey: c.pki.keyFile(certName)}
	cfg.Contexts["dkc"] = &clientcmdapi.Context{Cluster: "dkc", AuthInfo: certName}
	cfg.CurrentContext = "dkc"
	return clientcmd.WriteToFile(*cfg, path)
}

// UserKubeconfig issues a client certificate for user in groups and returns
// the path of a kubeconfig that uses it, for RBAC tests and node agents.
func (c *Cluster) UserKubeconfig(user string, groups ...string) (string, error) {
	name := "user-" + strings.NewReplacer(":", "-", "/", "-").Replace(user)
	if err := c.pki.issue(name, user, groups, nil, nil, false); err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, name+".kubeconfig")
	return path, c.writeKubeconfig(path, name)
}

// utab is the private libmount table of the cluster's components.
func (c *Cluster) utab() string { return filepath.Join(c.Dir, "libmount", "utab") }

// Node returns the node named name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// NodeNames lists the nodes' names.
func (c *Cluster) NodeNames() []string {
	var names []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
	}
	return names
}

// WaitForNodesReady waits until every node reports Ready.
func (c *Cluster) WaitForNodesReady(ctx context.Context, timeout time.Duration) error {
	var notReady []string
	err := poll(ctx, timeout, func() (bool, error) {
		notReady = notReady[:0]
		for _, n := range c.Nodes {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || !IsReady(node) {
				notReady = append(notReady, n.Name)
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		var logs []string
		for _, name := range notReady {
			logs = append(logs, c.Node(name).LogPath)
		}
		return fmt.Errorf("nodes %v not Ready (kubelet logs: %s): %w", notReady, strings.Join(logs, ", "), err)
	}
	return nil
}

// IsReady reports whether node has condition Ready=True.
func IsReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Stop ends every process the cluster started, by PID, in reverse order
// (kubelets, containerd, apiserver, etcd), then removes the namespaces, links
// and mounts. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		c.stopDKCControllers()
		for _, n := range c.KubeadmNodes {
			n.stop()
		}
		var wg sync.WaitGroup
		for _, n := range c.Nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n.stop()
			}()
		}
		wg.Wait()
		c.stopPodControllers()
		if c.services != nil {
			c.services.stop()
		}
		if c.registry != nil {
			c.registry.stop()
		}
		if c.apiserver != nil {
			_ = c.apiserver.stop(15 * time.Second)
		}
		if c.etcd != nil {
			_ = c.etcd.stop(10 * time.Second)
		}
		if c.net != nil {
			c.net.teardown()
		}
	})
}

// Logs lists the log files of every component, for failure reports.
func (c *Cluster) Logs() []string {
	matches, _ := filepath.Glob(filepath.Join(c.Dir, "logs", "*.log"))
	for _, n := range c.Nodes {
		m, _ := filepath.Glob(filepath.Join(n.Dir, "*.log"))
		matches = append(matches, m...)
	}
	for _, n := range c.KubeadmNodes {
		matches = append(matches, n.Logs()...)
	}
	sort.Strings(matches)
	return matches
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s", timeout)
		case <-tick.C:
		}
	}
}

// Kubectl is the kubectl the tests run: v1.37.2 from the components'
// BinDir (hack/build-components.sh builds it), else the one on PATH.
func Kubectl() (string, error) {
	pinned := filepath.Join(DefaultBinDir(), "kubectl")
	if _, err := os.Stat(pinned); err == nil {
		return pinned, nil
	}
	return exec.LookPath("kubectl")
}
