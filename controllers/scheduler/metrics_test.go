package scheduler_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/corekube/corekube/test/metricstest"
	"github.com/corekube/corekube/test/testserver"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

func TestSchedulerMetrics(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "node-1", "2", "8Gi", "110")
	createNode(t, c, "node-2", "2", "8Gi", "110")
	reg := prometheus.NewPedanticRegistry()
	cfg := fastConfig()
	cfg.Metrics = reg
	startScheduler(t, srv, cfg)

	const n = 5
	for i := range n {
		createPod(t, c, fmt.Sprintf("m-%d", i), requests("100m", "128Mi"))
	}
	for i := range n {
		waitBound(t, c, fmt.Sprintf("m-%d", i))
	}
	createPod(t, c, "huge", requests("64", "128Mi"))
	waitUnschedulable(t, c, "huge", "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
	createPod(t, c, "gated", func(p *v1.Pod) {
		p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/wait"}}
	})

	var fs metricstest.Families
	want := func(name string, value float64, labels ...string) string {
		got, ok := fs.Value(name, labels...)
		if !ok || got != value {
			return fmt.Sprintf("%s%v = %v (present %v), want %v; series %v", name, labels, got, ok, value, fs.Series(name))
		}
		return ""
	}
	checks := func() []string {
		var bad []string
		for _, msg := range []string{
			want("scheduler_schedule_attempts_total", n, "result", "scheduled", "profile", "default-scheduler"),
			want("scheduler_schedule_attempts_total", 1, "result", "unschedulable", "profile", "default-scheduler"),
			want("scheduler_schedule_attempts_total", 0, "result", "error", "profile", "default-scheduler"),
			want("scheduler_scheduling_attempt_duration_seconds", n, "result", "scheduled", "profile", "default-scheduler"),
			want("scheduler_scheduling_attempt_duration_seconds", 1, "result", "unschedulable", "profile", "default-scheduler"),
			want("scheduler_pod_scheduling_sli_duration_seconds", n, "attempts", "1"),
			want("scheduler_pod_scheduling_attempts", n),
			want("scheduler_pending_pods", 1, "queue", "unschedulable"),
			want("scheduler_pending_pods", 1, "queue", "gated"),
			want("scheduler_pending_pods", 0, "queue", "active"),
			want("scheduler_pending_pods", 0, "queue", "backoff"),
			want("scheduler_preemption_attempts_total", 1),
			want("scheduler_queue_incoming_pods_total", n+1, "queue", "active", "event", "UnschedulablePodAdd"),
			want("scheduler_queue_incoming_pods_total", 1, "queue", "unschedulable", "event", "UnschedulablePodAdd"),
			want("scheduler_queue_incoming_pods_total", 1, "queue", "unschedulable", "event", "ScheduleAttemptFailure"),
		} {
			if msg != "" {
				bad = append(bad, msg)
			}
		}
		return bad
	}
	var bad []string
	testserver.WaitFor(t, "the scheduler's metrics", func(_ context.Context) (bool, error) {
		fs = metricstest.Gather(t, reg)
		bad = checks()
		return len(bad) == 0, nil
	}, func() string { return strings.Join(bad, "\n") })

	// Kube's help texts and buckets.
	if h := fs["scheduler_schedule_attempts_total"].GetHelp(); !strings.HasPrefix(h, "[STABLE] Number of attempts to schedule pods") {
		t.Errorf("help = %q", h)
	}
	if h := fs["scheduler_pod_scheduling_sli_duration_seconds"].GetHelp(); !strings.HasPrefix(h, "[BETA] ") {
		t.Errorf("sli help = %q", h)
	}
	buckets := fs["scheduler_scheduling_attempt_duration_seconds"].GetMetric()[0].GetHistogram().GetBucket()
	// 15 buckets from 1ms doubling, and +Inf.
	if len(buckets) != 16 || buckets[0].GetUpperBound() != 0.001 || math.Abs(buckets[14].GetUpperBound()-16.384) > 1e-9 {
		t.Errorf("attempt duration buckets: %d, first %v", len(buckets), buckets[0].GetUpperBound())
	}

	// The unschedulable pod fits once a big enough node arrives.
	createNode(t, c, "node-big", "128", "8Gi", "110")
	waitBound(t, c, "huge")
	testserver.WaitFor(t, "the retried pod's metrics", func(_ context.Context) (bool, error) {
		fs = metricstest.Gather(t, reg)
		bad = nil
		for _, msg := range []string{
			want("scheduler_schedule_attempts_total", n+1, "result", "scheduled"),
			want("scheduler_pod_scheduling_sli_duration_seconds", 1, "attempts", "2"),
			want("scheduler_pending_pods", 0, "queue", "unschedulable"),
		} {
			if msg != "" {
				bad = append(bad, msg)
			}
		}
		if v, _ := fs.Value("scheduler_queue_incoming_pods_total", "event", "NodeAdd"); v != 1 {
			bad = append(bad, fmt.Sprintf("incoming NodeAdd = %v: %v", v, fs.Series("scheduler_queue_incoming_pods_total")))
		}
		return len(bad) == 0, nil
	}, func() string { return strings.Join(bad, "\n") })
}
