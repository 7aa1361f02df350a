package registry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/storage/trace"
	"github.com/corekube/corekube/watch"
	"github.com/corekube/corekube/watch/rawjson"
	"github.com/corekube/corekube/watch/rawproto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	listvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

var listOptionsKind = schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}

// ListPage is one page of a list. Items that come from the watch cache are
// kept as the cache holds them, encoded: a JSON answer copies their
// encodings, and only the typed list (Object) decodes them.
type ListPage struct {
	store *Store
	items []runtime.Object // the decoded items, when they came from etcd
	// cached holds the items instead when they came from the cache.
	cached []*watch.Object
	meta   metav1.ListMeta
}

// List returns the objects in namespace ("" for all namespaces) that opts
// selects, one page at a time when opts.Limit is set.
func (s *Store) List(ctx context.Context, namespace string, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	page, err := s.ListPage(ctx, namespace, opts)
	if err != nil {
		return nil, err
	}
	return page.Object()
}

// ListPage is List without building the typed list.
func (s *Store) ListPage(ctx context.Context, namespace string, opts *metainternalversion.ListOptions) (*ListPage, error) {
	if opts == nil {
		opts = &metainternalversion.ListOptions{}
	}
	if errs := listvalidation.ValidateListOptions(opts, true); len(errs) > 0 {
		return nil, apierrors.NewInvalid(listOptionsKind, "", errs)
	}
	// The selectors' field labels are checked (400) before anything is read.
	if _, err := s.Matcher(opts.LabelSelector, opts.FieldSelector); err != nil {
		return nil, err
	}
	prefix := s.listPrefix(namespace)
	sopts, minRevision, err := s.storageListOptions(prefix, opts)
	if err != nil {
		return nil, err
	}
	if opts.Continue == "" && opts.ResourceVersionMatch != metav1.ResourceVersionMatchExact && !s.cache.Disabled() {
		return s.listFromCache(ctx, namespace, opts, minRevision)
	}

	// From etcd: each item becomes the Object the cache would hold for
	// it (its stored encoding with the resourceVersion set, the
	// attributes selectors match on), for this answer only; the page is
	// then written as a cached one is.
	objects := make(map[string]*watch.Object)
	if cm := cacheMatcher(opts.LabelSelector, opts.FieldSelector); cm != nil {
		sopts.Predicate = func(kv storage.KV) (bool, error) {
			obj, err := s.cache.Object(kv, true)
			if err != nil {
				return false, err
			}
			ok := cm(obj)
			if ok {
				objects[kv.Key] = obj
			}
			return ok, nil
		}
	}
	tr := trace.From(ctx)
	tr.Mark(trace.StorageRead)
	// Values as the cache reads them, for cache.Object.
	res, err := s.cached.List(ctx, prefix, sopts)
	tr.Mark(trace.StorageReadDone)
	if err != nil {
		if errors.Is(err, storage.ErrCompacted) && opts.Continue != "" {
			return nil, s.continueExpired(prefix, sopts.StartKey)
		}
		return nil, toAPIError(err, s.info.GroupResource(), "")
	}
	if minRevision > res.Revision {
		return nil, tooLargeResourceVersion(minRevision, res.Revision)
	}

	page := &ListPage{store: s, cached: make([]*watch.Object, 0, len(res.Items))}
	for _, kv := range res.Items {
		obj := objects[kv.Key]
		if obj == nil {
			// Nothing selects on it: no attributes to compute.
			if obj, err = s.cache.Object(kv, false); err != nil {
				return nil, toAPIError(err, s.info.GroupResource(), "")
			}
		}
		page.cached = append(page.cached, obj)
	}
	page.meta.ResourceVersion = strconv.FormatInt(res.Revision, 10)
	if res.NextKey != "" {
		page.meta.Continue = encodeContinue(res.Revision, strings.TrimPrefix(res.NextKey, prefix))
		page.meta.RemainingItemCount = res.RemainingItemCount
	}
	return page, nil
}

