package cmd_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/spf13/cobra"
	cobradoc "github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-dkc/dkc/pkg/agent"
	"github.com/kubectl-dkc/dkc/pkg/goldenfile"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

var update = flag.Bool("update", false, "rewrite docs/reference.md from the code")

// referencePath is the generated reference, relative to this package.
const referencePath = "../docs/reference.md"

// TestReferenceDocs holds docs/reference.md to the code: it must be what
// reference() generates from the command trees, the annotation keys, the
// condition and Event reasons and the metrics. -update (make docs)
// rewrites it.
func TestReferenceDocs(t *testing.T) {
	goldenfile.Check(t, referencePath, reference(t), *update, "make docs")
}

// reference returns docs/reference.md as the code defines it.
func reference(t *testing.T) []byte {
	t.Helper()
	// Defaults that come from the environment read as their variables.
	t.Setenv("HOME", "$HOME")
	t.Setenv("NODE_NAME", "")
	t.Setenv("POD_NAME", "")
	trees := commandTrees()
	// The reference lists every flag, also those that a --help only names
	// (the agent's tuning flags).
	for _, root := range trees {
		walk(root, func(c *cobra.Command) {
			c.Flags().VisitAll(func(f *pflag.Flag) { f.Hidden = false })
		})
	}

	var b bytes.Buffer
	b.WriteString(`<!-- Generated from the code by make docs (go test ./cmd -run '^TestReferenceDocs$' -update); TestReferenceDocs fails when it is stale. Do not edit. -->
# Reference

Every command and flag, annotation, condition, Event reason and metric of
dkc, generated from the code. What each means and what to do about it:
[troubleshooting.md](troubleshooting.md); the workflow:
[user-guide.md](user-guide.md).

- [Commands](#commands): ` + "`kubectl dkc`" + ` and its subcommands, the controller and the agent among them
- [Global flags](#global-flags)
- [The agent's binary](#the-agents-binary): ` + "`kubectl-dkc-agent`" + `
- [Annotations, labels and taints](#annotations-labels-and-taints)
- [Node condition](#node-condition)
- [NodeConfigPool conditions](#nodeconfigpool-conditions)
- [Events](#events)
- [Metrics](#metrics)
- [Exit codes](#exit-codes)

## Commands

`)
	dkc := trees["kubectl dkc"]
	dkc.InitDefaultCompletionCmd()
	global := dkc.PersistentFlags()
	// Each command's section lists its own flags; the global ones, which
	// every command inherits, have a section of their own.
	global.VisitAll(func(f *pflag.Flag) { f.Hidden = true })
	genCommands(t, &b, dkc)
	b.WriteString("## Global flags\n\nEvery `kubectl dkc` command takes kubectl's global flags, and `-v` for the log's verbosity:\n\n```\n")
	global.VisitAll(func(f *pflag.Flag) { f.Hidden = false })
	b.WriteString(global.FlagUsages())
	b.WriteString("```\n\n")

	standalone := trees["kubectl-dkc-agent"]
	b.WriteString("## The agent's binary\n\n" +
		"`kubectl-dkc-agent`, which the DaemonSet and the systemd unit run, is [`kubectl dkc agent`](#kubectl-dkc-agent) alone, " +
		"and `kubectl-dkc-agent version` prints its version. Its flags ([agent.md](agent.md#flags) explains them):\n\n```\n")
	b.WriteString(standalone.Flags().FlagUsages())
	b.WriteString("```\n\n")

	b.WriteString("## Annotations, labels and taints\n\nEvery key dkc writes or reads, by the Go constant that defines it ([carrier.md](carrier.md) describes the carrier):\n\n")
	b.WriteString("| key | kind | constant | meaning |\n| --- | --- | --- | --- |\n")
	for _, k := range prefixedKeys(t) {
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", k.value, k.kind, k.constant, k.doc)
	}

	fmt.Fprintf(&b, "\n## Node condition\n\nThe agent keeps the Node condition `%s`, with one of these reasons ([troubleshooting.md](troubleshooting.md#the-node-condition-reason-by-reason) says what each means and what to do):\n\n", source.ConditionType)
	b.WriteString("| reason | status |\n| --- | --- |\n")
	for _, r := range agent.ConditionReasons {
		fmt.Fprintf(&b, "| `%s` | %s |\n", r, agent.ConditionStatus(r))
	}

	fmt.Fprintf(&b, "\n## NodeConfigPool conditions\n\nA `%s`'s status has the kstatus conditions below. One is True with one of its reasons, and the other two are False with the same reason ([rollout.md](rollout.md#pools-gitops)):\n\n", pool.Kind)
	b.WriteString("| condition | reasons |\n| --- | --- |\n")
	for _, typ := range slices.Sorted(maps.Keys(pool.Reasons)) {
		fmt.Fprintf(&b, "| `%s` | %s |\n", typ, codeList(pool.Reasons[typ]))
	}

	b.WriteString("\n## Events\n\nThe agent records Events on its Node (namespace `default`, source `kubectl-dkc-agent`) with these reasons ([carrier.md](carrier.md#events) says when):\n\n")
	b.WriteString("| reason | type |\n| --- | --- |\n")
	for _, r := range agent.EventReasons {
		typ := corev1.EventTypeNormal
		if agent.ConditionStatus(r) == corev1.ConditionFalse {
			typ = corev1.EventTypeWarning
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", r, typ)
	}

	b.WriteString("\n## Metrics\n\nThe agent serves these on `--metrics-bind-address`, besides the Go and process collectors' `go_*` and `process_*` ([agent.md](agent.md#metrics-healthz-and-readyz) suggests alerts). The controller serves no metrics.\n\n")
	b.WriteString("| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n")
	for _, m := range agentMetrics(t) {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.typ, m.labels, m.help)
	}

	b.WriteString("\n## Exit codes\n\nOne table, in the user guide: [exit codes](user-guide.md#exit-codes).\n")
	return b.Bytes()
}

