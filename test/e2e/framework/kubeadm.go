package framework

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A kubeadm node is built the way an operator builds a worker node: a
// systemd runs as PID 1 of the node's own namespaces (StartSystemdWith,
// with the node's network namespace and every cgroup v1 controller) and
// starts containerd.service, Debian's unit, and kubelet.service, the unit
// and 10-kubeadm.conf drop-in of the upstream kubelet and kubeadm packages;
// then `kubeadm join`, run inside the node, writes /var/lib/kubelet/
// config.yaml from the kubelet-config ConfigMap, kubeadm-flags.env and the
// bootstrap kubeconfig, and restarts kubelet.service; the kubelet's TLS
// bootstrap writes /etc/kubernetes/kubelet.conf.
//
// The node's /etc, /var/lib, /var/log, /opt, /usr/libexec and /usr/local
// are overlays
// whose upper layers live in the node's directory, so that nothing kubeadm,
// the kubelet or containerd write reaches the host's; /run is a private
// tmpfs.

// kubeletUnit is kubelet.service as the upstream deb and rpm packages ship
// it (kubernetes/release), with ExecStart pointing at the harness's
// kubelet instead of /usr/bin/kubelet.
const kubeletUnit = `[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=%s
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`

// kubeadmDropIn is 10-kubeadm.conf as the upstream kubeadm package ships it
// (kubelet.service.d), with the harness's kubelet in ExecStart.
const kubeadmDropIn = `# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# This is a file that "kubeadm init" and "kubeadm join" generates at runtime, populating the KUBELET_KUBEADM_ARGS variable dynamically
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
# This is a file that the user can use for overrides of the kubelet args as a last resort. Preferably, the user should use
# the .NodeRegistration.KubeletExtraArgs object in the configuration files instead. KUBELET_EXTRA_ARGS should be sourced from this file.
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=%s $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`

// KubeadmIgnoredPreflightErrors are the `kubeadm join` preflight checks
// that cannot pass in the harness, each with the reason; docs/development.md
// lists them with kubeadm's exact messages.
var KubeadmIgnoredPreflightErrors = map[string]string{
	// These machines mount cgroup v1. kubeadm 1.37's system verification
	// fails on it, and says to set the kubelet's failCgroupV1: false (the
	// kubelet-config ConfigMap does) and to skip this check.
	"SystemVerification": "cgroup v1: kubeadm says to set failCgroupV1: false and skip this check",
}

// KubeadmNode is a node that `kubeadm join` set up under its own systemd.
type KubeadmNode struct {
	Name  string
	IP    string
	NetNS string
	// Dir holds the node's state: the overlays' upper layers, containerd's
	// root, the manager's unit directory and console, and logs.
	Dir string
	// Systemd is the node's PID 1; Systemd.Path reaches the node's files.
	Systemd *Systemd
	// UnitDir is the manager's unit path: kubelet.service and
	// kubelet.service.d/10-kubeadm.conf are there.
	UnitDir string
	// JoinLog holds `kubeadm join`'s output.
	JoinLog string

	cluster *Cluster
	opts    KubeadmNodeOptions
}

// kubeadmOverlays are the node's directories whose writes go to the node.
var kubeadmOverlays = []string{"/etc", "/var/lib", "/var/log", "/opt", "/usr/libexec", "/usr/local"}

