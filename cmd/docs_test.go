package cmd_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-dkc/dkc/cmd"
	"github.com/kubectl-dkc/dkc/pkg/agent"
	agentcmd "github.com/kubectl-dkc/dkc/pkg/cmd/agent"
	"github.com/kubectl-dkc/dkc/pkg/pool"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// The docs tests hold README.md and docs/*.md to the code: every flag of a
// dkc command line, every Event reason, every condition and its reasons,
// and every exit code the docs name must be the code's. A failure names the
// doc's file and line.

// TestDocsFlags checks every flag written in a command line of kubectl dkc,
// kubectl-dkc or kubectl-dkc-agent (in a code block, or in inline code,
// which may also begin with a verb: `assign --wait`): the command the line
// names must have it, or inherit it (kubectl's global flags). A flag in a
// comment on such a line must be a flag of some dkc command. Flags of other
// tools (kubectl's own verbs, systemctl, make) are not checked.
func TestDocsFlags(t *testing.T) {
	trees := commandTrees()
	for _, d := range readDocs(t) {
		for _, inv := range d.invocations(trees) {
			checkFlags(t, d, inv.line, inv.text, inv.root, trees)
			if inv.comment != "" {
				checkFlags(t, d, inv.line, inv.comment, nil, trees)
			}
		}
	}
}

// TestDocsFlagTables keeps the flags of dkc's commands, with their
// defaults and meanings, in one list, the generated docs/reference.md: no
// other doc has a table of flags. A table of flags is one whose first
// column is headed flag or option, or one where more than half of the rows
// (at least two) begin with inline code whose first word is a flag of a
// dkc command, such as "`--canary N`". A doc says when and why to use a
// flag in prose, and links to the reference for the list.
func TestDocsFlagTables(t *testing.T) {
	trees := commandTrees()
	for _, d := range readDocs(t) {
		for _, tbl := range d.tables() {
			if isFlagsTable(tbl, trees) {
				t.Errorf("%s: a second table of flags; the flags have one list, docs/reference.md: link to its section", d.at(tbl.line))
			}
		}
	}
}

// isFlagsTable says whether tbl lists flags of dkc's commands (see
// TestDocsFlagTables).
func isFlagsTable(tbl table, trees map[string]*cobra.Command) bool {
	switch strings.ToLower(strings.TrimSpace(tbl.header[0])) {
	case "flag", "flags", "option", "options":
		return true
	}
	flags := 0
	for _, r := range tbl.rows {
		m := leadingCode.FindStringSubmatch(r.cells[0])
		if m == nil {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimSpace(m[1]), " ")
		f := flagToken.FindStringSubmatch(first)
		if f == nil {
			continue
		}
		name, short := f[2], f[1] == "-"
		if short {
			name = name[:1]
		}
		if anyCommandHas(trees, name, short) {
			flags++
		}
	}
	return flags >= 2 && 2*flags > len(tbl.rows)
}

// leadingCode is the inline code a table's cell begins with.
var leadingCode = regexp.MustCompile("^`([^`]+)`")

// commandTrees returns the command trees of the binaries by the names the
// docs call them with.
func commandTrees() map[string]*cobra.Command {
	streams := genericiooptions.NewTestIOStreamsDiscard()
	dkc := cmd.NewCmdDKC(streams)
	// What kubectl-dkc-agent's main builds.
	standalone := agentcmd.NewCmdStandalone(streams)
	for _, root := range []*cobra.Command{dkc, standalone} {
		root.InitDefaultVersionFlag()
		walk(root, func(c *cobra.Command) { c.InitDefaultHelpFlag() })
	}
	return map[string]*cobra.Command{"kubectl dkc": dkc, "kubectl-dkc": dkc, "kubectl-dkc-agent": standalone}
}

// walk calls fn for c and every command below it.
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

