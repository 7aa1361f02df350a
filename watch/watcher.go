package watch

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

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
	// Client names who watches (the user), for the log line when the
	// watcher is closed for falling behind.
	Client string
}

// Event is one event for one watcher. For Bookmark, Object carries only
// the revision.
type Event struct {
	Type             EventType
	Object           *Object
	InitialEventsEnd bool
	// Dispatched: the event is a change dispatched to the watchers as it
	// happened, not one of the initial or replayed events of this watch
	// (kube shares the encoding of a dispatched event among its watchers,
	// and counts its size once; see RecordSentShared).
	Dispatched bool
	// Err is why a watch that reads etcd directly ended (Type Error, the
	// last event; see Config.Disabled).
	Err error
}

// Watcher is one client's watch. Its consumer pulls events with Next (one
// goroutine at a time); Events offers a channel instead, for callers that
// want one. A Watcher ends when the context given to Cache.Watch ends, on
// Stop, when it falls too far behind, or when the cache restarts (the
// client then lists and watches again). Its owner must call Stop (or end
// the context) to release it.
type Watcher struct {
	c *Cache
	w *watcher
	// first holds the events known when the watch started (initial state
	// or replay), delivered before anything queued; only the consumer
	// touches it.
	first []Event
	// stopCtx unregisters the context.AfterFunc that stops the watcher
	// when the watch's context ends.
	stopCtx func() bool

	eventsOnce sync.Once
	events     chan Event
}

// watcher is the cache's side of a Watcher: the selector and the queue the
// cache fills under its lock.
type watcher struct {
	match     func(*Object) bool
	prefix    string
	after     int64 // events at or before this revision are not for us
	bookmarks bool
	// indexed: the watcher selects only objects whose IndexField is
	// indexValue.
	indexed    bool
	indexValue string
	// limit bounds the queue: a watcher that falls further behind stops
	// queueing and catches up from the cache's window later (lagging). The
	// queue itself grows on demand, so that a watcher that sees few events
	// (a node agent) costs little memory.
	limit int
	// backlog counts the watch's initial or replayed events (Watcher.first)
	// not yet taken. The queue may hold that many more than limit: a
	// watcher still sending its initial state (150,000 pods take seconds)
	// is busy, not slow, and closing it would only make its client start
	// over, with the same backlog.
	backlog atomic.Int64
	// client is who watches (WatchOptions.Client), for the log.
	client string

	mu sync.Mutex
	// queue[head:] are the events not yet taken.
	queue []Event
	head  int
	// lagging: the queue overflowed, and the events from the overflowing
	// one on were not queued. Once its consumer has drained the queue, the
	// watcher takes them from the cache's window (Cache.catchUp): the
	// window keeps them anyway, so a watcher that falls behind for a while
	// costs no memory of its own, and it is closed only when the window no
	// longer reaches back to them (etcd moves a slow watcher to its
	// unsynced set the same way, rather than cancel it). The events to
	// take are those after resumeAfter, less the first resumeSkip of
	// revision resumeAfter+1 (events one transaction wrote share a
	// revision; the first ones were queued).
	lagging     bool
	resumeAfter int64
	resumeSkip  int
	// lagged: the watcher has lagged before (its first time is logged).
	lagged bool
	// notify has room for one signal: "the queue may be non-empty".
	notify chan struct{}
	// done is closed when the watcher ends (closeOnce).
	done      chan struct{}
	closeOnce sync.Once

	// For a watcher fed by its own etcd watch (a cache that keeps
	// nothing): space has room for one signal, "an event was taken", for
	// its relay waiting on a full queue; cancel ends the relay.
	space  chan struct{}
	cancel context.CancelFunc
	// finished (under mu): the relay has ended, nothing more will be
	// queued; the watch ends once its queue is drained.
	finished bool
}

// shrinkAbove is the queue capacity above which a drained queue is
// released rather than reused: a burst must not pin a large buffer to an
// idle watcher.
const shrinkAbove = 64

