// Package flagztest helps the tests of what reads a kubelet's /flagz.
package flagztest

import "github.com/kubectl-dkc/dkc/pkg/flagz"

// Listed is every flag of flagz.Fields as /flagz lists it, with its
// default, but for the flags given as name, value pairs.
func Listed(given ...string) map[string]string {
	out := map[string]string{}
	for _, f := range flagz.Fields {
		out[f.Flag] = f.Default
	}
	for i := 0; i+1 < len(given); i += 2 {
		out[given[i]] = given[i+1]
	}
	return out
}
