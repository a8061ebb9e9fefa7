// Command etcd is etcd's own server main, built from the Go module at the
// version this tools module pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
