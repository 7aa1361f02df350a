package etcd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/storage/storagetest"
)

// compressEverything makes a store write every value compressed with d,
// so that the conformance suite's keys (none under pods or events) are.
func compressEverything(d *dictionary) Option {
	return func(s *Store) { s.compressAll = d }
}

// TestDictionariesFrozen: a dictionary is part of the storage format (a
// value reads back only with the bytes it was written with). A new one
// gets a new name; an existing one never changes.
func TestDictionariesFrozen(t *testing.T) {
	want := map[string]string{
		"pods1":   "09c79bd3f304a35e7b975bebacbc549e0450131fe32d7edc40f924a94028f631",
		"events1": "996b5dfbc9b27c8fbc7a7cf48db61dee2023e62e108ac4af59e39bcfca14c113",
	}
	if len(dictionaries) != len(want) {
		t.Errorf("%d dictionaries, want %d: give a new one its hash here", len(dictionaries), len(want))
	}
	for name, d := range dictionaries {
		sum := sha256.Sum256(d.bytes)
		if got := hex.EncodeToString(sum[:]); got != want[name] {
			t.Errorf("dictionary %s has SHA-256 %s, want %s: values written with it would no longer read", name, got, want[name])
		}
		if d.name != name || d.prefix != compressedPrefix+name+":" {
			t.Errorf("dictionary %s is named %q with prefix %q", name, d.name, d.prefix)
		}
	}
}

func TestConformanceCompressed(t *testing.T) {
	store := New(shared.Client(), WithListBatch(3), compressEverything(dictionaries["pods1"]))
	storagetest.RunConformance(t, func(*testing.T) storage.Interface { return store })
}