// KubeadmKubeletConfig is the KubeletConfiguration the cluster's kubeadm
// config gives the kubelet-config ConfigMap: kubeadm's defaults, except
// what a cgroup v1 machine needs (failCgroupV1: false), and eviction
// thresholds of 1%: the nodes' files are on the host's disk, whose free
// space the tests do not control, and the default thresholds (imagefs
// under 15% free) put a node under DiskPressure on a host that is 86% full,
// which evicts pods and fails the agent's health gate.
const KubeadmKubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
failCgroupV1: false
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.inodesFree: 1%
`

// serviceSubnet is the cluster's Service CIDR (the apiserver's
// --service-cluster-ip-range, kubeadm's networking.serviceSubnet).
const serviceSubnet = "10.0.0.0/24"

// KubernetesServiceIP is the ClusterIP of the default/kubernetes Service,
// the first address of serviceSubnet: what a pod's KUBERNETES_SERVICE_HOST
// says. The apiserver's serving certificate names it.
const KubernetesServiceIP = "10.0.0.1"

// kubeadmToken is the bootstrap token nodes join with.
func (c *Cluster) kubeadmToken() string { return c.kubeadm.token }

// prepareKubeadm runs, once, what `kubeadm init` leaves for joining nodes
// on the cluster's own control plane, with kubeadm's phases:
// upload-config (the kubeadm-config and kubelet-config ConfigMaps) and
// bootstrap-token (the token, its RBAC, and the cluster-info ConfigMap,
// which the bootstrap signer then signs).
func (c *Cluster) prepareKubeadm(ctx context.Context) error {
	if c.kubeadm.token != "" {
		return nil
	}
	dir := filepath.Join(c.Dir, "kubeadm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := exec.Command(c.kubeadmBinary(), "version", "-o", "short").Output()
	if err != nil {
		return fmt.Errorf("kubeadm version: %w", err)
	}
	version := strings.TrimSpace(string(out))
	token := randomString(6) + "." + randomString(16)
	host, port, _ := strings.Cut(strings.TrimPrefix(c.APIServerURL, "https://"), ":")
	config := fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- token: %q
  description: dkc e2e
  ttl: 2h
  usages: [signing, authentication]
  groups: [system:bootstrappers:kubeadm:default-node-token]
localAPIEndpoint:
  advertiseAddress: %s
  bindPort: %s
nodeRegistration:
  name: dkc-control-plane
  criSocket: unix:///run/containerd/containerd.sock
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: dkc
kubernetesVersion: %s
controlPlaneEndpoint: %q
networking:
  serviceSubnet: %s
`, token, host, port, version, host+":"+port, serviceSubnet)
	c.kubeadm.config = config
	for _, phase := range [][]string{{"upload-config", "kubeadm"}, {"upload-config", "kubelet"}, {"bootstrap-token", "--skip-token-print"}} {
		if err := c.kubeadmInitPhase(ctx, KubeadmKubeletConfig, phase...); err != nil {
			return err
		}
	}
	// Token discovery needs cluster-info signed for the token.
	id, _, _ := strings.Cut(token, ".")
	err = poll(ctx, time.Minute, func() (bool, error) {
		cm, err := c.Client.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
		return err == nil && cm.Data["jws-kubeconfig-"+id] != "", nil
	})
	if err != nil {
		return fmt.Errorf("the bootstrap signer did not sign cluster-info for token %s: %w", id, err)
	}
	c.kubeadm.token = token
	return nil
}

func (c *Cluster) kubeadmBinary() string { return filepath.Join(c.opts.BinDir, "kubeadm") }

// kubeadmState is the cluster's part of kubeadm: the token nodes join
// with, and the InitConfiguration and ClusterConfiguration of the cluster's
// kubeadm config (kubeadm/kubeadm.yaml, with a KubeletConfiguration).
type kubeadmState struct{ token, config string }

// kubeadmInitPhase runs `kubeadm init phase PHASE...` against the cluster,
// with its kubeadm config and kubelet as the KubeletConfiguration, and
// keeps the output in the kubeadm directory.
func (c *Cluster) kubeadmInitPhase(ctx context.Context, kubelet string, phase ...string) error {
	dir := filepath.Join(c.Dir, "kubeadm")
	path := filepath.Join(dir, "kubeadm.yaml")
	if err := os.WriteFile(path, []byte(c.kubeadm.config+"---\n"+kubelet), 0o600); err != nil {
		return err
	}
	argv := append([]string{c.kubeadmBinary(), "init", "phase"}, phase...)
	argv = append(argv, "--config="+path, "--kubeconfig="+c.Kubeconfig)
	// A private /run: kubeadm asks an init system whether
	// systemd-resolved runs; it finds none, not the host's.
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c",
		`mount -n -t tmpfs tmpfs /run && exec "$@"`, "dkc-kubeadm"}, argv...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubeadm init phase %s: %w\n%s", strings.Join(phase, " "), err, out)
	}
	return os.WriteFile(filepath.Join(dir, "init-phase-"+phase[0]+"-"+strings.TrimPrefix(phase[1], "--")+".log"), out, 0o644)
}

// UploadKubeletConfig uploads kubelet as the cluster's kubelet-config
// ConfigMap, with kubeadm's own `init phase upload-config kubelet`, as
// `kubeadm upgrade apply` does with a new version's KubeletConfiguration.
// kubelet must keep KubeadmKubeletConfig's fields for the harness's nodes
// to run.
func (c *Cluster) UploadKubeletConfig(ctx context.Context, kubelet string) error {
	if c.kubeadm.config == "" {
		return fmt.Errorf("upload kubelet-config: no kubeadm node joined the cluster yet")
	}
	return c.kubeadmInitPhase(ctx, kubelet, "upload-config", "kubelet")
}

