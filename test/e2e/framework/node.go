package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"
)

// Node is one real kubelet on its own containerd, in its own network and
// mount namespace.
type Node struct {
	Name  string
	IP    string
	NetNS string
	// Dir holds the node's state: kubelet root dir, certs, logs, containerd.
	Dir string
	// ConfigPath is the kubelet's --config file. The harness writes it once
	// at setup; tests and the agent may rewrite it.
	ConfigPath string
	// ConfigDir is the kubelet's --config-dir, for drop-ins.
	ConfigDir string
	// KubeconfigPath holds the node's system:node:NAME credential.
	KubeconfigPath string
	// LogPath is the kubelet's log; ContainerdLogPath containerd's.
	LogPath           string
	ContainerdLogPath string
	// PIDFile holds the running kubelet's PID; the supervisor rewrites it at
	// every start.
	PIDFile string
	// RestartCommand restarts the kubelet the way `systemctl restart kubelet`
	// would: it ends the running kubelet, and returns once the supervisor
	// started a new one. It is the node agent's --restart-command in tests.
	RestartCommand string

	cluster    *Cluster
	mounts     []bindMount
	kubelet    *process
	containerd *process
	agents     []*Agent
}

func (c *Cluster) addNode(i int) (*Node, error) {
	name := c.opts.NodeNamePrefix + strconv.Itoa(i)
	ns, err := c.net.addNode(i)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.Dir, "nodes", name)
	n := &Node{
		Name:              name,
		IP:                c.net.nodeIP(i),
		NetNS:             ns,
		Dir:               dir,
		ConfigPath:        filepath.Join(dir, "kubelet-config.yaml"),
		ConfigDir:         filepath.Join(dir, "kubelet-config.d"),
		KubeconfigPath:    filepath.Join(dir, "kubelet.kubeconfig"),
		LogPath:           filepath.Join(dir, "kubelet.log"),
		ContainerdLogPath: filepath.Join(dir, "containerd.log"),
		PIDFile:           filepath.Join(dir, "kubelet.pid"),
		RestartCommand:    filepath.Join(dir, "restart-kubelet"),
		cluster:           c,
	}
	for _, d := range []string{dir, n.ConfigDir, filepath.Join(dir, "cni", "net.d"), filepath.Join(dir, "varlog"), filepath.Join(dir, "varlib")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	user := "system:node:" + name
	if err := c.pki.issue("node-"+name, user, []string{"system:nodes"}, nil, nil, false); err != nil {
		return nil, err
	}
	if err := c.writeKubeconfig(n.KubeconfigPath, "node-"+name); err != nil {
		return nil, err
	}
	hosts, resolv, err := c.writeNameFiles()
	if err != nil {
		return nil, err
	}
	sysctls, err := sysctlMounts(filepath.Join(c.Dir, "sysctl"))
	if err != nil {
		return nil, err
	}
	n.mounts = append([]bindMount{
		{hosts, "/etc/hosts"},
		{resolv, "/etc/resolv.conf"},
		// The kubelet creates /var/log/containers, /var/log/pods and the
		// hard-coded /var/lib/kubelet/device-plugins.
		{filepath.Join(dir, "varlog"), "/var/log"},
		{filepath.Join(dir, "varlib"), "/var/lib"},
	}, sysctls...)
	if err := n.writeContainerdConfig(); err != nil {
		return nil, err
	}
	if err := os.WriteFile(n.ConfigPath, n.defaultKubeletConfig(), 0o644); err != nil {
		return nil, err
	}
	if err := n.writeRestartCommand(); err != nil {
		return nil, err
	}
	if c.opts.Pods {
		if err := writeRegistryHosts(n.registryHostsDir(), c.Registry); err != nil {
			return nil, err
		}
		if err := c.registry.forward(ns); err != nil {
			return nil, err
		}
	}
	containerdArgv := []string{"containerd", "--config", filepath.Join(dir, "containerd.toml")}
	kubeletArgv := wrapArgv(ns, n.cluster.utab(), n.mounts, n.kubeletArgv())
	if c.opts.Pods {
		containerdArgv = podsContainerdArgv(containerdArgv)
		kubeletArgv = podsWrapArgv(ns, n.cluster.utab(), filepath.Join(dir, "containerd.pid"), n.kubeletArgv())
	}
	n.containerd = c.newProcess(name+"-containerd", wrapArgv(ns, n.cluster.utab(), n.mounts, containerdArgv), false)
	n.containerd.logPath = n.ContainerdLogPath
	if c.opts.Pods {
		n.containerd.pidFile = filepath.Join(dir, "containerd.pid")
	}
	n.kubelet = c.newProcess(name+"-kubelet", kubeletArgv, true)
	n.kubelet.logPath = n.LogPath
	n.kubelet.pidFile = n.PIDFile
	return n, nil
}

