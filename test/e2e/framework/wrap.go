package framework

import (
	"os"
	"sort"
	"strings"
)

// bindMount is a file bind-mounted over target in a component's private
// mount namespace.
type bindMount struct{ source, target string }

// wrapArgv runs argv in a private mount namespace with the given bind mounts,
// inside network namespace netns when it is not empty. nsenter and unshare
// exec without forking, so the PID of the wrapped command is the PID of the
// component. utab, when set, is where libmount keeps its table instead of the
// host's /run/mount (the kubelet runs mount(8) to make its root dir shared).
func wrapArgv(netns, utab string, mounts []bindMount, argv []string) []string {
	var script strings.Builder
	script.WriteString("set -e\n")
	if utab != "" {
		script.WriteString("export LIBMOUNT_UTAB=" + shellQuote(utab) + "\n")
	}
	for _, m := range mounts {
		script.WriteString("mount -n --bind " + shellQuote(m.source) + " " + shellQuote(m.target) + "\n")
	}
	script.WriteString(`exec "$@"` + "\n")
	out := []string{}
	if netns != "" {
		out = append(out, "nsenter", "--net=/run/netns/"+netns, "--")
	}
	out = append(out, "unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script.String(), "dkc-wrap")
	return append(out, argv...)
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sysctlMounts are the /proc/sys files the kubelet writes at start, each
// covered by a file that already holds the value it wants, so the kubelet
// never changes the host's settings.
func sysctlMounts(dir string) ([]bindMount, error) {
	wanted := map[string]string{
		"vm/overcommit_memory":      "1",
		"vm/panic_on_oom":           "0",
		"kernel/panic":              "10",
		"kernel/panic_on_oops":      "1",
		"kernel/keys/root_maxkeys":  "1000000",
		"kernel/keys/root_maxbytes": "25000000",
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var mounts []bindMount
	for _, key := range sortedKeys(wanted) {
		target := "/proc/sys/" + key
		if _, err := os.Stat(target); err != nil {
			continue
		}
		src := dir + "/" + strings.ReplaceAll(key, "/", "_")
		if err := os.WriteFile(src, []byte(wanted[key]+"\n"), 0o644); err != nil {
			return nil, err
		}
		mounts = append(mounts, bindMount{src, target})
	}
	return mounts, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
