package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// HostState is what the harness promises to leave as it found it: the
// host's firewall, links, network namespaces and mounts, and no process of
// its own.
type HostState struct {
	IPTables  string
	IP6Tables string
	Links     []string
	NetNS     []string
	Mounts    []string
	// Paths a kubelet or containerd would create on a host it owned.
	Paths []string
	// Processes started from the harness's binaries or state directories,
	// as "PID: command line".
	Processes []string
}

var watchedPaths = []string{
	"/var/lib/kubelet", "/var/lib/containerd", "/var/log/pods", "/var/log/containers",
	"/usr/libexec/kubernetes", "/etc/kubernetes", "/run/containerd", "/run/mount", "/opt/cni", "/etc/cni",
}

// CaptureHostState records the host's state for a later Diff.
func CaptureHostState() HostState {
	var s HostState
	s.IPTables = rulesOnly("iptables-save")
	s.IP6Tables = rulesOnly("ip6tables-save")
	if entries, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, e := range entries {
			s.Links = append(s.Links, e.Name())
		}
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			s.NetNS = append(s.NetNS, e.Name())
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(line); len(f) > 4 {
				s.Mounts = append(s.Mounts, f[4])
			}
		}
	}
	sort.Strings(s.Mounts)
	for _, p := range watchedPaths {
		if _, err := os.Stat(p); err == nil {
			s.Paths = append(s.Paths, p)
		}
	}
	s.Processes = LeftoverProcesses()
	return s
}

// rulesOnly is the output of an iptables-save without its comment lines,
// which carry timestamps.
func rulesOnly(cmd string) string {
	out, err := exec.Command(cmd).Output()
	if err != nil {
		return cmd + ": " + err.Error()
	}
	var keep []string
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "#") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// Diff lists how now differs from s, as human-readable lines.
func (s HostState) Diff(now HostState) []string {
	var out []string
	if s.IPTables != now.IPTables {
		out = append(out, fmt.Sprintf("iptables-save changed:\nbefore:\n%s\nafter:\n%s", s.IPTables, now.IPTables))
	}
	if s.IP6Tables != now.IP6Tables {
		out = append(out, fmt.Sprintf("ip6tables-save changed:\nbefore:\n%s\nafter:\n%s", s.IP6Tables, now.IP6Tables))
	}
	diffList := func(what string, a, b []string) {
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			out = append(out, fmt.Sprintf("%s changed: before %v, after %v", what, a, b))
		}
	}
	diffList("links", s.Links, now.Links)
	diffList("network namespaces", s.NetNS, now.NetNS)
	diffList("mounts", s.Mounts, now.Mounts)
	diffList("host paths", s.Paths, now.Paths)
	// Only processes that were not there before count: a cluster a person
	// keeps up with make cluster-up is not the tests' to end.
	before := map[string]bool{}
	for _, p := range s.Processes {
		before[p] = true
	}
	var left []string
	for _, p := range now.Processes {
		if !before[p] {
			left = append(left, p)
		}
	}
	if len(left) > 0 {
		out = append(out, "processes left behind: "+strings.Join(left, "; "))
	}
	return out
}

// harnessDir matches the directories the harness makes with os.MkdirTemp:
// a cluster's state (dkc-NNN) and the test binary's build (dkc-bin-NNN). A
// lock file or a person's directory that only starts with dkc- is not one,
// so that a process waiting on /tmp/dkc-e2e.lock is not taken for one the
// tests left behind.
var harnessDir = regexp.MustCompile(regexp.QuoteMeta(os.TempDir()) + `/dkc-(bin-)?[0-9]+(/|\s|$)`)

// LeftoverProcesses lists running processes started from the harness's
// component binaries or state directories, sorted.
func LeftoverProcesses() []string {
	var out []string
	binDir := DefaultBinDir()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		cmdline := strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
		if strings.Contains(cmdline, binDir) || harnessDir.MatchString(cmdline) {
			out = append(out, filepath.Base(filepath.Dir(p))+": "+cmdline)
		}
	}
	sort.Strings(out)
	return out
}
