package v1alpha1

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStoredFormUnchanged reads a NodeConfigRollout and a NodeConfigPool as
// dkc stored them before these types were generated, and writes them back
// to the same bytes: existing objects keep decoding, and nothing the
// apiserver holds changes shape.
func TestStoredFormUnchanged(t *testing.T) {
	tests := map[string]struct {
		stored string
		into   any
	}{
		"rollout": {
			stored: `{"kind":"NodeConfigRollout","apiVersion":"kubectl-dkc.io/v1alpha1","metadata":{"name":"r","namespace":"kube-system"},` +
				`"spec":{"paused":true,"config":{"configMap":{"namespace":"kube-system","name":"a","kubeletConfigKey":"kubelet"}},` +
				`"pin":{"namespace":"kube-system","name":"a","kubeletConfigKey":"kubelet","digest":"sha256:00","allowUnsafe":["security"]},` +
				`"targets":[{"config":{"configMap":{"namespace":"kube-system","name":"old","kubeletConfigKey":"kubelet"}},"nodes":["n1","n3"]},{"config":null,"nodes":["n2"]}],` +
				`"targetPins":[{"nodes":["n1","n3"],"pin":{"namespace":"kube-system","name":"old","kubeletConfigKey":"kubelet","digest":"sha256:01"}}],` +
				`"nodes":["n1","n2","n3"],"selector":"pool=a","maxUnavailable":"10%","canary":1,"soak":"2m0s","orderByLabel":"zone","drain":["n2"],` +
				`"drainOptions":{"timeout":"5m0s","force":true},"undoOf":"q","windows":[{"days":["Mon","Fri"],"start":"22:00","duration":"4h0m0s","timeZone":"Europe/Berlin"}]},` +
				`"status":{"state":"Halted","reason":"n2: refused","wave":2,"soakSince":"2026-11-01T10:00:00Z","counts":{"waiting":1,"inProgress":0,"updated":1,"skipped":0,"failed":1},` +
				`"failures":[{"node":"n2","error":"refused"}],"lastUpdate":"2026-11-01T10:01:00Z","nodes":{"n1":{"phase":"Done"}}}}`,
			into: &NodeConfigRollout{},
		},
		"pool": {
			stored: `{"kind":"NodeConfigPool","apiVersion":"kubectl-dkc.io/v1alpha1","metadata":{"name":"p","namespace":"kube-system","generation":3},` +
				`"spec":{"nodeSelector":{"matchLabels":{"pool":"a"}},"configSource":{"configMap":{"namespace":"kube-system","name":"a","kubeletConfigKey":"kubelet"}},` +
				`"digest":"sha256:00","allowUnsafe":["security"],"strategy":{"maxUnavailable":2,"canary":1,"soak":"1m0s","drain":true,"orderByLabel":"zone",` +
				`"windows":[{"days":["Sat"],"start":"01:00","duration":"2h0m0s"}]},"paused":true},` +
				`"status":{"observedGeneration":3,"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-11-01T10:00:00Z","reason":"Updated","message":"all nodes run revision 2"}],` +
				`"revision":2,"currentRollout":"p-2","digest":"sha256:00","nodes":{"selected":3,"updated":3,"available":3,"failed":0,"conflicting":0},"conflictingNodes":["n9"]}}`,
			into: &NodeConfigPool{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := json.Unmarshal([]byte(tc.stored), tc.into); err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(tc.into)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.stored, string(got)); d != "" {
				t.Errorf("written back differently (-stored +written):\n%s", d)
			}
		})
	}
}

// TestDeepCopyIsDeep changes everything a copy can share with its original
// through a pointer, a slice or a map, and checks that the original keeps
// its value.
func TestDeepCopyIsDeep(t *testing.T) {
	var in NodeConfigRollout
	stored := `{"spec":{"config":{"configMap":{"namespace":"ns","name":"a","kubeletConfigKey":"k"}},"pin":{"namespace":"ns","name":"a","kubeletConfigKey":"k","digest":"d","allowUnsafe":["x"]},` +
		`"targets":[{"config":{"configMap":{"namespace":"ns","name":"o","kubeletConfigKey":"k"}},"nodes":["n1"]}],"targetPins":[{"nodes":["n1"],"pin":{"namespace":"ns","name":"o","kubeletConfigKey":"k","digest":"d"}}],` +
		`"nodes":["n1"],"maxUnavailable":1,"canary":0,"drain":["n1"],"windows":[{"days":["Mon"],"start":"00:00","duration":"1h"}]},` +
		`"status":{"wave":0,"soakSince":"2026-11-01T10:00:00Z","counts":{"waiting":0,"inProgress":0,"updated":0,"skipped":0,"failed":0},"failures":[{"node":"n1","error":"e"}],"lastUpdate":null,` +
		`"liveNodes":{"n1":{"phase":"Done","previous":{"configMap":{"namespace":"ns","name":"p","kubeletConfigKey":"k"}}}},"nodes":{"n1":{}}}}`
	if err := json.Unmarshal([]byte(stored), &in); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(&in)
	out := in.DeepCopy()
	out.Spec.Config.ConfigMap.Name = "changed"
	out.Spec.Pin.AllowUnsafe[0] = "changed"
	out.Spec.Targets["n1"].ConfigMap.Name = "changed"
	out.Spec.TargetPins["n1"].Digest = "changed"
	out.Spec.Nodes[0] = "changed"
	out.Spec.Drain[0] = "changed"
	out.Spec.Windows[0].Days[0] = "Tue"
	out.Status.SoakSince.Time = out.Status.SoakSince.Add(1)
	out.Status.Failures[0].Error = "changed"
	out.Status.Nodes["n1"].Previous.ConfigMap.Name = "changed"
	out.Status.LegacyNodes[2] = 'x'
	got, _ := json.Marshal(&in)
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("changing the copy changed the original (-before +after):\n%s", d)
	}
}