// KubeadmNodeOptions are a kubeadm node's own settings.
type KubeadmNodeOptions struct {
	// KubeletBinDir holds the node's kubelet, which kubelet.service runs;
	// default the cluster's Options.KubeletBinDir.
	KubeletBinDir string
	// KubeletConfigDir, when set, is the kubelet's --config-dir, as
	// docs/install.md tells an operator to set it for dkc's drop-in mode:
	// the directory made on the node, and the flag given through the
	// JoinConfiguration's nodeRegistration.kubeletExtraArgs.
	KubeletConfigDir string
	// KubeletExtraArgs are more kubelet flags, by name without the
	// dashes, given as KubeletConfigDir is.
	KubeletExtraArgs map[string]string
	// Taints are the JoinConfiguration's nodeRegistration.taints: the
	// taints the kubelet registers the Node with.
	Taints []corev1.Taint
}

// StartKubeadmNode boots a node named name under its own systemd, has
// `kubeadm join` set its kubelet up, and waits until the node is Ready. The
// cluster must have been started with Options.Kubeadm. On error the node,
// if not nil, is kept (stopped with the cluster) so that its logs can be
// read.
func (c *Cluster) StartKubeadmNode(ctx context.Context, name string) (*KubeadmNode, error) {
	return c.StartKubeadmNodeWith(ctx, name, KubeadmNodeOptions{})
}

// StartKubeadmNodeWith is StartKubeadmNode with the node's own options.
func (c *Cluster) StartKubeadmNodeWith(ctx context.Context, name string, opts KubeadmNodeOptions) (*KubeadmNode, error) {
	if opts.KubeletBinDir == "" {
		opts.KubeletBinDir = c.opts.KubeletBinDir
	}
	if !c.opts.Kubeadm {
		return nil, fmt.Errorf("start kubeadm node %s: the cluster was started without Options.Kubeadm", name)
	}
	if err := c.prepareKubeadm(ctx); err != nil {
		return nil, fmt.Errorf("start kubeadm node %s: %w", name, err)
	}
	began := time.Now()
	i := c.opts.Nodes + len(c.KubeadmNodes) + 1
	ns, err := c.net.addNode(i)
	if err != nil {
		return nil, err
	}
	n := &KubeadmNode{
		Name:    name,
		IP:      c.net.nodeIP(i),
		NetNS:   ns,
		Dir:     c.kubeadmNodeDir(name),
		cluster: c,
		opts:    opts,
	}
	n.UnitDir = filepath.Join(n.Dir, "systemd", "units")
	n.JoinLog = filepath.Join(n.Dir, "kubeadm-join.log")
	c.KubeadmNodes = append(c.KubeadmNodes, n)
	if c.opts.Pods {
		// In the node's network namespace, which outlives a reboot.
		if err := c.routeServices(ns); err != nil {
			return n, fmt.Errorf("start kubeadm node %s: %w", name, err)
		}
		if err := c.registry.forward(ns); err != nil {
			return n, fmt.Errorf("start kubeadm node %s: %w", name, err)
		}
	}
	if err := n.boot(); err != nil {
		return n, fmt.Errorf("start kubeadm node %s: %w", name, err)
	}
	if err := n.join(ctx); err != nil {
		return n, fmt.Errorf("start kubeadm node %s: %w", name, err)
	}
	err = poll(ctx, 2*time.Minute, func() (bool, error) {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && IsReady(node), nil
	})
	if err != nil {
		return n, fmt.Errorf("kubeadm node %s not Ready (logs: %s): %w", name, strings.Join(n.Logs(), ", "), err)
	}
	c.logf("kubeadm node %s Ready %s after its start", name, time.Since(began).Round(time.Millisecond))
	return n, nil
}

// upper is the upper layer of the node's overlay of dir.
func (n *KubeadmNode) upper(dir string) string {
	return filepath.Join(n.Dir, "root", strings.Trim(strings.ReplaceAll(dir, "/", "_"), "_"), "upper")
}

