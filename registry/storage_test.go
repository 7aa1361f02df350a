package registry_test

import (
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
