package util

import (
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubectl-dkc/dkc/pkg/cmd/util/usage"
)

// NewPrintFlags returns the -o flags of a command that changes objects and
// reports each one as kubectl cordon does: "KIND/NAME OPERATION" by default,
// KIND/NAME with -o name, the object with -o json|yaml. The type setter
// fills in the TypeMeta that objects returned by a clientset lack.
func NewPrintFlags() *genericclioptions.PrintFlags {
	return genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Scheme)
}

// Printer returns pf's printer. A format pf has no printer for is an
// usage.InvalidOutput of pf's formats, after extra: the formats the command
// prints itself.
func Printer(pf *genericclioptions.PrintFlags, extra ...string) (printers.ResourcePrinter, error) {
	p, err := pf.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, usage.InvalidOutput(*pf.OutputFormat, append(extra, pf.AllowedFormats()...))
	}
	return p, err
}

// ToPrinter returns pf's printer for operation ("assigned", "created", ...),
// marked " (dry run)" for a client dry run and " (server dry run)" for a
// server one, as kubectl marks them (DryRunSuffix).
func ToPrinter(pf *genericclioptions.PrintFlags, dryRun, operation string) (printers.ResourcePrinter, error) {
	pf.NamePrintFlags.Operation = operation + DryRunSuffix(dryRun)
	return Printer(pf)
}

// DryRunSuffix is what kubectl appends to an operation for --dry-run:
// " (dry run)" for client, " (server dry run)" for server, else nothing.
func DryRunSuffix(dryRun string) string {
	switch dryRun {
	case DryRunClient:
		return " (dry run)"
	case DryRunServer:
		return " (server dry run)"
	}
	return ""
}

// PrintList prints list with p, the printer of -o format. cli-runtime's
// name printer takes no typed list, so with -o name each item is printed
// on its own, as kubectl get prints a list: one KIND.GROUP/NAME a line.
func PrintList(p printers.ResourcePrinter, format string, list runtime.Object, w io.Writer) error {
	if format != "name" {
		return p.PrintObj(list, w)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	for _, item := range items {
		if err := p.PrintObj(item, w); err != nil {
			return err
		}
	}
	return nil
}
