package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Systemd is a real systemd manager (the host's /lib/systemd/systemd) running
// as PID 1 of its own PID, mount, cgroup, UTS, IPC and network namespaces,
// with a D-Bus system bus (the host's dbus-daemon, started by it as
// dbus.service) inside. It loads only the units the test gives it: its
// unit path is a private directory, /etc/systemd/system, /run and
// /var/lib/systemd are private tmpfs mounts, /proc/sys and /sys are read-only,
// and its cgroups are children of the test's own. The host's systemd, its
// units and its system bus are never touched.
//
// A client reaches the manager through the bus socket, BusAddress: the path
// goes through /proc/PID/root, so a process in the host's namespaces can
// dial it as a DaemonSet pod dials the host's bus.
type Systemd struct {
	// Dir holds the unit directory and the manager's console log.
	Dir string
	// PID is the host PID of the manager (PID 1 in its namespace).
	PID int

	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has exited and been waited for
	waitErr error         // cmd.Wait's error, once exited is closed
	cgroups []string
}

// systemdStopTimeout bounds Stop's clean shutdown; a manager still running
// then is killed.
const systemdStopTimeout = 20 * time.Second

// systemdInit runs as PID 1 of the new namespaces, then becomes systemd.
// $1 is the unit directory, $2 the file that stands in for /dev/console.
// %s is where SystemdOptions add their lines, after the base mounts and
// before /sys turns read-only.
//
// Every mount is -n, and the private /run comes first: mount(8) otherwise
// keeps its table in /run/mount/utab, and a mount namespace does not keep a
// directory made on the host's /run from the host.
const systemdInit = `set -eu
mount -n -t tmpfs -o mode=755 tmpfs /run
mount -n --bind "$2" /dev/console
mount -n -o bind,ro /proc/sys /proc/sys
mount -n -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
mkdir /sys/fs/cgroup/systemd
mount -n -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
%s
mount -n -t tmpfs -o mode=755 tmpfs /etc/systemd/system
mount -n -t tmpfs -o mode=755 tmpfs /var/lib/systemd
mount -n -o remount,bind,ro /sys
export SYSTEMD_UNIT_PATH="$1" container=dkc-e2e
exec /lib/systemd/systemd --system --unit=dkc-e2e.target --log-target=console --log-level=info --show-status=no
`

// SystemdOptions shape the namespaces of a manager beyond StartSystemd's.
type SystemdOptions struct {
	// NetNS, when set, is the network namespace (a name under /run/netns)
	// the manager runs in, instead of a new empty one.
	NetNS string
	// Controllers mounts every cgroup v1 controller hierarchy of this
	// process inside, as on a host, besides name=systemd. A kubelet needs
	// them; the cgroup namespace makes the manager's cgroup their root.
	Controllers bool
	// Setup is shell run inside before the manager starts, after the
	// private /run and cgroup mounts, while /etc and /var/lib are still
	// the host's (mount over them to keep writes off the host).
	Setup string
	// Wants are units the boot target pulls in besides the system bus, as
	// `systemctl enable` would have them start at boot.
	Wants []string
}

// systemdBaseUnits start the system bus. systemd connects to it once
// dbus.service runs, as on a host.
var systemdBaseUnits = map[string]string{
	"dkc-e2e.target": "[Unit]\nDescription=dkc e2e\nWants=dbus.socket dbus.service\n",
	// Stop isolates this target: every unit but the bus stops, as at a
	// machine's shutdown.
	"dkc-e2e-down.target": "[Unit]\nDescription=dkc e2e shutdown\nDefaultDependencies=no\nAllowIsolate=yes\nWants=dbus.socket dbus.service\n",
	"dbus.socket":         "[Unit]\nDefaultDependencies=no\n[Socket]\nListenStream=/run/dbus/system_bus_socket\n",
	"dbus.service": "[Unit]\nDefaultDependencies=no\nRequires=dbus.socket\n[Service]\n" +
		"ExecStart=/usr/bin/dbus-daemon --system --address=systemd: --nofork --nopidfile --systemd-activation --syslog-only\n",
}

// PreflightSystemd says why this machine cannot run an isolated systemd.
func PreflightSystemd() error {
	var problems []string
	if os.Geteuid() != 0 {
		problems = append(problems, "must run as root: systemd runs in namespaces of its own")
	}
	for _, p := range []string{"/lib/systemd/systemd", "/usr/bin/dbus-daemon", "/usr/share/dbus-1/system.conf"} {
		if _, err := os.Stat(p); err != nil {
			problems = append(problems, fmt.Sprintf("missing %s: apt-get install systemd dbus", p))
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/systemd/cgroup.procs"); err != nil {
		problems = append(problems, "no cgroup v1 name=systemd hierarchy at /sys/fs/cgroup/systemd (this harness runs systemd on cgroup v1 hosts)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		problems = append(problems, "missing unshare: apt-get install util-linux")
	}
	if len(problems) > 0 {
		return errors.New("cannot run an isolated systemd:\n  - " + strings.Join(problems, "\n  - "))
	}
	return nil
}

// StartSystemd starts a manager in dir with units (file name → contents,
// drop-ins as "UNIT.d/NAME.conf") besides the bus, and waits until its
// system bus answers on BusAddress.
func StartSystemd(dir string, units map[string]string) (s *Systemd, err error) {
	return StartSystemdWith(dir, units, SystemdOptions{})
}

// StartSystemdWith is StartSystemd with opts.
func StartSystemdWith(dir string, units map[string]string, opts SystemdOptions) (s *Systemd, err error) {
	if err := PreflightSystemd(); err != nil {
		return nil, err
	}
	unitDir := filepath.Join(dir, "units")
	if err := os.MkdirAll(unitDir, 0o755); err != nil {
		return nil, err
	}
	for name, body := range systemdBaseUnits {
		if err := os.WriteFile(filepath.Join(unitDir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	if len(opts.Wants) > 0 {
		target := systemdBaseUnits["dkc-e2e.target"] + "Wants=" + strings.Join(opts.Wants, " ") + "\n"
		if err := os.WriteFile(filepath.Join(unitDir, "dkc-e2e.target"), []byte(target), 0o644); err != nil {
			return nil, err
		}
	}
	for name, body := range units {
		// A name may be a drop-in, such as "a.service.d/10-log.conf".
		path := filepath.Join(unitDir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	console := filepath.Join(dir, "console.log")
	if err := os.WriteFile(console, nil, 0o644); err != nil {
		return nil, err
	}
	s = &Systemd{Dir: dir}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	// A child cgroup of ours in every hierarchy: the cgroup namespace makes
	// it the manager's root, so whatever it creates stays under it.
	name := fmt.Sprintf("dkc-systemd-%d-%d", os.Getpid(), time.Now().UnixNano())
	if s.cgroups, err = makeChildCgroups(name); err != nil {
		return s, err
	}
	setup := opts.Setup
	if opts.Controllers {
		mounts, err := controllerMounts()
		if err != nil {
			return s, err
		}
		setup = mounts + setup
	}
	init := fmt.Sprintf(systemdInit, setup)
	enter, newNet := "", "--net "
	if opts.NetNS != "" {
		enter, newNet = "nsenter --net="+shellQuote("/run/netns/"+opts.NetNS)+" -- ", ""
	}
	script := "for c in \"$@\"; do echo $$ > \"$c/cgroup.procs\"; done\n" +
		"exec " + enter + "unshare --pid --fork --mount-proc --mount --propagation private --cgroup --uts --ipc " + newNet +
		"/bin/sh -c " + shellQuote(init) + " systemd-init " + shellQuote(unitDir) + " " + shellQuote(console)
	s.cmd = exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, s.cgroups...)...)
	log, err := os.Create(filepath.Join(dir, "unshare.log"))
	if err != nil {
		return s, err
	}
	defer log.Close()
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := s.cmd.Start(); err != nil {
		return s, fmt.Errorf("start unshare: %w", err)
	}
	s.exited = make(chan struct{})
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.exited:
			b, _ := os.ReadFile(filepath.Join(dir, "unshare.log"))
			c, _ := os.ReadFile(console)
			return s, fmt.Errorf("systemd exited (%v): %s%s", s.waitErr, b, c)
		default:
		}
		if s.PID == 0 {
			s.PID = childOf(s.cmd.Process.Pid)
		}
		if s.PID != 0 {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", s.PID)); strings.TrimSpace(string(comm)) == "systemd" {
				if _, err := os.Stat(s.Path("/run/dbus/system_bus_socket")); err == nil && s.busUp() {
					return s, nil
				}
			}
		}
		if time.Now().After(deadline) {
			c, _ := os.ReadFile(console)
			return s, fmt.Errorf("systemd's system bus did not come up within 30s; console:\n%s", c)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// busUp reports whether dbus.service runs, so the bus routes to systemd.
func (s *Systemd) busUp() bool {
	out, err := s.Systemctl("is-active", "dbus.service")
	return err == nil && strings.TrimSpace(out) == "active"
}

// BusAddress is the D-Bus address of the manager's system bus, for
// DBUS_SYSTEM_BUS_ADDRESS.
func (s *Systemd) BusAddress() string {
	return "unix:path=" + s.Path("/run/dbus/system_bus_socket")
}

// Path is path inside the manager's mount namespace, seen from the host.
func (s *Systemd) Path(path string) string {
	return fmt.Sprintf("/proc/%d/root%s", s.PID, path)
}

// Systemctl runs the host's systemctl inside the manager's namespaces.
func (s *Systemd) Systemctl(args ...string) (string, error) {
	return s.Exec(append([]string{"systemctl", "--no-pager"}, args...)...)
}

// command is argv run inside the manager's mount, PID, network, UTS and
// IPC namespaces.
func (s *Systemd) command(argv ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"-t", strconv.Itoa(s.PID), "-m", "-p", "-n", "-u", "-i", "--"}, argv...)...)
}

// Exec runs argv inside the manager's mount, PID, network, UTS and IPC
// namespaces, as root.
func (s *Systemd) Exec(argv ...string) (string, error) {
	out, err := s.command(argv...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
	}
	return string(out), nil
}

// Console is what the manager logged.
func (s *Systemd) Console() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "console.log"))
	return string(b)
}

