// Package watch is corekube's watch cache. For each resource one goroutine
// owns one etcd watch and keeps, in memory, the current state of every
// object and a sliding window of recent events. LIST and WATCH are served
// from it: an object is decoded (and serialized) once per revision, not once
// per reader, and watchers never open etcd watches of their own.
package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/watch/rawproto"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Object is one object at one revision as the cache keeps it: one
// encoding for good (its primary: the JSON, resourceVersion included, of
// an object stored as JSON; the protobuf message, resourceVersion set, of
// one stored as kube's protobuf), a memo of the other encoding (see
// memoMu), and the labels and fields selectors match on. The typed object
// is decoded only on demand (Tables, YAML, GetCached): kept decoded, a pod
// takes ~4× its encoded size, most of it small maps the garbage collector
// must walk. Nothing may modify an Object after it is cached.
type Object struct {
	Key      string
	Revision int64
	Labels   Attrs
	Fields   Attrs

	// data is the primary encoding: the JSON, or with proto (below) the
	// protobuf message (no envelope: watch/rawproto writes it), without
	// its managedFields entries when it has entries (message.go).
	data []byte
	// spliceAt and spliceLen locate in a JSON data the resourceVersion
	// the cache spliced into the stored value (spliceLen 0: data is no
	// splice).
	spliceAt, spliceLen int32
	// entriesAt is where in a protobuf data its entries go back.
	entriesAt int32
	// entries are a protobuf message's managedFields entries, shared with
	// other objects' equal ones (message.go); nil when data is the whole
	// message.
	entries []string
	// codec makes the other encoding and decodes; nil for bookmarks.
	codec *codec

	// shared is the decoded object, once Shared has been asked for it.
	sharedOnce sync.Once
	shared     runtime.Object
	sharedErr  error

	// memoMu guards the memo of the encoding that is not the primary (the
	// protobuf of a JSON object, the JSON of a protobuf one) and recent.
	// The memo is held strongly only while the object is one of the
	// window's recent events (recent): then every watcher of the event
	// shares one encoding. Once the event leaves the window, or for an
	// object only listed, it is held weakly: readers close together in
	// time (a LIST's pages, the watchers of one event) still share it,
	// but the garbage collector drops it, so that the cache keeps one
	// encoding per object rather than two, whoever reads it. The memo
	// also keeps a failed encoding's error.
	memoMu     sync.Mutex
	memoStrong *encoding
	memoWeak   weak.Pointer[encoding]
	recent     bool
	// proto: data is the protobuf message (set once, before the Object
	// is shared; here, beside recent, it costs no word of its own).
	proto bool

	// sizesObserved has a bit per encoding (JSON, protobuf) and event
	// type whose size apiserver_watch_events_sizes has observed
	// (RecordSentShared).
	sizesObserved atomic.Uint32
}

// codec is what the objects of a cache share to make one encoding from
// the other and to decode them.
type codec struct {
	decode ObjectDecodeFunc
	// decodeMessage decodes a kept protobuf message of the cache's own
	// envelope (Config.DecodeMessageObject); nil decodes the JSON.
	decodeMessage ObjectDecodeFunc
	// transcoder writes the protobuf encoding from the JSON; nil when the
	// type has none (the object is then decoded and marshalled).
	transcoder *rawproto.Transcoder
	// messageJSON writes the JSON from the protobuf message
	// (Config.MessageJSON), env naming the apiVersion and kind the
	// message was stored with.
	messageJSON func(dst []byte, env rawproto.Envelope, msg []byte) ([]byte, error)
	env         rawproto.Envelope
}

// encoding is one encoding of an object, or why there is none.
type encoding struct {
	data []byte
	err  error
}

// JSON returns the object's JSON encoding: its primary, or the memo,
// made from the protobuf message when there is none (which may fail).
// The bytes are shared and must not be modified.
func (o *Object) JSON() ([]byte, error) {
	if o.data == nil {
		return nil, errors.New("watch: object has no encoding")
	}
	if !o.proto {
		return o.data, nil
	}
	return o.memo()
}

// Protobuf returns the object's protobuf message (without kube's envelope:
// no magic, no runtime.Unknown; watch/rawproto writes them): its primary,
// or the memo, computed from the JSON when there is none. Concurrent
// first callers wait for one computation rather than repeat it. The bytes
// are shared and must not be modified. A message kept in pieces (see
// message.go) is put together in a new slice: readers of many objects
// should use ProtobufMessage.
func (o *Object) Protobuf() ([]byte, error) {
	m, err := o.ProtobufMessage()
	return m.Bytes(), err
}

// ProtobufMessage is Protobuf as the cache keeps it, which may be in
// pieces: a reader appends it (Message.AppendTo) or writes its pieces
// (Message.AppendPieces) without a copy made for it.
func (o *Object) ProtobufMessage() (Message, error) {
	if o.proto {
		return o.message(), nil
	}
	data, err := o.memo()
	return WholeMessage(data), err
}

