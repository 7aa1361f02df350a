// Package memory is an in-process storage.Interface with etcd's semantics:
// one store-wide revision counter that every write increments, values
// readable at any revision since the last compaction, watches that replay
// that history, compaction with etcd's errors, and keys that expire after
// a TTL. It keeps everything in memory and persists nothing, so it is a
// store for tests (and an in-process option) where etcd itself is not
// what is being tested; storage/storagetest holds it to the same contract
// as storage/etcd.
package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/corekube/corekube/storage"
)

// errClosed is returned by every call after Close.
var errClosed = &storage.UnavailableError{Err: errors.New("memory store closed")}

// version is one value of a key, written at rev; a deletion has deleted set
// and the value before it.
type version struct {
	rev     int64
	value   []byte
	deleted bool
}

// expiry is a key's pending TTL deletion; the timer's callback deletes the
// key only if the key still carries this expiry.
type expiry struct{ timer *time.Timer }

// Store is the in-memory storage.Interface. The zero value is not usable:
// call New. Close stops its expiry timers and ends its watches.
type Store struct {
	mu sync.Mutex
	// rev is the revision of the last write (1 in an empty store, as in a
	// fresh etcd).
	rev int64
	// compacted is the revision of the last compaction: reads below it
	// fail with ErrCompacted.
	compacted int64
	// history holds every key's versions since the compaction, oldest
	// first; a key whose last version is a deletion at or below the
	// compaction is dropped.
	history map[string][]version
	// events is every change since the compaction, in revision order (one
	// per revision), which watches replay.
	events []storage.Event
	// expiries are the pending TTL deletions by key.
	expiries map[string]*expiry
	// changed is closed and replaced on every write and progress request,
	// waking the watches.
	changed chan struct{}
	// progress counts RequestProgress calls; a watch that has answered
	// fewer reports its revision.
	progress int64
	// done is closed by Close.
	done   chan struct{}
	closed bool
	// watches counts the running watch goroutines, for Close to wait on.
	watches sync.WaitGroup
}

// New returns an empty store.
func New() *Store {
	return &Store{
		rev:      1,
		history:  map[string][]version{},
		expiries: map[string]*expiry{},
		changed:  make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// Close stops the expiry timers and closes every watch, waiting for their
// goroutines to end. Later calls fail with ErrUnavailable.
func (s *Store) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for _, e := range s.expiries {
		e.timer.Stop()
	}
	clear(s.expiries)
	close(s.done)
	s.mu.Unlock()
	s.watches.Wait()
}

// check fails when ctx has ended or the store is closed; callers hold mu.
func (s *Store) check(ctx context.Context) error {
	if s.closed {
		return errClosed
	}
	// As storage/etcd: a deadline is the backend not answering in time, a
	// cancellation the caller's own doing.
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		return &storage.UnavailableError{Err: err}
	} else if err != nil {
		return err
	}
	return nil
}

// current returns key's live value; callers hold mu.
func (s *Store) current(key string) (storage.KV, bool) {
	vs := s.history[key]
	if len(vs) == 0 || vs[len(vs)-1].deleted {
		return storage.KV{}, false
	}
	v := vs[len(vs)-1]
	return storage.KV{Key: key, Value: slices.Clip(v.value), Revision: v.rev}, true
}

// put writes value (already copied) under key at a new revision and
// records the event; callers hold mu.
func (s *Store) put(key string, value []byte, o storage.WriteOptions) storage.KV {
	s.rev++
	prev, existed := s.current(key)
	s.history[key] = append(s.history[key], version{rev: s.rev, value: value})
	kv := storage.KV{Key: key, Value: slices.Clip(value), Revision: s.rev}
	if existed {
		s.record(storage.Event{Type: storage.Modified, KV: kv, PrevValue: prev.Value})
	} else {
		s.record(storage.Event{Type: storage.Added, KV: kv})
	}
	s.setExpiry(key, o.TTL)
	return kv
}

