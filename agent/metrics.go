package agent

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/corekube/corekube/agent/pleg"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
)

// The kubelet's metrics (pkg/kubelet/metrics and pkg/kubelet/server/metrics
// of kube v1.32): names, help texts with component-base's stability
// prefix, label names and buckets as the kubelet's. A kubelet is one node;
// an agent process carries many, so every series about a node carries a
// node label (the node's name) beside the kubelet's own labels, and
// kubelet_node_name{node} has one series per node. The kubelet API
// server's request metrics are the process's (one server for all its
// nodes) and have no node label.

// nodeLabel is the label the agent adds to the kubelet's per-node series:
// the name the kubelet's own kubelet_node_name uses.
const nodeLabel = "node"

// podStartupBuckets are the kubelet's buckets for pod startup latencies
// (seconds, round in everyday units up to an hour).
var podStartupBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// syncOp is a pod sync's operation_type, as the kubelet's SyncPodType.
type syncOp uint8

const (
	opSync syncOp = iota
	opUpdate
	opCreate
	opKill
	opTerminated
	numSyncOps
)

var syncOpNames = [numSyncOps]string{opSync: "sync", opUpdate: "update", opCreate: "create", opKill: "kill", opTerminated: "terminated"}

// containerType is the container_type of kubelet_started_containers_total.
type containerType uint8

const (
	typeContainer containerType = iota
	typeInitContainer
	typeEphemeralContainer
	numContainerTypes
)

var containerTypeNames = [numContainerTypes]string{"container", "init_container", "ephemeral_container"}

// Descriptions of the series read from the nodes at each scrape.
var (
	descNodeName = prometheus.NewDesc("kubelet_node_name",
		"[ALPHA] The node's name. The count is always 1.", []string{nodeLabel}, nil)
	descRunningPods = prometheus.NewDesc("kubelet_running_pods",
		"[ALPHA] Number of pods that have a running pod sandbox", []string{nodeLabel}, nil)
	descRunningContainers = prometheus.NewDesc("kubelet_running_containers",
		"[ALPHA] Number of containers currently running", []string{nodeLabel, "container_state"}, nil)
	descPLEGLastSeen = prometheus.NewDesc("kubelet_pleg_last_seen_seconds",
		"[ALPHA] Timestamp in seconds when PLEG was last seen active.", []string{nodeLabel}, nil)
)

// kubeletMetrics are the kubelet metrics of one agent process, created per
// agent (several agents run in one test process) and registered into
// Config.Metrics or the agent's own registry.
type kubeletMetrics struct {
	// gatherer is what the kubelet API's /metrics serves.
	gatherer prometheus.Gatherer

	podWorkerDuration     *prometheus.HistogramVec
	podStartDuration      *prometheus.HistogramVec
	podStartSLIDuration   *prometheus.HistogramVec
	podStartTotalDuration *prometheus.HistogramVec
	plegRelistDuration    *prometheus.HistogramVec
	plegRelistInterval    *prometheus.HistogramVec
	plegDiscardEvents     *prometheus.CounterVec
	startedPods           *prometheus.CounterVec
	startedPodsErrors     *prometheus.CounterVec
	startedContainers     *prometheus.CounterVec
	evictions             *prometheus.CounterVec

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	httpInflight *prometheus.GaugeVec
}

// nodeMetrics are one node's children of the per-node metrics, looked up
// once when the node is made: a pod sync observes them without a label
// lookup or an allocation.
type nodeMetrics struct {
	// podWorker and startedContainers are labelled vectors in the
	// kubelet too: a child appears at its first observation, so a node
	// shows the kill and terminated syncs, or init containers, once it has
	// had some (a 1,000-node process's scrape is 15% smaller at steady
	// state). Looked up once, then kept.
	podWorker         [numSyncOps]lazyChild[prometheus.Observer]
	podStart          prometheus.Observer
	podStartSLI       prometheus.Observer
	podStartTotal     prometheus.Observer
	startedPods       prometheus.Counter
	startedPodsErrors prometheus.Counter
	startedContainers [numContainerTypes]lazyChild[prometheus.Counter]
	pleg              pleg.Metrics
	// evictions is kubelet_evictions by eviction_signal, looked up at an
	// eviction (rare).
	evictions func(signal string) prometheus.Counter
}

