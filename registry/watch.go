package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/corekube/corekube/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	listvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// initialEventsEndAnnotation marks the bookmark that ends the initial
// events of a watch (WatchList protocol).
const initialEventsEndAnnotation = "k8s.io/initial-events-end"

// Watch streams the changes to the objects opts selects in namespace ("" for
// all), as kube's watch does: from resourceVersion "" or "0", synthetic
// ADDED events for the current state first; from N, every change after N.
// Objects that start or stop matching the selectors arrive as ADDED or
// DELETED. The channel closes when ctx ends or after an ERROR event.
func (s *Store) Watch(ctx context.Context, namespace string, opts *metainternalversion.ListOptions) (<-chan watch.Event, error) {
	if errs := listvalidation.ValidateListOptions(opts, true); len(errs) > 0 {
		return nil, apierrors.NewInvalid(listOptionsKind, "", errs)
	}
	match, err := s.Matcher(opts.LabelSelector, opts.FieldSelector)
	if err != nil {
		return nil, err
	}
	if match == nil {
		match = func(runtime.Object) (bool, error) { return true, nil }
	}
	prefix := s.listPrefix(namespace)
	w := &watcher{store: s, match: match, out: make(chan watch.Event, 100), bookmarks: opts.AllowWatchBookmarks}

	var initial []storage.KV
	var from int64
	sendInitial := opts.ResourceVersion == "" || opts.ResourceVersion == "0"
	if opts.SendInitialEvents != nil {
		sendInitial = *opts.SendInitialEvents
	}
	if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		if from, err = strconv.ParseInt(opts.ResourceVersion, 10, 64); err != nil || from < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %q", opts.ResourceVersion))
		}
	}
	if sendInitial {
		res, err := s.storage.List(ctx, prefix, storage.ListOptions{})
		if err != nil {
			return nil, toAPIError(err, s.info.GroupResource(), "")
		}
		initial, from = res.Items, res.Revision
	} else if from == 0 {
		if from, err = s.storage.CurrentRevision(ctx); err != nil {
			return nil, toAPIError(err, s.info.GroupResource(), "")
		}
	}
	events, err := s.storage.Watch(ctx, prefix, from)
	if err != nil {
		return nil, toAPIError(err, s.info.GroupResource(), "")
	}
	initialEnd := sendInitial && opts.AllowWatchBookmarks
	go w.run(ctx, initial, from, initialEnd, events)
	return w.out, nil
}

// watcher turns storage events into API watch events for one client.
type watcher struct {
	store     *Store
	match     func(runtime.Object) (bool, error)
	out       chan watch.Event
	bookmarks bool
}

func (w *watcher) run(ctx context.Context, initial []storage.KV, rev int64, initialEnd bool, events <-chan storage.Event) {
	defer close(w.out)
	for _, kv := range initial {
		obj, err := w.store.decode(kv)
		if err != nil {
			w.sendError(ctx, err)
			return
		}
		if ok, _ := w.match(obj); ok && !w.send(ctx, watch.Event{Type: watch.Added, Object: obj}) {
			return
		}
	}
	if initialEnd && !w.send(ctx, watch.Event{Type: watch.Bookmark, Object: w.bookmark(rev, true)}) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			out, ok, err := w.translate(ev)
			if err != nil {
				w.sendError(ctx, err)
				return
			}
			if ok && !w.send(ctx, out) {
				return
			}
		}
	}
}

// translate maps one storage event to at most one watch event, applying
// the selectors to the old and the new state.
func (w *watcher) translate(ev storage.Event) (watch.Event, bool, error) {
	switch ev.Type {
	case storage.Error:
		if compacted := (*storage.CompactedError)(nil); errors.As(ev.Err, &compacted) {
			return watch.Event{}, false, apierrors.NewResourceExpired(
				fmt.Sprintf("too old resource version: %d (%d)", compacted.Requested, compacted.Compacted))
		}
		if errors.Is(ev.Err, storage.ErrCompacted) {
			return watch.Event{}, false, apierrors.NewResourceExpired("too old resource version")
		}
		return watch.Event{}, false, ev.Err
	case storage.Progress:
		if !w.bookmarks {
			return watch.Event{}, false, nil
		}
		return watch.Event{Type: watch.Bookmark, Object: w.bookmark(ev.KV.Revision, false)}, true, nil
	case storage.Deleted:
		obj, err := w.store.decode(ev.KV)
		if err != nil {
			return watch.Event{}, false, err
		}
		ok, err := w.match(obj)
		return watch.Event{Type: watch.Deleted, Object: obj}, ok, err
	}
	obj, err := w.store.decode(ev.KV)
	if err != nil {
		return watch.Event{}, false, err
	}
	now, err := w.match(obj)
	if err != nil {
		return watch.Event{}, false, err
	}
	before := false
	if ev.PrevValue != nil {
		prev, err := w.store.decode(storage.KV{Key: ev.KV.Key, Value: ev.PrevValue, Revision: ev.KV.Revision})
		if err != nil {
			return watch.Event{}, false, err
		}
		if before, err = w.match(prev); err != nil {
			return watch.Event{}, false, err
		}
	}
	switch {
	case now && before:
		return watch.Event{Type: watch.Modified, Object: obj}, true, nil
	case now:
		return watch.Event{Type: watch.Added, Object: obj}, true, nil
	case before:
		return watch.Event{Type: watch.Deleted, Object: obj}, true, nil
	}
	return watch.Event{}, false, nil
}

// bookmark is an object of the resource's kind carrying only a
// resourceVersion (and the initial-events-end annotation).
func (w *watcher) bookmark(rev int64, initialEnd bool) runtime.Object {
	obj := w.store.strategy.New()
	m := accessor(obj)
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	if initialEnd {
		m.SetAnnotations(map[string]string{initialEventsEndAnnotation: "true"})
	}
	w.store.setTypeMeta(obj)
	return obj
}

func (w *watcher) send(ctx context.Context, ev watch.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *watcher) sendError(ctx context.Context, err error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	w.send(ctx, watch.Event{Type: watch.Error, Object: &st})
}
