package registry

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"time"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/storage/trace"
	"github.com/corekube/corekube/watch"
	"github.com/corekube/corekube/watch/rawproto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Options configure a Store beyond its Strategy.
type Options struct {
	// Admission runs on every write; nil admits everything.
	Admission *admission.Chain
	// ReturnDeletedObject makes DELETE answer the deleted object rather than
	// a Success Status (kube does so for pods).
	ReturnDeletedObject bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger is for the watch cache; nil means slog.Default().
	Logger *slog.Logger
	// WatchCacheSize is how many recent events the watch cache keeps; 0
	// means the cache's default.
	WatchCacheSize int
	// BookmarkInterval is how often watches that allow bookmarks get one;
	// 0 means the cache's default (a minute).
	BookmarkInterval time.Duration
	// TypeConverter turns on metadata.managedFields tracking and
	// server-side apply; nil leaves both off.
	TypeConverter TypeConverterSource
	// WatchMetrics, when set, receives the watch cache's metrics
	// (watch.NewMetrics, one per server).
	WatchMetrics *watch.Metrics
	// StorageMediaType is how objects are written to storage:
	// MediaTypeProtobuf ("", kube's default) or MediaTypeJSON
	// (CheckStorageMediaType); either is read.
	StorageMediaType string
	// NoWatchCache, when set, says which resources keep no watch cache
	// (kube's --watch-cache-sizes RESOURCE#0 and --watch-cache=false):
	// their LISTs read etcd, and each of their watches is an etcd watch
	// of its own (see watch.Config.Disabled). nil caches every resource.
	NoWatchCache func(schema.GroupResource) bool
}

// Store implements every REST verb of one resource over storage.Interface.
// Resource-specific behaviour comes from its Strategy; everything else
// (metadata, resourceVersion, preconditions, dry run, graceful deletion,
// finalizers, selectors, pagination) is here, once.
type Store struct {
	storage  storage.Interface
	strategy Strategy
	info     ResourceInfo
	prefix   string // "/<resource>/", under the store's --etcd-prefix
	opts     Options

	// update is the strategy for updates: strategy itself, or a
	// subresource's StatusStrategy.
	update      StatusStrategy
	subresource string
	// fields records managedFields and merges applies for this resource
	// or subresource.
	fields *fieldTracker

	fieldLabels sets.Set[string]
	// writeOpts go with every create and update: the strategy's TTL.
	writeOpts []storage.WriteOption
	// cache serves WATCH and most LISTs; Run keeps it current.
	cache *watch.Cache
	// written holds this server's writes the cache has not caught up
	// with yet, for the next write of the key to start from.
	written *recentWrites
	// converted: the objects are stored in another version than the one
	// served (StorageVersionConverter), which the cache holds.
	converted bool
	// cached is the storage the watch cache reads, whose values
	// cache.Object takes: storage itself for a converted resource, else
	// the storage below it, values as stored.
	cached storage.Interface
}

