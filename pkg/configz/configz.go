// Package configz reads a kubelet's running config through the apiserver's
// node proxy (GET /api/v1/nodes/NODE/proxy/configz, which needs get on
// nodes/proxy) and turns it into a KubeletConfiguration, as the old
// documented workflow did with curl and jq.
package configz

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/itchyny/gojq"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubectl-dkc/dkc/pkg/kubeletconfig"
)

// SeedExpression is the jq expression of the old documented workflow,
// `.kubeletconfig|.kind="KubeletConfiguration"|.apiVersion="kubelet.config.k8s.io/v1beta1"`,
// changed to keep kind and apiVersion when configz already carries them (it
// does from kubelet 1.36).
const SeedExpression = `.kubeletconfig | .kind = (.kind // "KubeletConfiguration") | .apiVersion = (.apiVersion // "kubelet.config.k8s.io/v1beta1")`

// ErrNoKubeletConfig means a configz response has no .kubeletconfig object.
var ErrNoKubeletConfig = kubeletconfig.ErrNoKubeletConfig

// Path is the apiserver path of node nodeName's configz.
func Path(nodeName string) string {
	return "/api/v1/nodes/" + nodeName + "/proxy/configz"
}

// Fetch returns the raw configz response of node nodeName, read through the
// apiserver's node proxy. Pass a core/v1 client:
// clientset.CoreV1().RESTClient().
func Fetch(ctx context.Context, client rest.Interface, nodeName string) ([]byte, error) {
	// Result.Error, unlike DoRaw, decodes an apiserver Status, so its
	// message (such as a missing nodes/proxy permission) reaches the user.
	res := client.Get().AbsPath("/api/v1/nodes", nodeName, "proxy", "configz").Do(ctx)
	raw, err := res.Raw()
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", Path(nodeName), withBody(res.Error()))
	}
	return raw, nil
}

// Snapshot returns node nodeName's running config as a
// KubeletConfiguration document: its configz, read as Fetch reads it, run
// through t. A missing "get" on "nodes/proxy" is an error that says so.
func Snapshot(ctx context.Context, client rest.Interface, t *Transformer, nodeName string) ([]byte, error) {
	raw, err := Fetch(ctx, client, nodeName)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf(`%w: reading a kubelet's config needs "get" on "nodes/proxy"; check with: kubectl auth can-i get nodes --subresource=proxy`, err)
		}
		return nil, err
	}
	return t.Transform(ctx, raw)
}

// Running returns the config node nodeName's kubelet runs: its configz, read
// as Snapshot reads it, decoded leniently (a kubelet newer than dkc may show
// fields dkc does not know). This is the one way the CLI learns what a node
// runs, for a rollout's drain plan, its check for node-specific values, and
// what a dry-run of assign or rollout start would change.
// A nil client (a fake clientset's) is an error.
func Running(ctx context.Context, client rest.Interface, nodeName string) (*kubeletconfigv1beta1.KubeletConfiguration, error) {
	if client == nil || reflect.ValueOf(client).IsNil() {
		return nil, errors.New("no REST client to read /configz with")
	}
	doc, err := Snapshot(ctx, client, &Transformer{}, nodeName)
	if err != nil {
		return nil, err
	}
	cfg, _, err := kubeletconfig.Decode(doc, kubeletconfig.DecodeOptions{AllowUnknownFields: true})
	if err != nil {
		return nil, fmt.Errorf("node %q: configz: %w", nodeName, err)
	}
	return cfg, nil
}

// withBody adds to err the plain-text body the apiserver's proxy answered
// with, such as "Error trying to reach service: ...", which client-go keeps
// only in the Status details.
func withBody(err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return err
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Type == metav1.CauseTypeUnexpectedServerResponse && cause.Message != "" {
			return fmt.Errorf("%w: %s", err, strings.TrimSpace(cause.Message))
		}
	}
	return err
}

// seed is SeedExpression, compiled once.
var seed = mustCompile(SeedExpression)

func mustCompile(expr string) *gojq.Code {
	q, err := gojq.Parse(expr)
	if err != nil {
		panic(err)
	}
	code, err := gojq.Compile(q)
	if err != nil {
		panic(err)
	}
	return code
}

// Transformer applies SeedExpression and then an optional user expression
// (the --jq flag) to configz responses. Compile it once with NewTransformer
// and use it for many nodes; it is safe for concurrent use.
type Transformer struct {
	expr string
	user *gojq.Code // nil without a user expression
}

// NewTransformer compiles the user expression userExpr; an empty one means
// none. The expression cannot read the environment or further inputs.
func NewTransformer(userExpr string) (*Transformer, error) {
	t := &Transformer{expr: userExpr}
	if userExpr == "" {
		return t, nil
	}
	q, err := gojq.Parse(userExpr)
	if err != nil {
		return nil, fmt.Errorf("invalid --jq expression %q: %w", userExpr, err)
	}
	code, err := gojq.Compile(q, gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		return nil, fmt.Errorf("invalid --jq expression %q: %w", userExpr, err)
	}
	t.user = code
	return t, nil
}

// Transform applies SeedExpression to the configz response raw, then the
// user expression, and returns the result as JSON indented by two spaces with
// a trailing newline, as jq prints it. Object keys come out sorted, as gojq
// produces them (jq itself would keep insertion order). Each expression must
// yield exactly one result.
func (t *Transformer) Transform(ctx context.Context, raw []byte) ([]byte, error) {
	var in any
	if !json.Valid(raw) {
		// Unmarshal only for its error message.
		err := json.Unmarshal(raw, &in)
		return nil, fmt.Errorf("decode configz response: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep integers exact; gojq normalizes json.Number
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("decode configz response: %w", err)
	}
	obj, ok := in.(map[string]any)
	if !ok {
		return nil, ErrNoKubeletConfig
	}
	if _, ok := obj["kubeletconfig"].(map[string]any); !ok {
		return nil, ErrNoKubeletConfig
	}
	out, err := runOne(ctx, seed, in)
	if err != nil {
		return nil, fmt.Errorf("seed expression: %w", err)
	}
	if t.user != nil {
		if out, err = runOne(ctx, t.user, out); err != nil {
			return nil, fmt.Errorf("--jq %q: %w", t.expr, err)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return buf.Bytes(), nil
}

// Transform is NewTransformer(userExpr) followed by Transform(raw), for a
// single use.
func Transform(raw []byte, userExpr string) ([]byte, error) {
	t, err := NewTransformer(userExpr)
	if err != nil {
		return nil, err
	}
	return t.Transform(context.Background(), raw)
}

// runOne runs code on in and returns its only result.
func runOne(ctx context.Context, code *gojq.Code, in any) (any, error) {
	iter := code.RunWithContext(ctx, in)
	var out any
	n := 0
	for {
		v, ok := iter.Next()
		if !ok {
			break
		}
		if err, ok := v.(error); ok {
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				break // halt: stop without error, like jq
			}
			return nil, err
		}
		if n++; n > 1 {
			return nil, errors.New("yields more than one result, want exactly one")
		}
		out = v
	}
	if n == 0 {
		return nil, errors.New("yields no result, want exactly one")
	}
	return out, nil
}