// remove deletes key (which exists) at a new revision; callers hold mu.
func (s *Store) remove(cur storage.KV) storage.KV {
	s.rev++
	s.history[cur.Key] = append(s.history[cur.Key], version{rev: s.rev, value: cur.Value, deleted: true})
	kv := storage.KV{Key: cur.Key, Value: cur.Value, Revision: s.rev}
	s.record(storage.Event{Type: storage.Deleted, KV: kv, PrevValue: cur.Value})
	s.setExpiry(cur.Key, 0)
	return kv
}

// record appends e to the history and wakes the watches; callers hold mu.
func (s *Store) record(e storage.Event) {
	s.events = append(s.events, e)
	s.wake()
}

func (s *Store) wake() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// setExpiry replaces key's expiry with one ttl from now, or none for a
// zero ttl, as an etcd put attaches the key to the write's lease or to
// none; callers hold mu. Every key has a timer of its own: etcd's lease
// sharing is an optimisation the contract allows but does not require.
func (s *Store) setExpiry(key string, ttl time.Duration) {
	if e := s.expiries[key]; e != nil {
		e.timer.Stop()
		delete(s.expiries, key)
	}
	if ttl <= 0 {
		return
	}
	e := &expiry{}
	e.timer = time.AfterFunc(ttl, func() { s.expire(key, e) })
	s.expiries[key] = e
}

// expire deletes key if e is still its expiry (a later write may have
// replaced it while the timer fired).
func (s *Store) expire(key string, e *expiry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.expiries[key] != e {
		return
	}
	if cur, ok := s.current(key); ok {
		s.remove(cur)
	}
}

// Get implements storage.Interface.
func (s *Store) Get(ctx context.Context, key string) (storage.KV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return storage.KV{}, fmt.Errorf("get %s: %w", key, err)
	}
	kv, ok := s.current(key)
	if !ok {
		return storage.KV{}, fmt.Errorf("get %s: %w", key, storage.ErrNotFound)
	}
	return kv, nil
}

// Create implements storage.Interface.
func (s *Store) Create(ctx context.Context, key string, value []byte, opts ...storage.WriteOption) (storage.KV, error) {
	o := storage.ApplyWriteOptions(opts)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return storage.KV{}, fmt.Errorf("create %s: %w", key, err)
	}
	if _, ok := s.current(key); ok {
		return storage.KV{}, fmt.Errorf("create %s: %w", key, storage.ErrAlreadyExists)
	}
	return s.put(key, bytes.Clone(value), o), nil
}

// GuaranteedUpdate implements storage.Interface. tryUpdate runs without
// the lock (it may use the store); the write is a compare-and-swap on the
// revision it read, retried with the newer value when another write won.
func (s *Store) GuaranteedUpdate(ctx context.Context, key string, tryUpdate storage.UpdateFunc, opts ...storage.WriteOption) (storage.KV, error) {
	o := storage.ApplyWriteOptions(opts)
	read := func() (storage.KV, error) {
		kv, err := s.Get(ctx, key)
		if err != nil {
			return storage.KV{}, errors.Unwrap(err)
		}
		return kv, nil
	}
	from, err := o.StartFrom(key, read)
	if err != nil {
		return storage.KV{}, fmt.Errorf("update %s: %w", key, err)
	}
	for {
		value, write, kv, err := from.Attempt(tryUpdate)
		if !write {
			return kv, err
		}
		cur := from.KV
		kv, won, err := s.swap(ctx, cur, func() storage.KV { return s.put(key, bytes.Clone(value), o) })
		if err != nil {
			return storage.KV{}, fmt.Errorf("update %s: %w", key, err)
		}
		if won {
			return kv, nil
		}
		from.Lost(kv)
	}
}

// Delete implements storage.Interface, retrying like GuaranteedUpdate.
func (s *Store) Delete(ctx context.Context, key string, precondition func(current storage.KV) error, opts ...storage.WriteOption) (storage.KV, error) {
	read := func() (storage.KV, error) {
		kv, err := s.Get(ctx, key)
		if err != nil {
			return storage.KV{}, errors.Unwrap(err)
		}
		return kv, nil
	}
	from, err := storage.ApplyWriteOptions(opts).StartFrom(key, read)
	if err != nil {
		return storage.KV{}, fmt.Errorf("delete %s: %w", key, err)
	}
	for {
		if err := from.Check(precondition); err != nil {
			return storage.KV{}, err // a precondition's unchanged, like tryUpdate's
		}
		cur := from.KV
		kv, won, err := s.swap(ctx, cur, func() storage.KV { return s.remove(cur) })
		if err != nil {
			return storage.KV{}, fmt.Errorf("delete %s: %w", key, err)
		}
		if won {
			return kv, nil
		}
		from.Lost(kv)
	}
}

