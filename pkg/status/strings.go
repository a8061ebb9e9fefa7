package status

import "github.com/kubectl-dkc/dkc/pkg/source"

// Upstream's status error strings. Operators' runbooks match on them, so dkc
// keeps them verbatim; it may append detail after them but never drops them.
const (
	LoadError     = "failed to load config, see Kubelet log for details"
	ValidateError = "failed to validate config, see Kubelet log for details"
	// AllNilSubfieldsError lives in pkg/source, which validates sources and
	// cannot import this package.
	AllNilSubfieldsError = source.AllNilSubfieldsError
	DownloadError        = "failed to download config, see Kubelet log for details"
	InternalError        = "internal failure, see Kubelet log for details"
	// SyncErrorPrefix prefixes errors that come from the sync loop.
	SyncErrorPrefix = "failed to sync: "
)
