package watch

import (
	"context"
	"fmt"
	"time"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/watch/rawproto"
)

// A Cache with Config.Disabled keeps nothing: no objects, no window. It is
// kube-apiserver's storage without a watch cache (--watch-cache-sizes
// events#0, kube's default for events, or --watch-cache=false): every LIST
// reads etcd (the registry builds transient Objects with Object) and every
// watch is an etcd watch of its own (Watch, from direct.go), filtered as
// the cache's watchers are. Objects and encodings then live only as long
// as the request that read them.

// Disabled reports whether the cache keeps nothing (Config.Disabled).
func (c *Cache) Disabled() bool { return c.cfg.Disabled }

// Object makes an Object of a stored value, what the cache would hold for
// it, for a reader of etcd (a cache that keeps nothing, a LIST at an
// exact revision): transient, it lives as long as its reader. Without
// attrs, its Labels and Fields stay empty and the value is not decoded
// (its encoding is the stored value with the resourceVersion set), for a
// reader that selects nothing.
func (c *Cache) Object(kv storage.KV, attrs bool) (o *Object, err error) {
	switch {
	case c.cfg.MessageJSON != nil && rawproto.IsEnveloped(kv.Value):
		o, err = c.decodeProtobuf(kv, attrs, true)
	case !attrs:
		if data, at, ok := spliceResourceVersion(kv.Value, kv.Revision); ok {
			o = &Object{Key: kv.Key, Revision: kv.Revision, data: data, codec: c.codec}
			o.setSplice(at, len(data)-len(kv.Value))
			break
		}
		fallthrough
	default:
		o, err = c.decodeJSON(kv)
	}
	if err != nil {
		return nil, err
	}
	// Its memo lives as long as it does: its reader (a LIST of both
	// encodings, a selecting one that made the JSON for the attributes)
	// may ask for it more than once.
	o.recent = true
	return o, nil
}

// countInterval is how often a cache that keeps nothing counts its objects
// in etcd, for apiserver_storage_objects and API Priority and Fairness's
// LIST cost estimates: kube's --etcd-count-metric-poll-period default.
const countInterval = time.Minute

// runDisabled is Run for a cache that keeps nothing: it counts the
// resource's objects in etcd now and every countInterval until ctx ends.
func (c *Cache) runDisabled(ctx context.Context) error {
	c.mu.Lock()
	c.ready = true
	c.signalLocked()
	c.mu.Unlock()
	c.metrics.initialized()
	tick := time.NewTicker(countInterval)
	defer tick.Stop()
	for {
		if n, rev, err := c.count(ctx); err == nil {
			c.mu.Lock()
			c.counted, c.rev = n, max(c.rev, rev)
			c.mu.Unlock()
		} else if ctx.Err() == nil {
			c.log.Warn("count objects", "err", err)
		}
		select {
		case <-ctx.Done():
			c.reset()
			return nil
		case <-tick.C:
		}
	}
}

// count returns how many objects etcd holds under the prefix: a one-item
// page, whose remaining count etcd gives with it.
func (c *Cache) count(ctx context.Context) (int, int64, error) {
	page, err := c.cfg.Storage.List(ctx, c.cfg.Prefix, storage.ListOptions{Limit: 1})
	if err != nil {
		return 0, 0, err
	}
	n := len(page.Items)
	if page.RemainingItemCount != nil {
		n += int(*page.RemainingItemCount)
	}
	return n, page.Revision, nil
}

// Error is the type of the last event of a watch that reads etcd
// directly when etcd ends it (its revision was compacted, or the revision
// asked for the initial events has not been reached): Event.Err says why.
const Error EventType = "ERROR"

