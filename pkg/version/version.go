// Package version holds the build's version, stamped at link time:
//
//	-ldflags "-X github.com/kubectl-dkc/dkc/pkg/version.version=v0.1.0 ..."
package version

import "runtime"

var (
	version   = "v0.0.0-dev"
	gitCommit = "unknown"
	buildDate = "unknown"
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	GitCommit string `json:"gitCommit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the stamped build information.
func Get() Info {
	return Info{
		Version:   version,
		GitCommit: gitCommit,
		BuildDate: buildDate,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}
