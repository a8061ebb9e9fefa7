package agent

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
)

// observation is what the kubelet's config holds, compared with what the
// agent would have written: the config file (or drop-in) is the ground
// truth, the record only the agent's intent. Status names as active only a
// config whose effective bytes match what the file holds.
type observation struct {
	// effective is the kubelet's effective config now.
	effective []byte
	// source is the config whose bytes the file holds (nil: the local
	// config), unless drift is set.
	source *corev1.NodeConfigSource
	// drift means the file holds bytes the agent never wrote: neither the
	// local config nor any config the record names.
	drift bool
	// err means the file could not be read; nothing is known.
	err error
}

// observe compares the kubelet's effective config with what applying each
// config the record names would give (Writer.Preview): the target first,
// then the config last written, the assigned and the last-known-good one,
// then the local config.
func (a *Agent) observe(st checkpoint.State) observation {
	effective, err := a.Writer.Effective()
	if err != nil {
		return observation{err: fmt.Errorf("read kubelet config: %w", err)}
	}
	var candidates []*corev1.NodeConfigSource
	for _, src := range []*corev1.NodeConfigSource{st.Target(), st.Active, st.Assigned, st.LastKnownGood} {
		if src != nil {
			candidates = append(candidates, src)
		}
	}
	for _, src := range append(candidates, nil) {
		payload, err := a.payload(src)
		if err != nil {
			continue // a checkpoint that is gone matches nothing
		}
		preview, err := a.Writer.Preview(payload)
		if err != nil {
			continue
		}
		if sameJSON(preview, effective) {
			return observation{effective: effective, source: src}
		}
	}
	return observation{effective: effective, drift: true}
}

// observedStatus is the NodeConfigStatus of st for the assignment assigned,
// with errMsg, and active as obs saw it. Under drift no config is named
// (errMsg says why); when the file could not be read, the config the agent
// last wrote there is.
func (a *Agent) observedStatus(st checkpoint.State, assigned *corev1.NodeConfigSource, obs observation, errMsg string) *corev1.NodeConfigStatus {
	s := &corev1.NodeConfigStatus{Assigned: assigned, LastKnownGood: st.LastKnownGood, Error: errMsg}
	switch {
	case obs.err != nil:
		s.Active = st.Active
		if s.Error == "" {
			s.Error = obs.err.Error()
		}
	case obs.drift:
		if s.Error == "" {
			s.Error = a.driftMessage(st)
		}
	default:
		s.Active = obs.source
	}
	return s
}

// payload returns the checkpointed config of src; nil for the local config.
func (a *Agent) payload(src *corev1.NodeConfigSource) ([]byte, error) {
	if src == nil {
		return nil, nil
	}
	return a.Store.LoadKey(src)
}