func newKubeletMetrics() *kubeletMetrics {
	node := []string{nodeLabel}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: "[ALPHA] " + help, Buckets: buckets}, labels)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: "[ALPHA] " + help}, labels)
	}
	httpLabels := []string{"method", "path", "server_type", "long_running"}
	return &kubeletMetrics{
		podWorkerDuration: histogram("kubelet_pod_worker_duration_seconds",
			"Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
			prometheus.DefBuckets, nodeLabel, "operation_type"),
		podStartDuration: histogram("kubelet_pod_start_duration_seconds",
			"Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
			podStartupBuckets, node...),
		podStartSLIDuration: histogram("kubelet_pod_start_sli_duration_seconds",
			"Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
			podStartupBuckets, node...),
		podStartTotalDuration: histogram("kubelet_pod_start_total_duration_seconds",
			"Duration in seconds to start a pod since creation, including time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
			podStartupBuckets, node...),
		plegRelistDuration: histogram("kubelet_pleg_relist_duration_seconds",
			"Duration in seconds for relisting pods in PLEG.", prometheus.DefBuckets, node...),
		plegRelistInterval: histogram("kubelet_pleg_relist_interval_seconds",
			"Interval in seconds between relisting in PLEG.", prometheus.DefBuckets, node...),
		plegDiscardEvents: counter("kubelet_pleg_discard_events", "The number of discard events in PLEG.", node...),
		startedPods:       counter("kubelet_started_pods_total", "Cumulative number of pods started", node...),
		startedPodsErrors: counter("kubelet_started_pods_errors_total", "Cumulative number of errors when starting pods", node...),
		startedContainers: counter("kubelet_started_containers_total", "Cumulative number of containers started", nodeLabel, "container_type"),
		evictions:         counter("kubelet_evictions", "Cumulative number of pod evictions by eviction signal", nodeLabel, "eviction_signal"),

		httpRequests: counter("kubelet_http_requests_total",
			"Number of the http requests received since the server started", httpLabels...),
		httpDuration: histogram("kubelet_http_requests_duration_seconds",
			"Duration in seconds to serve http requests", prometheus.DefBuckets, httpLabels...),
		httpInflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kubelet_http_inflight_requests",
			Help: "[ALPHA] Number of the inflight http requests"}, httpLabels),
	}
}

// register registers the metrics and the collector of the nodes' state
// into a registry of the agent's own, with the Go and process collectors
// (what a kubelet's /metrics has besides), which the kubelet API serves;
// and into reg too when it is set (in `corekube up`, the API server's, so
// that one /metrics serves everything). The kubelet API never serves reg:
// it answers anyone who reaches its port, and the API server's metrics are
// for those its authorization lets read them.
func (m *kubeletMetrics) register(reg prometheus.Registerer, state prometheus.Collector) error {
	own := prometheus.NewRegistry()
	m.gatherer = own
	own.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cs := []prometheus.Collector{
		m.podWorkerDuration, m.podStartDuration, m.podStartSLIDuration, m.podStartTotalDuration,
		m.plegRelistDuration, m.plegRelistInterval, m.plegDiscardEvents,
		m.startedPods, m.startedPodsErrors, m.startedContainers, m.evictions,
		m.httpRequests, m.httpDuration, m.httpInflight, state,
	}
	for _, c := range cs {
		own.MustRegister(c)
		if reg == nil {
			continue
		}
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("agent: register the kubelet metrics: %w", err)
		}
	}
	return nil
}

// forNode looks up (creating) the node's children of every per-node
// metric, so that they all show from the start, as the kubelet's.
func (m *kubeletMetrics) forNode(name string) *nodeMetrics {
	nm := &nodeMetrics{
		podStart:          m.podStartDuration.WithLabelValues(name),
		podStartSLI:       m.podStartSLIDuration.WithLabelValues(name),
		podStartTotal:     m.podStartTotalDuration.WithLabelValues(name),
		startedPods:       m.startedPods.WithLabelValues(name),
		startedPodsErrors: m.startedPodsErrors.WithLabelValues(name),
		pleg: pleg.Metrics{
			RelistDuration: m.plegRelistDuration.WithLabelValues(name),
			RelistInterval: m.plegRelistInterval.WithLabelValues(name),
			DiscardEvents:  m.plegDiscardEvents.WithLabelValues(name),
		},
	}
	nm.evictions = func(signal string) prometheus.Counter { return m.evictions.WithLabelValues(name, signal) }
	for op, opName := range syncOpNames {
		nm.podWorker[op].make = func() prometheus.Observer { return m.podWorkerDuration.WithLabelValues(name, opName) }
	}
	for t, typeName := range containerTypeNames {
		nm.startedContainers[t].make = func() prometheus.Counter { return m.startedContainers.WithLabelValues(name, typeName) }
	}
	return nm
}

// lazyChild is a child of a labelled metric made at its first use (by
// make) and kept: later uses cost an atomic load, no label lookup.
type lazyChild[T any] struct {
	make  func() T
	child atomic.Pointer[T]
}

func (l *lazyChild[T]) get() T {
	if c := l.child.Load(); c != nil {
		return *c
	}
	// Two first uses at once both look the child up: the vector returns
	// the same one to both.
	c := l.make()
	l.child.Store(&c)
	return c
}

