// Package etcd implements storage.Interface over etcd v3, and runs an
// embedded single-member etcd for clusters that bring no etcd of their own.
//
// It is the only package that imports the etcd client. Keys are stored
// as given under the store's prefix (WithPrefix: kube-apiserver's
// --etcd-prefix), values as opaque bytes (those of pods and events
// compressed with WithCompression, compress.go), and the storage revision
// of a key is its etcd mod revision.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/corekube/corekube/storage"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var _ storage.Interface = (*Store)(nil)

// Store is a storage.Interface backed by etcd. It is safe for concurrent use.
type Store struct {
	client *clientv3.Client
	// kv and watcher are the client's, under prefix: every key read,
	// written and watched is prefix+key.
	kv            clientv3.KV
	watcher       clientv3.Watcher
	prefix        string
	listBatch     int64
	healthTimeout time.Duration
	leaseConfig   LeaseConfig
	// leases attaches keys written with a TTL to shared etcd leases.
	leases *leaseManager
	// registerer is where WithMetrics puts the metrics; metrics records
	// them (nil: none).
	registerer prometheus.Registerer
	metrics    *metrics
	// compress writes the values of compressedResources compressed;
	// compressAll, for tests, writes every value with that dictionary.
	compress    bool
	compressAll *dictionary
}

// Option configures a Store.
type Option func(*Store)

// WithListBatch sets how many keys a filtered List reads per etcd request
// (default 500). Larger batches mean fewer round trips and more memory.
func WithListBatch(n int64) Option {
	return func(s *Store) {
		if n > 0 {
			s.listBatch = n
		}
	}
}

// WithHealthTimeout bounds the read Healthy makes (default 2s).
func WithHealthTimeout(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.healthTimeout = d
		}
	}
}

// WithLeaseConfig tunes how keys written with a TTL share leases (default
// kube-apiserver's: reused for up to a minute, 1,000 keys per lease).
func WithLeaseConfig(c LeaseConfig) Option {
	return func(s *Store) { s.leaseConfig = c }
}

// WithCompression writes the values of pods and events compressed (see
// compressedPrefix) when on. A store reads compressed values either way.
func WithCompression(on bool) Option {
	return func(s *Store) { s.compress = on }
}

// WithPrefix keeps every key under prefix in etcd, as kube-apiserver's
// --etcd-prefix: key K is stored as prefix+K, so that clusters with
// different prefixes can share one etcd. The prefix is cleaned as kube
// cleans it ("registry" and "/registry/" both mean "/registry"; "/" means
// none).
func WithPrefix(prefix string) Option {
	return func(s *Store) { s.prefix = CleanPrefix(prefix) }
}

// WithMetrics records kube-apiserver's etcd metrics in reg:
// etcd_request_duration_seconds, etcd_requests_total and
// etcd_request_errors_total by operation and type (the resource, from the
// key's first segment; see SetMetricsName), the storage LIST, watch event
// and bookmark counters, and apiserver_storage_size_bytes. nil records
// nothing.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(s *Store) { s.registerer = reg }
}

// SetMetricsName labels the requests for keys under "/"+resource+"/"
// with name in the metrics' type and resource labels: kube's group
// resource ("leases.coordination.k8s.io"); without it the label is the
// key segment itself, which is the same for the core group. Call it
// before the first request under the prefix.
func (s *Store) SetMetricsName(resource, name string) {
	if s.metrics != nil {
		s.metrics.setName(resource, name)
	}
}

// CleanPrefix is prefix as the store uses it: absolute, without a
// trailing slash ("" for the root).
func CleanPrefix(prefix string) string {
	return strings.TrimSuffix(path.Join("/", prefix), "/")
}

// New returns a Store using client. The caller keeps ownership of client
// and closes it after the Store is no longer used.
func New(client *clientv3.Client, opts ...Option) *Store {
	s := &Store{client: client, listBatch: 500, healthTimeout: 2 * time.Second}
	for _, opt := range opts {
		opt(s)
	}
	s.kv, s.watcher = client.KV, client.Watcher
	if s.prefix != "" {
		s.kv, s.watcher = namespace.NewKV(client.KV, s.prefix), namespace.NewWatcher(client.Watcher, s.prefix)
	}
	s.leases = newLeaseManager(client.Lease, s.leaseConfig)
	if s.registerer != nil {
		s.metrics = newMetrics(s.registerer)
		s.leases.granted = func(n int64) { s.metrics.leaseObjects.Observe(float64(n)) }
		s.registerer.MustRegister(&sizeCollector{client: client})
	}
	return s
}

