// Package logbuf is a log destination tests read while the code under test
// writes to it from its own goroutines. It imports nothing of corekube, so
// that the tests of any package (storage, watch, server) can use it.
package logbuf

import (
	"strings"
	"sync"
)

// Buffer is a strings.Builder safe for concurrent writes and reads.
type Buffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
