package etcd

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/storage/storagetest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestConformanceUnderPrefix(t *testing.T) {
	store := New(shared.Client(), WithListBatch(3), WithPrefix("/conformance-prefix"))
	storagetest.RunConformance(t, func(*testing.T) storage.Interface { return store })
}

func TestCleanPrefix(t *testing.T) {
	for in, want := range map[string]string{"/registry": "/registry", "registry": "/registry", "/registry/": "/registry", "/": "", "": "", "/a//b/": "/a/b"} {
		if got := CleanPrefix(in); got != want {
			t.Errorf("CleanPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPrefixesApart: stores under different prefixes share one etcd
// without seeing each other's keys, which etcd holds at prefix+key.
func TestPrefixesApart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	one, two := New(shared.Client(), WithPrefix("/one")), New(shared.Client(), WithPrefix("/two"))
	events, err := two.Watch(ctx, "/pods/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.Create(ctx, "/pods/ns/a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	kv, err := two.Create(ctx, "/pods/ns/b", []byte("2"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := shared.Client().Get(ctx, "/one/pods/ns/a")
	if err != nil || len(raw.Kvs) != 1 || string(raw.Kvs[0].Value) != "1" {
		t.Errorf("etcd key /one/pods/ns/a: %v %v", err, raw)
	}
	for store, want := range map[*Store]string{one: "/pods/ns/a", two: "/pods/ns/b"} {
		list, err := store.List(ctx, "/pods/", storage.ListOptions{})
		if err != nil || len(list.Items) != 1 || list.Items[0].Key != want {
			t.Errorf("list under %s: %v %+v, want only %s", store.prefix, err, list.Items, want)
		}
	}
	// The watch under /two sees its own create first: not /one's.
	for ev := range events {
		if ev.Type == storage.Progress {
			continue
		}
		if ev.Type != storage.Added || ev.KV.Key != "/pods/ns/b" || ev.KV.Revision != kv.Revision {
			t.Errorf("watch under /two: %+v, want ADDED /pods/ns/b at %d", ev, kv.Revision)
		}
		break
	}
}

// TestCompactRound: of two servers running rounds on one etcd, one wins
// each round and compacts to what it saw at its previous one; the other
// learns the round and wins only once the winner stops.
func TestCompactRound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := shared.Client().Delete(ctx, CompactRevKey); err != nil {
		t.Fatal(err)
	}
	st := New(shared.Client())
	type server struct{ round, rev int64 }
	a, b := &server{}, &server{}
	run := func(s *server) bool {
		t.Helper()
		next, rev, compacted, err := st.CompactRound(ctx, s.round, s.rev)
		if err != nil {
			t.Fatal(err)
		}
		s.round, s.rev = next, rev
		return compacted
	}
	if run(a) {
		t.Fatal("the first round compacted: it only records a revision")
	}
	if run(b) || b.round != 1 {
		t.Fatalf("b lost the first round to a and must learn round 1, has %d", b.round)
	}
	target := a.rev
	if !run(a) {
		t.Fatal("a's second round did not compact")
	}
	if _, err := shared.Client().Get(ctx, "x", clientv3.WithRev(target-1)); err == nil {
		t.Errorf("revision %d readable after compacting to %d", target-1, target)
	}
	if _, err := shared.Client().Get(ctx, "x", clientv3.WithRev(target)); err != nil {
		t.Errorf("revision %d, compacted to, not readable: %v", target, err)
	}
	if run(b) {
		t.Fatal("b compacted in a round a had taken")
	}
	// a stops; b takes the next round.
	if !run(b) {
		t.Fatal("b did not take over once a stopped")
	}
	resp, err := shared.Client().Get(ctx, CompactRevKey)
	if err != nil {
		t.Fatal(err)
	}
	if v := resp.Kvs[0].Version; v != 3 {
		t.Errorf("%s at version %d after 3 won rounds", CompactRevKey, v)
	}
	if got, _ := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64); got <= target {
		t.Errorf("%s holds %d, want a revision after %d", CompactRevKey, got, target)
	}
}
