package registry

import (
	"sync"

	"github.com/corekube/corekube/storage"
)

// recentWrites remembers what this server last wrote under a key until its
// watch cache has caught up with that write, so that the next write of the
// key starts from it rather than from the cache's older copy. A client
// that writes twice in a row (the node agent's final status, then its
// DELETE of the pod) would otherwise often find the cache a few
// milliseconds behind its first write: a compare-and-swap lost, one etcd
// transaction for nothing, and the write done again from etcd's value.
//
// It only ever supplies where a compare-and-swap starts (storage.WithCurrent),
// never an answer: a value another server wrote since loses the
// compare-and-swap and the write runs again from etcd's, as with a stale
// cache. The Store and its subresources share one.
type recentWrites struct {
	mu  sync.Mutex
	kvs map[string]storage.KV // a nil Value: deleted at Revision
}

// Bounds of recentWrites: above pruneRecentWritesAt entries the ones the cache has
// caught up with go; above maxRecentWrites (a cache that stopped
// following etcd) all of them, as remembering is only a shortcut.
const (
	pruneRecentWritesAt = 256
	maxRecentWrites     = 4096
)

func newRecentWrites() *recentWrites { return &recentWrites{kvs: make(map[string]storage.KV)} }

// wrote records kv (Value nil: a delete) as written; cacheRev is the
// revision the watch cache has reached.
func (w *recentWrites) wrote(kv storage.KV, cacheRev int64) {
	if kv.Revision <= cacheRev {
		return // the cache has it already
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.kvs[kv.Key]; ok && old.Revision >= kv.Revision {
		return
	}
	w.kvs[kv.Key] = kv
	if len(w.kvs) <= pruneRecentWritesAt {
		return
	}
	for k, e := range w.kvs {
		if e.Revision <= cacheRev {
			delete(w.kvs, k)
		}
	}
	if len(w.kvs) > maxRecentWrites {
		clear(w.kvs)
	}
}

// newer returns what was last written under key if the watch cache, at
// revision cacheRev, has not caught up with it yet, and forgets it once it
// has (the cache then holds that write or a newer one, a delete included).
// deleted reports a delete as that last write.
func (w *recentWrites) newer(key string, cacheRev int64) (kv storage.KV, deleted, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kv, ok = w.kvs[key]
	if !ok {
		return storage.KV{}, false, false
	}
	if kv.Revision <= cacheRev {
		delete(w.kvs, key)
		return storage.KV{}, false, false
	}
	return kv, kv.Value == nil, true
}
