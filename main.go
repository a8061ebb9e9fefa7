// Command kubectl-dkc is the kubectl plugin for Dynamic Kubelet Configuration.
package main

import (
	"os"

	"github.com/kubectl-dkc/dkc/cmd"
)

func main() {
	os.Exit(cmd.Execute())
}
