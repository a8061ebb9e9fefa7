// Package table prints the tables of kubectl dkc as kubectl get prints
// the tables an apiserver returns: a metav1.Table through cli-runtime's
// table printer. It links no cobra, so that the domain packages (status,
// rollout) print their tables through it too.
package table

import (
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
)

// None marks an empty cell of a table, as kubectl's tables do.
const None = "<none>"

// OrNone returns s, or None when s is empty.
func OrNone(s string) string {
	if s == "" {
		return None
	}
	return s
}

// OneLine keeps s, an error message say, on one line: every run of
// whitespace, line breaks and tabs included, becomes one space. The table
// printer would cut a cell at its first line break, and a tab would move
// the columns after it.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// New returns a table as an apiserver returns one to kubectl get: a
// string column per name in columns, and no rows yet (AddRow).
func New(columns ...string) *metav1.Table {
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

// Print prints t through cli-runtime's table printer, as kubectl get
// prints a Table: the column names upper case, the columns aligned by
// printers.GetNewTabWriter, a cell cut at its first line break. A table
// without rows prints nothing: the caller says so on ErrOut, as kubectl
// get's "No resources found".
func Print(w io.Writer, t *metav1.Table) error {
	return NewStream(w).Print(t)
}

// Stream prints tables to one writer one after the other, as kubectl get
// -w prints a watch: the header once, before the first row, and each row
// aligned with the rows printed before it (a column only grows wider).
type Stream struct {
	printer printers.ResourcePrinter
	// w is printers.GetNewTabWriter's, which remembers the widths of the
	// columns it flushed.
	w interface {
		io.Writer
		Flush() error
	}
}

// NewStream returns a Stream that prints to w.
func NewStream(w io.Writer) *Stream {
	return &Stream{printer: printers.NewTablePrinter(printers.PrintOptions{}), w: printers.GetNewTabWriter(w)}
}

// Print prints the rows of t, after the header when no row was printed
// yet, and flushes them. t has the columns of the tables printed before.
func (s *Stream) Print(t *metav1.Table) error {
	if err := s.printer.PrintObj(t, s.w); err != nil {
		return err
	}
	return s.w.Flush()
}

// Printer returns the default printer of a command whose objects print
// as the tables toTable makes of them (Print).
func Printer(toTable func(runtime.Object) (*metav1.Table, error)) printers.ResourcePrinter {
	return printers.ResourcePrinterFunc(func(obj runtime.Object, w io.Writer) error {
		t, err := toTable(obj)
		if err != nil {
			return err
		}
		return Print(w, t)
	})
}
