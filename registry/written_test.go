package registry

import (
	"fmt"
	"testing"

	"github.com/corekube/corekube/storage"
)

// TestRecentWrites: a write is offered until the cache's revision reaches
// it (a delete too, as deleted), then forgotten; writes the cache already
// has are not kept; the map stays bounded by pruning what the cache has.
func TestRecentWrites(t *testing.T) {
	w := newRecentWrites()
	w.wrote(storage.KV{Key: "a", Value: []byte("1"), Revision: 10}, 5)
	w.wrote(storage.KV{Key: "a", Value: []byte("0"), Revision: 8}, 5) // older: ignored
	if kv, deleted, ok := w.newer("a", 9); !ok || deleted || string(kv.Value) != "1" {
		t.Fatalf("cache at 9: newer(a) = %q deleted %v ok %v, want the write at 10", kv.Value, deleted, ok)
	}
	if _, _, ok := w.newer("a", 10); ok {
		t.Fatal("cache at 10: the write at 10 is still offered")
	}
	if _, _, ok := w.newer("a", 9); ok {
		t.Fatal("a write the cache caught up with was not forgotten")
	}

	w.wrote(storage.KV{Key: "gone", Revision: 20}, 15) // a delete
	if _, deleted, ok := w.newer("gone", 19); !ok || !deleted {
		t.Fatalf("cache at 19: newer(gone) = deleted %v ok %v, want the delete", deleted, ok)
	}
	if _, _, ok := w.newer("gone", 20); ok {
		t.Fatal("a delete the cache caught up with is still offered")
	}

	w.wrote(storage.KV{Key: "old", Revision: 30}, 30) // the cache has it
	if len(w.kvs) != 0 {
		t.Fatalf("kept %d writes the cache has", len(w.kvs))
	}

	for i := range pruneRecentWritesAt + 10 {
		w.wrote(storage.KV{Key: fmt.Sprint("k", i), Value: []byte("v"), Revision: int64(100 + i)}, 99)
	}
	// One more write, the cache past all of them but the last: the others go.
	w.wrote(storage.KV{Key: "last", Value: []byte("v"), Revision: 1000}, 999)
	if len(w.kvs) != 1 {
		t.Fatalf("after pruning: %d writes kept, want 1", len(w.kvs))
	}
	for i := range maxRecentWrites + 1 {
		w.wrote(storage.KV{Key: fmt.Sprint("s", i), Revision: int64(2000 + i)}, 1999) // a cache that stopped
	}
	if len(w.kvs) > maxRecentWrites {
		t.Fatalf("%d writes kept, more than %d", len(w.kvs), maxRecentWrites)
	}
}