// setMessage keeps msg as the object's protobuf message, its entries
// apart and shared through entries (entryTable.split); before the object
// is shared.
func (o *Object) setMessage(msg []byte, entries *entryTable) {
	m := entries.split(msg)
	o.data, o.entriesAt, o.entries = m.head, int32(m.at), m.entries
}

// message is the protobuf message of an object kept as one (proto).
func (o *Object) message() Message {
	return Message{head: o.data, at: int(o.entriesAt), entries: o.entries}
}

// memo returns the memoized encoding that is not the primary, computing
// it if the memo is empty (see memoMu).
func (o *Object) memo() ([]byte, error) {
	o.memoMu.Lock()
	defer o.memoMu.Unlock()
	enc := o.memoStrong
	if enc == nil {
		enc = o.memoWeak.Value()
	}
	if enc == nil {
		if o.proto {
			enc = o.encodeJSON()
		} else {
			enc = o.encodeProtobuf()
		}
		o.memoWeak = weak.Make(enc)
	}
	if o.recent {
		o.memoStrong = enc
	}
	return enc.data, enc.err
}

// Stored returns the value the object was read from in storage, as the
// Store reads it (JSON, without the resourceVersion: byte for byte what
// storage holds at its Revision for an object stored as JSON, what the
// registry's storage codec makes of it for one stored as protobuf), in a
// new slice; ok is false when the cache cannot tell (its JSON is not the
// stored value with the resourceVersion spliced in, or there is none).
func (o *Object) Stored() (value []byte, ok bool) {
	if o.proto {
		data, err := o.JSON()
		if err != nil {
			return nil, false
		}
		return cutResourceVersion(data)
	}
	if o.spliceLen == 0 {
		return nil, false
	}
	end := int(o.spliceAt) + int(o.spliceLen)
	value = make([]byte, 0, len(o.data)-int(o.spliceLen))
	return append(append(value, o.data[:o.spliceAt]...), o.data[end:]...), true
}

// Decode returns a new decoded copy of the object, which the caller owns.
// It decodes the protobuf message of an object kept so when the cache
// has a decoder for it (Config.DecodeMessageObject), else the JSON (for
// an object kept as protobuf, the memo).
func (o *Object) Decode() (runtime.Object, error) {
	if o.DecodesFromMessage() {
		return o.codec.decodeMessage(storage.KV{Key: o.Key, Value: o.message().Bytes(), Revision: o.Revision})
	}
	if o.codec == nil || o.codec.decode == nil {
		return nil, errors.New("watch: object cannot be decoded")
	}
	data, err := o.JSON()
	if err != nil {
		return nil, err
	}
	return o.codec.decode(storage.KV{Key: o.Key, Value: data, Revision: o.Revision})
}

// DecodesFromMessage reports whether Decode decodes the object's protobuf
// message, making no JSON (an object kept as protobuf, with a decoder for
// its kind: Config.DecodeMessageObject).
func (o *Object) DecodesFromMessage() bool {
	return o.proto && o.codec != nil && o.codec.decodeMessage != nil
}

// Shared returns the decoded object, decoding it on the first call and
// keeping it for as long as the Object lives. The result is shared and must
// not be modified. It suits small objects read often (admission's
// namespace lookups); a reader of many objects should use Decode, so that
// the cache does not grow back to holding every object decoded.
func (o *Object) Shared() (runtime.Object, error) {
	o.sharedOnce.Do(func() { o.shared, o.sharedErr = o.Decode() })
	return o.shared, o.sharedErr
}

// protoMarshaler is the protobuf encoding gogo-protobuf generates for the
// k8s.io/api types.
type protoMarshaler interface {
	Marshal() ([]byte, error)
}

// encodeProtobuf computes the protobuf encoding of a JSON object:
// transcoded from the JSON when the type has a transcoder (several times
// faster than decoding), or decoded and marshalled, which is also how JSON
// the transcoder does not expect is handled.
func (o *Object) encodeProtobuf() *encoding {
	if o.codec != nil && o.codec.transcoder != nil {
		if enc, ok := transcode(func(dst []byte) ([]byte, error) { return o.codec.transcoder.Append(dst, o.data) }); ok {
			return enc
		}
	}
	enc := &encoding{}
	obj, err := o.Decode()
	if err != nil {
		enc.err = err
		return enc
	}
	m, ok := obj.(protoMarshaler)
	if !ok {
		enc.err = fmt.Errorf("watch: %T has no protobuf encoding", obj)
		return enc
	}
	if enc.data, err = m.Marshal(); err != nil {
		enc.err = fmt.Errorf("watch: encode %s as protobuf: %w", o.Key, err)
	}
	return enc
}