// watchDirect starts a watch of its own on etcd, as kube's storage does
// without a watch cache: from the current state as ADDED events when
// SendInitial (then, with InitialEventsEnd, the bookmark that ends them),
// then every change after it; else every change after FromRevision (0:
// after now). Events pass the same selector translation as the cache's
// watchers (an object starting or ceasing to match is ADDED or DELETED).
// Unlike a cached watcher, a slow client is not closed: the relay waits
// for it, and etcd's client buffers behind, as in kube.
func (c *Cache) watchDirect(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	if !opts.SendInitial && opts.FromRevision == 0 {
		// "From now" is now, not whenever the relay starts: a write
		// acknowledged after Watch returns is an event of this watch.
		rev, err := c.cfg.Storage.CurrentRevision(ctx, c.cfg.Prefix)
		if err != nil {
			return nil, err
		}
		opts.FromRevision = rev
	}
	match := opts.Match
	w := &watcher{
		match:     func(*Object) bool { return true },
		prefix:    c.cfg.Prefix + opts.Prefix,
		bookmarks: opts.Bookmarks,
		limit:     c.cfg.WatcherBuffer,
		notify:    make(chan struct{}, 1),
		done:      make(chan struct{}),
		space:     make(chan struct{}, 1),
	}
	if match != nil {
		w.match = match
	}
	// The relay's context ends with the watcher (Stop, ctx, or the
	// cache's reset: dropLocked calls w.cancel), which ends its etcd watch.
	rctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	c.mu.Lock()
	c.watchers[w] = struct{}{}
	c.mu.Unlock()
	pw := &Watcher{c: c, w: w}
	pw.stopCtx = context.AfterFunc(ctx, func() { c.remove(w) })
	go func() {
		defer cancel()
		defer w.finish()
		if err := c.relay(rctx, w, opts); err != nil && rctx.Err() == nil {
			w.offerWait(rctx, &event{typ: Error, err: err, obj: &Object{}})
		}
	}()
	return pw, nil
}

// relay feeds w from etcd until ctx ends or etcd ends the watch.
func (c *Cache) relay(ctx context.Context, w *watcher, opts WatchOptions) error {
	// Attributes only for a watch that selects.
	selects := opts.Match != nil
	from := opts.FromRevision
	if opts.SendInitial {
		rev, err := c.listInitial(ctx, w, opts.Prefix, from, selects)
		if err != nil {
			return err
		}
		from = rev
		if opts.InitialEventsEnd {
			w.offerWait(ctx, &event{typ: Bookmark, obj: &Object{Revision: rev}, initialEnd: true})
		}
	}
	w.after = from
	events, err := c.cfg.Storage.Watch(ctx, w.prefix, from)
	if err != nil {
		return err
	}
	for se := range events {
		switch se.Type {
		case storage.Error:
			return se.Err
		case storage.Progress:
			continue // kube's storage sends API clients no bookmarks
		}
		obj, err := c.Object(se.KV, selects)
		if err != nil {
			return err
		}
		ev := &event{typ: Added, obj: obj}
		switch se.Type {
		case storage.Deleted:
			ev.typ = Deleted
		case storage.Modified:
			ev.typ = Modified
			switch {
			case !selects:
				ev.prev = &Object{Key: se.KV.Key} // matches, as everything does
			case se.PrevValue != nil:
				prev, err := c.storedJSON(storage.KV{Key: se.KV.Key, Value: se.PrevValue})
				if err != nil {
					return err
				}
				_, l, f, err := c.cfg.Decode(storage.KV{Key: se.KV.Key, Value: prev, Revision: se.KV.Revision})
				if err != nil {
					return fmt.Errorf("decode %s: %w", se.KV.Key, err)
				}
				ev.prev = &Object{Key: se.KV.Key, Labels: NewAttrs(l), Fields: NewAttrs(f)}
			}
		}
		if !w.offerWait(ctx, ev) {
			return nil
		}
	}
	return ctx.Err()
}

// listInitial offers the current state under prefix as ADDED events, read
// from etcd in pages at one revision, and returns that revision. A min
// etcd has not reached yet is refused (TooLargeError), as kube's storage
// refuses it.
func (c *Cache) listInitial(ctx context.Context, w *watcher, prefix string, min int64, selects bool) (int64, error) {
	if min > 0 {
		current, err := c.cfg.Storage.CurrentRevision(ctx, c.cfg.Prefix)
		if err != nil {
			return 0, err
		}
		if min > current {
			return 0, &TooLargeError{Requested: min, Current: current}
		}
	}
	opts := storage.ListOptions{Limit: 500}
	for {
		page, err := c.cfg.Storage.List(ctx, c.cfg.Prefix+prefix, opts)
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", c.cfg.Prefix+prefix, err)
		}
		for _, kv := range page.Items {
			obj, err := c.Object(kv, selects)
			if err != nil {
				return 0, err
			}
			if !w.offerWait(ctx, &event{typ: Added, obj: obj}) {
				return 0, ctx.Err()
			}
		}
		if page.NextKey == "" {
			return page.Revision, nil
		}
		opts.StartKey, opts.Revision = page.NextKey, page.Revision
	}
}

// offerWait queues ev for a watcher fed by its own relay, waiting while its
// queue is full; false means the watch ended first.
func (w *watcher) offerWait(ctx context.Context, ev *event) bool {
	for {
		if w.offer(ev) {
			return true
		}
		select {
		case <-w.space:
		case <-w.done:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
