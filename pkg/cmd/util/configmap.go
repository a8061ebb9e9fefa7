package util

import (
	"context"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-dkc/dkc/pkg/source"
)

// AssignableConfigMap gets the ConfigMap namespace/name that assign and
// rollout start are about to put on nodes, and checks that it holds key
// (source.Payload's rule). It warns on errOut when kubectl dkc push did not
// create it. Its errors say how to fix the flags.
func AssignableConfigMap(ctx context.Context, client kubernetes.Interface, namespace, name, key string, errOut io.Writer) (*corev1.ConfigMap, error) {
	ref := namespace + "/" + name
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("configmap %q not found: push it with kubectl dkc push, or name its namespace with -n", ref)
	}
	if err != nil {
		return nil, fmt.Errorf("get configmap %q: %w", ref, err)
	}
	if _, err := source.Payload(cm, key); err != nil {
		var missing *source.KeyNotFoundError
		if errors.As(err, &missing) && len(missing.Keys) > 0 {
			return nil, fmt.Errorf("%w; choose one with --key", err)
		}
		return nil, err
	}
	if _, ok := cm.Labels[source.ConfigLabel]; !ok {
		fmt.Fprintf(errOut, "Warning: configmap %q has no label %s: it was not pushed by kubectl dkc push\n", ref, source.ConfigLabel)
	}
	return cm, nil
}
