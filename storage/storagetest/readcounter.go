package storagetest

import (
	"context"
	"sync/atomic"

	"github.com/corekube/corekube/storage"
)

// ReadCounter is a storage that counts its reads of single keys (Get), for
// tests that assert a path reads nothing from storage.
type ReadCounter struct {
	storage.Interface
	Gets atomic.Int64
}

// Get counts the read and makes it.
func (r *ReadCounter) Get(ctx context.Context, key string) (storage.KV, error) {
	r.Gets.Add(1)
	return r.Interface.Get(ctx, key)
}
