// Package kubeletconfig holds what dkc knows about a KubeletConfiguration
// (kubelet.config.k8s.io/v1beta1) as a document: strict decoding, a few
// obvious validity checks, the classes of changes that are unsafe to make to
// a live kubelet, ConfigMap hash names identical to
// `kubectl create configmap --append-hash`, normalized diffs, and the JSON
// merge patch that combines kubelet drop-in files.
//
// It is a domain package: it does no I/O beyond what callers pass in and
// never imports cobra. The kubelet's own start remains the final judge of a
// configuration; these checks only catch mistakes early.
//
// Errors from decoding wrap ErrLoad and errors from validation wrap
// ErrValidate, so that the node agent can map them to upstream's status
// strings ("failed to load config, ..." and "failed to validate config, ...").
package kubeletconfig
