package kubeclient

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// NodeListWatch lists and watches the Nodes of client for an informer,
// each request's options narrowed by narrow (a field or label selector).
func NodeListWatch(client Interface, narrow func(*metav1.ListOptions)) cache.ListerWatcher {
	nodes := client.Nodes()
	return listWatch(client, narrow,
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return nodes.List(ctx, opts)
		},
		nodes.Watch)
}

// ConfigMapListWatch lists and watches the ConfigMaps of client in
// namespace for an informer, each request's options narrowed by narrow.
func ConfigMapListWatch(client Interface, namespace string, narrow func(*metav1.ListOptions)) cache.ListerWatcher {
	cms := client.ConfigMaps(namespace)
	return listWatch(client, narrow,
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) { return cms.List(ctx, opts) },
		cms.Watch)
}

// PodListWatch lists and watches the Pods of client in every namespace for
// an informer, each request's options narrowed by narrow.
func PodListWatch(client Interface, narrow func(*metav1.ListOptions)) cache.ListerWatcher {
	pods := client.Pods(metav1.NamespaceAll)
	return listWatch(client, narrow,
		func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return pods.List(ctx, opts)
		},
		pods.Watch)
}

// listWatch is what client-go's generated informers build: a ListWatch
// that streams its initial list (WatchList) unless client says it cannot.
func listWatch(client Interface, narrow func(*metav1.ListOptions),
	list cache.ListWithContextFunc, watchFn cache.WatchFuncWithContext) cache.ListerWatcher {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			narrow(&opts)
			return list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			narrow(&opts)
			return watchFn(ctx, opts)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, client)
}