// raw reads key's value as etcd holds it.
func raw(t *testing.T, key string) []byte {
	t.Helper()
	resp, err := shared.Client().Get(t.Context(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get %s: %v (%d keys)", key, err, len(resp.Kvs))
	}
	return resp.Kvs[0].Value
}

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompressedResources: a compressing store writes pods and events
// compressed with their dictionaries and everything else as it is; every
// store reads both, whether it compresses or not, so turning compression
// on or off needs no migration.
func TestCompressedResources(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	root := "/compressed-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	on := New(shared.Client(), WithPrefix(root), WithCompression(true))
	off := New(shared.Client(), WithPrefix(root))
	pod, event := testdata(t, "pod.pb"), testdata(t, "event.pb")

	for _, tc := range []struct {
		key, dictionary string
		value           []byte
	}{
		{"/pods/ns/p", "pods1", pod},
		{"/events/ns/e", "events1", event},
		{"/leases/ns/l", "", []byte("k8s\x00lease")},
		{"/nodes/n", "", pod}, // nodes are not compressed, whatever their bytes
	} {
		if _, err := on.Create(ctx, tc.key, tc.value); err != nil {
			t.Fatalf("Create %s: %v", tc.key, err)
		}
		stored := raw(t, root+tc.key)
		if tc.dictionary == "" {
			if !bytes.Equal(stored, tc.value) {
				t.Errorf("%s stored as %q, want as given", tc.key, stored[:min(len(stored), 20)])
			}
		} else {
			prefix := compressedPrefix + tc.dictionary + ":"
			if !bytes.HasPrefix(stored, []byte(prefix)) || len(stored) > len(tc.value)/3 {
				t.Errorf("%s stored as %d bytes starting %q, want compressed with %s (%d bytes given)",
					tc.key, len(stored), stored[:min(len(stored), 20)], tc.dictionary, len(tc.value))
			}
			t.Logf("%s: %d bytes stored as %d", tc.key, len(tc.value), len(stored))
		}
		for name, s := range map[string]*Store{"compressing": on, "plain": off} {
			got, err := s.Get(ctx, tc.key)
			if err != nil || !bytes.Equal(got.Value, tc.value) {
				t.Errorf("%s store: Get %s = %d bytes, %v; want the %d bytes written", name, tc.key, len(got.Value), err, len(tc.value))
			}
		}
	}

	// The plain store's update of a compressed pod writes it plain; the
	// compressing store's, compressed again. Both see the other's value.
	update := func(s *Store, suffix string) {
		t.Helper()
		_, err := s.GuaranteedUpdate(ctx, "/pods/ns/p", func(cur storage.KV) ([]byte, error) {
			if !bytes.HasPrefix(cur.Value, pod) {
				t.Errorf("update saw %d bytes, want the pod with suffixes", len(cur.Value))
			}
			return append(bytes.Clone(cur.Value), suffix...), nil
		})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
	}
	update(off, "a")
	if stored := raw(t, root+"/pods/ns/p"); !bytes.Equal(stored, append(bytes.Clone(pod), 'a')) {
		t.Errorf("plain store's update stored %q…, want the value as it is", stored[:20])
	}
	update(on, "b")
	if stored := raw(t, root+"/pods/ns/p"); !bytes.HasPrefix(stored, []byte(compressedPrefix+"pods1:")) {
		t.Errorf("compressing store's update stored %q…, want it compressed", stored[:20])
	}
	got, err := off.Get(ctx, "/pods/ns/p")
	if err != nil || !bytes.Equal(got.Value, append(bytes.Clone(pod), "ab"...)) {
		t.Errorf("Get after both updates = %d bytes, %v", len(got.Value), err)
	}

	// A no-op update of a compressed value writes nothing.
	before := got.Revision
	kv, err := on.GuaranteedUpdate(ctx, "/pods/ns/p", func(cur storage.KV) ([]byte, error) { return cur.Value, nil })
	if err != nil || kv.Revision != before {
		t.Errorf("no-op update: revision %d, %v; want %d unchanged", kv.Revision, err, before)
	}
}

// TestCompressedWatchAndList: watches, LISTs (paged, filtered) and
// deletes return values decompressed.
func TestCompressedWatchAndList(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s := New(shared.Client(), WithPrefix("/compressed-watch-"+strconv.FormatInt(time.Now().UnixNano(), 10)),
		WithCompression(true), WithListBatch(2))
	pod := testdata(t, "pod.pb")
	value := func(i int) []byte { return append(bytes.Clone(pod), strconv.Itoa(i)...) }
	events, err := s.Watch(ctx, "/pods/", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Create(ctx, "/pods/ns/p"+strconv.Itoa(i), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GuaranteedUpdate(ctx, "/pods/ns/p0", func(storage.KV) ([]byte, error) { return value(10), nil }); err != nil {
		t.Fatal(err)
	}
	deleted, err := s.Delete(ctx, "/pods/ns/p1", nil)
	if err != nil || !bytes.Equal(deleted.Value, value(1)) {
		t.Errorf("Delete returned %d bytes, %v; want the value", len(deleted.Value), err)
	}

	for i, want := range []struct {
		typ         storage.EventType
		value, prev []byte
	}{
		{storage.Added, value(0), nil}, {storage.Added, value(1), nil}, {storage.Added, value(2), nil},
		{storage.Added, value(3), nil}, {storage.Added, value(4), nil},
		{storage.Modified, value(10), value(0)}, {storage.Deleted, value(1), value(1)},
	} {
		select {
		case e := <-events:
			if e.Type != want.typ || !bytes.Equal(e.KV.Value, want.value) || !bytes.Equal(e.PrevValue, want.prev) {
				t.Errorf("event %d: %s of %s, %d bytes (prev %d), err %v; want %s with %d bytes (prev %d)",
					i, e.Type, e.KV.Key, len(e.KV.Value), len(e.PrevValue), e.Err, want.typ, len(want.value), len(want.prev))
			}
		case <-ctx.Done():
			t.Fatalf("no event %d", i)
		}
	}

	page, err := s.List(ctx, "/pods/", storage.ListOptions{Limit: 2})
	if err != nil || len(page.Items) != 2 || !bytes.Equal(page.Items[0].Value, value(10)) {
		t.Errorf("List page: %d items, %v", len(page.Items), err)
	}
	filtered, err := s.List(ctx, "/pods/", storage.ListOptions{Predicate: func(kv storage.KV) (bool, error) {
		return bytes.HasPrefix(kv.Value, pod), nil // sees the value decompressed
	}})
	if err != nil || len(filtered.Items) != 4 {
		t.Errorf("filtered List: %d items, %v; want 4", len(filtered.Items), err)
	}
	for _, kv := range filtered.Items {
		if !bytes.HasPrefix(kv.Value, pod) {
			t.Errorf("List item %s: %d bytes, not the pod", kv.Key, len(kv.Value))
		}
	}
}

// TestUnreadableCompressedValues: a value with an unknown dictionary or a
// broken stream is an error that names the key and the cause, for reads,
// LISTs and watches alike, not bytes handed on.
func TestUnreadableCompressedValues(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	root := "/unreadable-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	s := New(shared.Client(), WithPrefix(root))
	events, err := s.Watch(ctx, "/pods/", 0)
	if err != nil {
		t.Fatal(err)
	}
	for key, value := range map[string]string{
		"/pods/ns/future": compressedPrefix + "pods9:abc",
		"/pods/ns/broken": compressedPrefix + "pods1:not deflate",
	} {
		if _, err := shared.Client().Put(ctx, root+key, value); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get(ctx, key)
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Get %s: %v, want an error naming the key", key, err)
		}
		t.Logf("Get %s: %v", key, err)
	}
	if _, err := s.Get(ctx, "/pods/ns/future"); err == nil || !strings.Contains(err.Error(), `unknown compression dictionary "pods9"`) {
		t.Errorf("Get of a value with dictionary pods9: %v", err)
	}
	if _, err := s.List(ctx, "/pods/", storage.ListOptions{}); err == nil {
		t.Error("List of unreadable values succeeded")
	}
	select {
	case e := <-events:
		if e.Type != storage.Error || e.Err == nil {
			t.Errorf("watch event %s (%v), want an error", e.Type, e.Err)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
}

// BenchmarkCompression measures a pod's compression and decompression
// with its dictionary: the CPU a write and a read of it cost.
func BenchmarkCompression(b *testing.B) {
	pod, err := os.ReadFile("testdata/pod.pb")
	if err != nil {
		b.Fatal(err)
	}
	d := dictionaries["pods1"]
	stored := d.compress(pod)
	b.Run("compress", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d.compress(pod)
		}
		b.ReportMetric(float64(len(stored)), "stored-bytes")
	})
	b.Run("decompress", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeValue([]byte(stored)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