// boot writes the node's files and units and starts its systemd.
func (n *KubeadmNode) boot() error {
	c := n.cluster
	var setup strings.Builder
	for _, dir := range kubeadmOverlays {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		upper := n.upper(dir)
		work := filepath.Join(filepath.Dir(upper), "work")
		for _, d := range []string{upper, work} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		fmt.Fprintf(&setup, "mount -n -t overlay overlay -o %s %s\n",
			shellQuote("lowerdir="+dir+",upperdir="+upper+",workdir="+work), shellQuote(dir))
	}
	// containerd's overlayfs snapshotter cannot keep its layers on an
	// overlay: its root is a directory of the node's on the host's disk.
	containerdRoot := filepath.Join(n.Dir, "containerd")
	if err := os.MkdirAll(containerdRoot, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(&setup, "mkdir -p /var/lib/containerd\nmount -n --bind %s /var/lib/containerd\n", shellQuote(containerdRoot))
	// The /proc/sys files the kubelet writes, covered by files that hold
	// the values it wants (sysctlMounts), over the read-only /proc/sys.
	sysctls, err := sysctlMounts(filepath.Join(c.Dir, "sysctl"))
	if err != nil {
		return err
	}
	for _, m := range sysctls {
		fmt.Fprintf(&setup, "mount -n --bind %s %s\n", shellQuote(m.source), shellQuote(m.target))
	}

	etc := n.upper("/etc")
	registryHosts := ""
	if c.opts.Pods {
		registryHosts = "/etc/containerd/certs.d"
		if err := writeRegistryHosts(filepath.Join(etc, "containerd", "certs.d"), c.Registry); err != nil {
			return err
		}
	}
	hosts := fmt.Sprintf("127.0.0.1 localhost\n::1 localhost\n%s %s\n", n.IP, n.Name)
	files := map[string]string{
		filepath.Join(etc, "hostname"):    n.Name + "\n",
		filepath.Join(etc, "hosts"):       hosts,
		filepath.Join(etc, "resolv.conf"): "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n",
		filepath.Join(etc, "containerd", "config.toml"): containerdConfig(containerdPaths{
			root:          "/var/lib/containerd",
			state:         "/run/containerd",
			socket:        "/run/containerd/containerd.sock",
			opt:           "/var/lib/containerd/opt",
			cniConfDir:    "/etc/cni/net.d",
			cri:           criConfig(c.PauseImage(), registryHosts),
			systemdCgroup: true,
		}),
		filepath.Join(etc, "cni", "net.d", "10-dkc.conflist"): bridgeConflist("/var/lib/cni/networks", true),
	}
	for path, body := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return err
		}
	}

	containerdUnit, err := os.ReadFile("/lib/systemd/system/containerd.service")
	if err != nil {
		return fmt.Errorf("read Debian's containerd.service: %w", err)
	}
	kubelet := filepath.Join(n.opts.KubeletBinDir, "kubelet")
	// The node runs no journald: each service's output goes to a file.
	logTo := func(name string) string {
		return "[Service]\nStandardOutput=append:/var/log/" + name + ".log\nStandardError=inherit\n"
	}
	units := map[string]string{
		"containerd.service": string(containerdUnit),
		// The harness never loads kernel modules (Debian's unit runs
		// modprobe overlay; overlay is there already).
		"containerd.service.d/50-dkc-e2e.conf":     "[Service]\nExecStartPre=\n",
		"containerd.service.d/60-dkc-e2e-log.conf": logTo("containerd"),
		"kubelet.service":                          fmt.Sprintf(kubeletUnit, kubelet),
		"kubelet.service.d/10-kubeadm.conf":        fmt.Sprintf(kubeadmDropIn, kubelet),
		"kubelet.service.d/60-dkc-e2e-log.conf":    logTo("kubelet"),
		"multi-user.target":                        "[Unit]\nDescription=Multi-User System\nWants=containerd.service kubelet.service\n",
	}
	// Targets a service with default dependencies orders itself against;
	// this manager boots no system, so they are empty.
	for _, target := range []string{"sysinit.target", "basic.target", "shutdown.target", "network.target", "network-online.target", "local-fs.target"} {
		units[target] = "[Unit]\nDefaultDependencies=no\n"
	}
	// kubeadm's preflight checks that the kubelet's port is free and that
	// /proc/sys/net/ipv4/ip_forward is 1, as on a real node; both are the
	// node's own network namespace's, not the host's.
	if out, err := exec.Command("nsenter", "--net=/run/netns/"+n.NetNS, "--", "/bin/sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward").CombinedOutput(); err != nil {
		return fmt.Errorf("set ip_forward in netns %s: %v: %s", n.NetNS, err, out)
	}
	sd, err := StartSystemdWith(filepath.Join(n.Dir, "systemd"), units, SystemdOptions{
		NetNS:       n.NetNS,
		Controllers: true,
		Setup:       setup.String(),
		Wants:       []string{"multi-user.target"},
	})
	if sd != nil {
		n.Systemd = sd
	}
	if err != nil {
		return err
	}
	return nil
}

