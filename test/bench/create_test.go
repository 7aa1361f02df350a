package bench

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/corekube/corekube/server"
)

// concurrency is the number of clients of the create benchmarks.
const concurrency = 16

const createNamespaceName = "bench-create"

func setupCreate(srv *server.Server) error {
	c := clientFor(srv.URL())
	defer c.CloseIdleConnections()
	return createNamespace(c, srv.URL(), createNamespaceName)
}

var (
	// createServer hosts the create benchmarks: pods over HTTP in
	// bench-create, raw storage creates under /registry/pods/rawbench/, on
	// the test harness's server (etcd without fsync).
	createServer = &lazyServer{setup: setupCreate}
	// createServerFsync is the same with fsync on, as `corekube up` runs.
	createServerFsync = &lazyServer{start: startFsyncServer, setup: setupCreate}
	// createServerAudit writes an audit log at Metadata level.
	createServerAudit = &lazyServer{start: startAuditServer, setup: setupCreate}
	// createServerPlain serves plain HTTP (--insecure-http).
	createServerPlain = &lazyServer{start: startPlainServer, setup: setupCreate}
)

// BenchmarkPodCreate compares pod creates over HTTP (the whole stack:
// HTTP, decoding, admission, defaulting, validation, encoding, etcd
// transaction, response) with raw storage creates of the same bodies
// (storage.Interface.Create: one etcd transaction each), both by exactly 16
// concurrent clients on the same embedded etcd. One op is one create.
//
// http and storage use the test harness (testserver.Start, etcd without
// fsync; HTTPS with the admin's client certificate, each client on
// HTTP/1.1 connections of its own); fsync-http and fsync-storage the same
// server with fsync on; plain-http a server with --insecure-http (its
// admin a static token); token the http server with a ServiceAccount token
// (RBAC decides its requests) instead of the admin's client certificate;
// token-audit the same on a server writing an audit log at Metadata level.
// heap-MiB is the live heap of the whole process after the run: it grows
// with every write etcd has not yet snapshotted (see BENCHMARKS.md).
func BenchmarkPodCreate(b *testing.B) {
	skipShort(b)
	b.Run("http", func(b *testing.B) { benchCreateHTTP(b, createServer) })
	b.Run("storage", func(b *testing.B) { benchCreateStorage(b, createServer) })
	b.Run("fsync-http", func(b *testing.B) { benchCreateHTTP(b, createServerFsync) })
	b.Run("fsync-storage", func(b *testing.B) { benchCreateStorage(b, createServerFsync) })
	b.Run("plain-http", func(b *testing.B) { benchCreateHTTP(b, createServerPlain) })
	b.Run("token", func(b *testing.B) {
		srv := createServer.get(b)
		token, err := serviceAccountToken(srv, createNamespaceName, "bench")
		if err != nil {
			b.Fatal(err)
		}
		benchCreateHTTPWith(b, createServer, newTokenClient(token))
	})
	b.Run("token-audit", func(b *testing.B) {
		srv := createServerAudit.get(b)
		token, err := serviceAccountToken(srv, createNamespaceName, "bench")
		if err != nil {
			b.Fatal(err)
		}
		benchCreateHTTPWith(b, createServerAudit, newTokenClient(token))
	})
}

func benchCreateHTTP(b *testing.B, ls *lazyServer) {
	benchCreateHTTPWith(b, ls, clientFor(ls.get(b).URL()))
}

func benchCreateHTTPWith(b *testing.B, ls *lazyServer, client *http.Client) {
	srv := ls.get(b)
	defer client.CloseIdleConnections()
	names, bodies := timedCreates(b, srv, client, createNamespaceName, "http")
	b.ReportMetric(float64(len(bodies[0])), "req-bytes")
	kv, err := srv.Storage().Get(context.Background(), "/pods/"+createNamespaceName+"/"+names[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(kv.Value)), "stored-bytes")
	b.ReportMetric(liveHeapMiB(), "heap-MiB")
}

// timedCreates creates b.N pods (names from prefix) in namespace through
// srv's API, with client, by concurrency clients, timing only the
// creates, and reports creates/s and the p50 and p99 latencies. It
// returns the pods' names and bodies.
func timedCreates(b *testing.B, srv *server.Server, client *http.Client, namespace, prefix string) (names []string, bodies [][]byte) {
	url := srv.URL() + "/api/v1/namespaces/" + namespace + "/pods"
	names, bodies = podBodies(prefix, b.N, func(int) string { return "web" })
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
	return names, bodies
}

func benchCreateStorage(b *testing.B, ls *lazyServer) {
	srv := ls.get(b)
	st := srv.Storage()
	names, bodies := podBodies("raw", b.N, func(int) string { return "web" })
	keys := make([]string, len(names))
	for i, name := range names {
		keys[i] = "/pods/rawbench/" + name
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
	b.ReportMetric(liveHeapMiB(), "heap-MiB")
}

// liveHeapMiB is the process's live Go heap after a collection (client,
// server and etcd together), taken after the timed part.
func liveHeapMiB() float64 { return float64(liveHeapKiB()) / 1024 }

// warmConnections opens the connections the benchmark will use, so that
// the measured run does not pay for dialling.
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
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
