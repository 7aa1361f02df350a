package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

const patchNamespaceName = "bench-patch"

// BenchmarkPodPatch compares a server-side apply (PATCH with
// application/apply-patch+yaml, fieldManager bench) with a strategic merge
// patch making the same change to the same realistic pod: one label's value,
// new on every op, so that every op writes. Each op is one PATCH by one
// client, sequentially, after the pod's first apply; p50 and p99 are the
// latencies seen by the client. The applied configuration is the whole pod
// body (what kubectl apply --server-side sends); the strategic merge patch
// only the label.
func BenchmarkPodPatch(b *testing.B) {
	skipShort(b)
	srv := createServer.get(b)
	client := clientFor(srv.URL())
	defer client.CloseIdleConnections()
	if err := createNamespace(client, srv.URL(), patchNamespaceName); err != nil && !strings.Contains(err.Error(), ": 409, ") {
		b.Fatal(err)
	}
	base := srv.URL() + "/api/v1/namespaces/" + patchNamespaceName + "/pods/"
	b.Run("strategic", func(b *testing.B) {
		name := newPodName("smp")
		if err := post(context.Background(), client, srv.URL()+"/api/v1/namespaces/"+patchNamespaceName+"/pods", podBody(name, "v0"), http.StatusCreated); err != nil {
			b.Fatal(err)
		}
		benchPatch(b, client, base+name, "application/strategic-merge-patch+json", func(i int) []byte {
			return []byte(fmt.Sprintf(`{"metadata":{"labels":{"app":"v%d"}}}`, i+1))
		})
	})
	b.Run("apply", func(b *testing.B) {
		name := newPodName("ssa")
		url := base + name + "?fieldManager=bench"
		if err := patch(context.Background(), client, url, "application/apply-patch+yaml", podBody(name, "v0"), http.StatusCreated); err != nil {
			b.Fatal(err)
		}
		benchPatch(b, client, url, "application/apply-patch+yaml", func(i int) []byte {
			return podBody(name, fmt.Sprintf("v%d", i+1))
		})
	})
}

func benchPatch(b *testing.B, client *http.Client, url, contentType string, body func(i int) []byte) {
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = body(i)
	}
	ctx := context.Background()
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range bodies {
		start := time.Now()
		if err := patch(ctx, client, url, contentType, bodies[i], http.StatusOK); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(start)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
	b.ReportMetric(float64(len(bodies[0])), "req-bytes")
}

// patch sends one PATCH and checks its status code.
func patch(ctx context.Context, c *http.Client, url, contentType string, body []byte, want int) error {
	return send(ctx, c, http.MethodPatch, url, contentType, body, want)
}
