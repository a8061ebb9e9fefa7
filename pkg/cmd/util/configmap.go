package util

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// AssignableConfigMap gets the ConfigMap namespace/name that assign and
// rollout start are about to put on nodes, checks that it holds key
// (source.Payload's rule) and, when digest is not empty, that the bytes
// under key are the ones a reviewer saw (--digest), and returns it with
// those bytes: the bytes the assignment pins. It warns on errOut when
// kubectl dkc push did not create it, and when it carries
// source.AllowUnsafeAnnotation, which no agent honours. Its errors say how
// to fix the flags.
func AssignableConfigMap(ctx context.Context, client kubernetes.Interface, namespace, name, key, digest string, errOut io.Writer) (*corev1.ConfigMap, []byte, error) {
	ref := namespace + "/" + name
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("configmap %q not found: push it with kubectl dkc push, or name its namespace with -n", ref)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get configmap %q: %w", ref, err)
	}
	payload, err := source.Payload(cm, key)
	if err != nil {
		var missing *source.KeyNotFoundError
		if errors.As(err, &missing) && len(missing.Keys) > 0 {
			return nil, nil, fmt.Errorf("%w; choose one with --key", err)
		}
		return nil, nil, err
	}
	if got := source.Digest(payload); digest != "" && got != digest {
		return nil, nil, fmt.Errorf("configmap %q holds %s under %q, not the reviewed --digest %s: its bytes changed since they were reviewed; review them again and pass their digest, or push the reviewed config under a new name (kubectl dkc push prints its digest)",
			ref, source.ShortDigest(got), key, source.ShortDigest(digest))
	}
	if _, ok := cm.Labels[source.ConfigLabel]; !ok {
		fmt.Fprintf(errOut, "Warning: configmap %q has no label %s: it was not pushed by kubectl dkc push\n", ref, source.ConfigLabel)
	}
	WarnAllowUnsafeAnnotation(errOut, cm)
	return cm, payload, nil
}

// WarnAllowUnsafeAnnotation warns on errOut when cm carries
// source.AllowUnsafeAnnotation: no agent honours it, because the opt-in is
// the assigner's.
func WarnAllowUnsafeAnnotation(errOut io.Writer, cm *corev1.ConfigMap) {
	if v, ok := cm.Annotations[source.AllowUnsafeAnnotation]; ok {
		fmt.Fprintf(errOut, "Warning: configmap %q carries %s=%s, which no agent honours: the opt-in is the assigner's (--allow-unsafe=CLASS on assign or rollout start)\n",
			cm.Namespace+"/"+cm.Name, source.AllowUnsafeAnnotation, v)
	}
}

// configMapTypes are the names kubectl knows ConfigMaps by in TYPE/NAME.
var configMapTypes = []string{"configmap", "configmaps", "cm"}

// IsConfigMapType reports whether typ, the TYPE of a TYPE/NAME reference,
// names ConfigMaps as kubectl does: configmap, configmaps or cm, in any
// case.
func IsConfigMapType(typ string) bool {
	return slices.Contains(configMapTypes, strings.ToLower(typ))
}

// ConfigMapName returns the name of the ConfigMap that ref names, as
// kubectl names one: NAME, or TYPE/NAME with a TYPE that IsConfigMapType
// (what kubectl dkc push -o name and kubectl get -o name print), so that
// their output chains into a flag that takes a ConfigMap. Another TYPE, a
// namespace in the reference, and a name that is not a DNS subdomain are
// errors that say what to write. An empty ref returns "".
func ConfigMapName(ref string) (string, error) {
	name := ref
	if typ, rest, found := strings.Cut(ref, "/"); found {
		switch {
		case !IsConfigMapType(typ):
			return "", fmt.Errorf("%q is not a ConfigMap type: write NAME or configmap/NAME", typ)
		case strings.Contains(rest, "/"):
			return "", errors.New("write NAME or configmap/NAME, and the namespace with -n")
		case rest == "":
			return "", fmt.Errorf("no name after %q: write NAME or configmap/NAME", typ+"/")
		}
		name = rest
	}
	if name == "" {
		return "", nil
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", errors.New(strings.Join(msgs, ", "))
	}
	return name, nil
}

// AddDigestFlag adds --digest, the sha256 of the config's bytes as a
// reviewer saw them, bound to value.
func AddDigestFlag(cmd *cobra.Command, value *string) {
	cmd.Flags().StringVar(value, "digest", *value, `The sha256 of the config's bytes as they were reviewed ("sha256:" and 64 hex digits, as kubectl dkc push prints it): other bytes under --key are refused before anything is written.`)
}

// ValidateDigest checks the value of --digest: empty, or a full digest.
func ValidateDigest(digest string) error {
	if digest != "" && !source.ValidDigest(digest) {
		return fmt.Errorf("invalid --digest %q: write the full digest, \"sha256:\" and 64 lowercase hex digits, as kubectl dkc push prints it", digest)
	}
	return nil
}
