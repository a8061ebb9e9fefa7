package status

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-dkc/dkc/pkg/source"
	"github.com/kubectl-dkc/dkc/pkg/table"
)

const (
	// local marks the node's local config: a nil source.
	local = "<local>"
	// invalid marks a source without a subfield.
	invalid = "<invalid>"
)

// Table makes the table of items, a row a node sorted by node name, with
// the columns NODE CARRIER ASSIGNED ACTIVE LAST-KNOWN-GOOD AGENT ERROR. wide
// adds REQUESTED (the assignment the operator made, which the status can lag
// behind) and PINNED (the digest the assignment pins, shortened, with the
// unsafe classes it allows), and shows each reported source with its
// resourceVersion. See FormatSource for how a source shows; ASSIGNED, ACTIVE
// and LAST-KNOWN-GOOD are <none> when the node reports no status. A cell
// keeps all of its value on one line (cell).
func Table(items []NodeConfig, wide bool) *metav1.Table {
	columns := []string{"Node", "Carrier", "Assigned", "Active", "Last-Known-Good", "Agent", "Error"}
	if wide {
		columns = []string{"Node", "Carrier", "Requested", "Pinned", "Assigned", "Active", "Last-Known-Good", "Agent", "Error"}
	}
	t := table.New(columns...)
	for _, item := range sorted(items) {
		assigned, active, lkg, errText := table.None, table.None, table.None, table.None
		if st := item.Status; st != nil {
			assigned = FormatSource(st.Assigned, wide)
			active = FormatSource(st.Active, wide)
			lkg = FormatSource(st.LastKnownGood, wide)
			if st.Error != "" {
				errText = st.Error
			}
		}
		carrier := string(item.Carrier)
		if carrier == "" {
			carrier = table.None
		}
		row := []string{item.Name, carrier, assigned, active, lkg, string(item.Agent), errText}
		if wide {
			row = []string{item.Name, carrier, FormatSource(item.ConfigSource, wide), formatPin(item), assigned, active, lkg, string(item.Agent), errText}
		}
		cells := make([]any, len(row))
		for i := range row {
			cells[i] = table.OrNone(table.OneLine(row[i]))
		}
		table.AddRow(t, cells...)
	}
	return t
}

// FormatSource shows src in one table cell: <local> for nil, <invalid> for a
// source without a subfield, else the ConfigMap as namespace/name. A
// kubeletConfigKey other than the default "kubelet" follows as :key, and wide
// adds @resourceVersion when src has one.
func FormatSource(src *corev1.NodeConfigSource, wide bool) string {
	if src == nil {
		return local
	}
	ref := src.ConfigMap
	if ref == nil {
		return invalid
	}
	s := ref.Namespace + "/" + ref.Name
	if ref.KubeletConfigKey != source.DefaultKey {
		s += ":" + ref.KubeletConfigKey
	}
	if wide && ref.ResourceVersion != "" {
		s += "@" + ref.ResourceVersion
	}
	return s
}

// formatPin shows the pin of item's assignment: <none> for the local
// config, <unpinned> for an assignment without a pin for it.
func formatPin(item NodeConfig) string {
	if item.ConfigSource == nil {
		return table.None
	}
	if !item.Pin.For(item.ConfigSource) {
		return "<unpinned>"
	}
	return item.Pin.Describe()
}