// encodeJSON computes the JSON encoding of a protobuf object
// (Config.MessageJSON).
func (o *Object) encodeJSON() *encoding {
	if o.codec == nil || o.codec.messageJSON == nil {
		return &encoding{err: fmt.Errorf("watch: %s has no JSON encoding", o.Key)}
	}
	var err error
	msg := o.data
	if o.entries != nil {
		// The message in one piece, for as long as the transcoding.
		buf := transcodeBuffers.Get().(*[]byte)
		*buf = o.message().AppendTo((*buf)[:0])
		msg = *buf
		defer putTranscodeBuffer(buf)
	}
	enc, ok := transcode(func(dst []byte) ([]byte, error) {
		dst, err = o.codec.messageJSON(dst, o.codec.env, msg)
		return dst, err
	})
	if !ok {
		return &encoding{err: fmt.Errorf("watch: encode %s as JSON: %w", o.Key, err)}
	}
	return enc
}

// transcode runs write on a scratch buffer and copies its output out at
// its exact size (an encoding that is kept), which costs less than
// growing it from nothing; ok is false when write fails.
func transcode(write func(dst []byte) ([]byte, error)) (*encoding, bool) {
	buf := transcodeBuffers.Get().(*[]byte)
	data, err := write((*buf)[:0])
	if err != nil {
		transcodeBuffers.Put(buf)
		return nil, false
	}
	enc := &encoding{data: slices.Clone(data)}
	*buf = data
	putTranscodeBuffer(buf)
	return enc, true
}

// putTranscodeBuffer returns buf to transcodeBuffers, unless it grew too
// large to keep.
func putTranscodeBuffer(buf *[]byte) {
	if cap(*buf) <= 1<<20 {
		transcodeBuffers.Put(buf)
	}
}

// transcodeBuffers are transcode's scratch buffers.
var transcodeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// setRecent marks the object as one of the window's events, or no longer
// one: only then is its memo held strongly.
func (o *Object) setRecent(recent bool) {
	o.memoMu.Lock()
	defer o.memoMu.Unlock()
	o.recent = recent
	if !recent {
		o.memoStrong = nil
	}
}

// windowSize is what the window counts of the object against
// WindowBytes: its primary encoding and the memo it holds strongly.
func (o *Object) windowSize() int64 {
	o.memoMu.Lock()
	defer o.memoMu.Unlock()
	n := len(o.data)
	if o.proto {
		n = o.message().Len()
	}
	if o.memoStrong != nil {
		n += len(o.memoStrong.data)
	}
	return int64(n)
}

// DecodeFunc turns a stored value into an object (with its resourceVersion
// set from kv.Revision) and the labels and fields selectors match on. The
// cache calls it once per written revision, for the attributes.
type DecodeFunc func(kv storage.KV) (runtime.Object, labels.Set, fields.Set, error)

// ObjectDecodeFunc turns a stored value into an object, with its
// resourceVersion set from kv.Revision. Object.Decode calls it with the
// Object's own JSON as kv.Value.
type ObjectDecodeFunc func(kv storage.KV) (runtime.Object, error)

// EventType says what happened to an object.
type EventType string

// Event types, as the watch API names them.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	Bookmark EventType = "BOOKMARK"
)

// event is one change in the window. For Deleted, obj is the last state
// with the revision of the delete.
type event struct {
	typ EventType
	obj *Object
	// prev holds the previous state's attributes only (key, revision,
	// labels, fields: what selectors and the index look at), so that the
	// window does not keep a superseded object's encoding alive. nil for
	// Added.
	prev *Object
	// initialEnd marks a Bookmark ending a direct watch's initial events;
	// err is an Error event's cause (direct watches only).
	initialEnd bool
	err        error
	// at is when the window took the event (unix nanoseconds), for
	// WindowMaxAge; bytes what it counts against WindowBytes.
	at, bytes int64
}

func (e *event) revision() int64 { return e.obj.Revision }