// Stop shuts the manager down as a machine does: it stops every unit
// (isolating dkc-e2e-down.target), so that their stop actions run, and
// waits until systemd removed the directories it made for PrivateTmp=
// units under /tmp, which is the host's. Then it kills the manager, which
// ends every process left in its PID namespace, and removes its cgroups. A
// shutdown that takes over systemdStopTimeout, or a manager whose bus is
// down, is killed then.
func (s *Systemd) Stop() {
	if s.PID != 0 && !s.hasExited() && s.busUp() {
		deadline := time.Now().Add(systemdStopTimeout)
		private := s.privateTmps()
		cmd := s.command("systemctl", "--no-pager", "isolate", "dkc-e2e-down.target")
		// What went wrong, if the shutdown did, is in stop.log.
		if log, err := os.Create(filepath.Join(s.Dir, "stop.log")); err == nil {
			defer log.Close()
			cmd.Stdout, cmd.Stderr = log, log
		}
		if err := cmd.Start(); err == nil {
			done := make(chan struct{})
			go func() {
				_ = cmd.Wait()
				close(done)
			}()
			select {
			case <-done:
				// systemd removes them in a thread of its own, after
				// the unit stopped; at the deadline the manager is
				// killed all the same.
				_ = poll(context.Background(), time.Until(deadline), func() (bool, error) {
					for _, dir := range private {
						if _, err := os.Stat(dir); !os.IsNotExist(err) {
							return false, nil
						}
					}
					return true, nil
				})
			case <-time.After(time.Until(deadline)):
				_ = cmd.Process.Kill()
			}
		}
	}
	if s.hasExited() {
		// Its PID may be another process's by now.
	} else if s.PID != 0 {
		_ = syscall.Kill(s.PID, syscall.SIGKILL)
	} else if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
	if s.exited != nil {
		// unshare exits once its child, the manager, is gone.
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
		}
	}
	removeCgroups(s.cgroups)
	s.PID = 0
}

