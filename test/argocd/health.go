// Package argocd runs the Argo CD health checks that docs/rollout.md gives
// for NodeConfigPool and NodeConfigRollout, in gopher-lua, the Lua
// interpreter Argo CD embeds, on objects as Argo CD passes them: the
// object's JSON decoded into Lua tables.
package argocd

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

// Health is what a health check returns: Argo CD's status (Healthy,
// Progressing, Degraded, Suspended, Missing, Unknown) and a message.
type Health struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// healthKey is the argocd-cm key of a kind's health check.
const healthKey = "resource.customizations.health.kubectl-dkc.io_"

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(data:\n.*?)```")

// Checks reads the argocd-cm data block of the doc at path and returns its
// health checks by kind.
func Checks(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	checks := map[string]string{}
	for _, m := range yamlBlock.FindAllSubmatch(b, -1) {
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(m[1], &cm); err != nil {
			return nil, fmt.Errorf("%s: an argocd-cm data block: %w", path, err)
		}
		for k, v := range cm.Data {
			if len(k) > len(healthKey) && k[:len(healthKey)] == healthKey {
				checks[k[len(healthKey):]] = v
			}
		}
	}
	if len(checks) == 0 {
		return nil, fmt.Errorf("%s: no %s* key in a yaml data block", path, healthKey)
	}
	return checks, nil
}

// Run runs script on obj, any value that encodes to a JSON object.
func Run(script string, obj any) (Health, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return Health{}, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return Health{}, err
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		l.Push(l.NewFunction(lib.open))
		l.Push(lua.LString(lib.name))
		l.Call(1, 0)
	}
	l.SetGlobal("obj", toLua(l, m))
	if err := l.DoString(script); err != nil {
		return Health{}, err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	var h Health
	if s, ok := ret.RawGetString("status").(lua.LString); ok {
		h.Status = string(s)
	}
	if s, ok := ret.RawGetString("message").(lua.LString); ok {
		h.Message = string(s)
	}
	return h, nil
}

// toLua is the JSON value v as Lua: objects and arrays as tables (arrays
// 1-based), numbers, strings, booleans, and null as nil.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []any:
		t := l.NewTable()
		for i, e := range v {
			t.RawSetInt(i+1, toLua(l, e))
		}
		return t
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	default:
		return lua.LNil
	}
}
