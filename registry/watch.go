package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/corekube/corekube/auth/user"
	"strconv"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/watch"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	listvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
)

// initialEventsEndAnnotation marks the bookmark that ends the initial
// events of a watch (WatchList protocol).
const initialEventsEndAnnotation = "k8s.io/initial-events-end"

// initialEventsListBlueprintAnnotation, on the same bookmark, carries the
// encoded empty list (metav1.InitialEventsListBlueprintAnnotationKey).
const initialEventsListBlueprintAnnotation = "kubernetes.io/initial-events-list-blueprint"

// WatchEvent is one event of a watch: Object, or for the objects of the
// watch cache (every ADDED, MODIFIED and DELETED event) their cached
// encoding, decoded by Decoded on demand.
type WatchEvent struct {
	Type   apiwatch.EventType
	Object runtime.Object // bookmarks and errors
	cached *watch.Object
	store  *Store
	// dispatched: a change sent to every watcher as it happened (see
	// watch.Event.Dispatched).
	dispatched bool
}

// Decoded returns the event's object for the server's own readers (the
// authorizers' caches, the webhook configurations), decoding it if it came
// from the cache (the copy is the caller's). A decoded object has no
// metadata.managedFields: none of those readers looks at them, and they
// are a third of a pod's encoding.
func (e WatchEvent) Decoded() (runtime.Object, error) {
	if e.cached != nil && e.cached.DecodesFromMessage() {
		// The message decodes whole, as cheaply as the JSON without them.
		obj, err := e.cached.Decode()
		if err != nil {
			return nil, err
		}
		accessor(obj).SetManagedFields(nil)
		return obj, nil
	}
	if e.cached != nil {
		data, err := e.cached.JSON()
		if err != nil {
			return nil, err
		}
		return e.store.decodeWithoutManagedFields(storage.KV{Key: e.cached.Key, Value: data, Revision: e.cached.Revision})
	}
	return e.Object, nil
}

// DecodesFromMessage reports whether Decoded decodes the object's kept
// protobuf message (no JSON is made for it unless JSON is asked for).
func (e WatchEvent) DecodesFromMessage() bool {
	return e.cached != nil && e.cached.DecodesFromMessage()
}

// JSON returns the object's cached JSON encoding, when it has one (for an
// object stored as protobuf, made from its message and shared by the
// watchers of a recent event: watch.Object.JSON).
func (e WatchEvent) JSON() ([]byte, bool) {
	if e.cached == nil {
		return nil, false
	}
	data, err := e.cached.JSON()
	return data, err == nil
}

// AppendProtobuf appends to dst the object's cached protobuf message,
// without kube's envelope (watch/rawproto writes it), when it has one: the
// message kept of an object stored as protobuf, else computed from the
// JSON and shared by every protobuf watcher of a recent event
// (watch.Object.ProtobufMessage). ok is false, and dst returned as it
// was, when it has none.
func (e WatchEvent) AppendProtobuf(dst []byte) (_ []byte, ok bool) {
	if e.cached == nil {
		return dst, false
	}
	m, err := e.cached.ProtobufMessage()
	if err != nil {
		return dst, false
	}
	return m.AppendTo(dst), true
}

// Watch streams the changes to the objects opts selects in namespace ("" for
// all) from the watch cache, as kube's watch does: from resourceVersion ""
// or "0", synthetic ADDED events for the current state first; from N, every
// change after N (N older than the cache's window: one ERROR event, 410).
// Objects that start or stop matching the selectors arrive as ADDED or
// DELETED. The watch ends when ctx ends, after an ERROR event, or when it
// is cut (the client then watches again).
func (s *Store) Watch(ctx context.Context, namespace string, opts *metainternalversion.ListOptions) (*Watcher, error) {
	if errs := listvalidation.ValidateListOptions(opts, true); len(errs) > 0 {
		return nil, apierrors.NewInvalid(listOptionsKind, "", errs)
	}
	if _, err := s.Matcher(opts.LabelSelector, opts.FieldSelector); err != nil {
		return nil, err
	}
	wo := watch.WatchOptions{
		Prefix:    s.cachePrefix(namespace),
		Match:     cacheMatcher(opts.LabelSelector, opts.FieldSelector),
		Bookmarks: opts.AllowWatchBookmarks,
	}
	if u, ok := user.From(ctx); ok {
		wo.Client = u.Name
	}
	if ix, ok := s.strategy.(WatchIndexStrategy); ok && opts.FieldSelector != nil {
		if value, found := opts.FieldSelector.RequiresExactMatch(ix.WatchIndexField()); found {
			wo.IndexValue = &value
		}
	}
	wo.SendInitial = opts.ResourceVersion == "" || opts.ResourceVersion == "0"
	if opts.SendInitialEvents != nil {
		wo.SendInitial = *opts.SendInitialEvents
	}
	wo.InitialEventsEnd = wo.SendInitial && opts.AllowWatchBookmarks
	if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		from, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil || from < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %q", opts.ResourceVersion))
		}
		wo.FromRevision = from
	}
	if opts.SendInitialEvents != nil && opts.ResourceVersion == "" {
		// As kube: sendInitialEvents with resourceVersion unset starts at
		// the current etcd revision (a consistent read, like a LIST
		// without resourceVersion), so a client reads its own writes.
		rev, err := s.storage.CurrentRevision(ctx, s.prefix)
		if err != nil {
			return nil, toAPIError(err, s.info.GroupResource(), "")
		}
		wo.FromRevision = rev
	}

	w, err := s.cache.Watch(ctx, wo)
	var compacted *storage.CompactedError
	switch {
	case errors.As(err, &compacted):
		// kube answers 200 and one ERROR event, not a 410 response.
		status := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", compacted.Requested, compacted.Compacted)).Status()
		status.Kind, status.APIVersion = "Status", "v1"
		return &Watcher{store: s, final: &WatchEvent{Type: apiwatch.Error, Object: &status}}, nil
	case err != nil:
		return nil, s.cacheError(err)
	}
	return &Watcher{store: s, w: w}, nil
}