// Config configures a Cache.
type Config struct {
	Storage storage.Interface
	// Prefix is the resource's key prefix, ending in "/".
	Prefix string
	// Decode computes an object's labels and fields; the object it returns
	// may lack what they do not need (the registry leaves managedFields
	// out).
	Decode DecodeFunc
	// DecodeObject decodes an Object on demand (Object.Decode). It saves
	// the attributes Decode computes, which a reader of the object does
	// not need; nil means Decode.
	DecodeObject ObjectDecodeFunc
	// Transcoder turns the objects' JSON into protobuf without decoding
	// them (Object.Protobuf); nil decodes and marshals.
	Transcoder *rawproto.Transcoder
	// MessageJSON, when set, says that Storage gives values as stored,
	// kube's protobuf (rawproto.IsEnveloped) or JSON: an object stored as
	// protobuf is kept as its message (with its resourceVersion set:
	// rawproto.SetResourceVersion), protobuf readers copy it, and
	// MessageJSON appends to dst the JSON of such a message, enveloped in
	// env (the apiVersion and kind it was stored with): encoding/json's
	// bytes for the decoded object (Object.JSON, and the attributes:
	// Decode is given the JSON). It must refuse an envelope that does not
	// name the resource's kind. nil: values are JSON.
	MessageJSON func(dst []byte, env rawproto.Envelope, msg []byte) ([]byte, error)
	// DecodeMessage, with MessageJSON, decodes the kept message of an
	// object stored as protobuf under the resource's own kind (KV.Value is
	// the message, its resourceVersion set to KV.Revision) as Decode
	// decodes the object's JSON. With it the cache computes attributes
	// without making the JSON, which it then makes only for a JSON reader
	// (most readers of a resource stored as protobuf speak protobuf).
	// DecodeMessageObject is DecodeObject for such a message. nil: they
	// are given the JSON.
	DecodeMessage       DecodeFunc
	DecodeMessageObject ObjectDecodeFunc
	// WindowSize is how many recent events are kept for watches that start
	// from a past resourceVersion.
	WindowSize int
	// WindowBytes bounds the bytes of the objects the window holds
	// (default 64 MiB); WindowMaxAge how long an event stays (default
	// 75 s, the history kube's watch cache keeps). Now is the clock
	// (tests; default time.Now).
	WindowBytes  int64
	WindowMaxAge time.Duration
	Now          func() time.Time
	// WatcherBuffer bounds the events queued for one watcher; a watcher
	// that falls further behind is closed (its client relists).
	WatcherBuffer int
	// BookmarkInterval is how often watchers that allow bookmarks get one.
	BookmarkInterval time.Duration
	// IndexField names a field (e.g. "spec.nodeName") that watchers often
	// select on with "=": an event is then offered only to the watchers of
	// its value, so a thousand node agents cost one lookup, not a thousand
	// selector matches.
	IndexField string
	Logger     *slog.Logger
	// Metrics, when set, counts the cache's events, watchers, LISTs and
	// waits (kube's apiserver_watch_cache_* and related metrics), with
	// Resource (kube's group resource: "pods",
	// "leases.coordination.k8s.io"; default the prefix's first segment)
	// and Kind (of the events sent to watch clients) as labels.
	Metrics  *Metrics
	Resource string
	Kind     schema.GroupVersionKind
	// Disabled: keep nothing (kube's --watch-cache-sizes RESOURCE#0): the
	// cache only counts the objects (Stats), List must not be called (the
	// reader lists etcd, making Objects with Object), and every Watch is an
	// etcd watch of its own (direct.go).
	Disabled bool
}

// Cache is the watch cache of one resource.
type Cache struct {
	cfg Config
	log *slog.Logger
	// codec is what the objects share to encode and decode (Object.codec).
	codec *codec
	// entries shares the managedFields entries of kept protobuf messages.
	entries entryTable

	mu sync.RWMutex
	// advanced is closed (and replaced) whenever rev moves or ready flips.
	advanced chan struct{}
	ready    bool
	items    ordered
	rev      int64 // the state reflects every change up to rev
	// window holds the most recent events in revision order; every event
	// after floor is in it.
	window   []*event
	start, n int
	// windowBytes is the sum of the window's events' sizes.
	windowBytes int64
	floor       int64
	watchers    map[*watcher]struct{}
	// byIndex holds the watchers that select one value of IndexField;
	// unindexed the others.
	byIndex   map[string]map[*watcher]struct{}
	unindexed map[*watcher]struct{}

	slowWatchersClosed int64
	// laggedWatchers counts watchers that fell behind their buffer and
	// caught up (or tried to) from the window (lagLocked).
	laggedWatchers int64
	// counted is how many objects etcd held at the last count (Disabled).
	counted int
	// metrics are the cache's label children (nil: no metrics).
	metrics *cacheMetrics
}

// The window's default bounds besides its count (Config).
const (
	defaultWindowBytes  = 64 << 20
	defaultWindowMaxAge = 75 * time.Second
)

