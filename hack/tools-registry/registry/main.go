// Command registry is distribution's registry (cmd/registry of
// github.com/distribution/distribution/v3, at the version go.mod pins) with
// only the storage drivers the e2e harness configures: filesystem, and
// inmemory. Upstream's main also links the azure, gcs and s3 drivers, the
// cloudfront middleware, token and htpasswd auth and the pull-through proxy;
// their SDKs are more than 400 of its 1000 packages, and no test uses them.
// hack/build-components-registry.sh builds it.
package main

import (
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	// The two registered commands exit non-zero themselves when they fail.
	_ = registry.RootCmd.Execute()
}