// Get returns the current value of key with a linearizable read.
func (s *Store) Get(ctx context.Context, key string) (storage.KV, error) {
	kv, err := s.get(ctx, key)
	if err != nil {
		return storage.KV{}, fmt.Errorf("get %s: %w", key, err)
	}
	return kv, nil
}

// get is Get without the error context, for methods that add their own.
func (s *Store) get(ctx context.Context, key string) (storage.KV, error) {
	start := s.metrics.now()
	resp, err := s.kv.Get(ctx, key)
	s.metrics.record(opGet, key, start, err)
	if err != nil {
		return storage.KV{}, translate(err)
	}
	if len(resp.Kvs) == 0 {
		return storage.KV{}, storage.ErrNotFound
	}
	return toKV(resp.Kvs[0])
}

// Create stores value under key unless the key exists. With a TTL the key
// is attached to a lease (see WriteOptions.TTL).
func (s *Store) Create(ctx context.Context, key string, value []byte, opts ...storage.WriteOption) (storage.KV, error) {
	o := storage.ApplyWriteOptions(opts)
	for retried := false; ; retried = true {
		lease, err := s.lease(ctx, o)
		if err != nil {
			return storage.KV{}, fmt.Errorf("create %s: %w", key, err)
		}
		// No Else branch: the existing value is of no use to the caller.
		start := s.metrics.now()
		resp, err := s.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, s.encodeValue(key, value), clientv3.WithLease(lease))).
			Commit()
		s.metrics.record(opCreate, key, start, err)
		if err != nil && !retried && s.leases.staleLease(o.LeaseScope, lease, err) {
			continue
		}
		if err != nil {
			return storage.KV{}, fmt.Errorf("create %s: %w", key, translate(err))
		}
		if !resp.Succeeded {
			return storage.KV{}, fmt.Errorf("create %s: %w", key, storage.ErrAlreadyExists)
		}
		return storage.KV{Key: key, Value: value, Revision: resp.Header.Revision}, nil
	}
}

// lease returns the lease a write with options o attaches its key to:
// clientv3.NoLease without a TTL, which also detaches a key from a lease
// it had.
func (s *Store) lease(ctx context.Context, o storage.WriteOptions) (clientv3.LeaseID, error) {
	if o.TTL <= 0 {
		return clientv3.NoLease, nil
	}
	id, err := s.leases.get(ctx, o.LeaseScope, o.TTL)
	if err != nil {
		return clientv3.NoLease, fmt.Errorf("grant a lease of %v: %w", o.TTL, translate(err))
	}
	return id, nil
}

// GuaranteedUpdate implements storage.Interface. Each attempt is one
// transaction that either writes or, when another writer got there first,
// returns the newer value to retry with. With a TTL every write takes a
// lease anew, so the key expires TTL after its last change (kube's generic
// store applies its TTLFunc on update too).
func (s *Store) GuaranteedUpdate(ctx context.Context, key string, tryUpdate storage.UpdateFunc, opts ...storage.WriteOption) (storage.KV, error) {
	o := storage.ApplyWriteOptions(opts)
	read := func() (storage.KV, error) { return s.get(ctx, key) }
	from, err := o.StartFrom(key, read)
	if err != nil {
		return storage.KV{}, fmt.Errorf("update %s: %w", key, err)
	}
	leaseRetried := false
	for {
		value, write, kv, err := from.Attempt(tryUpdate)
		if !write {
			return kv, err
		}
		cur := from.KV
		lease, err := s.lease(ctx, o)
		if err != nil {
			return storage.KV{}, fmt.Errorf("update %s: %w", key, err)
		}
		start := s.metrics.now()
		resp, err := s.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.Revision)).
			Then(clientv3.OpPut(key, s.encodeValue(key, value), clientv3.WithLease(lease))).
			Else(clientv3.OpGet(key)).
			Commit()
		s.metrics.record(opUpdate, key, start, err)
		if err != nil && !leaseRetried && s.leases.staleLease(o.LeaseScope, lease, err) {
			leaseRetried = true
			continue
		}
		if err != nil {
			return storage.KV{}, fmt.Errorf("update %s: %w", key, translate(err))
		}
		if resp.Succeeded {
			return storage.KV{Key: key, Value: value, Revision: resp.Header.Revision}, nil
		}
		stored, err := elseKV(resp)
		if err != nil {
			return storage.KV{}, fmt.Errorf("update %s: %w", key, err)
		}
		from.Lost(stored)
	}
}

