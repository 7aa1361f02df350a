package agent

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/metricstest"
	"github.com/corekube/corekube/test/testserver"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// checkKubeletMetrics runs n pods on node-1 of e's agent (which has two
// nodes; node-2 runs otherPods pods already) and checks what the kubelet
// API's /metrics says of them: the exposition parses, every kubelet
// family has kube's help prefix, and the counts follow the sequence.
func checkKubeletMetrics(t *testing.T, parent *env, n, otherPods int) {
	e := *parent
	e.t = t // failures end the subtest
	e.waitNodeReady("node-1")
	var pods []*v1.Pod
	for i := range n {
		pods = append(pods, e.runPod(simplePod(fmt.Sprintf("metrics-%d", i), v1.RestartPolicyAlways), "node-1"))
	}
	for _, pod := range pods {
		e.waitPod(pod, 10*time.Second, "Running", phaseIs(v1.PodRunning))
	}
	url := e.kubelet().url + "/metrics"
	node1 := []string{"node", "node-1"}
	// Each value as the sequence leaves it, once the agent has seen it
	// all (the PLEG's next relist, the watch events of the last status
	// writes).
	want := []struct {
		name   string
		labels []string
		value  float64
	}{
		{"kubelet_node_name", node1, 1},
		{"kubelet_node_name", []string{"node", "node-2"}, 1},
		{"kubelet_running_pods", node1, float64(n)},
		{"kubelet_running_pods", []string{"node", "node-2"}, float64(otherPods)},
		{"kubelet_running_containers", append(node1, "container_state", "running"), float64(n)},
		{"kubelet_started_pods_total", node1, float64(n)},
		{"kubelet_started_pods_errors_total", node1, 0},
		{"kubelet_started_containers_total", append(node1, "container_type", "container"), float64(n)},
		{"kubelet_pod_start_sli_duration_seconds", node1, float64(n)},
		{"kubelet_pod_start_total_duration_seconds", node1, float64(n)},
		{"kubelet_pod_start_duration_seconds", node1, float64(n)},
		{"kubelet_pod_worker_duration_seconds", append(node1, "operation_type", "create"), float64(n)},
	}
	var fs metricstest.Families
	e.poll(10*time.Second, "the kubelet metrics to show the pods", func(context.Context) (bool, error) {
		fs = metricstest.Scrape(t, testserver.AdminKubeletHTTPClient(), url)
		for _, w := range want {
			if got, ok := fs.Value(w.name, w.labels...); !ok || got != w.value {
				return false, fmt.Errorf("%s%v = %v (found: %v), want %v; series %v", w.name, w.labels, got, ok, w.value, fs.Series(w.name))
			}
		}
		return true, nil
	})

	for name, f := range fs {
		if strings.HasPrefix(name, "kubelet_") && !strings.HasPrefix(f.GetHelp(), "[ALPHA] ") {
			t.Errorf("%s: help %q lacks the stability prefix", name, f.GetHelp())
		}
	}
	for _, name := range []string{"kubelet_pleg_relist_duration_seconds", "kubelet_pleg_relist_interval_seconds"} {
		if got, ok := fs.Value(name, node1...); !ok || got < 1 {
			t.Errorf("%s{node=node-1}: %v observations, want some", name, got)
		}
	}
	if got, _ := fs.Value("kubelet_pleg_last_seen_seconds", node1...); time.Since(time.Unix(int64(got), 0)).Abs() > time.Minute {
		t.Errorf("kubelet_pleg_last_seen_seconds{node=node-1} = %v, not about now", got)
	}
	// Kube's pod startup buckets, 0.5s to an hour (and +Inf).
	sli := fs["kubelet_pod_start_sli_duration_seconds"].GetMetric()[0].GetHistogram().GetBucket()
	var bounds []float64
	for _, b := range sli {
		if !math.IsInf(b.GetUpperBound(), 1) {
			bounds = append(bounds, b.GetUpperBound())
		}
	}
	if !reflect.DeepEqual(bounds, podStartupBuckets) {
		t.Errorf("pod start SLI buckets %v, want %v", bounds, podStartupBuckets)
	}
	// The agent's own registry has the Go and process collectors.
	if _, ok := fs.Value("go_goroutines"); !ok {
		t.Error("no go_goroutines on the kubelet's /metrics")
	}
	// Labelled children appear at their first observation, as the
	// kubelet's: no init container started, no pod stopped yet.
	for _, absent := range [][]string{
		{"kubelet_started_containers_total", "container_type", "init_container"},
		{"kubelet_pod_worker_duration_seconds", "operation_type", "kill"},
		{"kubelet_pod_worker_duration_seconds", "operation_type", "terminated"},
	} {
		if got, ok := fs.Value(absent[0], append(node1, absent[1:]...)...); ok {
			t.Errorf("%s%v = %v before any was observed; want no series", absent[0], absent[1:], got)
		}
	}
	// The scrapes before the last were counted.
	if got, _ := fs.Value("kubelet_http_requests_total", "method", "GET", "path", "metrics", "server_type", "readwrite", "long_running", "false"); got < 1 {
		t.Errorf("kubelet_http_requests_total for /metrics = %v; series %v", got, fs.Series("kubelet_http_requests_total"))
	}

	// A deleted pod: stopped (kill), then cleaned up once gone from the
	// API (terminated), no longer running.
	if err := e.client.CoreV1().Pods(pods[0].Namespace).Delete(context.Background(), pods[0].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(1))}); err != nil {
		t.Fatal(err)
	}
	e.poll(10*time.Second, "the kubelet metrics to show the pod gone", func(context.Context) (bool, error) {
		fs = metricstest.Scrape(t, testserver.AdminKubeletHTTPClient(), url)
		for _, w := range []struct {
			name   string
			labels []string
			ok     func(float64) bool
		}{
			{"kubelet_running_pods", node1, func(v float64) bool { return v == float64(n-1) }},
			{"kubelet_running_containers", append(node1, "container_state", "running"), func(v float64) bool { return v == float64(n-1) }},
			{"kubelet_pod_worker_duration_seconds", append(node1, "operation_type", "kill"), func(v float64) bool { return v >= 1 }},
			{"kubelet_pod_worker_duration_seconds", append(node1, "operation_type", "terminated"), func(v float64) bool { return v == 1 }},
			{"kubelet_started_pods_total", node1, func(v float64) bool { return v == float64(n) }},
		} {
			if got, ok := fs.Value(w.name, w.labels...); !ok || !w.ok(got) {
				return false, fmt.Errorf("%s%v = %v (found: %v)", w.name, w.labels, got, ok)
			}
		}
		return true, nil
	})
}

