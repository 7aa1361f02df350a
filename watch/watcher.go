package watch

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/corekube/corekube/storage"
)

// WatchOptions say where a watch starts and what it sees.
type WatchOptions struct {
	// Prefix narrows the watch (a namespace's keys); "" is everything.
	Prefix string
	// FromRevision: deliver every change after this revision.
	FromRevision int64
	// SendInitial: first the current state as ADDED events, then every
	// change after it (FromRevision then only says how fresh that state
	// must be).
	SendInitial bool
	// InitialEventsEnd: after the initial events, a bookmark that marks
	// their end (the WatchList protocol).
	InitialEventsEnd bool
	// Bookmarks: periodic bookmarks carrying the current revision.
	Bookmarks bool
	Match     func(*Object) bool
	// IndexValue, when set, is the one value of the cache's IndexField the
	// watch selects (Match must require it too).
	IndexValue *string
}

// Event is one event for one watcher. For Bookmark, Object carries only
// the revision.
type Event struct {
	Type             EventType
	Object           *Object
	InitialEventsEnd bool
}

// Watcher is one client's watch.
type Watcher struct {
	out  chan Event
	stop context.CancelFunc
}

// Events delivers the watch's events; it is closed when the watch ends:
// its context ended, Stop was called, it fell too far behind, or the cache
// restarted (the client then lists and watches again).
func (w *Watcher) Events() <-chan Event { return w.out }

// Stop ends the watch.
func (w *Watcher) Stop() { w.stop() }

// watcher is the cache's side of a Watcher.
type watcher struct {
	match     func(*Object) bool
	prefix    string
	after     int64 // events at or before this revision are not for us
	bookmarks bool
	// indexed: the watcher selects only objects whose IndexField is
	// indexValue.
	indexed    bool
	indexValue string
	buffer     chan Event
	done       chan struct{}
	closeOnce  sync.Once
}

// Watch starts a watch. A FromRevision older than the cache's window is
// storage.CompactedError (the API's 410 Expired).
func (c *Cache) Watch(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	// A revision the cache has not seen yet: wait for it a little, as kube
	// does, then refuse (TooLargeError, the API's ResourceVersionTooLarge).
	if err := c.waitFor(ctx, opts.FromRevision, waitTimeout, true); err != nil {
		return nil, err
	}
	match := opts.Match
	if match == nil {
		match = func(*Object) bool { return true }
	}
	w := &watcher{
		match:     match,
		prefix:    c.cfg.Prefix + opts.Prefix,
		bookmarks: opts.Bookmarks,
		buffer:    make(chan Event, c.cfg.WatcherBuffer),
		done:      make(chan struct{}),
	}
	if opts.IndexValue != nil {
		w.indexed, w.indexValue = true, *opts.IndexValue
	}
	var first []Event
	c.mu.Lock()
	for !c.ready {
		// The cache restarted after waitFor: a watcher registered now
		// would miss the changes its relist skips. Wait for the new state.
		c.mu.Unlock()
		if err := c.waitFor(ctx, opts.FromRevision, waitTimeout, true); err != nil {
			return nil, err
		}
		c.mu.Lock()
	}
	switch {
	case opts.SendInitial:
		w.after = c.rev
		for key, obj := range c.items {
			if strings.HasPrefix(key, w.prefix) && match(obj) {
				first = append(first, Event{Type: Added, Object: obj})
			}
		}
		sort.Slice(first, func(i, j int) bool { return first[i].Object.Key < first[j].Object.Key })
		if opts.InitialEventsEnd {
			first = append(first, Event{Type: Bookmark, Object: &Object{Revision: c.rev}, InitialEventsEnd: true})
		}
	case opts.FromRevision > 0:
		replay, ok := c.since(opts.FromRevision)
		if !ok {
			floor := c.floor
			c.mu.Unlock()
			return nil, &storage.CompactedError{Requested: opts.FromRevision, Compacted: floor}
		}
		w.after = opts.FromRevision
		for _, ev := range replay {
			if out, ok := w.translate(ev); ok {
				first = append(first, out)
			}
		}
		w.after = max(w.after, c.rev)
	default:
		w.after = c.rev
	}
	c.addLocked(w)
	c.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	public := &Watcher{out: make(chan Event), stop: cancel}
	go func() {
		defer close(public.out)
		defer c.remove(w)
		for _, ev := range first {
			if !w.send(ctx, public.out, ev) {
				return
			}
		}
		for {
			select {
			case ev := <-w.buffer:
				if !w.send(ctx, public.out, ev) {
					return
				}
			case <-w.done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return public, nil
}

func (w *watcher) send(ctx context.Context, out chan<- Event, ev Event) bool {
	select {
	case out <- ev:
		return true
	case <-w.done:
		return false
	case <-ctx.Done():
		return false
	}
}

// offer queues ev for the watcher without blocking (the cache holds its
// lock); false means the watcher's buffer is full.
func (w *watcher) offer(ev *event) bool {
	if ev.typ != Bookmark && (ev.revision() <= w.after || !strings.HasPrefix(ev.obj.Key, w.prefix)) {
		return true
	}
	out, ok := w.translate(ev)
	if !ok {
		return true
	}
	select {
	case w.buffer <- out:
		return true
	default:
		return false
	}
}

// translate applies the watcher's selector to the old and the new state:
// an object that starts matching is ADDED, one that stops is DELETED.
func (w *watcher) translate(ev *event) (Event, bool) {
	if ev.typ == Bookmark {
		return Event{Type: Bookmark, Object: ev.obj}, true
	}
	now := w.match(ev.obj)
	if ev.typ == Deleted {
		return Event{Type: Deleted, Object: ev.obj}, now
	}
	before := ev.prev != nil && w.match(ev.prev)
	switch {
	case now && before:
		return Event{Type: Modified, Object: ev.obj}, true
	case now:
		return Event{Type: Added, Object: ev.obj}, true
	case before:
		return Event{Type: Deleted, Object: ev.obj}, true
	}
	return Event{}, false
}

// dropLocked ends a watcher; slow says it fell behind. c.mu is held.
func (c *Cache) dropLocked(w *watcher, slow bool) {
	if _, ok := c.watchers[w]; !ok {
		return
	}
	delete(c.watchers, w)
	delete(c.unindexed, w)
	if byValue := c.byIndex[w.indexValue]; byValue != nil {
		delete(byValue, w)
		if len(byValue) == 0 {
			delete(c.byIndex, w.indexValue)
		}
	}
	if slow {
		c.slowWatchersClosed++
		c.log.Info("closing a watcher that fell behind", "buffer", cap(w.buffer))
	}
	w.closeOnce.Do(func() { close(w.done) })
}

func (c *Cache) remove(w *watcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(w, false)
}
