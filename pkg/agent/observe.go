package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-dkc/dkc/pkg/checkpoint"
	"github.com/kubectl-dkc/dkc/pkg/source"
)

// observed is everything a sync decides on, gathered before it decides
// anything: the record, the node's assignment and its pin, the assigned
// ConfigMap, the kubelet's config file, and the agent's memory of earlier
// syncs. Only reads produce it; decide turns it into a decision without
// looking anywhere else.
type observed struct {
	// st is the checkpoint store's record.
	st checkpoint.State

	// carrier holds the node's status (statusCarrier of the assignment's).
	carrier source.Carrier
	// assignErr means the node's assignment cannot be read or is invalid;
	// nothing below it was observed.
	assignErr error
	// assigned is the node's assignment; nil: none (reset), and nothing
	// below it was observed.
	assigned *corev1.NodeConfigSource
	// cmName is the assigned ConfigMap's namespace/name.
	cmName string
	// cmErr is the getter's error for the assigned ConfigMap:
	// errNotSynced, a *listError, NotFound, or another failure. Nothing
	// below it was observed unless it is nil.
	cmErr error
	// pin is the node's pin of its assignment (nil: none), unless pinErr
	// says it cannot be read.
	pin    *source.Pin
	pinErr error
	// as is the assignment with the ConfigMap's uid and resourceVersion,
	// its pin and the ConfigMap, once the ConfigMap is found; as.payload
	// is set when pinErr and payloadErr are nil.
	as assignment
	// payloadErr is why the ConfigMap's bytes are not the pinned ones
	// (pinned), or nil.
	payloadErr *configError

	// file is what the kubelet's config holds.
	file observation
	// fileHash names the content of the file, for drift reported once per
	// content.
	fileHash string
	// hasCondition: the node shows the agent's condition.
	hasCondition bool

	// The agent's memory of earlier syncs.
	//
	// refused is the refusal of this very assignment and pin (a.refused),
	// or nil.
	refused *configError
	// verifyPending: the agent started since the config in trial was
	// gated (a.verify).
	verifyPending bool
	// downloadFailed is the download error last reported with an Event.
	downloadFailed string
	// drifted is the fileHash of the drift last reported.
	drifted string
	// warnedAnnotation is the ConfigMap version last warned about for
	// source.AllowUnsafeAnnotation.
	warnedAnnotation string
	// onDrift is --on-drift.
	onDrift string
}

// judging is the pin of the assignment the sync judges (Agent.judging):
// an unreadable pin judges nothing.
func (o *observed) judging() *source.Pin {
	if o.assignErr != nil || o.assigned == nil {
		return nil
	}
	return o.pin
}

// observe gathers what sync decides on. It reads the record, the node, the
// ConfigMap (through get, which may start its informer) and the kubelet's
// config, and changes nothing else; its error is the record's.
func (a *Agent) observe(node *corev1.Node, get configMapGetter) (*observed, error) {
	st, err := a.state()
	if err != nil {
		return nil, err
	}
	o := &observed{
		st:               st,
		hasCondition:     source.Condition(node.Status.Conditions) != nil,
		verifyPending:    a.verify != nil,
		downloadFailed:   a.downloadFailed,
		drifted:          a.drifted,
		warnedAnnotation: a.warnedAnnotation,
		onDrift:          a.onDrift(),
	}
	// The bytes of the recorded assignment are known from its ConfigMap
	// (same uid and resourceVersion, pinned), even when its checkpoint was
	// lost: the sync that settles it checkpoints them again first.
	known := a.observeAssignment(o, node, get)
	o.file = a.observeFile(st, known)
	if o.file.err == nil {
		sum := sha256.Sum256(o.file.effective)
		o.fileHash = hex.EncodeToString(sum[:8])
	}
	return o, nil
}

// observeAssignment fills in o's assignment, pin and ConfigMap, as far as
// each can be read, and checks the ConfigMap's bytes against the pin. It
// returns the assignment when its bytes passed and the record names it
// (nil otherwise).
func (a *Agent) observeAssignment(o *observed, node *corev1.Node, get configMapGetter) *assignment {
	src, carrier, err := source.Assigned(node)
	if err == nil {
		err = source.ValidateSource(src)
	}
	o.carrier = statusCarrier(carrier)
	if err != nil {
		o.assignErr = err
		return nil
	}
	if src == nil {
		return nil
	}
	o.assigned = src
	o.pin, o.pinErr = source.PinOf(node)
	ref := src.ConfigMap
	o.cmName = ref.Namespace + "/" + ref.Name
	// The first read may come from a cache that lags the ConfigMap the
	// assigner pinned. A ConfigMap it does not show, and bytes that do not
	// match the pin, are read again from the apiserver's storage before
	// they are reported; a ConfigMap already reported missing, and a
	// refusal already reported for these bytes, are not read again.
	for _, fresh := range []bool{false, true} {
		cm, err := get(ref.Namespace, ref.Name, fresh)
		if !fresh && apierrors.IsNotFound(err) && o.downloadFailed != missingError(o.cmName).msg {
			continue
		}
		if err != nil {
			o.as, o.payloadErr, o.refused = assignment{}, nil, nil
			o.cmErr = err
			return nil
		}
		want := src.DeepCopy()
		want.ConfigMap.UID = cm.UID
		want.ConfigMap.ResourceVersion = cm.ResourceVersion
		o.as = assignment{src: want, pin: o.pin, cm: cm}
		if o.pinErr != nil {
			return nil
		}
		o.refused = nil
		if r := a.refused; r != nil && source.Equal(r.src, want) && r.pin.Equal(o.pin) {
			o.refused = r.err
		}
		payload, perr := a.pinned(o.as)
		if perr == nil {
			o.payloadErr, o.as.payload = nil, payload
			break
		}
		o.payloadErr = perr
		if o.refused != nil || !o.pin.For(src) {
			return nil
		}
	}
	if o.payloadErr == nil && o.refused == nil && source.Equal(o.st.Assigned, o.as.src) {
		return &o.as
	}
	return nil
}

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

// observeFile compares the kubelet's effective config with what applying
// each config the record names would give (Writer.Preview): the target
// first, then the config last written, the assigned and the last-known-good
// one, then the local config. A config's bytes come from its checkpoint,
// or from known when that is the config and its checkpoint is gone.
func (a *Agent) observeFile(st checkpoint.State, known *assignment) observation {
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
		if err != nil && known != nil && source.Equal(src, known.src) {
			payload, err = known.payload, nil
		}
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
func observedStatus(st checkpoint.State, assigned *corev1.NodeConfigSource, obs observation, errMsg, onDrift string) *corev1.NodeConfigStatus {
	s := &corev1.NodeConfigStatus{Assigned: assigned, LastKnownGood: st.LastKnownGood, Error: errMsg}
	switch {
	case obs.err != nil:
		s.Active = st.Active
		if s.Error == "" {
			s.Error = obs.err.Error()
		}
	case obs.drift:
		if s.Error == "" {
			s.Error = driftMessage(st, onDrift)
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