// swap runs write if cur is still the key's value and reports whether it
// did; if not it returns the key's newer value, or ErrNotFound.
func (s *Store) swap(ctx context.Context, cur storage.KV, write func() storage.KV) (storage.KV, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return storage.KV{}, false, err
	}
	now, ok := s.current(cur.Key)
	if !ok {
		return storage.KV{}, false, storage.ErrNotFound
	}
	if now.Revision != cur.Revision {
		return now, false, nil
	}
	return write(), true, nil
}

// List implements storage.Interface.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	start, err := storage.ListStart(prefix, opts)
	if err != nil {
		return storage.ListResult{}, err
	}
	res, err := s.list(ctx, prefix, start, opts)
	if err != nil {
		return storage.ListResult{}, storage.ListError(prefix, opts, err)
	}
	return res, nil
}

func (s *Store) list(ctx context.Context, prefix, start string, opts storage.ListOptions) (storage.ListResult, error) {
	kvs, rev, err := s.snapshot(ctx, prefix, start, opts.Revision)
	if err != nil {
		return storage.ListResult{}, err
	}
	res := storage.ListResult{Revision: rev}
	if opts.Predicate == nil {
		if opts.Limit > 0 && int64(len(kvs)) > opts.Limit {
			remaining := int64(len(kvs)) - opts.Limit
			kvs = kvs[:opts.Limit]
			res.NextKey = storage.KeyAfter(kvs[len(kvs)-1].Key)
			res.RemainingItemCount = &remaining
		}
		res.Items = kvs
		return res, nil
	}
	// The predicate runs without the lock: it is the caller's code.
	for i, kv := range kvs {
		ok, err := opts.Predicate(kv)
		if err != nil {
			return storage.ListResult{}, err
		}
		if !ok {
			continue
		}
		res.Items = append(res.Items, kv)
		if int64(len(res.Items)) == opts.Limit {
			if i < len(kvs)-1 {
				res.NextKey = storage.KeyAfter(kv.Key)
			}
			break
		}
	}
	return res, nil
}

// snapshot returns the keys from start under prefix as of rev (0: now), in
// key order, and the revision read.
func (s *Store) snapshot(ctx context.Context, prefix, start string, rev int64) ([]storage.KV, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, 0, err
	}
	switch {
	case rev == 0:
		rev = s.rev
	case rev > s.rev:
		return nil, 0, fmt.Errorf("%w: requested %d, current %d", storage.ErrFutureRevision, rev, s.rev)
	case rev < s.compacted:
		return nil, 0, &storage.CompactedError{Requested: rev, Compacted: s.compacted}
	}
	var kvs []storage.KV
	for key, vs := range s.history {
		if key < start || !strings.HasPrefix(key, prefix) {
			continue
		}
		// The last version at or before rev.
		i := sort.Search(len(vs), func(i int) bool { return vs[i].rev > rev }) - 1
		if i >= 0 && !vs[i].deleted {
			kvs = append(kvs, storage.KV{Key: key, Value: slices.Clip(vs[i].value), Revision: vs[i].rev})
		}
	}
	slices.SortFunc(kvs, func(a, b storage.KV) int { return strings.Compare(a.Key, b.Key) })
	return kvs, rev, nil
}

// CurrentRevision implements storage.Interface.
func (s *Store) CurrentRevision(ctx context.Context, _ string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return 0, fmt.Errorf("current revision: %w", err)
	}
	return s.rev, nil
}

