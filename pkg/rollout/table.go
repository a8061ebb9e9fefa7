package rollout

import (
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/table"
)

// WaveSummary counts a wave's nodes by phase.
type WaveSummary struct {
	Wave
	Done, InProgress, Waiting, Failed int
}

// State is the wave's state in one word: done, failed, in progress or
// waiting.
func (w WaveSummary) State() string {
	switch {
	case w.Failed > 0:
		return "failed"
	case w.InProgress > 0:
		return "in progress"
	case w.Waiting == 0:
		return "done"
	case w.Done > 0:
		return "in progress"
	}
	return "waiting"
}

// Summarize counts the nodes of each wave of r by phase; Skipped counts as
// done.
func Summarize(r *Rollout) []WaveSummary {
	var out []WaveSummary
	for _, w := range Waves(&r.Spec) {
		s := WaveSummary{Wave: w}
		for _, n := range w.Nodes {
			switch r.NodeStatus(n).Phase {
			case Succeeded, Skipped:
				s.Done++
			case InProgress:
				s.InProgress++
			case Failed:
				s.Failed++
			default:
				s.Waiting++
			}
		}
		out = append(out, s)
	}
	return out
}

// maxListed bounds the node names a table row shows.
const maxListed = 5

// PrintTable writes r as a header and its waveTable:
//
//	rollout/r1: Running, kube-system/cfg over 3 nodes, max unavailable 1 (1), canary 1, no soak: a freed slot goes at once to the next node
//	WAVE         STATE         DONE   IN-PROGRESS   WAITING   FAILED   NODES
//	0 (canary)   done          1      0             0         0        n1(Done)
//	1            in progress   0      1             1         0        n2(InProgress),n3
func PrintTable(w io.Writer, r *Rollout) error {
	fmt.Fprintf(w, "rollout/%s: %s\n", r.Name, Headline(r))
	if r.Status.Reason != "" {
		fmt.Fprintf(w, "reason: %s\n", r.Status.Reason)
	}
	return table.Print(w, waveTable(r))
}

// waveTable is the table of r's waves, a wave a row: its state, its nodes
// counted by phase, and the first of them (listNodes).
func waveTable(r *Rollout) *metav1.Table {
	t := table.New("Wave", "State", "Done", "In-Progress", "Waiting", "Failed", "Nodes")
	for _, s := range Summarize(r) {
		table.AddRow(t, s.Label(), s.State(), s.Done, s.InProgress, s.Waiting, s.Failed, listNodes(r, s.Nodes))
	}
	return t
}

// Headline says what r does in one line.
func Headline(r *Rollout) string {
	target := DescribeTarget(r.Spec.Config)
	if len(r.Spec.Targets) > 0 {
		target = "each node's previous config"
		if r.Spec.UndoOf != "" {
			target += " (undo of " + r.Spec.UndoOf + ")"
		}
	}
	s := fmt.Sprintf("%s, %s over %d nodes, max unavailable %s (%d), canary %d",
		r.State(), target, len(r.Spec.Nodes), r.Spec.MaxUnavailable.String(), Budget(r.Spec.MaxUnavailable, len(r.Spec.Nodes)), r.Spec.Canary)
	if r.Spec.Soak.Duration > 0 {
		s += ", soak " + r.Spec.Soak.Duration.String()
	} else {
		s += ", no soak: a freed slot goes at once to the next node"
	}
	if len(r.Spec.Drain) > 0 {
		s += fmt.Sprintf(", drains %d nodes", len(r.Spec.Drain))
	}
	if len(r.Spec.Windows) > 0 {
		s += ", starts nodes only in the windows " + r.Spec.Windows.String()
	}
	if p := r.Spec.PauseOnAlerts; p != nil {
		s += ", starts no node while an alert fires on " + p.Alertmanager
		if len(p.Matchers) > 0 {
			s += " matching " + strings.Join(p.Matchers, ", ")
		}
	}
	return s
}

// listNodes shows the first nodes of a wave with their phase when it is not
// Waiting.
func listNodes(r *Rollout, nodes []string) string {
	var parts []string
	for i, n := range nodes {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("... (%d more)", len(nodes)-maxListed))
			break
		}
		if p := r.NodeStatus(n).Phase; p != Waiting {
			n += "(" + string(p) + ")"
		}
		parts = append(parts, n)
	}
	return strings.Join(parts, ",")
}