// Watch starts a watch. A FromRevision older than the cache's window is
// storage.CompactedError (the API's 410 Expired). A cache that keeps
// nothing starts an etcd watch of its own, whose errors come as its last
// event (Error).
func (c *Cache) Watch(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	if c.cfg.Disabled {
		return c.watchDirect(ctx, opts)
	}
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
		limit:     c.cfg.WatcherBuffer,
		client:    opts.Client,
		notify:    make(chan struct{}, 1),
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
		c.items.ascend(w.prefix, "", func(obj *Object) bool {
			if match(obj) {
				first = append(first, Event{Type: Added, Object: obj})
			}
			return true
		})
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
			// The window holds every prefix's events (other namespaces').
			if !strings.HasPrefix(ev.obj.Key, w.prefix) {
				continue
			}
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
	initial := len(first)
	if opts.InitialEventsEnd && opts.SendInitial {
		initial-- // the bookmark is no object's event
	}
	c.metrics.initialEvents(initial)

	w.backlog.Store(int64(len(first)))
	pw := &Watcher{c: c, w: w, first: first}
	// No goroutine waits on ctx: AfterFunc starts one only once ctx ends,
	// to unregister the watcher (which wakes a blocked Next).
	pw.stopCtx = context.AfterFunc(ctx, func() { c.remove(w) })
	return pw, nil
}

// Next returns the watch's next event, blocking until there is one; false
// means the watch has ended. Events still queued when the watch ends are
// not delivered: its client resumes from the last one it saw.
func (p *Watcher) Next() (Event, bool) {
	for {
		select {
		case <-p.w.done:
			return Event{}, false
		default:
		}
		if len(p.first) > 0 {
			ev := p.first[0]
			p.first[0] = Event{}
			if p.first = p.first[1:]; len(p.first) == 0 {
				p.first = nil // release the initial events' backing array
			}
			p.w.backlog.Add(-1)
			return ev, true
		}
		ev, ok, finished, lagging := p.w.take()
		if ok {
			return ev, true
		}
		if finished {
			p.Stop()
			return Event{}, false
		}
		if lagging {
			p.c.catchUp(p.w) // refills the queue, or closes the watcher
			continue
		}
		select {
		case <-p.w.notify:
		case <-p.w.done:
			return Event{}, false
		}
	}
}

// Ready reports whether Next would return an event without blocking; a
// consumer that writes to a network stream can flush only when it is false.
func (p *Watcher) Ready() bool {
	if len(p.first) > 0 {
		return true
	}
	p.w.mu.Lock()
	ready, lagging := p.w.head < len(p.w.queue), p.w.lagging
	p.w.mu.Unlock()
	if ready || !lagging {
		return ready
	}
	// What comes next is in the window: take it now, so that a consumer
	// told "ready" does not then block in Next with its writes unflushed
	// (the window may hold nothing this watcher selects).
	p.c.catchUp(p.w)
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	return p.w.head < len(p.w.queue)
}

// Stop ends the watch. It may be called more than once, and concurrently
// with Next.
func (p *Watcher) Stop() {
	p.stopCtx()
	p.c.remove(p.w)
}

// Events delivers the watch's events on a channel, closed when the watch
// ends. It is for callers that want a channel rather than Next; the first
// call starts the goroutine that relays them, which ends with the watch.
// A caller of Events must not call Next.
func (p *Watcher) Events() <-chan Event {
	p.eventsOnce.Do(func() {
		p.events = make(chan Event)
		go func() {
			defer close(p.events)
			for {
				ev, ok := p.Next()
				if !ok {
					return
				}
				select {
				case p.events <- ev:
				case <-p.w.done:
					return
				}
			}
		}()
	})
	return p.events
}

// take removes the oldest queued event. When there is none, finished
// reports that none will come (a direct watcher's relay ended), lagging
// that the events to come next are in the cache's window (catchUp).
func (w *watcher) take() (ev Event, ok, finished, lagging bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.head == len(w.queue) {
		return Event{}, false, w.finished, w.lagging
	}
	ev = w.queue[w.head]
	w.queue[w.head] = Event{} // let the object go once it is superseded
	w.head++
	if w.space != nil {
		select {
		case w.space <- struct{}{}:
		default: // a signal is already pending
		}
	}
	if w.head == len(w.queue) {
		if cap(w.queue) > shrinkAbove {
			w.queue = nil
		} else {
			w.queue = w.queue[:0]
		}
		w.head = 0
	}
	return ev, true, false, false
}

