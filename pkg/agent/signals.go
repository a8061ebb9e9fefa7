package agent

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
)

// hostSignals measures the eviction signals the bounds compare thresholds
// with, as the kubelet's eviction manager sees them, closely enough to
// refuse a threshold the node crosses right now:
//   - memory.available: MemAvailable of MemTotal in /proc/meminfo (the
//     kubelet subtracts the root cgroup's working set from MemTotal);
//   - nodefs.available and nodefs.inodesFree: statfs of the kubelet's root
//     dir, the filesystem the kubelet calls nodefs.
//
// A signal it cannot measure is left out, and its bound is skipped.
func hostSignals(kubeletRootDir string) map[string]kubeletconfig.Signal {
	out := map[string]kubeletconfig.Signal{}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if total, avail, ok := memInfo(data); ok {
			out["memory.available"] = kubeletconfig.Signal{
				Available: *resource.NewQuantity(avail, resource.BinarySI),
				Capacity:  *resource.NewQuantity(total, resource.BinarySI),
			}
		}
	}
	var fs syscall.Statfs_t
	if kubeletRootDir != "" && syscall.Statfs(kubeletRootDir, &fs) == nil && fs.Blocks > 0 {
		bsize := int64(fs.Bsize)
		out["nodefs.available"] = kubeletconfig.Signal{
			Available: *resource.NewQuantity(int64(fs.Bavail)*bsize, resource.BinarySI),
			Capacity:  *resource.NewQuantity(int64(fs.Blocks)*bsize, resource.BinarySI),
		}
		if fs.Files > 0 {
			out["nodefs.inodesFree"] = kubeletconfig.Signal{
				Available: *resource.NewQuantity(int64(fs.Ffree), resource.DecimalSI),
				Capacity:  *resource.NewQuantity(int64(fs.Files), resource.DecimalSI),
			}
		}
	}
	return out
}

// memInfo reads MemTotal and MemAvailable, in bytes, from /proc/meminfo.
func memInfo(data []byte) (total, available int64, ok bool) {
	var haveTotal, haveAvail bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, found := strings.Cut(sc.Text(), ":")
		if !found {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "MemTotal":
			total, haveTotal = kb<<10, true
		case "MemAvailable":
			available, haveAvail = kb<<10, true
		}
	}
	return total, available, haveTotal && haveAvail
}