func (n *Node) containerdSocket() string { return filepath.Join(n.Dir, "containerd.sock") }

func (n *Node) writeContainerdConfig() error {
	d := n.Dir
	toml := containerdConfig(containerdPaths{
		root:       filepath.Join(d, "containerd", "root"),
		state:      filepath.Join(d, "containerd", "state"),
		socket:     n.containerdSocket(),
		opt:        filepath.Join(d, "containerd", "opt"),
		cniConfDir: filepath.Join(d, "cni", "net.d"),
		cri:        n.criContainerdConfig(),
	})
	if err := os.WriteFile(filepath.Join(d, "containerd.toml"), []byte(toml), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(d, "cni", "net.d", "10-dkc.conflist"), []byte(bridgeConflist(filepath.Join(d, "cni", "ipam"), false)), 0o644)
}

// containerdPaths place a node's containerd.
type containerdPaths struct {
	root, state, socket, opt, cniConfDir string
	// cri is the CRI plugin's own section: the sandbox (pause) image, and
	// where the registries' hosts.toml files are.
	cri string
	// systemdCgroup makes runc place containers through systemd, as the
	// kubelet's cgroupDriver: systemd needs.
	systemdCgroup bool
}

// containerdConfig is a node's containerd config: the paths of p, its CRI
// section, and the CNI plugins from Debian's
// containernetworking-plugins.
func containerdConfig(p containerdPaths) string {
	runc := ""
	if p.systemdCgroup {
		runc = `
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
`
	}
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

%s
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = %q
%s`, p.root, p.state, p.socket, p.socket+".ttrpc", p.opt, p.cri, p.cniConfDir, runc)
}

// bridgeConflist is a bridge network config (Debian's CNI plugins): pods get
// an address of 198.18.0.0/24 on the node's bridge cni0. With gateway, the
// bridge is their default route into the node's network namespace, where
// the node's own addresses (a kubeadm node's Service ClusterIP) answer;
// without, a pod reaches nothing, and the config serves only for the
// runtime to report its network ready, as on the process nodes, which run
// hostNetwork pods only. Pods on different nodes do not reach each other.
func bridgeConflist(ipamDir string, gateway bool) string {
	return fmt.Sprintf(`{"cniVersion":"0.4.0","name":"dkc","plugins":[{"type":"bridge","bridge":"cni0","isDefaultGateway":%t,"ipMasq":false,"ipam":{"type":"host-local","ranges":[[{"subnet":"198.18.0.0/24"}]],"dataDir":%q}}]}`, gateway, ipamDir)
}

// DefaultKubeletConfig is the config the harness gives the node at setup.
func (n *Node) DefaultKubeletConfig() []byte { return n.defaultKubeletConfig() }

func (n *Node) defaultKubeletConfig() []byte {
	cfg := map[string]any{
		"kind":               "KubeletConfiguration",
		"apiVersion":         "kubelet.config.k8s.io/v1beta1",
		"address":            n.IP,
		"healthzBindAddress": n.IP,
		"healthzPort":        10248,
		"port":               10250,
		"readOnlyPort":       0,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": n.cluster.pki.caFile()},
		},
		"authorization":          map[string]any{"mode": "Webhook"},
		"cgroupDriver":           "cgroupfs",
		"cgroupsPerQOS":          false,
		"enforceNodeAllocatable": []string{"none"},
		"failSwapOn":             false,
		"failCgroupV1":           false,
		"maxPods":                110,
		"resolvConf":             "",
		"podLogsDir":             filepath.Join(n.Dir, "pod-logs"),
		"volumePluginDir":        filepath.Join(n.Dir, "volume-plugins"),
		"evictionHard": map[string]string{
			"memory.available":   "1Mi",
			"nodefs.available":   "1%",
			"imagefs.available":  "1%",
			"nodefs.inodesFree":  "1%",
			"imagefs.inodesFree": "1%",
		},
		"containerRuntimeEndpoint": "unix://" + n.containerdSocket(),
	}
	if n.cluster.opts.LegacyKubelet {
		delete(cfg, "containerRuntimeEndpoint")
		delete(cfg, "failCgroupV1")
		delete(cfg, "podLogsDir")
		// 1.23 refuses [none] without cgroupsPerQOS; an empty list works
		// there, while 1.36 treats an empty list as the default [pods].
		cfg["enforceNodeAllocatable"] = []string{}
	}
	if n.cluster.opts.KubeletConfig != nil {
		n.cluster.opts.KubeletConfig(n, cfg)
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		panic(err) // a map of plain values always marshals
	}
	return b
}

func (n *Node) kubeletArgv() []string {
	argv := []string{
		filepath.Join(n.cluster.opts.KubeletBinDir, "kubelet"),
		"--config=" + n.ConfigPath,
		"--kubeconfig=" + n.KubeconfigPath,
		"--root-dir=" + filepath.Join(n.Dir, "kubelet"),
		"--cert-dir=" + filepath.Join(n.Dir, "pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
	}
	if n.cluster.opts.LegacyKubelet {
		argv = append(argv, "--container-runtime=remote", "--container-runtime-endpoint=unix://"+n.containerdSocket())
	} else {
		argv = append(argv, "--config-dir="+n.ConfigDir)
	}
	argv = append(argv, n.cluster.opts.KubeletFlags...)
	if n.cluster.opts.NodeKubeletFlags != nil {
		argv = append(argv, n.cluster.opts.NodeKubeletFlags(n)...)
	}
	return argv
}

// writeRestartCommand writes the script that restarts the kubelet: it ends
// the kubelet by the PID the supervisor recorded and waits for the next one.
func (n *Node) writeRestartCommand() error {
	return os.WriteFile(n.RestartCommand, []byte(n.restartScript(n.PIDFile)), 0o755)
}

// restartScript is the restart command's text, reading the kubelet's PID
// from pidFile.
func (n *Node) restartScript(pidFile string) string {
	return fmt.Sprintf(`#!/bin/sh
# Restarts %[1]s's kubelet, as "systemctl restart kubelet" would: the harness
# supervisor starts a new kubelet when the old one exits.
set -u
pidfile=%[2]s
old=$(cat "$pidfile" 2>/dev/null || true)
if [ -n "$old" ]; then kill -TERM "$old" 2>/dev/null || true; fi
i=0
while [ $i -lt 600 ]; do
  new=$(cat "$pidfile" 2>/dev/null || true)
  if [ -n "$new" ] && [ "$new" != "$old" ] && kill -0 "$new" 2>/dev/null; then exit 0; fi
  sleep 0.05
  i=$((i+1))
done
echo "kubelet on %[1]s did not start again within 30s" >&2
exit 1
`, n.Name, shellQuote(pidFile))
}

func (n *Node) start() error {
	if err := n.containerd.start(); err != nil {
		return err
	}
	err := poll(context.Background(), 30*time.Second, func() (bool, error) {
		if n.containerd.pid() == 0 {
			return false, fmt.Errorf("containerd on %s exited (log: %s)", n.Name, n.ContainerdLogPath)
		}
		_, err := os.Stat(n.containerdSocket())
		return err == nil, nil
	})
	if err != nil {
		return err
	}
	return n.kubelet.start()
}

func (n *Node) stop() {
	for _, a := range n.agents {
		_ = a.Stop()
	}
	if n.kubelet != nil {
		_ = n.kubelet.stop(15 * time.Second)
	}
	if n.cluster.opts.Pods && n.containerd != nil && n.containerd.pid() != 0 {
		n.removeContainers()
	}
	if n.containerd != nil {
		_ = n.containerd.stop(10 * time.Second)
	}
	if n.cluster.opts.Pods {
		n.killShims()
	}
}

// StopKubelet stops the kubelet and keeps it stopped.
func (n *Node) StopKubelet() error { return n.kubelet.stop(15 * time.Second) }

// StartKubelet starts a stopped kubelet under supervision.
func (n *Node) StartKubelet() error { return n.kubelet.start() }

// RestartKubelet stops the kubelet and starts it again on ConfigPath.
func (n *Node) RestartKubelet() error {
	if err := n.StopKubelet(); err != nil {
		return err
	}
	return n.StartKubelet()
}

// RestartKubeletWithConfig writes config to ConfigPath and restarts.
func (n *Node) RestartKubeletWithConfig(config []byte) error {
	if err := n.StopKubelet(); err != nil {
		return err
	}
	if err := os.WriteFile(n.ConfigPath, config, 0o644); err != nil {
		return err
	}
	return n.StartKubelet()
}

// KubeletPID is the running kubelet's PID, or 0.
func (n *Node) KubeletPID() int { return n.kubelet.pid() }

// KubeletStarts counts how often the kubelet was started.
func (n *Node) KubeletStarts() int {
	n.kubelet.mu.Lock()
	defer n.kubelet.mu.Unlock()
	return n.kubelet.starts
}

// Command returns cmd name args run inside the node's network and mount
// namespace, with the node's private /etc/hosts, as a DaemonSet pod with
// hostNetwork would run. The caller starts it and ends it by its PID.
func (n *Node) Command(name string, args ...string) *exec.Cmd {
	argv := wrapArgv(n.NetNS, n.cluster.utab(), n.mounts[:2], append([]string{name}, args...))
	return exec.Command(argv[0], argv[1:]...)
}
