package memory

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/storage/storagetest"
)

// TestConformance holds the store to the contract storage/etcd passes.
// Every subtest gets the same store (the suite works under prefixes of
// its own), as with etcd's shared embedded server.
func TestConformance(t *testing.T) {
	s := New()
	t.Cleanup(s.Close)
	storagetest.RunConformance(t, func(*testing.T) storage.Interface { return s })
}

// TestCloseEndsWatches: Close closes open watches and stops pending
// expiries; later calls fail as an unreachable backend does.
func TestCloseEndsWatches(t *testing.T) {
	s := New()
	ch, err := s.Watch(context.Background(), "/a/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(t.Context(), "/a/k", []byte("v"), storage.WithTTL("/a/", 3600e9)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for range ch { // drains what was sent, then must be closed
	}
	if _, err := s.Get(t.Context(), "/a/k"); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Get after Close: err = %v, want ErrUnavailable", err)
	}
	s.Close() // a second Close is harmless
}

// TestCompactedWatchError: a watch behind the compaction fails with the
// CompactedError storage/etcd returns, naming both revisions.
func TestCompactedWatchError(t *testing.T) {
	s := New()
	t.Cleanup(s.Close)
	first, err := s.Create(t.Context(), "/a/k", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.GuaranteedUpdate(t.Context(), "/a/k", func(kv storage.KV) ([]byte, error) { return append(kv.Value, '+'), nil }); err != nil {
			t.Fatal(err)
		}
	}
	rev, _ := s.CurrentRevision(t.Context(), "/a/")
	if err := s.Compact(t.Context(), rev); err != nil {
		t.Fatal(err)
	}
	ch, err := s.Watch(t.Context(), "/a/", first.Revision)
	if err != nil {
		t.Fatal(err)
	}
	e := <-ch
	var ce *storage.CompactedError
	if e.Type != storage.Error || !errors.As(e.Err, &ce) || ce.Requested != first.Revision || ce.Compacted != rev {
		t.Fatalf("event %+v, want a CompactedError{%d, %d}", e, first.Revision, rev)
	}
	if _, ok := <-ch; ok {
		t.Error("watch not closed after its error")
	}
	// From rev-1 the history (the write at rev) is still there.
	ch, err = s.Watch(t.Context(), "/a/", rev-1)
	if err != nil {
		t.Fatal(err)
	}
	if e := <-ch; e.Type != storage.Modified || e.KV.Revision != rev {
		t.Errorf("watch from %d: %+v, want the write at %d", rev-1, e, rev)
	}
}

// TestWatchFromFutureRevision: a watch from a revision the store has not
// reached sends nothing until writes pass it, as etcd's does.
func TestWatchFromFutureRevision(t *testing.T) {
	s := New()
	t.Cleanup(s.Close)
	rev, _ := s.CurrentRevision(t.Context(), "/a/")
	ch, err := s.Watch(t.Context(), "/a/", rev+2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Create(t.Context(), "/a/"+strconv.Itoa(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if e := <-ch; e.Type != storage.Added || e.KV.Revision != rev+3 {
		t.Errorf("first event %+v, want the write at %d", e, rev+3)
	}
}