// Delete implements storage.Interface. Like GuaranteedUpdate it retries
// with the value a lost compare-and-swap returns.
func (s *Store) Delete(ctx context.Context, key string, precondition func(current storage.KV) error, opts ...storage.WriteOption) (storage.KV, error) {
	from, err := storage.ApplyWriteOptions(opts).StartFrom(key, func() (storage.KV, error) { return s.get(ctx, key) })
	if err != nil {
		return storage.KV{}, fmt.Errorf("delete %s: %w", key, err)
	}
	for {
		if err := from.Check(precondition); err != nil {
			return storage.KV{}, err // a precondition's unchanged, like tryUpdate's
		}
		cur := from.KV
		// The compare pins the deleted value to cur, so there is no need to
		// ask etcd for it (WithPrevKV) again.
		start := s.metrics.now()
		resp, err := s.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", cur.Revision)).
			Then(clientv3.OpDelete(key)).
			Else(clientv3.OpGet(key)).
			Commit()
		s.metrics.record(opDelete, key, start, err)
		if err != nil {
			return storage.KV{}, fmt.Errorf("delete %s: %w", key, translate(err))
		}
		if resp.Succeeded {
			cur.Revision = resp.Header.Revision
			return cur, nil
		}
		stored, err := elseKV(resp)
		if err != nil {
			return storage.KV{}, fmt.Errorf("delete %s: %w", key, err)
		}
		from.Lost(stored)
	}
}

// elseKV returns the key read by the OpGet in the Else branch of a failed
// compare-and-swap.
func elseKV(resp *clientv3.TxnResponse) (storage.KV, error) {
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return storage.KV{}, storage.ErrNotFound
	}
	return toKV(kvs[0])
}

// List implements storage.Interface.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	start, err := storage.ListStart(prefix, opts)
	if err != nil {
		return storage.ListResult{}, err
	}
	var (
		res storage.ListResult
		// The cost of the LIST, counted even when it fails, as kube does.
		cost listCost
	)
	if opts.Predicate == nil {
		res, err = s.listPage(ctx, start, prefix, opts, &cost)
	} else {
		res, err = s.listFiltered(ctx, start, prefix, opts, &cost)
	}
	s.metrics.recordList(prefix, cost.fetched, cost.evaluated, len(res.Items))
	if err != nil {
		return storage.ListResult{}, storage.ListError(prefix, opts, err)
	}
	return res, nil
}

// listCost counts the objects a LIST read from etcd and tested against
// its predicate, for the metrics.
type listCost struct{ fetched, evaluated int }

// rangeList is one range request of a LIST, counted in the metrics.
func (s *Store) rangeList(ctx context.Context, start, prefix string, rev, limit int64, cost *listCost) (*clientv3.GetResponse, error) {
	began := s.metrics.now()
	resp, err := s.kv.Get(ctx, start, rangeOpts(prefix, rev, limit)...)
	s.metrics.record(opList, prefix, began, err)
	if err != nil {
		return nil, translate(err)
	}
	cost.fetched += len(resp.Kvs)
	return resp, nil
}

// listPage reads one page with a single range request; etcd returns keys in
// ascending order and counts the whole range, which gives the remaining
// item count for free.
func (s *Store) listPage(ctx context.Context, start, prefix string, opts storage.ListOptions, cost *listCost) (storage.ListResult, error) {
	resp, err := s.rangeList(ctx, start, prefix, opts.Revision, opts.Limit, cost)
	if err != nil {
		return storage.ListResult{}, err
	}
	cost.evaluated += len(resp.Kvs) // no predicate: every object is taken
	res := storage.ListResult{Items: make([]storage.KV, len(resp.Kvs)), Revision: readRevision(opts.Revision, resp)}
	for i, kv := range resp.Kvs {
		if res.Items[i], err = toKV(kv); err != nil {
			return storage.ListResult{}, err
		}
	}
	if resp.More && len(resp.Kvs) > 0 {
		res.NextKey = storage.KeyAfter(res.Items[len(res.Items)-1].Key)
		remaining := resp.Count - int64(len(resp.Kvs))
		res.RemainingItemCount = &remaining
	}
	return res, nil
}

