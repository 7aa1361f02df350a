package agent

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ownedListWatch is the ListerWatcher of an informer that keeps only the
// objects for which own holds (the pods bound to, and the Nodes of, this
// process's nodes): the server has no field selector for "one of these
// thousand node names", so each of several agent processes lists and
// watches every bound pod and drops the others' before they reach its
// cache. own must not change over an object's life (spec.nodeName and
// metadata.name are immutable once set), so a dropped object is never one
// the cache held. Bookmarks and errors pass through: the reflector's
// resourceVersion follows the whole stream.
func ownedListWatch[T any, L runtime.Object, PT interface {
	*T
	runtime.Object
}](
	ctx context.Context,
	selector string,
	list func(context.Context, metav1.ListOptions) (L, error),
	items func(L) *[]T,
	own func(PT) bool,
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) cache.ListerWatcher {
	return &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			l, err := list(ctx, o)
			if err != nil {
				return nil, err
			}
			all := items(l)
			// A new slice of the kept items: the reflector copies items out
			// of the list, but the list's own array stays as long as the
			// list does.
			kept := make([]T, 0, len(*all))
			for i := range *all {
				if own(PT(&(*all)[i])) {
					kept = append(kept, (*all)[i])
				}
			}
			*all = kept
			return l, nil
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			w, err := watchFn(ctx, o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if e.Type == watch.Bookmark || e.Type == watch.Error {
					return e, true
				}
				if obj, ok := e.Object.(PT); ok {
					return e, own(obj)
				}
				return e, true
			}), nil
		},
	}
}