var (
	// flagToken is a flag as a command line writes it: --name, --name=VALUE,
	// -n, -oyaml.
	flagToken = regexp.MustCompile(`^(--?)([A-Za-z][A-Za-z0-9-]*)(=.*)?$`)
	// quoted is a shell string, which holds no flag of the command.
	quoted = regexp.MustCompile(`'[^']*'|"[^"]*"`)
	// endOfCommand ends a command line: a pipe, a list, the end of a
	// command substitution or a comment.
	endOfCommand = regexp.MustCompile(`\||;|&&|\)|\s#`)
)

// checkFlags checks the flags of the command line text, whose words after
// the binary's name begin at root: the command they name must have each of
// them. With a nil root, each flag must be one of some dkc command.
func checkFlags(t *testing.T, d doc, line int, text string, root *cobra.Command, trees map[string]*cobra.Command) {
	t.Helper()
	if loc := endOfCommand.FindStringIndex(text); loc != nil {
		text = text[:loc[0]]
	}
	c, descend := root, root != nil
	words := strings.Fields(quoted.ReplaceAllString(text, "Q"))
	for i := 0; i < len(words); i++ {
		w := strings.Trim(words[i], "[](),.:;`")
		m := flagToken.FindStringSubmatch(w)
		if m == nil {
			if descend {
				if sub := subcommand(c, w); sub != nil {
					c = sub
					continue
				}
			}
			descend = false
			continue
		}
		name, short := m[2], m[1] == "-"
		if short {
			// -oyaml: the shorthand o with its value.
			name, m[3] = name[:1], name[1:]+m[3]
		}
		if c == nil {
			if !anyCommandHas(trees, name, short) {
				t.Errorf("%s: no dkc command has the flag %s", d.at(line), m[1]+name)
			}
			continue
		}
		f := lookupFlag(c, name, short)
		if f == nil {
			t.Errorf("%s: %s has no flag %s", d.at(line), c.CommandPath(), m[1]+name)
			continue
		}
		if descend && m[3] == "" && f.NoOptDefVal == "" {
			i++ // the flag's value
		}
	}
}