// New returns a cache; Run fills and maintains it.
func New(cfg Config) *Cache {
	if cfg.WindowSize <= 0 {
		cfg.WindowSize = 10000
	}
	if cfg.Disabled {
		cfg.WindowSize = 0
	}
	if cfg.WindowBytes <= 0 {
		cfg.WindowBytes = defaultWindowBytes
	}
	if cfg.WindowMaxAge <= 0 {
		cfg.WindowMaxAge = defaultWindowMaxAge
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WatcherBuffer <= 0 {
		cfg.WatcherBuffer = 1000
	}
	if cfg.BookmarkInterval <= 0 {
		cfg.BookmarkInterval = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DecodeObject == nil && cfg.Decode != nil {
		decode := cfg.Decode
		cfg.DecodeObject = func(kv storage.KV) (runtime.Object, error) {
			obj, _, _, err := decode(kv)
			return obj, err
		}
	}
	if cfg.Resource == "" {
		cfg.Resource, _, _ = strings.Cut(strings.TrimPrefix(cfg.Prefix, "/"), "/")
	}
	return &Cache{
		codec: &codec{decode: cfg.DecodeObject, decodeMessage: cfg.DecodeMessageObject, transcoder: cfg.Transcoder, messageJSON: cfg.MessageJSON,
			env: rawproto.Envelope{APIVersion: cfg.Kind.GroupVersion().String(), Kind: cfg.Kind.Kind}},
		metrics:   cfg.Metrics.forCache(cfg.Resource, cfg.Prefix, cfg.Kind),
		cfg:       cfg,
		log:       cfg.Logger.With("cache", cfg.Prefix),
		advanced:  make(chan struct{}),
		window:    make([]*event, cfg.WindowSize),
		watchers:  map[*watcher]struct{}{},
		byIndex:   map[string]map[*watcher]struct{}{},
		unindexed: map[*watcher]struct{}{},
	}
}

// Run lists the resource, then follows its etcd watch until ctx ends. When
// the watch breaks (etcd compaction, leader loss) it lists again; watchers
// of the old state are closed so that their clients relist too.
func (c *Cache) Run(ctx context.Context) error {
	if c.cfg.Disabled {
		return c.runDisabled(ctx)
	}
	const minBackoff, maxBackoff = 100 * time.Millisecond, 5 * time.Second
	backoff := minBackoff
	for ctx.Err() == nil {
		started := time.Now()
		err := c.listAndWatch(ctx)
		if ctx.Err() != nil {
			break
		}
		if time.Since(started) > 2*maxBackoff {
			// It ran for a while (etcd lost its leader or quorum under a
			// working cache, and it may be back already): retry soon, not
			// after the backoff of failures long past.
			backoff = minBackoff
		}
		c.log.Warn("watch cache restarting", "err", err, "after", backoff)
		c.reset()
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
	c.reset()
	return nil
}

func (c *Cache) listAndWatch(ctx context.Context) error {
	var items ordered
	opts := storage.ListOptions{Limit: 1000}
	var rev int64
	for {
		page, err := c.cfg.Storage.List(ctx, c.cfg.Prefix, opts)
		if err != nil {
			return fmt.Errorf("list %s: %w", c.cfg.Prefix, err)
		}
		for _, kv := range page.Items {
			obj, err := c.decode(kv, false)
			if err != nil {
				return err
			}
			items.put(obj) // etcd lists in key order: an append
		}
		rev = page.Revision
		if page.NextKey == "" {
			break
		}
		opts.StartKey, opts.Revision = page.NextKey, page.Revision
	}
	events, err := c.cfg.Storage.Watch(ctx, c.cfg.Prefix, rev)
	if err != nil {
		return fmt.Errorf("watch %s: %w", c.cfg.Prefix, err)
	}
	c.mu.Lock()
	c.clearWindowLocked()
	c.items, c.rev, c.floor, c.n, c.start, c.ready = items, rev, rev, 0, 0, true
	// The old window's events (and the objects they hold) go.
	clear(c.window)
	c.windowBytes = 0
	c.signalLocked()
	c.mu.Unlock()
	c.metrics.initialized()

	bookmarks := time.NewTicker(c.cfg.BookmarkInterval)
	defer bookmarks.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-bookmarks.C:
			c.bookmark()
		case ev, ok := <-events:
			if !ok {
				return errors.New("etcd watch closed")
			}
			if err := c.apply(ev); err != nil {
				return err
			}
		}
	}
}

// decode makes the cache's Object of a stored value, decoding it for the
// attributes. recent: the object is an event's, which the window is
// about to hold (push), so the JSON made of a protobuf value now for the
// attributes is kept as its memo until the event leaves the window
// (watchers of the event are about to read it); the objects of a list
// keep it weakly, as any memo.
func (c *Cache) decode(kv storage.KV, recent bool) (*Object, error) {
	if c.cfg.MessageJSON != nil && rawproto.IsEnveloped(kv.Value) {
		return c.decodeProtobuf(kv, true, recent)
	}
	return c.decodeJSON(kv)
}

// decodeJSON makes the Object of a value stored as JSON: the value is
// decoded for the attributes, and then dropped; the JSON kept is the
// stored value with the resourceVersion spliced in (stored values are the
// same encoding without it), or, for a value the splice cannot read, the
// decoded object encoded again.
func (c *Cache) decodeJSON(kv storage.KV) (*Object, error) {
	obj, l, f, err := c.cfg.Decode(kv)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	data, at, ok := spliceResourceVersion(kv.Value, kv.Revision)
	if !ok {
		// Decode may leave out what attributes do not need: encode the
		// whole object.
		if c.cfg.DecodeObject != nil {
			if obj, err = c.cfg.DecodeObject(kv); err != nil {
				return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
			}
		}
		if data, err = json.Marshal(obj); err != nil {
			return nil, fmt.Errorf("encode %s: %w", kv.Key, err)
		}
	}
	o := &Object{Key: kv.Key, Revision: kv.Revision, Labels: NewAttrs(l), Fields: NewAttrs(f), data: data, codec: c.codec}
	if ok {
		o.setSplice(at, len(data)-len(kv.Value))
	}
	return o, nil
}

// decodeProtobuf makes the Object of a value stored as kube's protobuf:
// its primary is the message with the resourceVersion set, and, with
// attrs, its JSON is made now, for Decode to read the attributes from,
// and memoized (strongly when recent: see decode; recent is set later,
// by push). A message
// SetResourceVersion refuses (no writer of kube's makes one) is kept as
// JSON instead, made from the stored message.
func (c *Cache) decodeProtobuf(kv storage.KV, attrs, recent bool) (*Object, error) {
	env, msg, err := rawproto.ParseEnvelope(kv.Value)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	cd := c.codecOf(env)
	var rv [20]byte
	data, err := rawproto.SetResourceVersion(nil, msg, string(strconv.AppendInt(rv[:0], kv.Revision, 10)))
	if err != nil {
		stored, err := cd.messageJSON(nil, env, msg)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
		}
		return c.decodeJSON(storage.KV{Key: kv.Key, Value: stored, Revision: kv.Revision})
	}
	o := &Object{Key: kv.Key, Revision: kv.Revision, proto: true, codec: cd}
	o.setMessage(data, &c.entries)
	if !attrs {
		return o, nil
	}
	if c.cfg.DecodeMessage != nil && cd == c.codec {
		// The attributes from the message: no JSON until a reader wants it.
		_, l, f, err := c.cfg.DecodeMessage(storage.KV{Key: kv.Key, Value: data, Revision: kv.Revision})
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
		}
		o.Labels, o.Fields = NewAttrs(l), NewAttrs(f)
		return o, nil
	}
	enc := o.encodeJSON()
	if enc.err != nil {
		return nil, fmt.Errorf("decode %s: %w", kv.Key, enc.err)
	}
	_, l, f, err := c.cfg.Decode(storage.KV{Key: kv.Key, Value: enc.data, Revision: kv.Revision})
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	o.Labels, o.Fields = NewAttrs(l), NewAttrs(f)
	o.memoWeak = weak.Make(enc)
	if recent {
		o.memoStrong = enc
	}
	return o, nil
}

