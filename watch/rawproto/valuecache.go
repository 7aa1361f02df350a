package rawproto

import (
	"reflect"
	"sync"
	"sync/atomic"
)

// valueCache maps one encoding of a value to the other, for the types with
// their own codecs whose values repeat across objects (a pod's "100m" of
// CPU, a port 8080), which would otherwise be parsed and written again each
// time. Short keys only, and it stops growing at codecCacheMax entries: the
// values that repeat are in it by then. Both transcoders keep one per type
// and direction, shared by every plan.
type valueCache struct {
	m sync.Map // string -> []byte
	n atomic.Int32
}

const (
	codecCacheMax    = 4096
	codecCacheMaxKey = 64
)

// cacheDirection tells the two transcoders' caches of one type apart.
type cacheDirection uint8

const (
	toProtobuf cacheDirection = iota // key JSON, value the message
	toJSON                           // key the message, value JSON
)

type valueCacheKey struct {
	t   reflect.Type
	dir cacheDirection
}

var valueCaches sync.Map // valueCacheKey -> *valueCache

// valueCacheOf returns the cache of t's values converted in direction dir.
func valueCacheOf(t reflect.Type, dir cacheDirection) *valueCache {
	c, _ := valueCaches.LoadOrStore(valueCacheKey{t, dir}, &valueCache{})
	return c.(*valueCache)
}

func (c *valueCache) load(key []byte) ([]byte, bool) {
	v, ok := c.m.Load(string(key))
	if !ok {
		return nil, false
	}
	return v.([]byte), true
}

func (c *valueCache) store(key, value []byte) {
	if len(key) > codecCacheMaxKey || c.n.Load() >= codecCacheMax {
		return
	}
	if _, loaded := c.m.LoadOrStore(string(key), value); !loaded {
		c.n.Add(1)
	}
}
