package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/watch"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// Run maintains the Store's watch cache until ctx ends. Whoever builds the
// Store runs it; until it does, lists and watches wait for the cache.
func (s *Store) Run(ctx context.Context) error {
	return s.cache.Run(ctx)
}

// decodeForCache decodes a stored object for the cache, with the labels and
// fields selectors match on, once per written revision (the cache keeps the
// attributes and the encoding). Objects decoded on demand skip the
// attributes (s.decode).
func (s *Store) decodeForCache(kv storage.KV) (runtime.Object, labels.Set, fields.Set, error) {
	var obj runtime.Object
	var err error
	if ad, ok := s.strategy.(AttrsDecoder); ok {
		obj, err = ad.DecodeForAttrs(kv.Value)
	} else {
		obj, err = s.decodeWithoutManagedFields(kv)
	}
	return s.withAttrs(obj, err)
}

// withAttrs returns a decoded object with its labels and fields.
func (s *Store) withAttrs(obj runtime.Object, err error) (runtime.Object, labels.Set, fields.Set, error) {
	if err != nil {
		return nil, nil, nil, err
	}
	l, f, err := s.strategy.GetAttrs(obj)
	if err != nil {
		return nil, nil, nil, err
	}
	return obj, l, f, nil
}

// decodeMessage decodes a protobuf message the watch cache keeps (of an
// object stored as protobuf, its resourceVersion set) into the object
// decode would make of its JSON, without making the JSON
// (watch.Config.DecodeMessageObject).
func (s *Store) decodeMessage(kv storage.KV) (runtime.Object, error) {
	obj := s.strategy.New()
	u, ok := obj.(protoUnmarshaler)
	if !ok {
		return nil, fmt.Errorf("decode %s at %s: %T has no protobuf form", s.info.Kind, kv.Key, obj)
	}
	if err := u.Unmarshal(kv.Value); err != nil {
		return nil, fmt.Errorf("decode %s at %s from protobuf: %w", s.info.Kind, kv.Key, err)
	}
	accessor(obj).SetResourceVersion(strconv.FormatInt(kv.Revision, 10))
	s.setTypeMeta(obj)
	return obj, nil
}

// decodeMessageForCache is decodeForCache for a kept protobuf message
// (watch.Config.DecodeMessage): the whole object, decoded as cheaply as a
// partial decode of its JSON.
func (s *Store) decodeMessageForCache(kv storage.KV) (runtime.Object, labels.Set, fields.Set, error) {
	return s.withAttrs(s.decodeMessage(kv))
}

// cacheMatcher is Matcher over the attributes the cache keeps, so that
// selecting never decodes. nil selects everything.
func cacheMatcher(ls labels.Selector, fs fields.Selector) func(*watch.Object) bool {
	if (ls == nil || ls.Empty()) && (fs == nil || fs.Empty()) {
		return nil
	}
	if ls == nil {
		ls = labels.Everything()
	}
	if fs == nil {
		fs = fields.Everything()
	}
	return func(o *watch.Object) bool { return ls.Matches(o.Labels) && fs.Matches(o.Fields) }
}

// cachePrefix is the part of a list prefix below the resource's prefix.
func (s *Store) cachePrefix(namespace string) string {
	return strings.TrimPrefix(s.listPrefix(namespace), s.prefix)
}

// GetCached returns the object from the watch cache when it is there, and
// reads etcd otherwise (a miss may be an object created an instant ago). It
// suits lookups that tolerate a slightly stale answer, like admission's
// namespace checks; the returned object is shared and must not be changed.
// The cache keeps objects encoded; one read through GetCached stays decoded
// alongside until it changes, which suits a few objects read often (the
// namespaces), not every object of a large resource.
func (s *Store) GetCached(ctx context.Context, namespace, name string) (runtime.Object, error) {
	if obj, ok := s.cache.Get(s.key(namespace, name)); ok {
		decoded, err := obj.Shared()
		if err != nil {
			return nil, toAPIError(err, s.info.GroupResource(), "")
		}
		return decoded, nil
	}
	return s.Get(ctx, namespace, name, nil)
}

// Cached decodes the watch cache's copy of namespace/name, if the cache
// has it, into an object the caller owns; it never reads etcd, and unlike
// GetCached the cache keeps nothing decoded, so it suits any object of a
// large resource.
func (s *Store) Cached(namespace, name string) (runtime.Object, bool) {
	o, ok := s.cache.Get(s.key(namespace, name))
	if !ok || o.Key != s.key(namespace, name) {
		return nil, false
	}
	decoded, err := o.Decode()
	if err != nil {
		return nil, false
	}
	return decoded, true
}

// CachedMeta decodes only the metadata of the watch cache's copy of
// namespace/name, if the cache has it, into an ObjectMeta the caller owns;
// like Cached it never reads etcd and keeps nothing decoded, and it costs
// a fraction of a whole decode. It suits a check run on every request
// (a pod-bound token's pod: its uid and deletionTimestamp).
func (s *Store) CachedMeta(namespace, name string) (*metav1.ObjectMeta, bool) {
	key := s.key(namespace, name)
	o, ok := s.cache.Get(key)
	if !ok || o.Key != key {
		return nil, false
	}
	m := &metav1.ObjectMeta{}
	if err := s.decodeCachedMeta(o, m); err != nil {
		return nil, false
	}
	return m, true
}

// cacheError maps the cache's errors to Status errors.
func (s *Store) cacheError(err error) error {
	if errors.Is(err, watch.ErrNotReady) {
		return apierrors.NewTooManyRequests(watch.ErrNotReady.Error(), 1)
	}
	return toAPIError(err, s.info.GroupResource(), "")
}

// CacheReady reports whether the watch cache serves (readyz's
// informer-sync check).
func (s *Store) CacheReady() bool { return s.cache.Ready() }

// WatchCacheDisabled reports whether the resource keeps no watch cache
// (Options.NoWatchCache): its CacheStats count objects in etcd.
func (s *Store) WatchCacheDisabled() bool { return s.cache.Disabled() }

// CacheStats returns the watch cache's figures, for metrics.
func (s *Store) CacheStats() watch.Stats { return s.cache.Stats() }