// genCommands writes the section of root and of every command below it,
// as cobra's doc generator writes them, a heading level lower, linked to
// each other within the page.
func genCommands(t *testing.T, b *bytes.Buffer, root *cobra.Command) {
	t.Helper()
	root.DisableAutoGenTag = true
	anchor := func(file string) string {
		return "#" + strings.ReplaceAll(strings.TrimSuffix(file, ".md"), "_", "-")
	}
	var cmds []*cobra.Command
	walk(root, func(c *cobra.Command) {
		if c == root || (c.IsAvailableCommand() && !c.IsAdditionalHelpTopicCommand()) {
			cmds = append(cmds, c)
		}
	})
	for _, c := range cmds {
		// The help is laid out for a terminal: keep its lines.
		if c.Long != "" {
			c.Long = "```\n" + strings.TrimRight(c.Long, "\n") + "\n```"
		}
		var section bytes.Buffer
		if err := cobradoc.GenMarkdownCustom(c, &section, anchor); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(section.String(), "\n")
		fenced := false
		for i, l := range lines {
			if strings.HasPrefix(l, "```") {
				fenced = !fenced
			}
			if !fenced && strings.HasPrefix(l, "##") {
				lines[i] = "#" + l
			}
		}
		b.WriteString(strings.Join(lines, "\n"))
	}
}

// codeList is the words as inline code, separated by commas.
func codeList(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "`" + w + "`"
	}
	return strings.Join(quoted, ", ")
}

// prefixedKey is an exported constant of pkg/ whose value is source.Prefix
// and a name: an annotation or a label.
type prefixedKey struct {
	value, kind, constant, doc string
}

// prefixedKeys returns the keys of pkg/'s non-test files, sorted by value.
func prefixedKeys(t *testing.T) []prefixedKey {
	t.Helper()
	var out []prefixedKey
	fset := token.NewFileSet()
	err := filepath.WalkDir("../pkg", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !name.IsExported() || i >= len(vs.Values) {
						continue
					}
					suffix, ok := prefixed(vs.Values[i])
					if !ok {
						continue
					}
					comment := vs.Doc
					if comment == nil && len(gen.Specs) == 1 {
						comment = gen.Doc
					}
					kind := "annotation"
					switch {
					case strings.Contains(name.Name, "Label"):
						kind = "label"
					case strings.Contains(name.Name, "Taint"):
						kind = "taint"
					}
					out = append(out, prefixedKey{
						value:    source.Prefix + suffix,
						kind:     kind,
						constant: f.Name.Name + "." + name.Name,
						doc:      docText(comment),
					})
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("found no constant of the form source.Prefix + \"name\" in pkg/")
	}
	slices.SortFunc(out, func(a, b prefixedKey) int { return strings.Compare(a.value, b.value) })
	return out
}

// prefixed returns NAME of an expression Prefix + "NAME" or
// source.Prefix + "NAME".
func prefixed(e ast.Expr) (string, bool) {
	bin, ok := e.(*ast.BinaryExpr)
	if !ok || bin.Op != token.ADD {
		return "", false
	}
	switch x := bin.X.(type) {
	case *ast.Ident:
		if x.Name != "Prefix" {
			return "", false
		}
	case *ast.SelectorExpr:
		if pkg, ok := x.X.(*ast.Ident); !ok || pkg.Name != "source" || x.Sel.Name != "Prefix" {
			return "", false
		}
	default:
		return "", false
	}
	lit, ok := bin.Y.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// docText is a doc comment on one line, fit for a table's cell.
func docText(comment *ast.CommentGroup) string {
	if comment == nil {
		return ""
	}
	return strings.ReplaceAll(strings.Join(strings.Fields(comment.Text()), " "), "|", `\|`)
}

// metric is a row of the table of metrics.
type metric struct {
	name, typ, labels, help string
}

// agentMetrics returns the agent's own metrics, each label with the values
// the agent gives it.
func agentMetrics(t *testing.T) []metric {
	t.Helper()
	m := agent.NewMetrics()
	// A vector shows once it has a child: give it each value.
	for _, p := range agent.Phases {
		m.PhaseDuration.WithLabelValues(p)
	}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []metric
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "dkc_") {
			continue
		}
		values := map[string][]string{}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				values[l.GetName()] = append(values[l.GetName()], l.GetValue())
			}
		}
		var labels []string
		for _, name := range slices.Sorted(maps.Keys(values)) {
			labels = append(labels, fmt.Sprintf("`%s`: %s", name, codeList(values[name])))
		}
		out = append(out, metric{
			name:   f.GetName(),
			typ:    strings.ToLower(dto.MetricType_name[int32(f.GetType())]),
			labels: strings.Join(labels, "; "),
			help:   f.GetHelp(),
		})
	}
	if len(out) == 0 {
		t.Fatal("the agent's registry has no dkc_ metric")
	}
	return out
}