// listFiltered reads batches at one pinned revision until it has
// opts.Limit matches or the range is exhausted.
func (s *Store) listFiltered(ctx context.Context, start, prefix string, opts storage.ListOptions, cost *listCost) (storage.ListResult, error) {
	batch := max(opts.Limit, s.listBatch)
	res := storage.ListResult{Revision: opts.Revision}
	for {
		resp, err := s.rangeList(ctx, start, prefix, res.Revision, batch, cost)
		if err != nil {
			return storage.ListResult{}, err
		}
		// Later batches must see the same snapshot as the first.
		res.Revision = readRevision(res.Revision, resp)
		for i, ekv := range resp.Kvs {
			kv, err := toKV(ekv)
			if err != nil {
				return storage.ListResult{}, err
			}
			cost.evaluated++
			ok, err := opts.Predicate(kv)
			if err != nil {
				return storage.ListResult{}, err
			}
			if !ok {
				continue
			}
			res.Items = append(res.Items, kv)
			if int64(len(res.Items)) == opts.Limit {
				if i < len(resp.Kvs)-1 || resp.More {
					res.NextKey = storage.KeyAfter(kv.Key)
				}
				return res, nil
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return res, nil
		}
		start = storage.KeyAfter(string(resp.Kvs[len(resp.Kvs)-1].Key))
	}
}

func rangeOpts(prefix string, rev, limit int64) []clientv3.OpOption {
	opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix))}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(limit))
	}
	return opts
}

// readRevision is the revision a range was served at: the requested one, or
// for a latest read the header's.
func readRevision(requested int64, resp *clientv3.GetResponse) int64 {
	if requested > 0 {
		return requested
	}
	return resp.Header.Revision
}

// Watch implements storage.Interface. A zero fromRevision is resolved to
// the current revision before Watch returns, so the caller sees every
// change made after the call.
func (s *Store) Watch(ctx context.Context, prefix string, fromRevision int64) (<-chan storage.Event, error) {
	if fromRevision == 0 {
		rev, err := s.CurrentRevision(ctx, prefix)
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", prefix, err)
		}
		fromRevision = rev
	}
	// WithRequireLeader makes etcd cancel the watch when its member loses
	// the leader instead of leaving it silently stale.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	wch := s.watcher.Watch(wctx, prefix,
		clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithProgressNotify(),
		clientv3.WithRev(fromRevision+1))

	// Buffered so that bursts, such as a replay of history, do not cost a
	// goroutine handoff per event. (clientv3 buffers without bound behind
	// it, so a slow consumer never stalls other watches.)
	out := make(chan storage.Event, 100)
	go func() {
		defer close(out)
		defer cancel() // releases the etcd watch when we stop early
		w := watcher{ctx: ctx, out: out, prefix: prefix, from: fromRevision, metrics: s.metrics.watchType(prefix)}
		w.run(wch)
	}()
	return out, nil
}

type watcher struct {
	ctx    context.Context
	out    chan<- storage.Event
	prefix string
	from   int64
	// metrics counts the watch's events and bookmarks (nil: no metrics).
	metrics *typeMetrics
}

func (w *watcher) run(wch clientv3.WatchChan) {
	for {
		select {
		case <-w.ctx.Done():
			return
		case resp, ok := <-wch:
			if !ok {
				// etcd also closes the channel when ctx ends; only a close
				// nobody asked for is an error.
				if w.ctx.Err() == nil {
					w.fail(fmt.Errorf("%w: watch channel closed", storage.ErrUnavailable))
				}
				return
			}
			if !w.handle(resp) {
				return
			}
		}
	}
}

// handle forwards one etcd response and reports whether to go on.
func (w *watcher) handle(resp clientv3.WatchResponse) bool {
	switch {
	case resp.CompactRevision != 0:
		w.fail(&storage.CompactedError{Requested: w.from, Compacted: resp.CompactRevision})
		return false
	case resp.Err() != nil:
		w.fail(translate(resp.Err()))
		return false
	case resp.IsProgressNotify():
		w.metrics.bookmark()
		return w.send(storage.Event{Type: storage.Progress, KV: storage.KV{Revision: resp.Header.Revision}})
	}
	w.metrics.events(len(resp.Events))
	for _, ev := range resp.Events {
		e, err := toEvent(ev)
		if err != nil {
			w.fail(err)
			return false
		}
		if !w.send(e) {
			return false
		}
	}
	return true
}

