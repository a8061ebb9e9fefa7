package framework

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// killShims kills, by PID, what the node's containerd left running once it
// stopped: each shim (its command line names the node's containerd
// socket) and every process under it, the containers' own first. A task
// that removeContainers did not see or could not delete would otherwise
// outlive the cluster.
func (n *Node) killShims() {
	sock := n.containerdSocket()
	for _, shim := range pidsWhere(func(cmdline string) bool {
		return strings.Contains(cmdline, "containerd-shim") && strings.Contains(cmdline, sock)
	}) {
		n.cluster.logf("%s: killing shim %d left by containerd, and its processes", n.Name, shim)
		for _, pid := range descendants(shim) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = syscall.Kill(shim, syscall.SIGKILL)
	}
}

// pidsWhere lists the processes whose command line (arguments joined by
// spaces) satisfies match.
func pidsWhere(match func(cmdline string) bool) []int {
	var out []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		if match(strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// descendants lists the processes under pid, deepest first.
func descendants(pid int) []int {
	children := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 {
			continue
		}
		child, err1 := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		parent, err2 := strconv.Atoi(fields[1])
		if err1 == nil && err2 == nil {
			children[parent] = append(children[parent], child)
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			walk(c)
			out = append(out, c)
		}
	}
	walk(pid)
	return out
}