// NewStore returns the Store of the resource described by strategy.
func NewStore(st storage.Interface, strategy Strategy, opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	info := strategy.Info()
	// Values are stored in the configured media type (read in either).
	newStored := strategy.New
	conv, converted := strategy.(StorageVersionConverter)
	if converted {
		newStored = conv.NewStored
	}
	raw, codec := st, newStorageCodec(newStored, opts.StorageMediaType)
	st = newConvertingStorage(st, codec)
	// The watch cache reads values as stored (watch.Config.MessageJSON),
	// keeping an object stored as protobuf as its message: its JSON is
	// made on demand, so the cache holds one encoding per object, the
	// smaller one, and protobuf readers copy it.
	cached, messageJSON := raw, codec.messageJSON
	if converted {
		// Another version's objects, converted on every read and write.
		st = newConvertingStorage(st, conv)
		// The cache holds the served version's encoding (JSON), as
		// converted.
		cached, messageJSON = st, nil
	}
	_, fieldSet, _ := strategy.GetAttrs(strategy.New())
	labels := sets.New[string]()
	for k := range fieldSet {
		labels.Insert(k)
	}
	s := &Store{
		storage:     st,
		strategy:    strategy,
		info:        info,
		prefix:      keyPrefix(info),
		opts:        opts,
		update:      strategy,
		fields:      &fieldTracker{},
		fieldLabels: labels,
		writeOpts:   writeOptions(strategy, keyPrefix(info)),
		converted:   converted,
		written:     newRecentWrites(),
		cached:      cached,
	}
	cacheCfg := watch.Config{
		Storage:          cached,
		MessageJSON:      messageJSON,
		Prefix:           s.prefix,
		Decode:           s.decodeForCache,
		DecodeObject:     s.decode,
		WindowSize:       opts.WatchCacheSize,
		BookmarkInterval: opts.BookmarkInterval,
		Logger:           opts.Logger,
		Metrics:          opts.WatchMetrics,
		Resource:         info.GroupResource().String(),
		Kind:             info.GroupVersion().WithKind(info.Kind),
		Disabled:         opts.NoWatchCache != nil && opts.NoWatchCache(info.GroupResource()),
	}
	if messageJSON != nil {
		if _, ok := strategy.New().(protoUnmarshaler); ok {
			// Kept messages decode as they are (no JSON made for it).
			cacheCfg.DecodeMessage, cacheCfg.DecodeMessageObject = s.decodeMessageForCache, s.decodeMessage
		}
	}
	if ix, ok := strategy.(WatchIndexStrategy); ok {
		cacheCfg.IndexField = ix.WatchIndexField()
	}
	if t := reflect.TypeOf(strategy.New()); t.Kind() == reflect.Pointer {
		// Types without a protobuf form (custom resources) have none.
		cacheCfg.Transcoder, _ = rawproto.NewTranscoder(t.Elem())
	}
	s.cache = watch.New(cacheCfg)
	return s
}

// keyPrefix is the storage key prefix of a resource's objects.
func keyPrefix(info ResourceInfo) string { return "/" + info.Resource + "/" }

// writeOptions are the storage options of every create and update of a
// resource: an expiry for a TTLStrategy, with its objects' leases kept
// apart from other resources'.
func writeOptions(strategy Strategy, prefix string) []storage.WriteOption {
	ts, ok := strategy.(TTLStrategy)
	if !ok || ts.TTL() <= 0 {
		return nil
	}
	return []storage.WriteOption{storage.WithTTL(prefix, ts.TTL())}
}

// Subresource returns a Store for the named subresource (status, finalize)
// that shares this Store's storage but updates through ss: only what ss
// lets through changes.
func (s *Store) Subresource(name string, ss StatusStrategy) *Store {
	sub := *s
	sub.update = ss
	sub.subresource = name
	sub.fields = &fieldTracker{}
	return &sub
}

// Info describes the resource.
func (s *Store) Info() ResourceInfo { return s.info }

// Strategy returns the resource's strategy.
func (s *Store) Strategy() Strategy { return s.strategy }

// New returns an empty object of the resource's type.
func (s *Store) New() runtime.Object { return s.strategy.New() }

// key returns the storage key of one object.
func (s *Store) key(namespace, name string) string {
	if s.info.Namespaced {
		return s.prefix + namespace + "/" + name
	}
	return s.prefix + name
}

// listPrefix returns the key prefix of a list; namespace "" lists all.
func (s *Store) listPrefix(namespace string) string {
	if s.info.Namespaced && namespace != "" {
		return s.prefix + namespace + "/"
	}
	return s.prefix
}

// Get returns one object.
func (s *Store) Get(ctx context.Context, namespace, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	if opts != nil {
		if opts.ResourceVersion == "0" {
			// Any version will do (the API's "Any" semantics): the
			// watch cache's copy, as kube-apiserver serves it. The
			// kubelet asks so for its node before each status update,
			// to keep those reads off etcd. A key the cache does not
			// have (not ready, or written an instant ago) is read from
			// etcd, which is at least as new.
			if obj, ok := s.Cached(namespace, name); ok {
				return obj, nil
			}
		}
		if err := s.reachedResourceVersion(ctx, opts.ResourceVersion); err != nil {
			return nil, err
		}
	}
	tr := trace.From(ctx)
	tr.Mark(trace.StorageRead)
	kv, err := s.storage.Get(ctx, s.key(namespace, name))
	tr.Mark(trace.StorageReadDone)
	if err != nil {
		return nil, toAPIError(err, s.info.GroupResource(), name)
	}
	obj, err := s.decode(kv)
	if err != nil {
		return nil, toAPIError(err, s.info.GroupResource(), name)
	}
	return obj, nil
}