func (w *watcher) fail(err error) {
	w.send(storage.WatchError(w.prefix, w.from, err))
}

// send delivers e unless ctx ends first; it reports whether it did.
func (w *watcher) send(e storage.Event) bool {
	select {
	case w.out <- e:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// toEvent converts an etcd event, its values decoded (decodeValue).
func toEvent(ev *clientv3.Event) (storage.Event, error) {
	var prev []byte
	if ev.PrevKv != nil {
		var err error
		if prev, err = decodeValue(ev.PrevKv.Value); err != nil {
			return storage.Event{}, fmt.Errorf("previous value of %s at revision %d: %w", ev.Kv.Key, ev.Kv.ModRevision, err)
		}
	}
	if ev.Type == mvccpb.DELETE {
		return storage.Event{
			Type:      storage.Deleted,
			KV:        storage.KV{Key: string(ev.Kv.Key), Value: prev, Revision: ev.Kv.ModRevision},
			PrevValue: prev,
		}, nil
	}
	kv, err := toKV(ev.Kv)
	if err != nil {
		return storage.Event{}, err
	}
	if ev.IsCreate() {
		return storage.Event{Type: storage.Added, KV: kv}, nil
	}
	return storage.Event{Type: storage.Modified, KV: kv, PrevValue: prev}, nil
}

// CurrentRevision returns the latest revision with a linearizable read of
// a single key's count, the cheapest request that carries it. The metrics
// count it as kube counts its equivalent (a one-item read of the
// resource's prefix key): a "get" of prefix's type, and a LIST from
// storage that read nothing.
func (s *Store) CurrentRevision(ctx context.Context, prefix string) (int64, error) {
	start := s.metrics.now()
	resp, err := s.kv.Get(ctx, "/", clientv3.WithCountOnly())
	s.metrics.record(opGet, prefix, start, err)
	s.metrics.recordList(prefix, 0, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("current revision: %w", translate(err))
	}
	return resp.Header.Revision, nil
}

// Compact discards history before revision. Compacting at or below an
// earlier compaction succeeds: the history is gone either way.
func (s *Store) Compact(ctx context.Context, revision int64) error {
	_, err := s.client.Compact(ctx, revision)
	if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("compact at revision %d: %w", revision, translate(err))
	}
	return nil
}

// Healthy makes a linearizable read, which needs a leader and a quorum,
// within the health timeout (or ctx's deadline if sooner).
func (s *Store) Healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.healthTimeout)
	defer cancel()
	if _, err := s.kv.Get(ctx, "health", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("health check: %w: %w", storage.ErrUnavailable, err)
	}
	return nil
}

// toKV converts a key etcd returned, its value decoded (decodeValue).
func toKV(kv *mvccpb.KeyValue) (storage.KV, error) {
	value, err := decodeValue(kv.Value)
	if err != nil {
		return storage.KV{}, fmt.Errorf("value of %s at revision %d: %w", kv.Key, kv.ModRevision, err)
	}
	return storage.KV{Key: string(kv.Key), Value: value, Revision: kv.ModRevision}, nil
}

// translate maps etcd client errors onto the storage sentinels, keeping the
// original error in the chain for logs and errors.Is.
func translate(err error) error {
	var sentinel error
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		sentinel = storage.ErrCompacted
	case errors.Is(err, rpctypes.ErrFutureRev):
		sentinel = storage.ErrFutureRevision
	case errors.Is(err, context.DeadlineExceeded), unavailable(err):
		return &storage.UnavailableError{Err: err}
	default:
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

// unavailable reports gRPC errors that mean etcd could not serve the
// request now (no leader, timeouts, connection lost) as opposed to
// rejecting it.
func unavailable(err error) bool {
	code := status.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	return code == codes.Unavailable || code == codes.DeadlineExceeded
}

// RequestProgress implements storage.Interface. etcd answers on the watch
// stream the request's context selects; every watch here is opened with
// WithRequireLeader, so the same metadata reaches the same stream.
func (s *Store) RequestProgress(ctx context.Context) error {
	if err := s.watcher.RequestProgress(clientv3.WithRequireLeader(ctx)); err != nil {
		return translate(fmt.Errorf("request watch progress: %w", err))
	}
	return nil
}