// stateCollector reads, at each scrape, what the kubelet keeps as gauges:
// each node's name, running pods and containers by state (as its PLEG's
// last relist counted them) and when its PLEG was last active. Reading at
// scrape time costs the relists nothing.
type stateCollector struct{ a *Agent }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descNodeName
	ch <- descRunningPods
	ch <- descRunningContainers
	ch <- descPLEGLastSeen
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, n := range c.a.nodes {
		ch <- prometheus.MustNewConstMetric(descNodeName, prometheus.GaugeValue, 1, n.name)
		counts := n.pleg.Counts()
		ch <- prometheus.MustNewConstMetric(descRunningPods, prometheus.GaugeValue, float64(counts.RunningPods), n.name)
		for i, state := range pleg.ContainerStates {
			if counts.Seen[i] {
				ch <- prometheus.MustNewConstMetric(descRunningContainers, prometheus.GaugeValue, float64(counts.Containers[i]), n.name, string(state))
			}
		}
		// The kubelet's gauge is 0 until the PLEG has relisted.
		var lastSeen float64
		if t := n.pleg.RelistTime(); !t.IsZero() {
			lastSeen = float64(t.Unix())
		}
		ch <- prometheus.MustNewConstMetric(descPLEGLastSeen, prometheus.GaugeValue, lastSeen, n.name)
	}
}

// containerTypeOf is the container_type of container c of the pod.
func containerTypeOf(pod *v1.Pod, c *v1.Container) containerType {
	for i := range pod.Spec.InitContainers {
		if &pod.Spec.InitContainers[i] == c || pod.Spec.InitContainers[i].Name == c.Name {
			return typeInitContainer
		}
	}
	return typeContainer
}

// podStartedSLO reports whether the pod's status shows every container
// started, as the kubelet's pod startup latency tracker checks it (which
// also counts a status without containers as started; the agent waits for
// its first status listing them).
func podStartedSLO(pod *v1.Pod) bool {
	if len(pod.Status.ContainerStatuses) == 0 {
		return false
	}
	for i := range pod.Status.ContainerStatuses {
		r := pod.Status.ContainerStatuses[i].State.Running
		if r == nil || r.StartedAt.IsZero() {
			return false
		}
	}
	return true
}

// The pod startup latency tracker's states of a pod (podWorker.sli).
const (
	sliUntracked uint8 = iota // not seen yet
	sliTracking               // seen before the kubelet started it: measured
	sliDone                   // measured, or seen started already: never measured
)

// observePodOnWatch is the kubelet's pod startup latency tracker: a pod
// first seen before it was started (no status.startTime) is measured when
// the watch shows all its containers started, from its creation, minus
// the time its images took to pull. Called from the pod informer's
// handler only, which owns w.sli.
func (a *Agent) observePodOnWatch(w *podWorker, pod *v1.Pod) {
	switch w.sli {
	case sliDone:
		return
	case sliUntracked:
		w.sli = sliDone
		if pod.Status.StartTime == nil || pod.Status.StartTime.IsZero() {
			w.sli = sliTracking
		}
		return
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		w.sli = sliDone
		return
	}
	if !podStartedSLO(pod) {
		return
	}
	w.sli = sliDone
	total := a.clock.Since(pod.CreationTimestamp.Time)
	nm := w.node.metrics
	nm.podStartSLI.Observe((total - w.pullDuration()).Seconds())
	nm.podStartTotal.Observe(total.Seconds())
}

// instrumentKubeletAPI counts the kubelet API's requests as the kubelet's
// server does: by method, the path's first segment (two for /metrics/...)
// among the paths it serves, else "other", the server type (this one
// serves what the kubelet's authenticated port does: readwrite) and
// whether the request is long-running (exec, attach, port forwarding;
// none served here).
func (m *kubeletMetrics) instrumentKubeletAPI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, path := metricMethod(r.Method), metricPath(r.URL.Path)
		const serverType, longRunning = "readwrite", "false"
		m.httpRequests.WithLabelValues(method, path, serverType, longRunning).Inc()
		inflight := m.httpInflight.WithLabelValues(method, path, serverType, longRunning)
		inflight.Inc()
		defer inflight.Dec()
		start := time.Now()
		defer func() {
			m.httpDuration.WithLabelValues(method, path, serverType, longRunning).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(w, r)
	})
}

// metricMethod is the method label: a known HTTP method, else "other".
func metricMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}

// metricPath is the path label: the kubelet API path the request is for.
func metricPath(p string) string {
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 3)
	switch root := parts[0]; root {
	case "containerLogs", "healthz":
		return root
	case "metrics":
		if len(parts) > 1 && parts[1] != "" {
			return "other" // /metrics/cadvisor, /metrics/probes ...: not served
		}
		return root
	}
	return "other"
}

// metricsHandler serves the kubelet API's /metrics.
func (m *kubeletMetrics) metricsHandler(a *Agent) http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{ErrorLog: promLogger{a}})
}

// promLogger sends promhttp's gathering errors to the agent's log.
type promLogger struct{ a *Agent }

func (p promLogger) Println(v ...any) { p.a.log.Error("gather metrics", "err", fmt.Sprint(v...)) }
