package kubeletconfig

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// FuzzClassify sets the field at FieldClasses()[row] (any row, so nested
// paths and whole structs too) of a valid config to a random JSON value,
// and checks that:
//   - every change Classify reports has a class that exists;
//   - a config compared with itself has no changes;
//   - FormatRefusal names every refused change's field, and allowing every
//     class that needs an opt-in refuses nothing.
//
// Inputs whose value is not JSON or does not decode into the field are
// skipped. `make fuzz` runs it longer.
func FuzzClassify(f *testing.F) {
	rows := FieldClasses()
	index := func(path string) uint16 {
		return uint16(slices.IndexFunc(rows, func(r FieldClass) bool { return r.Path == path }))
	}
	f.Add(index("staticPodPath"), `"/etc/evil"`)
	f.Add(index("containerRuntimeEndpoint"), `"unix:///tmp/evil.sock"`)
	f.Add(index("authentication.x509.clientCAFile"), `"/tmp/ca"`)
	f.Add(index("authorization.mode"), `"AlwaysAllow"`)
	f.Add(index("readOnlyPort"), `10255`)
	f.Add(index("clusterDNS"), `["10.0.0.53"]`)
	f.Add(index("featureGates"), `{"AllAlpha":true,"Foo":false}`)
	f.Add(index("staticPodURLHeader"), `{"a\"b":["c"]}`)
	f.Add(index("evictionHard"), `{}`)
	f.Add(index("enforceNodeAllocatable"), `[]`)
	f.Add(index("logging"), `{"verbosity":4,"options":{"json":{"infoBufferSize":"1Mi"}}}`)
	f.Add(index("tracing.endpoint"), `"evil:4317"`)
	f.Add(index("resolvConf"), `""`)
	f.Add(index("cpuManagerPolicy"), `"none"`)
	f.Add(index("maxPods"), `null`)
	f.Add(uint16(1000), `true`)
	f.Fuzz(func(t *testing.T, row uint16, value string) {
		path := rows[int(row)%len(rows)].Path
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			t.Skip()
		}
		oldCfg := newConfig()
		newCfg, ok := setJSON(t, oldCfg, path, v)
		if !ok {
			t.Skip()
		}
		if got := Classify(newCfg, newCfg); len(got) != 0 {
			t.Fatalf("Classify(cfg, cfg) = %+v, want no changes", got)
		}
		changes := Classify(oldCfg, newCfg)
		for _, c := range changes {
			if c.Class == "" || !slices.Contains(Classes(), c.Class) {
				t.Fatalf("change %+v has no known class", c)
			}
			if c.Old == c.New {
				t.Fatalf("change %+v changes nothing", c)
			}
		}
		refused := Refused(changes, nil)
		if len(refused) > 0 {
			text := FormatRefusal(refused, refused)
			for _, c := range refused {
				if !strings.Contains(text, c.Field+" ") {
					t.Fatalf("FormatRefusal() = %q does not name %s", text, c.Field)
				}
			}
		}
		optIn := slices.DeleteFunc(Classes(), func(c SafetyClass) bool { return !c.RefusedByDefault() })
		if got := Refused(changes, optIn); len(got) != 0 {
			t.Fatalf("Refused() with every class allowed = %+v", got)
		}
	})
}

// setJSON returns a copy of cfg with the field at the dot-separated JSON
// path set to v, through the config's JSON form.
func setJSON(t *testing.T, cfg *config, path string, v any) (*config, bool) {
	t.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	m := doc
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
	if data, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	out := &config{}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, false
	}
	return out, true
}