// reachedResourceVersion returns once the store has reached the GET's
// resourceVersion ("" or "0": at once), else kube's 504 "Too large
// resource version". The read that follows is from etcd, which is at
// least as new as the cache, so "no older than rv" holds. The wait is the
// LIST's (watch.Cache.WaitForRevision: a few seconds for the cache to
// catch up, with progress requests to etcd); without a cache, etcd's
// current revision decides at once.
func (s *Store) reachedResourceVersion(ctx context.Context, resourceVersion string) error {
	if resourceVersion == "" || resourceVersion == "0" {
		return nil
	}
	rv, err := strconv.ParseInt(resourceVersion, 10, 64)
	if err != nil || rv < 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %q", resourceVersion))
	}
	if !s.cache.Disabled() {
		if err := s.cache.WaitForRevision(ctx, rv); err != nil {
			return s.cacheError(err)
		}
		return nil
	}
	current, err := s.storage.CurrentRevision(ctx, s.listPrefix(""))
	if err != nil {
		return toAPIError(err, s.info.GroupResource(), "")
	}
	if rv > current {
		return tooLargeResourceVersion(rv, current)
	}
	return nil
}

func (s *Store) now() metav1.Time {
	return metav1.NewTime(s.opts.Now().Truncate(time.Second))
}

// admit runs the mutating (validate false) or validating half of the
// admission chain on one write of this Store's resource or subresource;
// options is the request's *metav1.CreateOptions, UpdateOptions or
// DeleteOptions.
func (s *Store) admit(ctx context.Context, op admission.Operation, name, namespace string, obj, old runtime.Object, dryRun bool, options runtime.Object, validate bool) error {
	if s.opts.Admission == nil {
		return nil
	}
	a := &admission.Attributes{
		Operation:   op,
		Kind:        s.info.GroupVersion().WithKind(s.info.Kind),
		Resource:    s.info.GroupVersion().WithResource(s.info.Resource),
		Subresource: s.subresource,
		Namespace:   namespace,
		Name:        name,
		Object:      obj,
		OldObject:   old,
		DryRun:      dryRun,
		Options:     options,
	}
	if validate {
		return s.opts.Admission.Validate(ctx, a)
	}
	return s.opts.Admission.Mutate(ctx, a)
}

// AdmitCreate admits the CREATE of a subresource that acts rather than
// stores (pods/binding, pods/eviction, serviceaccounts/token): kube runs
// the chain on the subresource's own object (a Binding, an Eviction, a
// TokenRequest), of kind, before the action. Mutating plugins run, then
// validating ones.
func (s *Store) AdmitCreate(ctx context.Context, subresource string, kind schema.GroupVersionKind, namespace, name string, obj runtime.Object, dryRun bool) error {
	if s.opts.Admission == nil {
		return nil
	}
	a := &admission.Attributes{
		Operation:   admission.Create,
		Kind:        kind,
		Resource:    s.info.GroupVersion().WithResource(s.info.Resource),
		Subresource: subresource,
		Namespace:   namespace,
		Name:        name,
		Object:      obj,
		DryRun:      dryRun,
		Options:     createOptions(dryRun),
	}
	return s.opts.Admission.Admit(ctx, a)
}

// WithoutAdmission returns a Store that writes without the admission
// chain, for the writes a subresource makes on behalf of a request that
// was admitted as itself (kube's binding and eviction storage write the
// pod directly).
func (s *Store) WithoutAdmission() *Store {
	c := *s
	c.opts.Admission = nil
	return &c
}

// createOptions and updateOptions are the options admission sees for the
// Store's own options.
func createOptions(dryRun bool) *metav1.CreateOptions {
	o := &metav1.CreateOptions{}
	if dryRun {
		o.DryRun = []string{metav1.DryRunAll}
	}
	return o
}

func updateOptions(dryRun bool) *metav1.UpdateOptions {
	o := &metav1.UpdateOptions{}
	if dryRun {
		o.DryRun = []string{metav1.DryRunAll}
	}
	return o
}

func accessor(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		// Every type a Strategy returns has ObjectMeta; anything else is a
		// programming error, not bad input.
		panic(err)
	}
	return m
}

// ReturnsDeletedObject reports whether DELETE answers the deleted object
// (true) or a Success Status (false).
func (s *Store) ReturnsDeletedObject() bool { return s.opts.ReturnDeletedObject }
