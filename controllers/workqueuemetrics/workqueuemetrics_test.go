package workqueuemetrics_test

import (
	"testing"

	"github.com/corekube/corekube/controllers/workqueuemetrics"
	"github.com/corekube/corekube/test/metricstest"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Two queues of one registry (their providers asked for separately, as
// two controllers do) and a queue of another registry: each registry
// counts its own queues, under kube's names, help texts and buckets.
func TestProviderPerRegistry(t *testing.T) {
	reg, other := prometheus.NewRegistry(), prometheus.NewRegistry()
	p1, err := workqueuemetrics.For(reg)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := workqueuemetrics.For(reg)
	if err != nil {
		t.Fatalf("second provider on one registry: %v", err)
	}
	p3, err := workqueuemetrics.For(other)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := workqueuemetrics.For(nil); p != nil || err != nil {
		t.Errorf("For(nil) = %v, %v; want no provider", p, err)
	}
	newQueue := func(name string, p workqueue.MetricsProvider) workqueue.TypedRateLimitingInterface[string] {
		q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name, MetricsProvider: p})
		t.Cleanup(q.ShutDown)
		return q
	}
	a, b, c := newQueue("disruption", p1), newQueue("namespace", p2), newQueue("disruption", p3)
	a.Add("x")
	a.Add("y")
	item, _ := a.Get()
	a.AddRateLimited(item) // a retry
	a.Done(item)
	b.Add("z")

	fs := metricstest.Gather(t, reg)
	for _, tc := range []struct {
		name  string
		queue string
		want  float64
	}{
		{"workqueue_adds_total", "disruption", 2},
		{"workqueue_adds_total", "namespace", 1},
		{"workqueue_depth", "disruption", 1},
		{"workqueue_retries_total", "disruption", 1},
		{"workqueue_queue_duration_seconds", "disruption", 1},
		{"workqueue_work_duration_seconds", "disruption", 1},
	} {
		if got, ok := fs.Value(tc.name, "name", tc.queue); !ok || got != tc.want {
			t.Errorf("%s{name=%q} = %v (present %v), want %v", tc.name, tc.queue, got, ok, tc.want)
		}
	}
	for _, name := range []string{"workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"} {
		if _, ok := fs.Value(name, "name", "disruption"); !ok {
			t.Errorf("no %s{name=disruption}", name)
		}
	}
	if h := fs["workqueue_adds_total"].GetHelp(); h != "[ALPHA] Total number of adds handled by workqueue" {
		t.Errorf("help %q", h)
	}
	buckets := fs["workqueue_queue_duration_seconds"].GetMetric()[0].GetHistogram().GetBucket()
	if len(buckets) != 11 || buckets[0].GetUpperBound() != 1e-8 || buckets[9].GetUpperBound() != 10 {
		t.Errorf("buckets %v, want 1e-08 ... 10 and +Inf", buckets)
	}

	c.Add("w")
	fs = metricstest.Gather(t, other)
	if got, _ := fs.Value("workqueue_adds_total", "name", "disruption"); got != 1 {
		t.Errorf("the other registry's disruption adds = %v, want 1 (its own queue only)", got)
	}
}

// BenchmarkQueueItem measures one item through a named queue (Add, Get,
// Done) without metrics and with a registry's provider.
func BenchmarkQueueItem(b *testing.B) {
	for _, tc := range []struct {
		name string
		reg  prometheus.Registerer
	}{{"none", nil}, {"metrics", prometheus.NewRegistry()}} {
		b.Run(tc.name, func(b *testing.B) {
			p, err := workqueuemetrics.For(tc.reg)
			if err != nil {
				b.Fatal(err)
			}
			q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[int]{Name: "bench", MetricsProvider: p})
			defer q.ShutDown()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q.Add(i)
				item, _ := q.Get()
				q.Done(item)
			}
		})
	}
}