// routeServices makes the kubernetes Service's ClusterIP reach the
// apiserver inside netns, as kube-proxy does on a real node, so that pods
// reach the apiserver as in-cluster clients do (KUBERNETES_SERVICE_HOST and
// _PORT, which the kubelet sets from the Service): the address is added to
// the netns's loopback, and a forwarder of the harness's listens on it and
// copies each connection to the apiserver. Pods on the node's bridge route
// to it through the node (the CNI config's gateway).
func (c *Cluster) routeServices(netns string) error {
	if err := ipCmd("-n", netns, "addr", "add", KubernetesServiceIP+"/32", "dev", "lo"); err != nil {
		return err
	}
	if c.services == nil {
		c.services = newForwarder(strings.TrimPrefix(c.APIServerURL, "https://"), c.logf)
	}
	if err := c.services.listen(netns, KubernetesServiceIP+":443"); err != nil {
		return fmt.Errorf("forward the kubernetes Service in netns %s to the apiserver: %w", netns, err)
	}
	return nil
}

// join runs `kubeadm join` inside the node, as an operator would on it
// once the node booted: after containerd.service is up (Type=notify, so
// active means its socket serves).
func (n *KubeadmNode) join(ctx context.Context) error {
	c := n.cluster
	err := poll(ctx, time.Minute, func() (bool, error) {
		out, _ := n.Systemd.Systemctl("is-active", "containerd.service")
		return strings.TrimSpace(out) == "active", nil
	})
	if err != nil {
		return fmt.Errorf("containerd.service did not become active (log: %s): %w", n.Logs()[2], err)
	}
	hash := sha256.Sum256(c.pki.caCert.RawSubjectPublicKeyInfo)
	var ignore []string
	for check := range KubeadmIgnoredPreflightErrors {
		ignore = append(ignore, check)
	}
	slices.Sort(ignore)
	// The JoinConfiguration an operator would write: token discovery, and
	// the kubelet's extra flags, which kubeadm writes into
	// kubeadm-flags.env.
	config := fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: %q
    token: %q
    caCertHashes: [%q]
nodeRegistration:
  ignorePreflightErrors: [%s]
`, strings.TrimPrefix(c.APIServerURL, "https://"), c.kubeadmToken(), "sha256:"+hex.EncodeToString(hash[:]), strings.Join(ignore, ", "))
	args := maps.Clone(n.opts.KubeletExtraArgs)
	if dir := n.opts.KubeletConfigDir; dir != "" {
		if err := os.MkdirAll(n.Path(dir), 0o755); err != nil {
			return err
		}
		if args == nil {
			args = map[string]string{}
		}
		args["config-dir"] = dir
	}
	if len(n.opts.Taints) > 0 {
		config += "  taints:\n"
		for _, t := range n.opts.Taints {
			config += fmt.Sprintf("  - key: %q\n    value: %q\n    effect: %q\n", t.Key, t.Value, t.Effect)
		}
	}
	if len(args) > 0 {
		config += "  kubeletExtraArgs:\n"
		for _, name := range slices.Sorted(maps.Keys(args)) {
			config += fmt.Sprintf("  - name: %s\n    value: %q\n", name, args[name])
		}
	}
	configPath := filepath.Join(n.Dir, "kubeadm-join.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return err
	}
	log, err := os.Create(n.JoinLog)
	if err != nil {
		return err
	}
	defer log.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	err = n.Kubeadm(ctx, log, "join", "--config="+configPath, "--v=1")
	if err != nil {
		return fmt.Errorf("kubeadm join: %w (output: %s)\n%s", err, n.JoinLog, tail(n.JoinLog, 30))
	}
	return nil
}

// Kubeadm runs the cluster's kubeadm with args inside the node (its mount,
// PID, network, UTS and IPC namespaces), as an operator runs it on the
// node, writing its output to out.
func (n *KubeadmNode) Kubeadm(ctx context.Context, out io.Writer, args ...string) error {
	c := n.cluster
	argv := append([]string{
		"nsenter", "-t", strconv.Itoa(n.Systemd.PID), "-m", "-p", "-n", "-u", "-i", "--",
		"env", "PATH=" + n.opts.KubeletBinDir + ":/usr/sbin:/usr/bin:/sbin:/bin",
		c.kubeadmBinary(),
	}, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd.Run()
}

// Reboot stops the node's systemd, which ends every process of the node,
// runs whileDown (if not nil), and boots the node again on the same files,
// as a machine reboots: what the node wrote under its overlays stays, /run
// starts empty, and the units that the manager's unit path holds start
// again. It waits until the kubelet posts a Ready status after the boot.
func (n *KubeadmNode) Reboot(ctx context.Context, whileDown func() error) error {
	c := n.cluster
	n.Systemd.Stop()
	if whileDown != nil {
		if err := whileDown(); err != nil {
			return fmt.Errorf("reboot %s: while it is down: %w", n.Name, err)
		}
	}
	began := time.Now()
	if err := n.boot(); err != nil {
		return fmt.Errorf("reboot %s: %w", n.Name, err)
	}
	// Ready, and the kubelet's Lease renewed since the boot: the Lease's
	// renewTime has microseconds, where the Ready condition's heartbeat has
	// whole seconds and a kubelet that starts in under a second may post
	// its first status with a heartbeat before began, and the next only
	// minutes later.
	err := poll(ctx, 2*time.Minute, func() (bool, error) {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil || !IsReady(node) {
			return false, nil
		}
		lease, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{})
		return err == nil && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(began), nil
	})
	if err != nil {
		return fmt.Errorf("%s not Ready after its reboot (logs: %s): %w", n.Name, strings.Join(n.Logs(), ", "), err)
	}
	c.logf("kubeadm node %s rebooted, Ready %s after", n.Name, time.Since(began).Round(time.Millisecond))
	return nil
}

// DiskPath is where path, a file the node wrote under one of its overlays
// (/etc, /var/lib, ...), is kept on the host's disk: its overlay's upper
// layer. It is reachable while the node is down (Reboot's whileDown),
// where Path is not.
func (n *KubeadmNode) DiskPath(path string) (string, error) {
	for _, dir := range kubeadmOverlays {
		if rel, err := filepath.Rel(dir, path); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(n.upper(dir), rel), nil
		}
	}
	return "", fmt.Errorf("%s is on none of the node's overlays %v", path, kubeadmOverlays)
}

// Path is path inside the node, seen from the host.
func (n *KubeadmNode) Path(path string) string { return n.Systemd.Path(path) }

// KubeletMainPID is kubelet.service's main PID in the node's PID namespace,
// or 0.
func (n *KubeadmNode) KubeletMainPID() (int, error) {
	out, err := n.Systemd.Systemctl("show", "--property=MainPID", "--value", "kubelet.service")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// kubeadmNodeDir is the directory of kubeadm node name (KubeadmNode.Dir).
func (c *Cluster) kubeadmNodeDir(name string) string {
	return filepath.Join(c.Dir, "kubeadm-nodes", name)
}

// KubeadmKubeletStarts is KubeletStarts of kubeadm node name, which may be
// joining still (StartKubeadmNodeWith has not returned it yet).
func (c *Cluster) KubeadmKubeletStarts(name string) (int, error) {
	return (&KubeadmNode{Dir: c.kubeadmNodeDir(name)}).KubeletStarts()
}

// KubeletStarts counts the starts of the node's kubelet that got as far
// as running: the lines of the kubelet's log where it names its version,
// which it logs once per start, after it loaded its config. A kubelet that
// fails before (kubelet.service before kubeadm join wrote its config)
// does not count.
func (n *KubeadmNode) KubeletStarts() (int, error) {
	b, err := os.ReadFile(n.Logs()[3])
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), `"Kubelet version"`), nil
}

// KillContainer sends SIGKILL to the running container id (its CRI ID)
// through the node's own containerd, as `kill -9` of its process would.
func (n *KubeadmNode) KillContainer(id string) error {
	_, err := n.Systemd.Exec("ctr", "--namespace", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id)
	return err
}

// Logs lists the node's log files: the manager's console, kubeadm join's
// output, containerd's and the kubelet's.
func (n *KubeadmNode) Logs() []string {
	logs := []string{filepath.Join(n.Dir, "systemd", "console.log"), n.JoinLog}
	for _, name := range []string{"containerd", "kubelet"} {
		logs = append(logs, filepath.Join(n.upper("/var/log"), name+".log"))
	}
	return logs
}

func (n *KubeadmNode) stop() {
	if n.Systemd != nil {
		n.Systemd.Stop()
	}
}

// randomString is n characters of [a-z0-9], as in a bootstrap token.
func randomString(n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(chars))))
		if err != nil {
			panic(err) // crypto/rand does not fail on Linux
		}
		b[i] = chars[k.Int64()]
	}
	return string(b)
}
