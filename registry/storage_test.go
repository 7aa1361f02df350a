package registry_test

import (
	"github.com/corekube/corekube/registry"
	"testing"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/storage/memory"
)

// newTestStorage is an in-memory store for one test, closed when it ends.
// The registry's tests are about the registry: storage/memory keeps
// etcd's contract (storagetest), so they need no etcd process; the
// benchmarks keep a real etcd (newFieldsEtcd), whose cost they measure.
func newTestStorage(tb testing.TB) storage.Interface {
	tb.Helper()
	st := memory.New()
	tb.Cleanup(st.Close)
	return st
}

// storedJSON is the JSON of a value read from storage below a Store.
func storedJSON(t testing.TB, value []byte) []byte {
	t.Helper()
	data, err := registry.StoredJSON(value)
	if err != nil {
		t.Fatalf("stored value: %v", err)
	}
	return data
}
