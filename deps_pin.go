//go:build tools

// Package main pins dependencies until the code that uses them lands.
package main
import (
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/record"
	_ "k8s.io/client-go/util/workqueue"
	_ "k8s.io/cli-runtime/pkg/genericclioptions"
	_ "k8s.io/cli-runtime/pkg/printers"
	_ "k8s.io/kubelet/config/v1beta1"
	_ "k8s.io/apimachinery/pkg/runtime/serializer"
	_ "k8s.io/component-base/version"
	_ "k8s.io/utils/clock"
	_ "k8s.io/klog/v2"
	_ "github.com/spf13/cobra"
	_ "github.com/itchyny/gojq"
	_ "github.com/sergi/go-diff/diffmatchpatch"
	_ "github.com/coreos/go-systemd/v22/dbus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/google/go-cmp/cmp"
	_ "sigs.k8s.io/yaml"
)