// codecOf returns the codec of objects stored in env: the cache's, or,
// for an envelope other than the resource's (Config.Kind), a copy naming
// it, which its objects' JSON then names.
func (c *Cache) codecOf(env rawproto.Envelope) *codec {
	if env == c.codec.env {
		return c.codec
	}
	cd := *c.codec
	cd.env = env
	cd.decodeMessage = nil // it knows the resource's kind only
	return &cd
}

// storedJSON returns a stored value as JSON: the value itself, or the JSON
// of a protobuf value (without a resourceVersion, as stored).
func (c *Cache) storedJSON(kv storage.KV) ([]byte, error) {
	if c.cfg.MessageJSON == nil || !rawproto.IsEnveloped(kv.Value) {
		return kv.Value, nil
	}
	env, msg, err := rawproto.ParseEnvelope(kv.Value)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	data, err := c.cfg.MessageJSON(nil, env, msg)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	return data, nil
}

// setSplice records where the resourceVersion was spliced into the
// object's JSON (Stored), when the offsets fit.
func (o *Object) setSplice(at, n int) {
	if at >= 0 && at <= math.MaxInt32 && n > 0 && n <= math.MaxInt32 {
		o.spliceAt, o.spliceLen = int32(at), int32(n)
	}
}

// attrs returns an Object carrying only o's attributes, for event.prev.
func attrs(o *Object) *Object {
	if o == nil {
		return nil
	}
	return &Object{Key: o.Key, Revision: o.Revision, Labels: o.Labels, Fields: o.Fields}
}

// apply adds one storage event to the state and the window and hands it to
// the watchers.
func (c *Cache) apply(se storage.Event) error {
	switch se.Type {
	case storage.Error:
		return se.Err
	case storage.Progress:
		c.mu.Lock()
		if se.KV.Revision > c.rev {
			c.rev = se.KV.Revision
			c.signalLocked()
			c.metrics.progressed()
		}
		c.mu.Unlock()
		return nil
	}
	obj, err := c.decode(se.KV, true)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ev := &event{obj: obj}
	switch se.Type {
	case storage.Deleted:
		ev.typ = Deleted
		ev.prev = attrs(c.items.remove(se.KV.Key))
	case storage.Added:
		ev.typ = Added
		ev.prev = attrs(c.items.put(obj))
	default:
		ev.typ = Modified
		ev.prev = attrs(c.items.put(obj))
	}
	c.rev = obj.Revision
	c.push(ev)
	c.metrics.received()
	c.dispatchLocked(ev)
	c.signalLocked()
	return nil
}

// dispatchLocked offers ev to the watchers it may concern.
func (c *Cache) dispatchLocked(ev *event) {
	offer := func(ws map[*watcher]struct{}) {
		for w := range ws {
			if !w.offer(ev) {
				c.lagLocked(w, ev)
			}
		}
	}
	if c.cfg.IndexField == "" {
		offer(c.watchers)
		return
	}
	offer(c.unindexed)
	value := ev.obj.Fields.Get(c.cfg.IndexField)
	offer(c.byIndex[value])
	// An object moving between values concerns the watchers of both.
	if ev.prev != nil {
		if old := ev.prev.Fields.Get(c.cfg.IndexField); old != value {
			offer(c.byIndex[old])
		}
	}
}

