package util

import (
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
)

// None marks an empty cell of a table, as kubectl rollout history marks a
// revision without a change cause.
const None = "-"

// OrNone returns s, or None when s is empty.
func OrNone(s string) string {
	if s == "" {
		return None
	}
	return s
}

// NewTable returns a table as an apiserver returns one to kubectl get: a
// string column per name in columns, and no rows yet (AddRow).
func NewTable(columns ...string) *metav1.Table {
	t := &metav1.Table{}
	for _, name := range columns {
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: name, Type: "string"})
	}
	return t
}

// AddRow appends a row of cells to t, one a column, in the columns' order.
func AddRow(t *metav1.Table, cells ...any) {
	t.Rows = append(t.Rows, metav1.TableRow{Cells: cells})
}

// PrintTable prints t through cli-runtime's table printer, as kubectl get
// prints a Table: the column names upper case, the columns aligned by
// printers.GetNewTabWriter, a cell cut at its first line break. A table
// without rows prints nothing: the caller says so on ErrOut, as kubectl
// get's "No resources found".
func PrintTable(w io.Writer, t *metav1.Table) error {
	return printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(t, w)
}

// TablePrinter returns the default printer of a command whose objects
// print as the tables toTable makes of them (PrintTable).
func TablePrinter(toTable func(runtime.Object) (*metav1.Table, error)) printers.ResourcePrinter {
	return printers.ResourcePrinterFunc(func(obj runtime.Object, w io.Writer) error {
		t, err := toTable(obj)
		if err != nil {
			return err
		}
		return PrintTable(w, t)
	})
}
