package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The harness's network. Each cluster takes one /26 block of 198.51.100.0/24
// (TEST-NET-2, never routed): a host bridge dkcbrK holds .64K+1, and node i
// lives in netns dkcKnI with eth0 at .64K+10+i, joined to the bridge by the
// veth dkcKvI. A node has no default route, so it reaches nothing but the
// bridge. Every link has addrgenmode none, so IPv6 sends nothing.
const (
	maxBlocks  = 4
	netPrefix  = "198.51.100."
	netMaskLen = 26
	runDir     = "/run/kubectl-dkc"
)

// runNetnsMarker records that a harness found /run/netns unmounted: `ip
// netns add` mounts it, and the last network of any harness on the machine
// to be torn down undoes that mount. Both happen under lockRunDir.
const runNetnsMarker = runDir + "/run-netns-mounted"

type network struct {
	block  int
	bridge string
	hostIP string
	netns  []string
	veths  []string
	logf   func(string, ...any)
}

func (n *network) nodeIP(i int) string    { return netPrefix + strconv.Itoa(64*n.block+10+i) }
func (n *network) netnsName(i int) string { return fmt.Sprintf("dkc%dn%d", n.block, i) }
func (n *network) vethName(i int) string  { return fmt.Sprintf("dkc%dv%d", n.block, i) }

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// newNetwork claims a free block by creating its bridge. A block whose owner
// (recorded in /run/kubectl-dkc/blockK.pid) is dead is cleaned up first.
func newNetwork(logf func(string, ...any)) (*network, error) {
	unlock, err := lockRunDir()
	if err != nil {
		return nil, err
	}
	defer unlock()
	for b := 0; b < maxBlocks; b++ {
		n := &network{block: b, bridge: fmt.Sprintf("dkcbr%d", b), hostIP: netPrefix + strconv.Itoa(64*b+1), logf: logf}
		owner := filepath.Join(runDir, fmt.Sprintf("block%d.pid", b))
		if linkExists(n.bridge) {
			if ownerAlive(owner) {
				continue
			}
			logf("cleaning up network block %d left by a harness that died", b)
			n.cleanupStale()
		}
		if err := ipCmd("link", "add", n.bridge, "type", "bridge"); err != nil {
			continue // another harness took it first
		}
		if err := os.WriteFile(owner, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			n.teardownLocked()
			return nil, err
		}
		for _, args := range [][]string{
			{"link", "set", n.bridge, "addrgenmode", "none"},
			{"addr", "add", n.hostIP + "/" + strconv.Itoa(netMaskLen), "dev", n.bridge},
			{"link", "set", n.bridge, "up"},
		} {
			if err := ipCmd(args...); err != nil {
				n.teardownLocked()
				return nil, err
			}
		}
		// Its bridge claimed, the network counts as running for every
		// harness's releaseRunNetns from here on.
		if !isMountPoint("/run/netns") {
			if err := os.WriteFile(runNetnsMarker, nil, 0o644); err != nil {
				n.teardownLocked()
				return nil, err
			}
		}
		return n, nil
	}
	return nil, fmt.Errorf("no free network block: bridges dkcbr0..dkcbr%d are all owned by running harnesses", maxBlocks-1)
}

// addNode creates node i's netns and links and returns its netns name.
func (n *network) addNode(i int) (string, error) {
	ns, veth, ip := n.netnsName(i), n.vethName(i), n.nodeIP(i)
	if err := ipCmd("netns", "add", ns); err != nil {
		return "", err
	}
	n.netns = append(n.netns, ns)
	n.veths = append(n.veths, veth)
	for _, args := range [][]string{
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"link", "set", veth, "addrgenmode", "none"},
		{"link", "set", veth, "master", n.bridge, "up"},
		{"-n", ns, "link", "set", "eth0", "addrgenmode", "none"},
		{"-n", ns, "addr", "add", ip + "/" + strconv.Itoa(netMaskLen), "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			return "", err
		}
	}
	return ns, nil
}

// teardown removes every netns, link and mount the network made. Processes
// inside the namespaces must be stopped first.
func (n *network) teardown() {
	unlock, err := lockRunDir()
	if err != nil {
		n.logf("tear down network block %d: %v", n.block, err)
		return
	}
	defer unlock()
	n.teardownLocked()
}

// teardownLocked is teardown, under lockRunDir.
func (n *network) teardownLocked() {
	// Deleting a veth removes both ends at once; left to the namespace's
	// deletion, the kernel removes them asynchronously, after teardown.
	for _, veth := range n.veths {
		if linkExists(veth) {
			if err := ipCmd("link", "del", veth); err != nil {
				n.logf("%v", err)
			}
		}
	}
	n.veths = nil
	for _, ns := range n.netns {
		if err := ipCmd("netns", "del", ns); err != nil {
			n.logf("%v", err)
		}
	}
	n.netns = nil
	if linkExists(n.bridge) {
		if err := ipCmd("link", "del", n.bridge); err != nil {
			n.logf("%v", err)
		}
	}
	_ = os.Remove(filepath.Join(runDir, fmt.Sprintf("block%d.pid", n.block)))
	releaseRunNetns()
}

// releaseRunNetns undoes the /run/netns mount that `ip netns add` makes
// when a harness found it unmounted (runNetnsMarker), no harness's network
// runs any more, and no namespace is left in it. Then runDir goes too, if
// nothing else is in it.
func releaseRunNetns() {
	defer os.Remove(runDir) // fails unless empty
	if _, err := os.Stat(runNetnsMarker); err != nil {
		return
	}
	for b := 0; b < maxBlocks; b++ {
		if linkExists(fmt.Sprintf("dkcbr%d", b)) {
			return // the last network undoes it
		}
	}
	entries, err := os.ReadDir("/run/netns")
	if err != nil || len(entries) > 0 {
		return
	}
	for isMountPoint("/run/netns") {
		if err := syscall.Unmount("/run/netns", syscall.MNT_DETACH); err != nil {
			break
		}
	}
	_ = os.Remove("/run/netns")
	_ = os.Remove(runNetnsMarker)
}

// lockRunDir creates runDir and holds an exclusive lock on it, across the
// harnesses of the machine, until unlock. The last harness to finish
// removes runDir: the lock is taken on the runDir that is there.
func lockRunDir() (unlock func(), err error) {
	for {
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			return nil, err
		}
		f, err := os.Open(runDir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", runDir, err)
		}
		held, err := f.Stat()
		now, nowErr := os.Stat(runDir)
		if err == nil && nowErr == nil && os.SameFile(held, now) {
			return func() { f.Close() }, nil // closing it releases the lock
		}
		f.Close()
	}
}

func (n *network) cleanupStale() {
	entries, _ := os.ReadDir("/run/netns")
	prefix := fmt.Sprintf("dkc%dn", n.block)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			n.netns = append(n.netns, e.Name())
		}
	}
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		if strings.HasPrefix(l.Name(), fmt.Sprintf("dkc%dv", n.block)) {
			n.veths = append(n.veths, l.Name())
		}
	}
	n.teardownLocked()
}

func ownerAlive(pidFile string) bool {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}

func isMountPoint(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}
