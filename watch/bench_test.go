package watch

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/corekube/corekube/storage"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkDispatch measures one event applied to the cache and delivered
// to 1,000 watchers, each drained by its own consumer as the watch handler
// drains it: the fan-out path that runs once per watcher per event. It
// needs no etcd: the events are applied directly.
// With metrics on, each delivery is also counted as the watch handler
// counts one with the cache's encoding (RecordSentShared).
func BenchmarkDispatch(b *testing.B) {
	b.Run("metrics=off", func(b *testing.B) { benchmarkDispatch(b, nil) })
	b.Run("metrics=on", func(b *testing.B) { benchmarkDispatch(b, NewMetrics(prometheus.NewRegistry())) })
}

func benchmarkDispatch(b *testing.B, m *Metrics) {
	const watchers = 1000
	c := New(Config{Prefix: "/pods/", Decode: decodePod, WatcherBuffer: 1 << 20, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	c.mu.Lock()
	c.ready = true
	c.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var delivered sync.WaitGroup
	for range watchers {
		w, err := c.Watch(ctx, WatchOptions{})
		if err != nil {
			b.Fatal(err)
		}
		delivered.Add(1)
		go func() {
			defer delivered.Done()
			for n := 0; n < b.N; n++ {
				ev, ok := w.Next()
				if !ok {
					b.Error("watch ended early")
					return
				}
				c.RecordSentShared(ev.Object, ev.Type, false, len(ev.Object.data))
			}
		}()
	}
	value := []byte("v")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		ev := storage.Event{Type: storage.Modified, KV: storage.KV{Key: "/pods/ns/p" + strconv.Itoa(i%100), Value: value, Revision: int64(i + 1)}}
		if err := c.apply(ev); err != nil {
			b.Fatal(err)
		}
	}
	delivered.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*watchers), "ns/delivery")
}

// BenchmarkRecordSent measures what the metrics add per event sent to a
// watch client (the handler's RecordSent), from many watchers at once.
// "shared" is an event with the cache's encoding, whose size was
// observed by the first watcher already.
func BenchmarkRecordSent(b *testing.B) {
	c := New(Config{Prefix: "/pods/", Metrics: NewMetrics(prometheus.NewRegistry())})
	b.Run("own", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(64)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.RecordSent(3000)
			}
		})
	})
	b.Run("shared", func(b *testing.B) {
		obj := &Object{}
		b.ReportAllocs()
		b.SetParallelism(64)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.RecordSentShared(obj, Modified, false, 3000)
			}
		})
	})
}