// addLocked registers a watcher, in the index when it selects one value.
func (c *Cache) addLocked(w *watcher) {
	c.watchers[w] = struct{}{}
	if w.indexed && c.cfg.IndexField != "" {
		if c.byIndex[w.indexValue] == nil {
			c.byIndex[w.indexValue] = map[*watcher]struct{}{}
		}
		c.byIndex[w.indexValue][w] = struct{}{}
		return
	}
	c.unindexed[w] = struct{}{}
}

// push appends ev to the window. The window is bounded three ways: by
// events (WindowSize), by the bytes of their objects (WindowBytes: a few
// hundred updates of large objects would otherwise hold gigabytes), and
// by age (WindowMaxAge, kube's 75 s of history). The oldest events go
// first, the newest always stays; a watch from before the window gets
// 410 Gone and relists, as from kube's.
func (c *Cache) push(ev *event) {
	now := c.cfg.Now()
	ev.at = now.UnixNano()
	ev.obj.setRecent(true)
	// Its object's encodings as they are now, the bulk of what it holds
	// (a memo made later, the protobuf a watcher asks of a JSON object,
	// goes uncounted: counted, it would have to be counted out again).
	ev.bytes = ev.obj.windowSize()
	if c.n == len(c.window) {
		c.evictOldest()
	}
	c.window[(c.start+c.n)%len(c.window)] = ev
	c.n++
	c.windowBytes += ev.bytes
	cutoff := now.Add(-c.cfg.WindowMaxAge).UnixNano()
	for c.n > 1 && (c.windowBytes > c.cfg.WindowBytes || c.window[c.start].at < cutoff) {
		c.evictOldest()
	}
}

// evictOldest drops the window's oldest event; watches from before it can
// no longer be replayed.
func (c *Cache) evictOldest() {
	old := c.window[c.start]
	c.floor = old.revision()
	c.windowBytes -= old.bytes
	old.obj.setRecent(false)
	c.window[c.start] = nil
	c.start = (c.start + 1) % len(c.window)
	c.n--
}

// clearWindowLocked empties the window (before a relist's state replaces
// it), so that its events' objects no longer hold their encodings.
func (c *Cache) clearWindowLocked() {
	size := len(c.window)
	for i := 0; i < c.n; i++ {
		j := (c.start + i) % size
		c.window[j].obj.setRecent(false)
		c.window[j] = nil
	}
	c.n, c.start = 0, 0
}

// since returns the window's events after rev, or false when events after
// rev have already left the window.
func (c *Cache) since(rev int64) ([]*event, bool) {
	if rev < c.floor {
		return nil, false
	}
	size := len(c.window)
	i := sort.Search(c.n, func(i int) bool { return c.window[(c.start+i)%size].revision() > rev })
	out := make([]*event, 0, c.n-i)
	for ; i < c.n; i++ {
		out = append(out, c.window[(c.start+i)%size])
	}
	return out, true
}

func (c *Cache) signalLocked() {
	close(c.advanced)
	c.advanced = make(chan struct{})
}

// reset closes every watcher and marks the cache not ready (it relists).
func (c *Cache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.watchers {
		c.dropLocked(w, false)
	}
	c.ready = false
	c.signalLocked()
}

func (c *Cache) bookmark() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.watchers {
		if w.bookmarks {
			// A watcher with no room for it (or lagging) does without: a
			// bookmark only saves its client work.
			w.offer(&event{typ: Bookmark, obj: &Object{Revision: c.rev}})
		}
	}
}

