package etcd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/storage/storagetest"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// shared is the embedded etcd all tests of this binary use, started once by
// TestMain.
var shared *Embedded

// progressInterval is short so that a test can wait for a progress event.
const progressInterval = 100 * time.Millisecond

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "corekube-etcd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	shared, err = StartEmbedded(ctx, EmbeddedConfig{Dir: dir, UnsafeNoFsync: true, WatchProgressInterval: progressInterval})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer shared.Close()
	return m.Run()
}

func TestConformance(t *testing.T) {
	// A tiny batch makes filtered lists span several etcd requests.
	store := New(shared.Client(), WithListBatch(3))
	storagetest.RunConformance(t, func(*testing.T) storage.Interface { return store })
}

func TestWatchProgress(t *testing.T) {
	s := New(shared.Client())
	prefix := "/progress/" + strconv.FormatInt(time.Now().UnixNano(), 10) + "/"
	ch, err := s.Watch(t.Context(), prefix, 0)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	kv, err := s.Create(t.Context(), prefix+"a", []byte("v"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatal("watch closed")
			}
			if e.Type == storage.Progress && e.KV.Revision >= kv.Revision {
				return
			}
		case <-deadline:
			t.Fatalf("no progress event at or after revision %d within 5s", kv.Revision)
		}
	}
}

func TestHealthyUnavailable(t *testing.T) {
	// Nothing listens on port 1: the read times out.
	client, err := NewClient([]string{"http://127.0.0.1:1"})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer client.Close()
	err = New(client, WithHealthTimeout(200*time.Millisecond)).Healthy(t.Context())
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Healthy = %v, want ErrUnavailable", err)
	}
}

func TestEmbeddedRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	start := func() *Embedded {
		t.Helper()
		began := time.Now()
		e, err := StartEmbedded(t.Context(), EmbeddedConfig{Dir: dir, UnsafeNoFsync: true})
		if err != nil {
			t.Fatalf("StartEmbedded: %v", err)
		}
		t.Logf("started in %v on %v", time.Since(began).Round(time.Millisecond), e.Endpoints())
		return e
	}

	e := start()
	if other, err := StartEmbedded(t.Context(), EmbeddedConfig{Dir: dir}); err == nil {
		other.Close()
		t.Fatal("a second etcd started on a data directory in use")
	} else {
		t.Logf("second etcd on the same directory: %v", err)
	}
	kv, err := New(e.Client()).Create(t.Context(), "/restart/a", []byte("kept"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	e = start()
	defer e.Close()
	got, err := New(e.Client()).Get(t.Context(), "/restart/a")
	if err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	if string(got.Value) != "kept" || got.Revision != kv.Revision {
		t.Errorf("after restart got %q@%d, want %q@%d", got.Value, got.Revision, kv.Value, kv.Revision)
	}
}

// BenchmarkCreate measures parallel creates of 1 KiB values through the
// embedded etcd (with fsync off, so it measures corekube and etcd, not the
// disk).
// With metrics=on the Store records kube's etcd metrics too.
func BenchmarkCreate(b *testing.B) {
	b.Run("metrics=off", func(b *testing.B) { benchmarkCreate(b, New(shared.Client())) })
	b.Run("metrics=on", func(b *testing.B) { benchmarkCreate(b, New(shared.Client(), WithMetrics(prometheus.NewRegistry()))) })
}

func benchmarkCreate(b *testing.B, s *Store) {
	value := make([]byte, 1024)
	prefix := "/bench/" + strconv.FormatInt(time.Now().UnixNano(), 10) + "/"
	var seq atomic.Int64
	b.SetBytes(int64(len(value)))
	b.SetParallelism(8) // many concurrent requests, as an API server makes
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := prefix + strconv.FormatInt(seq.Add(1), 10)
			if _, err := s.Create(context.Background(), key, value); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// TestWatcherStopsWhenNobodyReads checks that a watch whose consumer has
// gone (cancelled ctx, stopped reading) does not block forever trying to
// deliver an event.
func TestWatcherStopsWhenNobodyReads(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	wch := make(chan clientv3.WatchResponse)
	w := watcher{ctx: ctx, out: make(chan storage.Event), prefix: "/", from: 1}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(wch)
	}()
	// Unbuffered: once this send returns, run holds the event and is about
	// to block on out, which nobody reads.
	wch <- clientv3.WatchResponse{Events: []*clientv3.Event{{
		Type: mvccpb.PUT,
		Kv:   &mvccpb.KeyValue{Key: []byte("/a"), Value: []byte("v"), CreateRevision: 2, ModRevision: 2},
	}}}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("watcher still blocked 5s after its context ended")
	}
}
