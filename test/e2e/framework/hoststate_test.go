package framework

import (
	"os"
	"testing"
)

func TestHarnessDir(t *testing.T) {
	tmp := os.TempDir()
	tests := map[string]bool{
		tmp + "/dkc-1522722536/bin/kubelet --config " + tmp + "/dkc-1522722536/nodes/n1/kubelet-config.yaml": true,
		"kube-apiserver --etcd-servers=http://127.0.0.1:2379 --cert-dir " + tmp + "/dkc-41287388":            true,
		tmp + "/dkc-bin-93129807/kubectl-dkc agent --node n1":                                                true,
		"flock " + tmp + "/dkc-e2e.lock go test ./test/e2e/":                                                 false,
		"flock " + tmp + "/dkc-build.lock make components":                                                   false,
		"bash " + tmp + "/dkc-helpers/lead/run.sh":                                                           false,
		"sleep 100": false,
	}
	for cmdline, want := range tests {
		if got := harnessDir.MatchString(cmdline); got != want {
			t.Errorf("harnessDir.MatchString(%q) = %v, want %v", cmdline, got, want)
		}
	}
}