// listFromCache serves a list from the watch cache: a consistent read
// (resourceVersion unset) once the cache has caught up with etcd, "0" at
// once, N once the cache has seen N. A limited first page carries a
// continue token at the cache's revision; later pages are read from etcd
// at that revision, so the pages form one snapshot.
func (s *Store) listFromCache(ctx context.Context, namespace string, opts *metainternalversion.ListOptions, minRevision int64) (*ListPage, error) {
	match := cacheMatcher(opts.LabelSelector, opts.FieldSelector)
	tr := trace.From(ctx)
	tr.Mark(trace.StorageRead)
	snap, err := s.cache.List(ctx, watch.SnapshotOptions{
		Prefix:      s.cachePrefix(namespace),
		MinRevision: minRevision,
		Consistent:  opts.ResourceVersion == "",
		Match:       match,
	})
	tr.Mark(trace.StorageReadDone)
	if err != nil {
		return nil, s.cacheError(err)
	}
	items := snap.Items
	page := &ListPage{store: s}
	page.meta.ResourceVersion = strconv.FormatInt(snap.Revision, 10)
	if limit := opts.Limit; limit > 0 && int64(len(items)) > limit {
		page.meta.Continue = encodeContinue(snap.Revision, strings.TrimPrefix(items[limit].Key, s.listPrefix(namespace)))
		if match == nil {
			remaining := int64(len(items)) - limit
			page.meta.RemainingItemCount = &remaining
		}
		items = items[:limit]
	}
	s.cache.RecordList(snap.Fetched, len(items))
	page.cached = items
	return page, nil
}

// ItemView says which parts of a list's items the reader of the typed list
// needs. The cache keeps items encoded, and decoding a whole object is most
// of the cost of a Table LIST; a page decodes no more than its view asks.
type ItemView uint8

const (
	// FullItems: every field (YAML, pretty JSON, a Table with
	// includeObject=Object).
	FullItems ItemView = iota
	// TableItems: the whole ObjectMeta and what the strategy's
	// TableConvertor reads (a Table with includeObject=Metadata, kubectl
	// get's default, or None). Other fields may be left empty.
	TableItems
	// MetadataItems: the whole ObjectMeta only (PartialObjectMetadataList).
	MetadataItems
)

// Object returns the page as the resource's typed list (e.g. *v1.PodList),
// every item whole.
func (p *ListPage) Object() (runtime.Object, error) { return p.ObjectFor(FullItems) }

