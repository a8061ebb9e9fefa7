package agent

import "testing"

func TestMemInfo(t *testing.T) {
	data := []byte("MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   12288000 kB\nBuffers:          100 kB\n")
	total, avail, ok := memInfo(data)
	if !ok || total != 24576000<<10 || avail != 12288000<<10 {
		t.Errorf("memInfo = %d, %d, %v; want %d, %d, true", total, avail, ok, 24576000<<10, 12288000<<10)
	}
	if _, _, ok := memInfo([]byte("MemTotal: 1 kB\n")); ok {
		t.Error("memInfo without MemAvailable reports ok")
	}
}

// The host's own signals: what the agent compares thresholds with.
func TestHostSignals(t *testing.T) {
	s := hostSignals(t.TempDir())
	for _, name := range []string{"memory.available", "nodefs.available", "nodefs.inodesFree"} {
		v, ok := s[name]
		if !ok {
			t.Errorf("signal %s not measured", name)
			continue
		}
		if v.Capacity.Sign() <= 0 || v.Available.Sign() < 0 || v.Available.Cmp(v.Capacity) > 0 {
			t.Errorf("signal %s = %s of %s", name, v.Available.String(), v.Capacity.String())
		}
	}
}
