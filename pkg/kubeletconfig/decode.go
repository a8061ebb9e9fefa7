package kubeletconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

const (
	// Kind is the only kind Decode accepts.
	Kind = "KubeletConfiguration"
	// APIVersion is the only apiVersion Decode accepts.
	APIVersion = "kubelet.config.k8s.io/v1beta1"
)

// ErrLoad is wrapped by every error from Decode, DecodePartial and
// MergePatch. The node agent reports it as upstream's
// "failed to load config, see Kubelet log for details".
var ErrLoad = errors.New("load kubelet config")

// ErrNoKubeletConfig means a kubelet's /configz response has no
// .kubeletconfig object. It lives here, not in package configz, so that the
// node agent's health gate reports it without linking configz's jq.
var ErrNoKubeletConfig = errors.New("configz response has no .kubeletconfig object")

// DecodeOptions tune Decode and DecodePartial.
type DecodeOptions struct {
	// AllowUnknownFields turns unknown-field errors into warnings.
	// Duplicate fields are always errors.
	AllowUnknownFields bool
}

// codecs decodes strictly: unknown and duplicate fields are reported as a
// runtime.StrictDecodingError next to a fully decoded object.
var codecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := kubeletconfigv1beta1.AddToScheme(scheme); err != nil {
		panic(err) // only fails on a programming error in the scheme
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict)
}()

// Decode decodes a complete KubeletConfiguration from JSON or YAML.
//
// The document must carry kind: KubeletConfiguration and apiVersion:
// kubelet.config.k8s.io/v1beta1. Unknown and duplicate fields are errors
// naming the field, unless opts.AllowUnknownFields is set: then each unknown
// field is returned as a warning and the config is still returned. No
// defaults are applied. Every error wraps ErrLoad.
//
// Checking kind up front means dkc never shows upstream's opaque
// "Object 'Kind' is missing in '...'"; it says which field to add instead.
func Decode(data []byte, opts DecodeOptions) (*kubeletconfigv1beta1.KubeletConfiguration, []string, error) {
	if err := checkTypeMeta(data); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrLoad, err)
	}
	cfg := &kubeletconfigv1beta1.KubeletConfiguration{}
	_, _, err := codecs.UniversalDeserializer().Decode(data, nil, cfg)
	if err == nil {
		return cfg, nil, nil
	}
	strict, ok := runtime.AsStrictDecodingError(err)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %w", ErrLoad, explainDecodeError(data, err))
	}
	var warnings, problems []string
	for _, e := range strict.Errors() {
		for _, msg := range strictMessages(e) {
			if opts.AllowUnknownFields && strings.HasPrefix(msg, "unknown field ") {
				warnings = append(warnings, msg)
				continue
			}
			problems = append(problems, msg)
		}
	}
	if len(problems) > 0 {
		return nil, nil, fmt.Errorf("%w: %s", ErrLoad, JoinBounded(problems, ", "))
	}
	return cfg, warnings, nil
}

// DecodePartial checks a drop-in (overlay) KubeletConfiguration, one that
// sets only some fields, and returns it as JSON ready for MergePatch.
//
// It is as strict as Decode: kind and apiVersion are required (as the
// kubelet requires for --config-dir files since 1.35), duplicate fields are
// errors, and so are unknown fields unless opts.AllowUnknownFields is set.
// (The kubelet itself ignores unknown fields in drop-ins.) Unlike
// a decoded struct, the returned JSON keeps null values, which delete keys
// from the base when merged. Every error wraps ErrLoad.
func DecodePartial(data []byte, opts DecodeOptions) ([]byte, []string, error) {
	_, warnings, err := Decode(data, opts)
	if err != nil {
		return nil, nil, err
	}
	patch, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrLoad, err)
	}
	return patch, warnings, nil
}

// checkTypeMeta reports a missing or wrong kind and apiVersion, naming the
// field and the fix.
func checkTypeMeta(data []byte) error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("parse document: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(j, &doc); err != nil {
		return errors.New("parse document: must be a JSON or YAML object")
	}
	var problems []string
	for _, f := range []struct{ name, want string }{{"kind", Kind}, {"apiVersion", APIVersion}} {
		switch got := doc[f.name]; got {
		case f.want:
		case nil, "":
			problems = append(problems, fmt.Sprintf("missing %q: add %s: %s", f.name, f.name, f.want))
		default:
			problems = append(problems, fmt.Sprintf("%s %q is not supported: want %s: %s", f.name, shortValue(fmt.Sprint(got)), f.name, f.want))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, ", "))
	}
	return nil
}

// yamlDuplicate matches one line of a go-yaml duplicate key error, such as
// `line 4: key "maxPods" already set in map`.
var yamlDuplicate = regexp.MustCompile(`line (\d+): key "(.*)" already set in map`)

// strictMessages turns one strict decoding error into messages naming the
// field. JSON errors already read `unknown field "a.b"` or
// `duplicate field "a"`; YAML duplicate keys come as a go-yaml error and are
// rewritten to the same shape.
func strictMessages(err error) []string {
	matches := yamlDuplicate.FindAllStringSubmatch(err.Error(), -1)
	if len(matches) == 0 {
		return []string{err.Error()}
	}
	msgs := make([]string, 0, len(matches))
	for _, m := range matches {
		msgs = append(msgs, fmt.Sprintf("duplicate field %q (line %s)", m[2], m[1]))
	}
	return msgs
}

var (
	durationType = reflect.TypeFor[metav1.Duration]()
	// typeMismatch matches the JSON decoder's wrong-type error, such as
	// `json: cannot unmarshal string into Go struct field
	// KubeletConfiguration.maxPods of type int32`.
	typeMismatch = regexp.MustCompile(`^json: cannot unmarshal (.+) into Go struct field \w+\.(\S+) of type (.+)$`)
)

// explainDecodeError rewrites a decoding error so that it starts with the
// field's JSON path: wrong types (`maxPods: cannot decode string as int32`)
// and durations, which the JSON decoder reports without a field
// (`time: unknown unit "x" in duration "10x"`). Other errors are returned
// as they are.
func explainDecodeError(data []byte, err error) error {
	if m := typeMismatch.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%s: cannot decode %s as %s", m[2], m[1], m[3])
	}
	var doc map[string]any
	if yaml.Unmarshal(data, &doc) != nil {
		return err
	}
	for _, path := range durationPaths(reflect.TypeFor[kubeletconfigv1beta1.KubeletConfiguration](), "") {
		v := lookup(doc, path)
		s, ok := v.(string)
		if !ok {
			continue
		}
		if _, perr := time.ParseDuration(s); perr != nil {
			return fmt.Errorf("%s: %w", path, perr)
		}
	}
	return err
}

// durationPaths lists the dotted JSON paths of every metav1.Duration field
// reachable through structs (not through maps or lists) from t.
func durationPaths(t reflect.Type, prefix string) []string {
	var paths []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == durationType:
			paths = append(paths, prefix+name)
		case ft.Kind() == reflect.Struct:
			paths = append(paths, durationPaths(ft, prefix+name+".")...)
		}
	}
	return paths
}

// lookup follows a dotted path through nested JSON objects.
func lookup(doc map[string]any, path string) any {
	var v any = doc
	for _, key := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[key]
	}
	return v
}
