package v1alpha1

import "github.com/kubectl-dkc/dkc/pkg/source"

// The error strings of a node's config status (Node status.config.error, or
// the status annotation), as upstream's Dynamic Kubelet Configuration wrote
// them. The agent writes them; the CLI and the rollout match them.
// Operators' runbooks match on them too, so dkc keeps them verbatim; it may
// append detail after them but never drops them.
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