// Compact implements storage.Interface: versions and events older than
// revision are dropped, except each key's value at revision. Compacting
// at or below an earlier compaction succeeds, as with etcd.
func (s *Store) Compact(ctx context.Context, revision int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("compact at revision %d: %w", revision, err)
	}
	if revision > s.rev {
		return fmt.Errorf("compact at revision %d: %w: current %d", revision, storage.ErrFutureRevision, s.rev)
	}
	if revision <= s.compacted {
		return nil
	}
	s.compacted = revision
	for key, vs := range s.history {
		// Keep the versions after revision and the last one at or before
		// it, unless that one is a deletion.
		i := sort.Search(len(vs), func(i int) bool { return vs[i].rev > revision }) - 1
		if i >= 0 && vs[i].deleted {
			i++
		}
		if i > 0 {
			vs = slices.Delete(vs, 0, i)
		}
		if len(vs) == 0 {
			delete(s.history, key)
		} else {
			s.history[key] = vs
		}
	}
	i := sort.Search(len(s.events), func(i int) bool { return s.events[i].KV.Revision >= revision })
	s.events = slices.Delete(s.events, 0, i)
	// Watches behind the compaction notice it when they next wake.
	s.wake()
	return nil
}

// Healthy implements storage.Interface: an open store is always healthy.
func (s *Store) Healthy(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	return nil
}

// RequestProgress implements storage.Interface.
func (s *Store) RequestProgress(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("request watch progress: %w", err)
	}
	s.progress++
	s.wake()
	return nil
}

// Watch implements storage.Interface. Each watch has one goroutine, which
// ends when ctx ends, after an Error event, or on Close; it reads the
// store's event history, so a slow consumer delays only itself (and keeps
// history from being freed by nothing but compaction, as in etcd).
func (s *Store) Watch(ctx context.Context, prefix string, fromRevision int64) (<-chan storage.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, fmt.Errorf("watch %s: %w", prefix, err)
	}
	if fromRevision == 0 {
		fromRevision = s.rev
	}
	w := &watch{s: s, ctx: ctx, prefix: prefix, from: fromRevision, seen: fromRevision, progress: s.progress,
		out: make(chan storage.Event, 100)}
	s.watches.Add(1)
	go func() {
		defer s.watches.Done()
		defer close(w.out)
		w.run()
	}()
	return w.out, nil
}

// watch is one Watch call's state, owned by its goroutine.
type watch struct {
	s      *Store
	ctx    context.Context
	out    chan storage.Event
	prefix string
	from   int64
	// seen is the revision up to which the history has been sent.
	seen int64
	// progress is the number of RequestProgress calls answered.
	progress int64
}

func (w *watch) run() {
	for {
		batch, progress, wake, err := w.next()
		if err != nil {
			w.send(storage.WatchError(w.prefix, w.from, err))
			return
		}
		for _, e := range batch {
			if !w.send(e) {
				return
			}
		}
		if progress && !w.send(storage.Event{Type: storage.Progress, KV: storage.KV{Revision: w.seen}}) {
			return
		}
		if len(batch) > 0 || progress {
			continue // more may have come while sending
		}
		select {
		case <-wake:
		case <-w.ctx.Done():
			return
		case <-w.s.done:
			return
		}
	}
}

// next returns the unsent events under the prefix (advancing seen to the
// store's revision), whether a progress report is due, and the channel
// that signals the next change.
func (w *watch) next() (batch []storage.Event, progress bool, wake <-chan struct{}, err error) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	// etcd serves a watch from revision r+1 if r+1 is not below the
	// compacted revision.
	if w.seen+1 < s.compacted {
		return nil, false, nil, &storage.CompactedError{Requested: w.from, Compacted: s.compacted}
	}
	i := sort.Search(len(s.events), func(i int) bool { return s.events[i].KV.Revision > w.seen })
	for _, e := range s.events[i:] {
		if strings.HasPrefix(e.KV.Key, w.prefix) {
			batch = append(batch, e)
		}
	}
	// A watch from a future revision waits for it, as etcd's does.
	w.seen = max(w.seen, s.rev)
	progress = w.progress != s.progress
	w.progress = s.progress
	return batch, progress, s.changed, nil
}

// send delivers e unless the watch ends first; it reports whether it did.
func (w *watch) send(e storage.Event) bool {
	select {
	case w.out <- e:
		return true
	case <-w.ctx.Done():
		return false
	case <-w.s.done:
		return false
	}
}
