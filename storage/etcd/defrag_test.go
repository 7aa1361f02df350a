package etcd

import (
	"fmt"
	"github.com/corekube/corekube/test/logbuf"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestDefragWorthIt(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		size, inUse int64
		want        bool
	}{
		{size: 0, inUse: 0, want: false},
		{size: 20 * mib, inUse: 1 * mib, want: false},     // mostly free, but too little to bother
		{size: 1000 * mib, inUse: 900 * mib, want: false}, // 100 MiB free, but 10% of the file
		{size: 1000 * mib, inUse: 800 * mib, want: false},
		{size: 1000 * mib, inUse: 700 * mib, want: true},
		{size: 200 * mib, inUse: 100 * mib, want: true},
	} {
		if got := defragWorthIt(c.size, c.inUse); got != c.want {
			t.Errorf("defragWorthIt(%d MiB, %d MiB in use) = %v, want %v", c.size/mib, c.inUse/mib, got, c.want)
		}
	}
}

// TestEmbeddedDefragmentsAtStart: a database file left mostly free by a
// compaction is rewritten at the next start, with its data; a file with
// little free space is left as it is.
func TestEmbeddedDefragmentsAtStart(t *testing.T) {
	defer func(v int64) { defragMinFree = v }(defragMinFree)
	defragMinFree = 4 << 20

	dir := t.TempDir()
	var log logbuf.Buffer
	start := func() *Embedded {
		t.Helper()
		e, err := StartEmbedded(t.Context(), EmbeddedConfig{Dir: dir, UnsafeNoFsync: true, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatalf("StartEmbedded: %v", err)
		}
		return e
	}
	status := func(e *Embedded) *clientv3.StatusResponse {
		t.Helper()
		s, err := e.Client().Status(t.Context(), e.Endpoints()[0])
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		return s
	}
	const defragmented = "defragmented etcd's database at start"

	e := start()
	if strings.Contains(log.String(), defragmented) {
		t.Errorf("a fresh database was defragmented:\n%s", log.String())
	}
	client := e.Client()
	value := strings.Repeat("x", 256<<10)
	for i := range 64 { // 16 MiB, then deleted
		if _, err := client.Put(t.Context(), fmt.Sprintf("/defrag/big/%02d", i), value); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	if _, err := client.Put(t.Context(), "/defrag/kept", "kept"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	del, err := client.Delete(t.Context(), "/defrag/big/", clientv3.WithPrefix())
	if err != nil || del.Deleted != 64 {
		t.Fatalf("Delete = %v, %v; want 64 deleted", del, err)
	}
	if _, err := client.Compact(t.Context(), del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	// The pages the compaction freed count as free only once no read
	// transaction from before it is open; etcd releases its own at its
	// next commit, which only a write brings.
	before := status(e)
	for deadline := time.Now().Add(10 * time.Second); !defragWorthIt(before.DbSize, before.DbSizeInUse); before = status(e) {
		if time.Now().After(deadline) {
			t.Fatalf("after the compaction the file is %d bytes with %d in use: not fragmented enough for this test", before.DbSize, before.DbSizeInUse)
		}
		if _, err := client.Put(t.Context(), "/defrag/tick", "tick"); err != nil {
			t.Fatalf("Put: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	e = start()
	after := status(e)
	t.Logf("database file %d bytes (%d in use) before the restart, %d after", before.DbSize, before.DbSizeInUse, after.DbSize)
	if after.DbSize > before.DbSize/2 {
		t.Errorf("database file %d bytes after the restart, want at most half of the %d before", after.DbSize, before.DbSize)
	}
	if !strings.Contains(log.String(), defragmented) {
		t.Errorf("no defragmentation logged:\n%s", log.String())
	}
	got, err := e.Client().Get(t.Context(), "/defrag/kept")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "kept" {
		t.Errorf("after the defragmentation Get = %v, %v; want the kept key", got, err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// Now compact: the next start has nothing worth doing.
	logged := strings.Count(log.String(), defragmented)
	e = start()
	defer e.Close()
	if n := strings.Count(log.String(), defragmented); n != logged {
		t.Errorf("a compact database was defragmented again:\n%s", log.String())
	}
}