// finish marks a direct watcher's relay as ended: its consumer gets what
// is queued, then the end of the watch.
func (w *watcher) finish() {
	w.mu.Lock()
	w.finished = true
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// offer queues ev for the watcher without blocking (the cache holds its
// lock); false means the watcher already holds limit events beyond its
// backlog. A lagging watcher takes nothing: it will find ev in the window.
func (w *watcher) offer(ev *event) bool {
	if ev.typ != Bookmark && ev.typ != Error && (ev.revision() <= w.after || !strings.HasPrefix(ev.obj.Key, w.prefix)) {
		return true
	}
	out, ok := w.translate(ev)
	if !ok {
		return true
	}
	// A direct watcher's objects are its own: nothing shared to count once.
	out.Dispatched = ev.typ != Bookmark && ev.typ != Error && w.space == nil
	w.mu.Lock()
	if w.lagging {
		w.mu.Unlock()
		return true
	}
	if len(w.queue)-w.head >= w.limit+int(w.backlog.Load()) {
		w.mu.Unlock()
		return false
	}
	if w.head > 0 && len(w.queue) == cap(w.queue) {
		// Reuse the taken slots before growing.
		n := copy(w.queue, w.queue[w.head:])
		clear(w.queue[n:])
		w.queue, w.head = w.queue[:n], 0
	}
	w.queue = append(w.queue, out)
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default: // a signal is already pending
	}
	return true
}

// lagLocked marks w, whose queue has no room for ev (the newest event of
// the window: apply pushes before it dispatches), as lagging: it takes ev
// and the events after it from the window once its consumer has drained
// the queue (catchUp). c.mu is held.
func (c *Cache) lagLocked(w *watcher, ev *event) {
	rev, skip := ev.revision(), 0
	for i := c.n - 2; i >= 0 && c.window[(c.start+i)%len(c.window)].revision() == rev; i-- {
		skip++ // written by ev's transaction before ev, and offered
	}
	w.mu.Lock()
	w.lagging, w.resumeAfter, w.resumeSkip = true, rev-1, skip
	first := !w.lagged
	w.lagged = true
	w.mu.Unlock()
	c.laggedWatchers++
	if first {
		attrs := []any{"buffer", w.limit, "client", w.client, "revision", rev}
		if within := strings.TrimPrefix(w.prefix, c.cfg.Prefix); within != "" {
			attrs = append(attrs, "within", within)
		}
		c.log.Info("a watcher fell behind its buffer; it goes on from the window", attrs...)
	}
}

// catchUp queues for a lagging watcher, whose consumer has drained its
// queue, the window's events it did not queue, and makes it current again
// (no event can be dispatched meanwhile: c.mu is held). When the window no
// longer reaches back to them, the watcher is closed as fallen behind, as
// it would have been without the window: its client relists.
func (c *Cache) catchUp(w *watcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.watchers[w]; !ok {
		return // closed meanwhile (Stop, the cache's relist)
	}
	w.mu.Lock()
	if !w.lagging {
		w.mu.Unlock()
		return
	}
	events, ok := c.since(w.resumeAfter)
	if !ok {
		w.mu.Unlock()
		c.dropLocked(w, true)
		return
	}
	skip := w.resumeSkip
	for _, ev := range events {
		if skip > 0 && ev.revision() == w.resumeAfter+1 {
			skip--
			continue
		}
		if ev.revision() <= w.after || !strings.HasPrefix(ev.obj.Key, w.prefix) {
			continue
		}
		if out, ok := w.translate(ev); ok {
			w.queue = append(w.queue, out)
		}
	}
	w.lagging = false
	w.mu.Unlock()
}

// translate applies the watcher's selector to the old and the new state:
// an object that starts matching is ADDED, one that stops is DELETED.
func (w *watcher) translate(ev *event) (Event, bool) {
	switch ev.typ {
	case Bookmark:
		return Event{Type: Bookmark, Object: ev.obj, InitialEventsEnd: ev.initialEnd}, true
	case Error:
		return Event{Type: Error, Object: ev.obj, Err: ev.err}, true
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
		c.metrics.terminatedWatcher()
		attrs := []any{"buffer", w.limit, "client", w.client}
		if within := strings.TrimPrefix(w.prefix, c.cfg.Prefix); within != "" {
			attrs = append(attrs, "within", within)
		}
		if w.indexed {
			attrs = append(attrs, "index", w.indexValue)
		}
		c.log.Info("closing a watcher that fell behind", attrs...)
	}
	w.closeOnce.Do(func() {
		close(w.done)
		if w.cancel != nil {
			w.cancel()
		}
	})
}

func (c *Cache) remove(w *watcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(w, false)
}