// subcommand returns c's subcommand called name, or nil.
func subcommand(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// lookupFlag returns c's flag, its own or inherited, called name (or with
// the shorthand name), or nil.
func lookupFlag(c *cobra.Command, name string, short bool) *pflag.Flag {
	for _, fs := range []*pflag.FlagSet{c.Flags(), c.InheritedFlags()} {
		if short {
			if f := fs.ShorthandLookup(name); f != nil {
				return f
			}
		} else if f := fs.Lookup(name); f != nil {
			return f
		}
	}
	return nil
}

// anyCommandHas says whether a command of any of the trees has the flag.
func anyCommandHas(trees map[string]*cobra.Command, name string, short bool) bool {
	var found bool
	for _, root := range trees {
		walk(root, func(c *cobra.Command) { found = found || lookupFlag(c, name, short) != nil })
	}
	return found
}

// invocation is a dkc command line in a doc.
type invocation struct {
	line int
	// text is the command line from the first word after the binary's
	// name; root is the command that word is looked up in.
	text string
	root *cobra.Command
	// comment is a shell comment after the command line.
	comment string
}

// invoked is where a dkc binary is run in a line: its name, at the start
// or after a space or a "(" (a command substitution).
var invoked = regexp.MustCompile(`(?:^|[\s(])(kubectl dkc|kubectl-dkc-agent|kubectl-dkc)(?:\s+|$)`)

// invocations returns d's dkc command lines, in the order of their lines.
func (d doc) invocations(trees map[string]*cobra.Command) []invocation {
	var out []invocation
	add := func(line int, text, comment string, verbFirst bool) {
		ms := invoked.FindAllStringSubmatchIndex(text, -1)
		for i, m := range ms {
			end := len(text)
			if i+1 < len(ms) {
				end = ms[i+1][0]
			}
			inv := invocation{line: line, text: text[m[1]:end], root: trees[text[m[2]:m[3]]]}
			if i == len(ms)-1 {
				inv.comment = comment
			}
			out = append(out, inv)
		}
		if len(ms) == 0 && verbFirst {
			if first, _, _ := strings.Cut(text, " "); subcommand(trees["kubectl dkc"], first) != nil {
				out = append(out, invocation{line: line, text: text, root: trees["kubectl dkc"]})
			}
		}
	}
	for _, l := range d.codeLines() {
		code, comment := l.text, ""
		if strings.HasPrefix(strings.TrimSpace(code), "#") {
			continue
		}
		if i := strings.Index(code, " #"); i >= 0 {
			code, comment = code[:i], code[i+2:]
		}
		add(l.line, code, comment, false)
	}
	for _, s := range d.spans() {
		add(s.line, s.text, "", true)
	}
	slices.SortStableFunc(out, func(a, b invocation) int { return a.line - b.line })
	return out
}

// TestDocsEventReasons checks the Event reasons the docs name against
// agent.EventReasons: each list of them must hold every one and no other;
// every reason written as "Event `X`" or "`X` Event", and every one of a
// list of reasons in a sentence about Events, must be one.
func TestDocsEventReasons(t *testing.T) {
	docs := docsByPath(t)
	// The list of the reasons has one home, the table of
	// troubleshooting.md (TestDocsTroubleshooting holds it to the code):
	// no other doc has a table of Events.
	for _, d := range docs {
		for _, tbl := range d.tables() {
			if strings.EqualFold(tbl.header[0], "event") && d.path != "docs/troubleshooting.md" {
				t.Errorf("%s: a second table of Events; link to troubleshooting.md's", d.at(tbl.line))
			}
		}
	}
	allowed := sets.New(agent.EventReasons...).Insert(corev1.EventTypeNormal, corev1.EventTypeWarning)
	// "Events (reasons `A`, `B` and `C`)": within a sentence.
	reasonsList := regexp.MustCompile(`\bEvents?\b[^.;]*?\breasons?\s+((?:` + reasonWord.String() + `(?:,?\s+(?:and|or)\s+|,\s*)?)+)`)
	for _, d := range docs {
		named := d.reasonsAfter(`Events?\s+`, `\s+Events?\b`)
		text := d.prose()
		for _, m := range reasonsList.FindAllStringSubmatchIndex(text, -1) {
			for _, w := range reasonWord.FindAllStringSubmatchIndex(text[m[2]:m[3]], -1) {
				named = append(named, reasonAt{reason: text[m[2]+w[2] : m[2]+w[3]], line: d.lineAt(text, m[2]+w[2])})
			}
		}
		for _, w := range named {
			if !allowed.Has(w.reason) {
				t.Errorf("%s: the agent records no Event %s; its reasons are %s", d.at(w.line), w.reason, strings.Join(agent.EventReasons, ", "))
			}
		}
	}
}

// TestDocsConditions checks the conditions the docs name: each table of
// the KubeletConfigOK condition's reasons (a table whose columns are
// reason and status) holds agent.ConditionReasons, each with its status;
// the table of the NodeConfigPool's conditions (condition, True when,
// reasons) holds pool.Reasons; and every word written as "condition `X`",
// "`X` condition" or "reason `X`" is a condition or one of its reasons.
func TestDocsConditions(t *testing.T) {
	docs := docsByPath(t)
	// The table of each condition's reasons has one home, besides the
	// generated reference: a second copy drifts.
	nodeTables, poolTables := sets.New[string](), sets.New[string]()
	for _, d := range docs {
		for _, tbl := range d.tables() {
			switch {
			case len(tbl.header) >= 2 && strings.EqualFold(tbl.header[0], "reason") && strings.EqualFold(tbl.header[1], "status"):
				nodeTables.Insert(d.path)
				var named []reasonAt
				for _, r := range tbl.rows {
					reason := strings.Trim(r.cells[0], "`")
					named = append(named, reasonAt{reason: reason, line: r.line})
					if want := string(agent.ConditionStatus(reason)); slices.Contains(agent.ConditionReasons, reason) && r.cells[1] != want {
						t.Errorf("%s: %s with reason %s is %s, not %s", d.at(r.line), source.ConditionType, reason, want, r.cells[1])
					}
				}
				compareReasons(t, d, tbl.line, string(source.ConditionType)+" reasons", named, agent.ConditionReasons)
			case len(tbl.header) == 3 && strings.EqualFold(tbl.header[0], "condition") && strings.EqualFold(tbl.header[2], "reasons"):
				poolTables.Insert(d.path)
				var conditions []reasonAt
				for _, r := range tbl.rows {
					typ := strings.Trim(r.cells[0], "`")
					conditions = append(conditions, reasonAt{reason: typ, line: r.line})
					var named []reasonAt
					for _, w := range reasonWord.FindAllStringSubmatch(r.cells[2], -1) {
						named = append(named, reasonAt{reason: w[1], line: r.line})
					}
					compareReasons(t, d, r.line, pool.Kind+" "+typ+" reasons", named, pool.Reasons[typ])
				}
				compareReasons(t, d, tbl.line, pool.Kind+" conditions", conditions, slices.Sorted(maps.Keys(pool.Reasons)))
			}
		}
	}
	if want := sets.New("docs/troubleshooting.md"); !nodeTables.Equal(want) {
		t.Errorf("the tables of %s's reasons are in %v; want one, in %v: link to it from elsewhere", source.ConditionType, sets.List(nodeTables), sets.List(want))
	}
	if want := sets.New("docs/rollout.md"); !poolTables.Equal(want) {
		t.Errorf("the tables of %s conditions are in %v; want one, in %v: link to it from elsewhere", pool.Kind, sets.List(poolTables), sets.List(want))
	}

	allowed := sets.New(agent.ConditionReasons...).Insert(string(source.ConditionType)).
		Insert(string(corev1.NodeReady), string(corev1.NodeMemoryPressure), string(corev1.NodeDiskPressure),
			string(corev1.NodePIDPressure), string(corev1.NodeNetworkUnavailable))
	for typ, reasons := range pool.Reasons {
		allowed.Insert(typ).Insert(reasons...)
	}
	for _, d := range docs {
		for _, w := range d.reasonsAfter(`(?:condition|reasons?(?: is)?)\s+`, `\s+condition\b`) {
			if !allowed.Has(w.reason) {
				t.Errorf("%s: no condition has the type or reason %s", d.at(w.line), w.reason)
			}
		}
	}
}

// TestDocsTroubleshooting holds docs/troubleshooting.md to the code: it
// explains every reason of the KubeletConfigOK condition (its table of
// reasons, which TestDocsConditions checks), every Event reason (a table
// whose first column is the Event, holding each of agent.EventReasons and
// no other), and every condition and reason of a NodeConfigPool.
func TestDocsTroubleshooting(t *testing.T) {
	const path = "docs/troubleshooting.md"
	d, ok := docsByPath(t)[path]
	if !ok {
		t.Fatalf("no %s", path)
	}
	tables := 0
	for _, tbl := range d.tables() {
		if !strings.EqualFold(tbl.header[0], "event") {
			continue
		}
		tables++
		var named []reasonAt
		for _, r := range tbl.rows {
			named = append(named, reasonAt{reason: strings.Trim(r.cells[0], "`"), line: r.line})
		}
		compareReasons(t, d, tbl.line, "Event reasons", named, agent.EventReasons)
	}
	if tables == 0 {
		t.Errorf("%s: no table of Events (a first column headed Event)", path)
	}

	written := sets.New[string]()
	for _, m := range reasonWord.FindAllStringSubmatch(d.prose(), -1) {
		written.Insert(m[1])
	}
	want := map[string][]string{
		string(source.ConditionType) + " reason": agent.ConditionReasons,
		"Event reason":                           agent.EventReasons,
		pool.Kind + " condition":                 slices.Sorted(maps.Keys(pool.Reasons)),
	}
	for typ, reasons := range pool.Reasons {
		want[pool.Kind+" "+typ+" reason"] = reasons
	}
	for _, what := range slices.Sorted(maps.Keys(want)) {
		for _, r := range want[what] {
			if !written.Has(r) {
				t.Errorf("%s does not explain the %s %s: say what it means and what to do", path, what, r)
			}
		}
	}
}

// TestDocsExitCodes keeps the exit codes in one table, the one
// TestExitCodes checks (docs/user-guide.md, "Exit codes"): no other doc
// has a table of codes or a section headed "Exit codes", and every "exit N"
// or "exits N" a doc writes is a code of that table.
func TestDocsExitCodes(t *testing.T) {
	codes := documentedExitCodes(t)
	exit := regexp.MustCompile(`\bexits?(?: with)?(?: code)?\s+(\d+)`)
	heading := regexp.MustCompile(`(?i)^#+\s+exit codes\s*$`)
	for _, d := range readDocs(t) {
		fenced := d.fenced()
		for i, l := range d.lines {
			if !fenced[i] && heading.MatchString(l) && d.path != "docs/user-guide.md" {
				t.Errorf("%s: a section of exit codes; the codes have one table, docs/user-guide.md#exit-codes: link to it", d.at(i+1))
			}
		}
		for _, tbl := range d.tables() {
			if strings.EqualFold(tbl.header[0], "code") && d.path != "docs/user-guide.md" {
				t.Errorf("%s: a table of exit codes; the codes have one table, docs/user-guide.md#exit-codes: link to it", d.at(tbl.line))
			}
		}
		text := strings.Join(d.lines, "\n")
		for _, m := range exit.FindAllStringSubmatchIndex(text, -1) {
			n, _ := strconv.Atoi(text[m[2]:m[3]])
			if !slices.Contains(codes, n) {
				t.Errorf("%s: exit code %d is not in docs/user-guide.md's table (%v)", d.at(d.lineAt(text, m[2])), n, codes)
			}
		}
	}
}

// compareReasons reports the reasons a doc's list names that want does
// not hold, at their lines, and those it leaves out, at line.
func compareReasons(t *testing.T, d doc, line int, what string, named []reasonAt, want []string) {
	t.Helper()
	got := sets.New[string]()
	for _, w := range named {
		got.Insert(w.reason)
		if !slices.Contains(want, w.reason) {
			t.Errorf("%s: %s: %s is not one of the code's (%s)", d.at(w.line), what, w.reason, strings.Join(want, ", "))
		}
	}
	if missing := sets.New(want...).Difference(got); missing.Len() > 0 {
		t.Errorf("%s: %s: the list leaves out %s", d.at(line), what, strings.Join(sets.List(missing), ", "))
	}
}

// A doc is README.md or a file of docs/, as the tests read it.
type doc struct {
	// path is relative to the repository: "docs/agent.md".
	path  string
	lines []string
}

// readDocs returns README.md, docs/*.md and docs/design/*.md, but for
// docs/reference.md: that one is generated from the code, and
// TestReferenceDocs holds it to it.
func readDocs(t *testing.T) []doc {
	t.Helper()
	paths, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	design, err := filepath.Glob("../docs/design/*.md")
	if err != nil {
		t.Fatal(err)
	}
	paths = append(paths, design...)
	var out []doc
	for _, p := range append([]string{"../README.md"}, paths...) {
		if p == referencePath {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, doc{path: strings.TrimPrefix(p, "../"), lines: strings.Split(string(b), "\n")})
	}
	return out
}

// docsByPath returns readDocs by their paths.
func docsByPath(t *testing.T) map[string]doc {
	t.Helper()
	out := map[string]doc{}
	for _, d := range readDocs(t) {
		out[d.path] = d
	}
	return out
}

// at is the place of line (from 1) in d: "docs/agent.md:12".
func (d doc) at(line int) string {
	return fmt.Sprintf("%s:%d", d.path, line)
}

// lineAt returns the line (from 1) of the byte offset in text, d's lines
// joined by newlines.
func (d doc) lineAt(text string, offset int) int {
	return strings.Count(text[:offset], "\n") + 1
}

// fenced says for each line of d whether it is in a fenced code block,
// fences included.
func (d doc) fenced() []bool {
	out := make([]bool, len(d.lines))
	in := false
	for i, l := range d.lines {
		fence := strings.HasPrefix(strings.TrimSpace(l), "```")
		out[i] = in || fence
		if fence {
			in = !in
		}
	}
	return out
}

// span is a piece of text of a doc and the line it begins on.
type span struct {
	line int
	text string
}

// codeLines returns the lines of d's code blocks, a line that ends in a
// backslash joined with the next.
func (d doc) codeLines() []span {
	var out []span
	fenced := d.fenced()
	for i := 0; i < len(d.lines); i++ {
		if !fenced[i] || strings.HasPrefix(strings.TrimSpace(d.lines[i]), "```") {
			continue
		}
		s := span{line: i + 1, text: d.lines[i]}
		for strings.HasSuffix(s.text, `\`) && i+1 < len(d.lines) && fenced[i+1] {
			i++
			s.text = strings.TrimSuffix(s.text, `\`) + " " + strings.TrimSpace(d.lines[i])
		}
		out = append(out, s)
	}
	return out
}

// prose returns d's lines outside code blocks joined by newlines, with the
// lines of code blocks left empty.
func (d doc) prose() string {
	lines := slices.Clone(d.lines)
	for i, f := range d.fenced() {
		if f {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// codeSpan is inline code.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// spans returns d's inline code, outside code blocks, on one line: a span
// may go on over a line break. In a table, `\|` is a "|".
func (d doc) spans() []span {
	var out []span
	text := d.prose()
	for _, m := range codeSpan.FindAllStringSubmatchIndex(text, -1) {
		s := text[m[2]:m[3]]
		if strings.Contains(s, "\n\n") {
			continue
		}
		s = strings.ReplaceAll(strings.Join(strings.Fields(s), " "), `\|`, "|")
		out = append(out, span{line: d.lineAt(text, m[0]), text: s})
	}
	return out
}

// table is a Markdown table of a doc: its header's cells and its rows.
type table struct {
	line   int
	header []string
	rows   []row
}

type row struct {
	line  int
	cells []string
}

// tables returns d's tables outside code blocks.
func (d doc) tables() []table {
	var out []table
	fenced := d.fenced()
	var cur *table
	for i, l := range d.lines {
		l = strings.TrimSpace(l)
		if fenced[i] || !strings.HasPrefix(l, "|") {
			cur = nil
			continue
		}
		cells := tableCells(l)
		switch {
		case cur == nil:
			out = append(out, table{line: i + 1, header: cells})
			cur = &out[len(out)-1]
		case strings.Trim(l, "|-: ") == "":
			// the delimiter row
		default:
			cur.rows = append(cur.rows, row{line: i + 1, cells: cells})
		}
	}
	return out
}

// tableCells splits a table's row into its cells, trimmed; `\|` is no
// cell's end.
func tableCells(l string) []string {
	l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
	var cells []string
	start := 0
	for i := 0; i < len(l); i++ {
		if l[i] == '|' && (i == 0 || l[i-1] != '\\') {
			cells = append(cells, strings.TrimSpace(l[start:i]))
			start = i + 1
		}
	}
	return append(cells, strings.TrimSpace(l[start:]))
}

// reasonAt is a reason, or a condition, a doc names, and where.
type reasonAt struct {
	reason string
	line   int
}

// reasonWord is a reason or a condition in inline code: a capitalized
// word.
var reasonWord = regexp.MustCompile("`([A-Z][A-Za-z]+)`")

// reasonsAfter returns the reasons in inline code in d's prose that follow
// the regular expression before or precede after.
func (d doc) reasonsAfter(before, after string) []reasonAt {
	text := d.prose()
	var out []reasonAt
	for _, expr := range []string{`\b` + before + reasonWord.String(), reasonWord.String() + after} {
		for _, m := range regexp.MustCompile(expr).FindAllStringSubmatchIndex(text, -1) {
			out = append(out, reasonAt{reason: text[m[2]:m[3]], line: d.lineAt(text, m[2])})
		}
	}
	return out
}