// ObjectFor returns the page as the resource's typed list whose items hold
// at least what view names. Items that came from etcd are whole already.
func (p *ListPage) ObjectFor(view ItemView) (runtime.Object, error) {
	items := p.items
	if p.cached != nil {
		// Decoded here, for this answer only: the cache keeps encodings.
		var err error
		if items, err = decodeAll(p.cached, p.store.itemDecoder(view)); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	list := p.store.strategy.NewList()
	if err := meta.SetList(list, items); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	// Items of a list carry no kind or apiVersion, as in kube. SetList
	// copied them, so objects shared with others stay untouched.
	_ = meta.EachListItem(list, func(item runtime.Object) error {
		item.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		return nil
	})
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	lm.SetResourceVersion(p.meta.ResourceVersion)
	lm.SetContinue(p.meta.Continue)
	lm.SetRemainingItemCount(p.meta.RemainingItemCount)
	list.GetObjectKind().SetGroupVersionKind(p.store.info.GroupVersion().WithKind(p.store.info.ListKind))
	return list, nil
}

// Len is how many items the page has.
func (p *ListPage) Len() int { return p.len() }

// ListMeta is the page's list metadata: its resourceVersion, and where the
// next page continues when there is one.
func (p *ListPage) ListMeta() metav1.ListMeta { return p.meta }

// ItemsFor returns items lo to hi (exclusive) of the page as ObjectFor's
// list holds them: decoded for view, without kind or apiVersion, objects
// of the caller's own. A large Table is made from them a batch at a time
// rather than from the whole list at once.
func (p *ListPage) ItemsFor(view ItemView, lo, hi int) ([]runtime.Object, error) {
	var items []runtime.Object
	if p.cached != nil {
		var err error
		if items, err = decodeAll(p.cached[lo:hi], p.store.itemDecoder(view)); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	} else {
		items = make([]runtime.Object, hi-lo)
		for i, obj := range p.items[lo:hi] {
			items[i] = obj.DeepCopyObject() // the page's may be shared
		}
	}
	for _, item := range items {
		item.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	}
	return items, nil
}

// itemDecoder returns how a cached item is decoded for view: by the
// strategy's TableDecoder for a Table, metadata only for a Table of the
// default convertor (it prints the name and creation time) and for
// PartialObjectMetadata, whole otherwise.
func (s *Store) itemDecoder(view ItemView) func(*watch.Object) (runtime.Object, error) {
	if view == TableItems {
		if td, ok := s.strategy.(TableDecoder); ok {
			return func(o *watch.Object) (runtime.Object, error) {
				if o.DecodesFromMessage() {
					// gogo decodes the whole message in a fraction of
					// the time the JSON made from it takes to make and
					// decode in part.
					return o.Decode()
				}
				data, err := o.JSON()
				if err != nil {
					return nil, err
				}
				return td.DecodeForTable(data)
			}
		}
		if _, printer := s.strategy.(TableConvertor); !printer {
			view = MetadataItems
		}
	}
	if view == MetadataItems {
		if _, ok := s.strategy.New().(metav1.ObjectMetaAccessor); ok {
			return s.decodeMetadata
		}
	}
	return (*watch.Object).Decode
}

// decodeMetadata decodes only the ObjectMeta of a cached object into a new
// object of the resource's type: the rest is skipped unread.
func (s *Store) decodeMetadata(o *watch.Object) (runtime.Object, error) {
	obj := s.strategy.New()
	om, ok := obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
	if !ok {
		return o.Decode()
	}
	if err := s.decodeCachedMeta(o, om); err != nil {
		return nil, err
	}
	return obj, nil
}

// decodeCachedMeta decodes the ObjectMeta of a cached object into m: from
// its protobuf message when the cache keeps one it decodes (gogo's
// decoding of the metadata field alone), else from its JSON.
func (s *Store) decodeCachedMeta(o *watch.Object, m *metav1.ObjectMeta) error {
	var err error
	if o.DecodesFromMessage() {
		var msg, raw []byte
		if msg, err = o.Protobuf(); err == nil {
			if raw, err = rawproto.Metadata(msg); err == nil {
				err = m.Unmarshal(raw)
			}
		}
	} else {
		var data, raw []byte
		if data, err = o.JSON(); err == nil {
			if raw, err = rawjson.Member(data, "metadata"); err == nil && raw != nil {
				err = DecodeObjectMeta(raw, m)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("decode %s metadata at %s: %w", s.info.Kind, o.Key, err)
	}
	return nil
}

// decodeBatch is how many items a decoding goroutine takes at a time, and
// parallelMinItems the smallest page decoded by more than one goroutine:
// below it, starting goroutines costs more than it saves.
const (
	decodeBatch      = 64
	parallelMinItems = 4 * decodeBatch
)

// decodeAll decodes items in order, on up to GOMAXPROCS goroutines for a
// large page (decoding is ~10-25 µs per pod; a Table of 5,000 pods is mostly
// that).
func decodeAll(items []*watch.Object, decode func(*watch.Object) (runtime.Object, error)) ([]runtime.Object, error) {
	out := make([]runtime.Object, len(items))
	err := forEach(len(items), func(i int) error {
		obj, err := decode(items[i])
		out[i] = obj
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// forEach calls f for every index below n, on up to GOMAXPROCS goroutines
// when n is large enough to repay them. The calling goroutine works too and
// returns only once every goroutine it started has finished; the first
// error stops them all. f must be safe to call concurrently for distinct
// indexes.
func forEach(n int, f func(i int) error) error {
	workers := min(goruntime.GOMAXPROCS(0), n/decodeBatch)
	if n < parallelMinItems || workers < 2 {
		for i := range n {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	}
	// Workers take batches in turn, so a worker slowed by other load
	// takes fewer.
	var (
		next   atomic.Int64
		failed atomic.Bool
		errs   = make([]error, workers)
		wg     sync.WaitGroup
	)
	work := func(w int) {
		for !failed.Load() {
			lo := int(next.Add(decodeBatch)) - decodeBatch
			if lo >= n {
				return
			}
			for i := lo; i < min(lo+decodeBatch, n); i++ {
				if err := f(i); err != nil {
					errs[w] = err
					failed.Store(true)
					return
				}
			}
		}
	}
	for w := 1; w < workers; w++ {
		wg.Go(func() { work(w) })
	}
	work(0)
	wg.Wait()
	return errors.Join(errs...)
}

// AppendJSON appends the page's JSON encoding, the same bytes
// json.Marshal(p.Object()) gives, reusing the items' cached encodings.
func (p *ListPage) AppendJSON(buf []byte) ([]byte, error) {
	chunks, err := p.JSONChunks()
	if err != nil {
		return nil, err
	}
	return appendChunks(buf, chunks), nil
}

// JSONChunks is the page's JSON encoding (AppendJSON's bytes) in pieces
// to be written in turn: the items' encodings themselves rather than a
// copy. The pieces are shared and must not be modified. An item kept as
// protobuf is made JSON for it (unless memoized), and all of them are
// held until the pieces go: a LIST answer uses WriteJSON instead.
func (p *ListPage) JSONChunks() (net.Buffers, error) {
	head, err := p.jsonHead()
	if err != nil {
		return nil, err
	}
	chunks, err := p.appendJSONItems(net.Buffers{head}, 0, p.len())
	if err != nil {
		return nil, err
	}
	return append(chunks, jsonListEnd), nil
}

// jsonWriteBatch is how many items WriteJSON encodes before it writes
// them: enough for every CPU to take part, few enough that a batch's JSON
// (~4 MB of pods) is all that a LIST of the whole cluster holds at once.
// A variable for the tests.
var jsonWriteBatch = 1024

// WriteJSON writes the page's JSON encoding (AppendJSON's bytes) to w, in
// batches of items: a LIST of 150,000 pods kept as protobuf would
// otherwise hold the JSON of all of them (~600 MB) until written. start
// is called once, before the first byte is written: an error before it
// (started false) can still be answered with a Status; one after it
// (started true) leaves the answer cut short, as a client that went away
// does.
func (p *ListPage) WriteJSON(w io.Writer, start func()) (started bool, err error) {
	head, err := p.jsonHead()
	if err != nil {
		return false, err
	}
	chunks := net.Buffers{head}
	n := p.len()
	for lo := 0; ; lo += jsonWriteBatch {
		hi := min(lo+jsonWriteBatch, n)
		if chunks, err = p.appendJSONItems(chunks, lo, hi); err != nil {
			return started, err
		}
		if hi == n {
			chunks = append(chunks, jsonListEnd)
		}
		if !started {
			start()
			started = true
		}
		for _, c := range chunks {
			if _, err := w.Write(c); err != nil {
				return true, err
			}
		}
		if hi == n {
			return true, nil
		}
		clear(chunks) // the batch's encodings go
		chunks = chunks[:0]
	}
}

// len is how many items the page has.
func (p *ListPage) len() int {
	if p.cached != nil {
		return len(p.cached)
	}
	return len(p.items)
}

// jsonHead is the JSON of the list up to its first item: its kind,
// apiVersion and metadata, and the opening of items.
func (p *ListPage) jsonHead() ([]byte, error) {
	head, err := json.Marshal(struct {
		metav1.TypeMeta `json:",inline"`
		Meta            metav1.ListMeta `json:"metadata"`
	}{metav1.TypeMeta{Kind: p.store.info.ListKind, APIVersion: p.store.info.APIVersion()}, p.meta})
	if err != nil {
		return nil, err
	}
	return append(head[:len(head)-1], `,"items":[`...), nil
}

// appendJSONItems appends the JSON of items lo to hi to chunks, each
// without its kind and apiVersion, as a list's items are encoded.
func (p *ListPage) appendJSONItems(chunks net.Buffers, lo, hi int) (net.Buffers, error) {
	items := make([][]byte, hi-lo)
	var err error
	if p.cached != nil {
		// An item kept as protobuf (stored so) is made JSON here, unless
		// its memo has it (watch.Object.JSON: ~8 µs a pod), on every CPU
		// for a large page.
		err = forEach(len(items), func(i int) (err error) {
			items[i], err = p.cached[lo+i].JSON()
			return err
		})
	} else {
		for i, obj := range p.items[lo:hi] {
			if items[i], err = json.Marshal(obj); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, err
	}
	for i, data := range items {
		// The opening brace, then the rest of the item.
		chunks = append(chunks, itemOpen[lo+i > 0], data[typeMetaEnd(data):])
	}
	return chunks, nil
}

var (
	// itemOpen opens a list's first item (false) or a later one (true).
	itemOpen    = map[bool][]byte{false: []byte("{"), true: []byte(",{")}
	jsonListEnd = []byte("]}")
)

// appendChunks appends the concatenation of chunks to buf, growing it once.
func appendChunks(buf []byte, chunks net.Buffers) []byte {
	size := 0
	for _, c := range chunks {
		size += len(c)
	}
	buf = slices.Grow(buf, size)
	for _, c := range chunks {
		buf = append(buf, c...)
	}
	return buf
}

// protoMarshaler is the protobuf encoding gogo-protobuf generates for the
// k8s.io/api types.
type protoMarshaler interface {
	Marshal() ([]byte, error)
}

// AppendProtobuf appends the page in kube's protobuf encoding: the magic,
// then a runtime.Unknown naming the list's kind around the list message
// (ListMeta, then the items). The bytes are those apimachinery's protobuf
// serializer writes for p.Object(), but the items are the watch cache's
// protobuf encodings (watch.Object.Protobuf: the message kept of an
// object stored as protobuf; for one stored as JSON, shared while
// memoized, else computed from the JSON on every CPU; the cache does not
// keep a second encoding of every object for life).
func (p *ListPage) AppendProtobuf(buf []byte) ([]byte, error) {
	chunks, err := p.ProtobufChunks()
	if err != nil {
		return nil, err
	}
	return appendChunks(buf, chunks), nil
}

// ProtobufChunks is the page's protobuf encoding (AppendProtobuf's bytes)
// in pieces to be written in turn, as JSONChunks. The pieces are shared
// and must not be modified.
func (p *ListPage) ProtobufChunks() (net.Buffers, error) {
	lm, err := p.meta.Marshal()
	if err != nil {
		return nil, err
	}
	var items []watch.Message
	if p.cached != nil {
		items = make([]watch.Message, len(p.cached))
		err = forEach(len(items), func(i int) (err error) {
			items[i], err = p.cached[i].ProtobufMessage()
			return err
		})
	} else {
		items = make([]watch.Message, len(p.items))
		for i, obj := range p.items {
			m, ok := obj.(protoMarshaler)
			if !ok {
				return nil, fmt.Errorf("%T has no protobuf encoding", obj)
			}
			var data []byte
			if data, err = m.Marshal(); err != nil {
				break
			}
			items[i] = watch.WholeMessage(data)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("encode %s as protobuf: %w", p.store.info.ListKind, err)
	}
	size, pieces := rawproto.FieldSize(len(lm)), 0
	lens := make([]int, len(items))
	for i, item := range items {
		lens[i] = item.Len()
		size += rawproto.FieldSize(lens[i])
		pieces += item.Pieces()
	}
	env := rawproto.Envelope{APIVersion: p.store.info.APIVersion(), Kind: p.store.info.ListKind}
	head := env.AppendHeader(nil, size)
	head = rawproto.AppendField(head, rawproto.ListMetaField, lm)
	chunks := make(net.Buffers, 0, len(items)+pieces+2)
	chunks = append(chunks, head)
	// The items' field headers (a few bytes each) in one buffer.
	headers := make([]byte, 0, len(items)*(1+binary.MaxVarintLen32))
	for i, item := range items {
		at := len(headers)
		headers = rawproto.AppendFieldHeader(headers, rawproto.ListItemsField, lens[i])
		chunks = item.AppendPieces(append(chunks, headers[at:len(headers):len(headers)]))
	}
	return append(chunks, rawproto.AppendTrailer(nil)), nil
}

// storageListOptions turns resourceVersion, resourceVersionMatch, limit and
// continue into a storage request, following kube's table: an unset
// resourceVersion is a consistent read of the latest state, "0" any state,
// N with NotOlderThan (the default) the latest state provided it is at
// least N, and N with Exact the state at N.
func (s *Store) storageListOptions(prefix string, opts *metainternalversion.ListOptions) (storage.ListOptions, int64, error) {
	sopts := storage.ListOptions{Limit: opts.Limit}
	if sopts.Limit < 0 {
		sopts.Limit = 0
	}
	var minRevision int64
	if opts.Continue != "" {
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return sopts, 0, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		rev, start, err := decodeContinue(opts.Continue)
		if err != nil {
			return sopts, 0, apierrors.NewBadRequest(err.Error())
		}
		if rev > 0 {
			sopts.Revision = rev
		}
		sopts.StartKey = prefix + start
		return sopts, 0, nil
	}
	if opts.ResourceVersion == "" || opts.ResourceVersion == "0" {
		return sopts, 0, nil
	}
	rv, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
	if err != nil || rv < 0 {
		return sopts, 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %q", opts.ResourceVersion))
	}
	if opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact {
		sopts.Revision = rv
	} else {
		minRevision = rv
	}
	return sopts, minRevision, nil
}

// Matcher returns a function reporting whether an object matches both
// selectors, or nil when they select everything. An unsupported field
// label is a 400, worded as kube words it for this resource.
func (s *Store) Matcher(ls labels.Selector, fs fields.Selector) (func(runtime.Object) (bool, error), error) {
	if ls == nil {
		ls = labels.Everything()
	}
	if fs == nil {
		fs = fields.Everything()
	}
	for _, r := range fs.Requirements() {
		if !s.fieldLabels.Has(r.Field) {
			return nil, apierrors.NewBadRequest(s.unknownFieldMessage(r.Field))
		}
	}
	if ls.Empty() && fs.Empty() {
		return nil, nil
	}
	return func(obj runtime.Object) (bool, error) {
		l, f, err := s.strategy.GetAttrs(obj)
		if err != nil {
			return false, err
		}
		return ls.Matches(l) && fs.Matches(f), nil
	}, nil
}

func (s *Store) unknownFieldMessage(field string) string {
	if s.info.CustomFieldSelectors {
		return "field label not supported: " + field
	}
	quoted := make([]string, 0, len(s.fieldLabels))
	for _, l := range sets.List(s.fieldLabels) {
		quoted = append(quoted, strconv.Quote(l))
	}
	return fmt.Sprintf("%q is not a known field selector: only %s", field, strings.Join(quoted, ", "))
}

// continueToken is kube's continue token, so that tokens look the same.
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

func encodeContinue(rev int64, start string) string {
	data, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", ResourceVersion: rev, StartKey: start})
	return base64.RawURLEncoding.EncodeToString(data)
}

func decodeContinue(token string) (rev int64, start string, err error) {
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, "", fmt.Errorf("continue key is not valid: %w", err)
	}
	var c continueToken
	if err := json.Unmarshal(data, &c); err != nil {
		return 0, "", fmt.Errorf("continue key is not valid: %w", err)
	}
	if c.APIVersion != "meta.k8s.io/v1" {
		return 0, "", fmt.Errorf("continue key is not valid: server does not recognize this encoded version %q", c.APIVersion)
	}
	if c.ResourceVersion == 0 {
		return 0, "", fmt.Errorf("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	}
	if c.StartKey == "" {
		return 0, "", fmt.Errorf("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")
	}
	// As kube: the start key is relative to the list prefix, with or
	// without a leading "/"; path.Clean keeps it from escaping the prefix.
	key := c.StartKey
	if !strings.HasPrefix(key, "/") {
		key = "/" + key
	}
	if cleaned := path.Clean(key); cleaned != key {
		return 0, "", fmt.Errorf("continue key is not valid: %s", c.StartKey)
	}
	return c.ResourceVersion, key[1:], nil
}

// continueExpired is kube's 410 for a continue token whose revision has
// been compacted; it carries a token (revision -1) that resumes the list at
// the latest revision, inconsistently.
func (s *Store) continueExpired(prefix, startKey string) error {
	err := apierrors.NewResourceExpired(continueTooOldMessage)
	err.ErrStatus.ListMeta.Continue = encodeContinue(-1, strings.TrimPrefix(startKey, prefix))
	return err
}

// tooLargeResourceVersion is kube's 504 for a resourceVersion the store has
// not reached; min 0 when the revisions are not known (etcd's refusal).
func tooLargeResourceVersion(min, current int64) error {
	msg := "Too large resource version"
	if min > 0 {
		msg = fmt.Sprintf("Too large resource version: %d, current: %d", min, current)
	}
	err := apierrors.NewTimeoutError(msg, 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return err
}

// appendWithoutTypeMeta appends an object's JSON without its leading kind
// and apiVersion (json.Marshal writes the inline TypeMeta first), the form
// items take inside a list.
func appendWithoutTypeMeta(buf, data []byte) []byte {
	buf = append(buf, '{')
	return append(buf, data[typeMetaEnd(data):]...)
}

// typeMetaEnd is where an item's JSON goes on after its opening brace and
// its kind and apiVersion members, the ones a list's items leave out.
func typeMetaEnd(data []byte) int {
	i := 1 // after '{'
	for _, field := range [...]string{`"kind":"`, `"apiVersion":"`} {
		if !bytes.HasPrefix(data[i:], []byte(field)) {
			continue
		}
		end := bytes.IndexByte(data[i+len(field):], '"') // no escapes in kinds and versions
		if end < 0 {
			break
		}
		i += len(field) + end + 1
		if i < len(data) && data[i] == ',' {
			i++
		}
	}
	return i
}
