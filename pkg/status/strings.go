package status

import "github.com/kubectl-dkc/dkc/pkg/apis/dkc/v1alpha1"

// Upstream's status error strings (v1alpha1.LoadError and the others), which
// the CLI's view matches.
const (
	LoadError            = v1alpha1.LoadError
	ValidateError        = v1alpha1.ValidateError
	AllNilSubfieldsError = v1alpha1.AllNilSubfieldsError
	DownloadError        = v1alpha1.DownloadError
	InternalError        = v1alpha1.InternalError
	SyncErrorPrefix      = v1alpha1.SyncErrorPrefix
)