// waitFor blocks until the cache is ready and reflects revision rev, or
// until ctx ends or timeout passes (then it returns the current revision
// and ErrFutureRevision). With nudge, it asks etcd for a progress report
// while it waits: the revision may belong to a write under another prefix,
// which this cache's watch would otherwise never hear of.
func (c *Cache) waitFor(ctx context.Context, rev int64, timeout time.Duration, nudge bool) error {
	if rev > 0 {
		defer c.metrics.waited(c.metrics.now())
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var tick <-chan time.Time
	if nudge {
		ticker := time.NewTicker(progressRequestInterval)
		defer ticker.Stop()
		tick = ticker.C
	}
	for asked := false; ; {
		c.mu.RLock()
		ok, ready, current, advanced := c.ready && c.rev >= rev, c.ready, c.rev, c.advanced
		c.mu.RUnlock()
		if ok {
			return nil
		}
		if nudge && ready && !asked {
			asked = true
			if err := c.cfg.Storage.RequestProgress(ctx); err != nil {
				return err
			}
		}
		select {
		case <-advanced:
		case <-tick:
			asked = false
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			if !ready {
				return ErrNotReady
			}
			return &TooLargeError{Requested: rev, Current: current}
		}
	}
}

// ErrNotReady: the cache is (re)initializing (its first list, or a relist
// after its watch broke, e.g. while etcd has no quorum) and did not become
// ready within the wait. kube's watch cache answers 429 "storage is
// (re)initializing" then, so that clients retry rather than treat it as
// a resourceVersion they must not ask for again.
var ErrNotReady = errors.New("storage is (re)initializing")

// progressRequestInterval is how often a waiting consistent read repeats
// its progress request.
const progressRequestInterval = 100 * time.Millisecond

// TooLargeError: the cache did not reach the requested revision in time.
type TooLargeError struct{ Requested, Current int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("too large resource version: %d, current: %d", e.Requested, e.Current)
}

// Unwrap makes errors.Is(err, storage.ErrFutureRevision) true.
func (e *TooLargeError) Unwrap() error { return storage.ErrFutureRevision }

// Snapshot is the state of the objects under a prefix at one revision,
// sorted by key.
type Snapshot struct {
	Revision int64
	Items    []*Object
	// Fetched is how many objects were read to select Items (for
	// RecordList).
	Fetched int
}

// SnapshotOptions select what List returns.
type SnapshotOptions struct {
	// Prefix narrows the list (a namespace's keys); "" is everything.
	Prefix string
	// MinRevision: wait until the cache has seen it (NotOlderThan).
	MinRevision int64
	// Consistent: first read etcd's current revision and wait for it, so
	// the answer is as fresh as a read from etcd.
	Consistent bool
	// StartKey: the first key of the page (inclusive).
	StartKey string
	Match    func(*Object) bool
}

// waitTimeout is how long a read waits for the cache to catch up, as kube.
const waitTimeout = 3 * time.Second

// WaitForRevision returns once the cache reflects revision rev, waiting
// as a List with a MinRevision does (then *TooLargeError or ErrNotReady):
// a GET with a resourceVersion uses it.
func (c *Cache) WaitForRevision(ctx context.Context, rev int64) error {
	if c.cfg.Disabled {
		return fmt.Errorf("watch: the cache of %s keeps no revision", c.cfg.Prefix)
	}
	return c.waitFor(ctx, rev, waitTimeout, true)
}

// List returns the matching objects, sorted by key.
func (c *Cache) List(ctx context.Context, opts SnapshotOptions) (snap Snapshot, err error) {
	if c.cfg.Disabled {
		return Snapshot{}, fmt.Errorf("watch: the cache of %s keeps nothing to list", c.cfg.Prefix)
	}
	min := opts.MinRevision
	if opts.Consistent {
		defer func() { c.metrics.consistentRead(err) }()
		rev, err := c.cfg.Storage.CurrentRevision(ctx, c.cfg.Prefix)
		if err != nil {
			return Snapshot{}, err
		}
		min = max(min, rev)
	}
	if err := c.waitFor(ctx, min, waitTimeout, opts.Consistent); err != nil {
		return Snapshot{}, err
	}
	prefix := c.cfg.Prefix + opts.Prefix
	c.mu.RLock()
	snap = Snapshot{Revision: c.rev, Items: []*Object{}}
	c.items.ascend(prefix, opts.StartKey, func(obj *Object) bool {
		snap.Fetched++
		if opts.Match == nil || opts.Match(obj) {
			snap.Items = append(snap.Items, obj)
		}
		return true
	})
	c.mu.RUnlock()
	return snap, nil
}

// Stats describe a cache at one moment, for metrics.
type Stats struct {
	Objects  int
	Watchers int
	Revision int64
	// SlowWatchersClosed counts watchers closed for falling behind.
	SlowWatchersClosed int64
	// LaggedWatchers counts the times a watcher's buffer overflowed and it
	// went on from the window instead (it is closed, and counted in
	// SlowWatchersClosed too, when the window no longer has its events).
	LaggedWatchers int64
	// Capacity is how many recent events the cache keeps (WindowSize).
	Capacity int
}

// Stats returns the cache's current figures.
func (c *Cache) Stats() Stats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	objects := c.items.len()
	if c.cfg.Disabled {
		objects = c.counted
	}
	return Stats{Objects: objects, Watchers: len(c.watchers), Revision: c.rev,
		SlowWatchersClosed: c.slowWatchersClosed, LaggedWatchers: c.laggedWatchers, Capacity: len(c.window)}
}

// Revision is the revision the cache's state reflects.
func (c *Cache) Revision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// Ready reports whether the cache has its list and follows etcd's watch
// (false before the first list and while it relists).
func (c *Cache) Ready() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ready
}

// SlowWatchersClosed counts watchers closed for falling behind.
func (c *Cache) SlowWatchersClosed() int64 { return c.Stats().SlowWatchersClosed }

// Get returns the cached object under key, if the cache is ready and has it.
func (c *Cache) Get(key string) (*Object, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready {
		return nil, false
	}
	return c.items.get(key)
}