// TestMetricsRegistry: the agent registers into the Registerer it is
// given, one series per node from the start (per-operation ones once
// observed), and refuses a registry that
// has an agent's metrics already; agents without one do not share theirs.
func TestMetricsRegistry(t *testing.T) {
	rc := &rest.Config{Host: "https://127.0.0.1:1"} // never reached: the agents do not run
	reg := prometheus.NewPedanticRegistry()
	if _, err := New(rc, Config{Nodes: 3, Metrics: reg}); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, f := range families {
		series[f.GetName()] = len(f.GetMetric())
	}
	for _, name := range []string{"kubelet_node_name", "kubelet_running_pods", "kubelet_pleg_last_seen_seconds", "kubelet_pod_start_sli_duration_seconds", "kubelet_started_pods_total"} {
		if series[name] != 3 {
			t.Errorf("%s: %d series, want one per node (3)", name, series[name])
		}
	}
	// Labelled by operation or container type: none until observed, as
	// the kubelet's vectors.
	for _, name := range []string{"kubelet_pod_worker_duration_seconds", "kubelet_started_containers_total"} {
		if series[name] != 0 {
			t.Errorf("%s: %d series before any sync, want none", name, series[name])
		}
	}
	if _, err := New(rc, Config{Nodes: 1, Metrics: reg}); err == nil {
		t.Error("a second agent registered into the same registry")
	}
	for range 2 {
		if _, err := New(rc, Config{Nodes: 1}); err != nil {
			t.Errorf("agent with its own registry: %v", err)
		}
	}
}

func TestMetricPath(t *testing.T) {
	for path, want := range map[string]string{
		"/containerLogs/ns/pod/c": "containerLogs",
		"/healthz":                "healthz",
		"/metrics":                "metrics",
		"/metrics/probes":         "other",
		"/pods":                   "other",
		"/":                       "other",
	} {
		if got := metricPath(path); got != want {
			t.Errorf("metricPath(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestNodeMetricsDoNotAllocate: what a pod sync and a relist observe
// costs no allocation (the children are looked up once per node).
func TestNodeMetricsDoNotAllocate(t *testing.T) {
	m := newKubeletMetrics()
	nm := m.forNode("node-1")
	allocs := testing.AllocsPerRun(100, func() {
		nm.podWorker[opSync].get().Observe(0.01)
		nm.startedContainers[typeContainer].get().Inc()
		nm.startedPods.Inc()
		nm.podStart.Observe(1)
		nm.pleg.RelistDuration.Observe(0.001)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per sync's metrics", allocs)
	}
}

// BenchmarkKubeletMetricsScrape: one scrape of the kubelet port's
// /metrics of a process of 1,000 nodes (bench-scale's size), gathered and
// encoded in the text format, at steady state; bytes reports the
// exposition's size.
func BenchmarkKubeletMetricsScrape(b *testing.B) {
	rc := &rest.Config{Host: "https://127.0.0.1:1"} // never reached: the agent does not run
	a, err := New(rc, Config{Nodes: 1000})
	if err != nil {
		b.Fatal(err)
	}
	// Steady state: every node has created, synced and updated pods and
	// started containers (the children a running node has).
	for _, n := range a.nodes {
		for _, op := range []syncOp{opCreate, opSync, opUpdate} {
			n.metrics.podWorker[op].get().Observe(0.01)
		}
		n.metrics.startedContainers[typeContainer].get().Inc()
	}
	h := a.metrics.metricsHandler(a)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	var size int
	b.ReportAllocs()
	for range b.N {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes")
}

// BenchmarkPodSyncMetrics: what the metrics add to one pod sync (the
// operation's choice, its timing and observation) and to one informer
// event (the startup latency tracker on a pod that has started).
func BenchmarkPodSyncMetrics(b *testing.B) {
	a, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Config{Nodes: 1})
	if err != nil {
		b.Fatal(err)
	}
	w := newPodWorker("u", a.nodes[0])
	w.setPod(simplePod("p", v1.RestartPolicyAlways), true)
	w.created = true
	b.ReportAllocs()
	for range b.N {
		w.updated.Store(true)
		a.observePodOnWatch(w, w.pod)
		op := w.nextOp()
		start := time.Now()
		w.node.metrics.podWorker[op].get().Observe(time.Since(start).Seconds())
	}
}
