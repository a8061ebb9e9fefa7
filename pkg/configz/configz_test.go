package configz

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// configz135 is a trimmed configz response of a kubelet up to 1.35: no kind
// and no apiVersion.
const configz135 = `{"kubeletconfig":{"enableServer":true,"staticPodPath":"/etc/kubernetes/manifests","syncFrequency":"1m0s","address":"198.51.100.11","port":10250,"authorization":{"mode":"Webhook"},"maxPods":110,"podPidsLimit":-1,"imageGCHighThresholdPercent":85,"cpuCFSQuotaPeriod":"100ms","evictionHard":{"memory.available":"100Mi","nodefs.available":"10%"},"enforceNodeAllocatable":["pods"],"systemReservedCgroup":"","containerLogMaxSize":"10Mi","nodeLeaseDurationSeconds":40,"failCgroupV1":false,"maxOpenFiles":1000000,"featureGates":{"A&B":true}}}`

// configz136 is a trimmed configz response of a kubelet 1.36, which carries
// kind and apiVersion.
const configz136 = `{"kubeletconfig":{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1","maxPods":110,"port":10250}}`

const want135 = `{
  "address": "198.51.100.11",
  "apiVersion": "kubelet.config.k8s.io/v1beta1",
  "authorization": {
    "mode": "Webhook"
  },
  "containerLogMaxSize": "10Mi",
  "cpuCFSQuotaPeriod": "100ms",
  "enableServer": true,
  "enforceNodeAllocatable": [
    "pods"
  ],
  "evictionHard": {
    "memory.available": "100Mi",
    "nodefs.available": "10%"
  },
  "failCgroupV1": false,
  "featureGates": {
    "A&B": true
  },
  "imageGCHighThresholdPercent": 85,
  "kind": "KubeletConfiguration",
  "maxOpenFiles": 1000000,
  "maxPods": 110,
  "nodeLeaseDurationSeconds": 40,
  "podPidsLimit": -1,
  "port": 10250,
  "staticPodPath": "/etc/kubernetes/manifests",
  "syncFrequency": "1m0s",
  "systemReservedCgroup": ""
}
`

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestTransform(t *testing.T) {
	tests := map[string]struct {
		raw     string
		expr    string
		want    string
		wantErr string
	}{
		"seed without kind": {raw: configz135, want: want135},
		"seed keeps kind": {
			raw:  `{"kubeletconfig":{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1","maxPods":110}}`,
			want: "{\n  \"apiVersion\": \"kubelet.config.k8s.io/v1\",\n  \"kind\": \"KubeletConfiguration\",\n  \"maxPods\": 110\n}\n",
		},
		"1.36": {
			raw:  configz136,
			want: "{\n  \"apiVersion\": \"kubelet.config.k8s.io/v1beta1\",\n  \"kind\": \"KubeletConfiguration\",\n  \"maxPods\": 110,\n  \"port\": 10250\n}\n",
		},
		"empty kubeletconfig": {
			raw:  `{"kubeletconfig":{}}`,
			want: "{\n  \"apiVersion\": \"kubelet.config.k8s.io/v1beta1\",\n  \"kind\": \"KubeletConfiguration\"\n}\n",
		},
		"user edit": {
			raw:  configz136,
			expr: `.maxPods = 200 | del(.port)`,
			want: "{\n  \"apiVersion\": \"kubelet.config.k8s.io/v1beta1\",\n  \"kind\": \"KubeletConfiguration\",\n  \"maxPods\": 200\n}\n",
		},
		"user scalar": {raw: configz136, expr: `.maxPods`, want: "110\n"},
		"user null":   {raw: configz136, expr: `.missing`, want: "null\n"},
		"user string": {raw: configz135, expr: `.featureGates | keys[0]`, want: "\"A&B\"\n"},
		"big integer": {
			raw:  `{"kubeletconfig":{"n":12345678901234567890}}`,
			expr: `.n`,
			want: "12345678901234567890\n",
		},
		"float": {raw: `{"kubeletconfig":{"f":0.5}}`, expr: `.f`, want: "0.5\n"},
		"user array": {
			raw:  configz135,
			expr: `[.port, .maxPods]`,
			want: "[\n  10250,\n  110\n]\n",
		},
		"user env is empty": {raw: configz136, expr: `$ENV | length`, want: "0\n"},
		"multiple results": {
			raw:     configz136,
			expr:    `.maxPods, .port`,
			wantErr: `--jq ".maxPods, .port": yields more than one result, want exactly one`,
		},
		"no result": {
			raw:     configz136,
			expr:    `empty`,
			wantErr: `--jq "empty": yields no result, want exactly one`,
		},
		"runtime error": {
			raw:     configz136,
			expr:    `.maxPods | keys`,
			wantErr: `--jq ".maxPods | keys": keys cannot be applied to: number (110)`,
		},
		"parse error": {
			raw:     configz136,
			expr:    `.maxPods |`,
			wantErr: `invalid --jq expression ".maxPods |": unexpected EOF`,
		},
		"compile error": {
			raw:     configz136,
			expr:    `nosuchfunc`,
			wantErr: `invalid --jq expression "nosuchfunc": function not defined: nosuchfunc/0`,
		},
		"no kubeletconfig": {
			raw:     `{"kind":"Status","status":"Failure"}`,
			wantErr: "configz response has no .kubeletconfig object",
		},
		"kubeletconfig not an object": {
			raw:     `{"kubeletconfig":null}`,
			wantErr: "configz response has no .kubeletconfig object",
		},
		"not an object": {
			raw:     `[]`,
			wantErr: "configz response has no .kubeletconfig object",
		},
		"not JSON": {
			raw:     `404 page not found`,
			wantErr: "decode configz response: invalid character 'p' after top-level value",
		},
		"two values": {
			raw:     `{"kubeletconfig":{}} {}`,
			wantErr: "decode configz response: invalid character '{' after top-level value",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Transform([]byte(tc.raw), tc.expr)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoKubeletConfigSentinel(t *testing.T) {
	if _, err := Transform([]byte(`{}`), ""); !errors.Is(err, ErrNoKubeletConfig) {
		t.Errorf("got %v, want ErrNoKubeletConfig", err)
	}
}

// TestTransformerReuse runs one compiled Transformer over several inputs.
func TestTransformerReuse(t *testing.T) {
	tr, err := NewTransformer(`.maxPods`)
	if err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]string{configz135: "110\n", `{"kubeletconfig":{"maxPods":5}}`: "5\n"} {
		got, err := tr.Transform(context.Background(), []byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
	}
}

func TestTransformCanceled(t *testing.T) {
	tr, err := NewTransformer(`def f: f; f`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.Transform(ctx, []byte(configz136)); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func TestFetch(t *testing.T) {
	tests := map[string]struct {
		code        int
		contentType string
		body        string
		want        string
		wantErr     string
	}{
		"kubelet unreachable": {
			code:        http.StatusServiceUnavailable,
			contentType: "text/plain",
			body:        "Error trying to reach service: dial tcp 198.51.100.11:10250: connect: connection refused",
			wantErr:     "get /api/v1/nodes/n1/proxy/configz: the server is currently unable to handle the request: Error trying to reach service: dial tcp 198.51.100.11:10250: connect: connection refused",
		},
		"ok": {code: http.StatusOK, body: configz136, want: configz136},
		"forbidden": {
			code:    http.StatusForbidden,
			body:    `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes \"n1\" is forbidden: User \"u\" cannot get resource \"nodes/proxy\"","reason":"Forbidden","code":403}`,
			wantErr: `get /api/v1/nodes/n1/proxy/configz: nodes "n1" is forbidden: User "u" cannot get resource "nodes/proxy"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var gotPath, gotMethod string
			client := apiserver(t, tc.code, tc.contentType, tc.body, func(r *http.Request) {
				gotPath, gotMethod = r.URL.Path, r.Method
			})
			got, err := Fetch(context.Background(), client, "n1")
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if tc.wantErr != "" && !apierrors.IsForbidden(err) && !apierrors.IsServiceUnavailable(err) {
				t.Errorf("error %v lost its API status", err)
			}
			if gotMethod != http.MethodGet || gotPath != "/api/v1/nodes/n1/proxy/configz" {
				t.Errorf("request: got %s %s", gotMethod, gotPath)
			}
		})
	}
}

func TestSnapshot(t *testing.T) {
	tr, err := NewTransformer(".maxPods")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		code          int
		body          string
		want, wantErr string
	}{
		"transformed": {code: http.StatusOK, body: configz136, want: "110\n"},
		"forbidden: the permission it needs": {
			code: http.StatusForbidden,
			body: `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes \"n1\" is forbidden: User \"u\" cannot get resource \"nodes/proxy\"","reason":"Forbidden","code":403}`,
			wantErr: `get /api/v1/nodes/n1/proxy/configz: nodes "n1" is forbidden: User "u" cannot get resource "nodes/proxy": ` +
				`reading a kubelet's config needs "get" on "nodes/proxy"; check with: kubectl auth can-i get nodes --subresource=proxy`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := apiserver(t, tc.code, "", tc.body, func(*http.Request) {})
			got, err := Snapshot(context.Background(), client, tr, "n1")
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("document (-want +got):\n%s", diff)
			}
		})
	}
}

// apiserver serves every request with code and body, as contentType
// (default JSON), after seen has looked at it, and returns a core/v1 REST
// client of it.
func apiserver(t *testing.T, code int, contentType, body string, seen func(*http.Request)) rest.Interface {
	t.Helper()
	if contentType == "" {
		contentType = "application/json"
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen(r)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return client.CoreV1().RESTClient()
}
