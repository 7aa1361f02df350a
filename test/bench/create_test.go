package bench

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/corekube/corekube/test/testserver"
)

// concurrency is the number of clients of the create benchmarks.
const concurrency = 16

const createNamespaceName = "bench-create"

// createServer hosts both create benchmarks: pods over HTTP in
// bench-create, raw storage creates under /registry/pods/rawbench/.
var createServer = &lazyServer{setup: func(srv *testserver.Server) error {
	return createNamespace(newClient(), srv.URL(), createNamespaceName)
}}

// BenchmarkPodCreate compares pod creates over HTTP (the whole stack:
// HTTP, decoding, admission, defaulting, validation, encoding, etcd
// transaction, response) with raw storage creates of the same bodies
// (storage.Interface.Create: one etcd transaction each), both by exactly 16
// concurrent clients on the same embedded etcd. One op is one create.
func BenchmarkPodCreate(b *testing.B) {
	skipShort(b)
	b.Run("http", benchCreateHTTP)
	b.Run("storage", benchCreateStorage)
}

func benchCreateHTTP(b *testing.B) {
	srv := createServer.get(b)
	client := newClient()
	defer client.CloseIdleConnections()
	url := srv.URL() + "/api/v1/namespaces/" + createNamespaceName + "/pods"
	names, bodies := podBodies("http", b.N, func(int) string { return "web" })
	warmConnections(b, client, srv.URL()+"/healthz")
	ctx := context.Background()

	b.ResetTimer()
	lat, wall, err := runPool(concurrency, b.N, func(i int) error {
		return post(ctx, client, url, bodies[i], http.StatusCreated)
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/wall.Seconds(), "creates/s")
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
	b.ReportMetric(float64(len(bodies[0])), "req-bytes")
	kv, err := srv.Storage().Get(ctx, "/registry/pods/"+createNamespaceName+"/"+names[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(kv.Value)), "stored-bytes")
}

func benchCreateStorage(b *testing.B) {
	srv := createServer.get(b)
	st := srv.Storage()
	names, bodies := podBodies("raw", b.N, func(int) string { return "web" })
	keys := make([]string, len(names))
	for i, name := range names {
		keys[i] = "/registry/pods/rawbench/" + name
	}
	ctx := context.Background()

	b.ResetTimer()
	lat, wall, err := runPool(concurrency, b.N, func(i int) error {
		_, err := st.Create(ctx, keys[i], bodies[i])
		return err
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/wall.Seconds(), "txn/s")
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
}

// warmConnections opens the concurrency connections the benchmark will use,
// so that the measured run does not pay for dialling.
func warmConnections(b *testing.B, c *http.Client, url string) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, concurrency)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(url)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