// Watcher is one watch of a Store. Its consumer pulls the events with Next
// (from one goroutine) and must call Stop when it is done; the watch also
// ends with the context given to Store.Watch, or when the server cuts it
// (the client then watches again).
type Watcher struct {
	store *Store
	w     *watch.Watcher // nil for a watch that is only final
	// final, when set, is the one event of a watch that could not start
	// (an ERROR event); Next returns it once.
	final *WatchEvent
}

// Next returns the next event, blocking until there is one; false means
// the watch has ended.
func (w *Watcher) Next() (WatchEvent, bool) {
	if w.w == nil {
		if ev := w.final; ev != nil {
			w.final = nil
			return *ev, true
		}
		return WatchEvent{}, false
	}
	ev, ok := w.w.Next()
	if !ok {
		return WatchEvent{}, false
	}
	switch ev.Type {
	case watch.Bookmark:
		return WatchEvent{Type: apiwatch.Bookmark, Object: w.store.bookmark(ev.Object.Revision, ev.InitialEventsEnd)}, true
	case watch.Error:
		return WatchEvent{Type: apiwatch.Error, Object: directWatchStatus(ev.Err)}, true
	}
	return WatchEvent{Type: apiwatch.EventType(ev.Type), cached: ev.Object, store: w.store, dispatched: ev.Dispatched}, true
}

// directWatchStatus is the ERROR event's Status of a watch read from etcd
// directly (no watch cache) that etcd ended, as kube's storage words it.
func directWatchStatus(err error) *metav1.Status {
	var status metav1.Status
	var tooLarge *watch.TooLargeError
	switch {
	case errors.Is(err, storage.ErrCompacted):
		status = apierrors.NewResourceExpired("The resourceVersion for the provided watch is too old.").Status()
	case errors.As(err, &tooLarge):
		status = tooLargeResourceVersion(tooLarge.Requested, tooLarge.Current).(*apierrors.StatusError).Status()
	default:
		status = apierrors.NewInternalError(err).Status()
	}
	status.Kind, status.APIVersion = "Status", "v1"
	return &status
}

// Ready reports whether Next would return at once; a streaming consumer
// flushes when it is false.
func (w *Watcher) Ready() bool {
	if w.w == nil {
		return w.final != nil
	}
	return w.w.Ready()
}

// Sent records that the consumer sent ev to its client, with an object
// encoding of size bytes: kube's apiserver_watch_events_total and
// apiserver_watch_events_sizes. cached says the encoding was the cache's
// (ev.JSON, or with protobuf ev.Protobuf), shared by every watcher of a
// dispatched event; the watch handler calls it per event.
func (w *Watcher) Sent(ev WatchEvent, size int, cached, protobuf bool) {
	if cached && ev.dispatched && ev.cached != nil {
		w.store.cache.RecordSentShared(ev.cached, watch.EventType(ev.Type), protobuf, size)
		return
	}
	w.store.cache.RecordSent(size)
}

// Stop ends the watch; it may be called more than once.
func (w *Watcher) Stop() {
	if w.w != nil {
		w.w.Stop()
	}
}

// bookmark is an object of the resource's kind carrying only a
// resourceVersion (and the initial-events-end annotation).
func (s *Store) bookmark(rev int64, initialEnd bool) runtime.Object {
	obj := s.strategy.New()
	m := accessor(obj)
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	if initialEnd {
		m.SetAnnotations(map[string]string{initialEventsEndAnnotation: "true", initialEventsListBlueprintAnnotation: s.listBlueprint()})
	}
	s.setTypeMeta(obj)
	return obj
}

// listBlueprint is kube's initial-events-list-blueprint: base64 of the
// resource's empty list in JSON, which client-go's watch-list (typed List
// with WatchListClient) requires to build its answer; without it, client-go
// falls back to a LIST.
func (s *Store) listBlueprint() string {
	list := s.strategy.NewList()
	list.GetObjectKind().SetGroupVersionKind(s.info.GroupVersion().WithKind(s.info.ListKind))
	data, _ := json.Marshal(list)
	return base64.StdEncoding.EncodeToString(append(data, '\n'))
}
