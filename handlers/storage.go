package handlers

import (
	"context"
	"io"
	"net"

	"github.com/corekube/corekube/registry"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The verbs of rest.go, patch.go, fieldmanager.go and watch.go reach a
// resource's storage only through the small interfaces below, in the shape
// of kube's rest.Creater, Getter, Lister, Updater, Patcher, GracefulDeleter,
// CollectionDeleter and Watcher, each holding only what the handlers call.
// They are defined here, by their consumer, so that the handlers can be
// tested against small in-test implementations rather than a Store on etcd.
// A *registry.Store serves them all (through storeREST for the two whose
// results are the registry's concrete page and watch types).

// restStorage is what every verb reads of the resource: what it is, an empty
// object to decode a body into, and its strategy (a Table's printer, a
// watch-list's empty list).
type restStorage interface {
	Info() registry.ResourceInfo
	New() runtime.Object
	Strategy() registry.Strategy
}

// restGetter serves GET of one object.
type restGetter interface {
	Get(ctx context.Context, namespace, name string, opts *metav1.GetOptions) (runtime.Object, error)
}

// restLister serves GET of a collection, one page at a time.
type restLister interface {
	ListPage(ctx context.Context, namespace string, opts *metainternalversion.ListOptions) (listPage, error)
}

// listPage is one page of a list (a *registry.ListPage): encoded straight
// from the items' cached encodings, or as the typed list.
type listPage interface {
	// ProtobufChunks is the page's protobuf encoding in pieces, written
	// in turn (the items' cached encodings, not a copy).
	ProtobufChunks() (net.Buffers, error)
	// WriteJSON writes the page's JSON encoding to w, calling start before
	// the first byte; started says whether it did (registry.ListPage).
	WriteJSON(w io.Writer, start func()) (started bool, err error)
	ObjectFor(view registry.ItemView) (runtime.Object, error)
	// Len, ListMeta and ItemsFor are the page a slice of items at a
	// time, as ObjectFor's list holds them (registry.ListPage).
	Len() int
	ListMeta() metav1.ListMeta
	ItemsFor(view registry.ItemView, lo, hi int) ([]runtime.Object, error)
}

// restCreater serves POST to a collection.
type restCreater interface {
	Create(ctx context.Context, namespace string, obj runtime.Object, opts registry.CreateOptions) (runtime.Object, error)
}

// restUpdater serves PUT: transform makes the new object from the current
// one (nil when there is none) inside the storage's compare-and-swap loop.
type restUpdater interface {
	Update(ctx context.Context, namespace, name string, transform registry.TransformFunc, opts registry.UpdateOptions) (runtime.Object, bool, error)
}

// restPatcher serves PATCH: JSON, merge and strategic merge patches through
// Update (with the storage's check that a patch keeps the uid), server-side
// apply through Apply.
type restPatcher interface {
	restUpdater
	CheckPatchedUID(current, patched runtime.Object) error
	Apply(ctx context.Context, namespace, name string, patch *unstructured.Unstructured, opts registry.ApplyOptions) (runtime.Object, bool, error)
}

// restGracefulDeleter serves DELETE of one object. ReturnsDeletedObject says
// whether a completed delete answers the object (else a Status).
type restGracefulDeleter interface {
	Delete(ctx context.Context, namespace, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error)
	ReturnsDeletedObject() bool
}

// restCollectionDeleter serves DELETE of a collection.
type restCollectionDeleter interface {
	DeleteCollection(ctx context.Context, namespace string, listOpts *metainternalversion.ListOptions, opts *metav1.DeleteOptions) (runtime.Object, error)
}

// restWatcher serves a watch.
type restWatcher interface {
	Watch(ctx context.Context, namespace string, opts *metainternalversion.ListOptions) (watchStream, error)
}

// watchStream is one watch (a *registry.Watcher): its consumer pulls events
// with Next, reports each one sent with Sent, flushes when Ready is false
// and calls Stop when done.
type watchStream interface {
	Next() (registry.WatchEvent, bool)
	Ready() bool
	Sent(ev registry.WatchEvent, size int, cached, protobuf bool)
	Stop()
}

// restResource is a resource (or a subresource that updates part of it)
// serving every verb.
type restResource interface {
	restStorage
	restGetter
	restLister
	restCreater
	restPatcher
	restGracefulDeleter
	restCollectionDeleter
	restWatcher
}

// storeREST serves a registry.Store as a restResource: the Store's own
// methods, with its list pages and watches as the interfaces above.
type storeREST struct{ *registry.Store }

func (s storeREST) ListPage(ctx context.Context, namespace string, opts *metainternalversion.ListOptions) (listPage, error) {
	page, err := s.Store.ListPage(ctx, namespace, opts)
	if err != nil {
		// Not a typed nil in the interface.
		return nil, err
	}
	return page, nil
}

func (s storeREST) Watch(ctx context.Context, namespace string, opts *metainternalversion.ListOptions) (watchStream, error) {
	w, err := s.Store.Watch(ctx, namespace, opts)
	if err != nil {
		return nil, err
	}
	return w, nil
}

var (
	_ restStorage           = (*registry.Store)(nil)
	_ restGetter            = (*registry.Store)(nil)
	_ restCreater           = (*registry.Store)(nil)
	_ restPatcher           = (*registry.Store)(nil)
	_ restGracefulDeleter   = (*registry.Store)(nil)
	_ restCollectionDeleter = (*registry.Store)(nil)
	_ listPage              = (*registry.ListPage)(nil)
	_ watchStream           = (*registry.Watcher)(nil)
	_ restResource          = storeREST{}
)