// privateTmps lists the host directories that systemd made for the
// manager's running PrivateTmp= units: the sources of their /tmp mounts,
// which /proc/PID/mountinfo gives relative to the host's filesystem that
// holds /tmp.
func (s *Systemd) privateTmps() []string {
	out, _ := s.Exec("sh", "-c", "cat /proc/[0-9]*/mountinfo 2>/dev/null")
	var dirs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[4] != "/tmp" {
			continue
		}
		i := strings.Index(f[3], "/systemd-private-")
		if i < 0 {
			continue
		}
		name, _, _ := strings.Cut(f[3][i+1:], "/")
		dir := filepath.Join("/tmp", name)
		if !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// hasExited reports whether the manager's process has exited.
func (s *Systemd) hasExited() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// makeChildCgroups creates cgroup name under this process's cgroup in every
// hierarchy and returns their directories.
func makeChildCgroups(name string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		var root string
		switch ctrl := f[1]; {
		case ctrl == "":
			root = "/sys/fs/cgroup/unified"
		case strings.HasPrefix(ctrl, "name="):
			root = "/sys/fs/cgroup/" + strings.TrimPrefix(ctrl, "name=")
		default:
			root = "/sys/fs/cgroup/" + strings.Split(ctrl, ",")[0]
		}
		if _, err := os.Stat(root); err != nil {
			continue
		}
		parent := filepath.Join(root, f[2])
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			removeCgroups(dirs)
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
		dirs = append(dirs, dir)
		// A cpuset cgroup takes no task until it has CPUs and memory nodes.
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(parent, file)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, file), v, 0o644); err != nil {
					removeCgroups(dirs)
					return nil, fmt.Errorf("set up cgroup %s: %w", dir, err)
				}
			}
		}
	}
	return dirs, nil
}

// removeCgroups removes each directory and the cgroups systemd made under
// it, deepest first, retrying while the killed processes leave.
func removeCgroups(dirs []string) {
	for _, dir := range dirs {
		var all []string
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				all = append(all, path)
			}
			return nil
		})
		sort.Slice(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
		for _, d := range all {
			for i := 0; i < 50; i++ {
				if err := syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

// controllerMounts is shell that mounts each cgroup v1 controller hierarchy
// this process is in under /sys/fs/cgroup, as the host does; co-mounted
// controllers ("cpu,cpuacct") get a link for each name.
func controllerMounts() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var script strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || f[1] == "" || strings.HasPrefix(f[1], "name=") {
			continue
		}
		dir := "/sys/fs/cgroup/" + f[1]
		fmt.Fprintf(&script, "mkdir %s\nmount -n -t cgroup -o %s cgroup %s\n", shellQuote(dir), shellQuote(f[1]), shellQuote(dir))
		if names := strings.Split(f[1], ","); len(names) > 1 {
			for _, n := range names {
				fmt.Fprintf(&script, "ln -s %s /sys/fs/cgroup/%s\n", shellQuote(f[1]), shellQuote(n))
			}
		}
	}
	return script.String(), nil
}

// childOf returns the first child of pid, or 0.
func childOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	child, _ := strconv.Atoi(f[0])
	return child
}
