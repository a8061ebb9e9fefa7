package rollout

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util"
	"github.com/kubectl-dkc/dkc/pkg/rollout"
	"github.com/kubectl-dkc/dkc/pkg/table"
)

// progress shows a rollout as it moves. On a terminal it redraws the wave
// table in place; elsewhere it prints one line per event, which scripts can
// parse:
//
//	rollout/NAME node/NODE PHASE wave=N [error=...]
//	rollout/NAME STATE [reason=...]
type progress struct {
	out   io.Writer
	tty   bool
	lines int
	phase map[string]rollout.Phase
	// state and reason are the last shown.
	state  rollout.State
	reason string
}

func newProgress(out io.Writer) *progress {
	return &progress{out: out, tty: util.IsTerminal(out), phase: map[string]rollout.Phase{}}
}

func (p *progress) update(r *rollout.Rollout) {
	if p.tty {
		var buf bytes.Buffer
		_ = rollout.PrintTable(&buf, r)
		if p.lines > 0 {
			fmt.Fprintf(p.out, "\x1b[%dA\x1b[J", p.lines)
		}
		p.lines = strings.Count(buf.String(), "\n")
		_, _ = p.out.Write(buf.Bytes())
		return
	}
	// The state first, so that a script knows the rollout it follows;
	// a final state only last, after the node lines that led to it (the
	// first update a client sees may be the end, when another client
	// drove the rollout).
	if p.state == "" && !r.State().Terminal() {
		p.printState(r)
	}
	wave := map[string]int{}
	for _, w := range rollout.Waves(&r.Spec) {
		for _, n := range w.Nodes {
			wave[n] = w.Index
		}
	}
	for _, n := range r.Spec.Nodes {
		ns := r.NodeStatus(n)
		old, seen := p.phase[n]
		if seen && old == ns.Phase || !seen && ns.Phase == rollout.Waiting {
			p.phase[n] = ns.Phase
			continue
		}
		p.phase[n] = ns.Phase
		line := fmt.Sprintf("rollout/%s node/%s %s wave=%d", r.Name, n, ns.Phase, wave[n])
		if ns.Error != "" {
			line += " error=" + table.OneLine(ns.Error)
		}
		fmt.Fprintln(p.out, line)
	}
	p.printState(r)
}

// finish shows the final state once, whatever was shown before.
func (p *progress) finish(r *rollout.Rollout) {
	if p.tty {
		p.update(r)
		return
	}
	p.printState(r)
}

func (p *progress) printState(r *rollout.Rollout) {
	if r.State() == p.state && r.Status.Reason == p.reason {
		return
	}
	p.state, p.reason = r.State(), r.Status.Reason
	line := fmt.Sprintf("rollout/%s %s", r.Name, r.State())
	if r.Status.Reason != "" {
		line += " reason=" + table.OneLine(r.Status.Reason)
	}
	fmt.Fprintln(p.out, line)
}
