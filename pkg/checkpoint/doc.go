// Package checkpoint is the node agent's crash-safe on-disk store of
// assigned kubelet configs. It keeps the layout of the kubelet's own
// Dynamic Kubelet Configuration store, so a directory written by a 1.23
// kubelet's --dynamic-config-dir can be opened as is:
//
//	<dir>/store/
//	  meta/
//	    state                 dkc: the agent's record (State), the truth for its intent
//	    assigned              the assigned config source (derived from state)
//	    last-known-good       the last-known-good config source (derived from state)
//	    assigned-at           dkc, older layout: the trial start (derived from state)
//	    last-error            dkc, older layout: the assigned config's error (derived)
//	  checkpoints/
//	    <uid>/<resourceVersion>/<key>
//	  baseline/               dkc: the node's local config, while dkc's is in place
//	    <name>
//
// meta/assigned and meta/last-known-good are empty when they name the node's
// local config; a missing file means the same. Otherwise they hold the YAML
// of a kubelet.config.k8s.io/v1beta1 SerializedNodeConfigSource whose source
// is a ConfigMap reference with uid and resourceVersion, as upstream wrote
// them.
//
// Open creates both files empty if they are missing, as upstream did.
//
// checkpoints/<uid>/<resourceVersion>/ holds one file per ConfigMap key
// saved: upstream saved every key of the ConfigMap's data, the agent saves
// the assigned key alone. A ConfigMap's uid and resourceVersion
// identify its content, so saving a checkpoint again does nothing; only
// different content (a damaged checkpoint) replaces it, as a whole. Keys,
// uids and resourceVersions become file names, so each must be a base name
// of at most 255 bytes (ErrInvalidKey).
//
// meta/state is the agent's record (State): assigned, active (the config
// last written to the kubelet), last-known-good, the error with the config it
// belongs to, and the trial start, in one JSON file written atomically. The
// agent reads and writes only the record (State, SetState); SetState then
// derives the other meta files, so that a kubelet's DKC code or an older dkc
// reads the same intent. A store without a record (written by a kubelet or an
// older dkc) is adopted: State builds the record from the older files. Once a
// record exists it wins; the store never writes the older files on their own.
// Tests build and read that layout with package checkpointtest.
//
// dkc adds files that upstream did not have:
//   - meta/assigned-at holds the RFC 3339 time (nanoseconds, UTC) at which
//     the current assignment was made, derived from the record (meta/state,
//     whose assignedAt is the trial's start, written in the same atomic
//     write as the assignment). Upstream measured the 10-minute
//     last-known-good trial from the mtime of meta/assigned and so restarted
//     it at every kubelet start (kubernetes#57808); the recorded time
//     survives agent restarts.
//   - meta/last-error holds the assigned config's error, derived from the
//     record, so that an older dkc reports it again after a restart.
//   - baseline/<name> holds the node's local kubelet config while dkc's
//     config is in its place, so that a reset can restore it. It is saved
//     when dkc takes the file over from the local config (SaveBaseline never
//     overwrites one) and removed once the file is restored
//     (RemoveBaseline), so the next takeover saves the file as it is then,
//     with the operator's edits. pkg/kubelet's package documentation gives
//     the rule and its crash cases.
//
// Every write is atomic and durable: a file is written under a temporary
// name in its final directory, fsynced, renamed into place, and then the
// directory is fsynced (upstream never fsynced the directory). A checkpoint
// is built in a temporary directory, each file fsynced, and the directory
// renamed into place the same way. Directories are 0700 and files 0600.
// After a crash at any point a reader sees the old state or the new one,
// never a partial file under its final name; temporaries left behind start
// with ".dkc-tmp-" and Open removes them.
//
// A Store is safe for use by several goroutines of one process. Two
// processes must not open the same directory at once.
package checkpoint
