package bench

// The SLIs of the scale benchmark, measured as ClusterLoader2 measures
// them: API call latency from the clients' side (every call timed where it
// is made) and from the server's apiserver_request_duration_seconds
// histogram (scraped before and after a phase, buckets diffed, quantiles
// estimated as Prometheus' histogram_quantile does), and pod startup
// latency per pod. The types here hold no cluster of their own, so that
// other harnesses of this package (the KWOK comparison) reuse them.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/corekube/corekube/test/metricstest"
)

// quantiles are the percentiles reported for every latency.
var quantiles = []float64{0.50, 0.90, 0.99}

// latencySummary is one latency distribution: count and p50/p90/p99 in
// milliseconds.
type latencySummary struct {
	Count int     `json:"count"`
	P50ms float64 `json:"p50_ms"`
	P90ms float64 `json:"p90_ms"`
	P99ms float64 `json:"p99_ms"`
}

// summarizeLatency sorts ds (seconds) and takes the nearest-rank percentiles, as
// ClusterLoader2 does for its client-side and pod startup latencies.
func summarizeLatency(ds []float64) latencySummary {
	if len(ds) == 0 {
		return latencySummary{}
	}
	s := slices.Clone(ds)
	sort.Float64s(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))] * 1000
	}
	return latencySummary{Count: len(s), P50ms: at(0.50), P90ms: at(0.90), P99ms: at(0.99)}
}

// callKey names a kind of API call as ClusterLoader2's API responsiveness
// measurement does: verb, resource (with subresource) and scope
// (resource, namespace or cluster).
type callKey struct {
	Verb, Resource, Scope string
}

func (k callKey) String() string { return k.Verb + " " + k.Resource + " " + k.Scope }

// latencyRecorder collects client-side call latencies by kind. It is safe
// for concurrent use.
type latencyRecorder struct {
	mu    sync.Mutex
	calls map[callKey][]float64
	errs  map[callKey]int
}

func newLatencyRecorder() *latencyRecorder {
	return &latencyRecorder{calls: map[callKey][]float64{}, errs: map[callKey]int{}}
}

// observe records one call that started at start; err counts it as failed
// (its latency is kept: a slow failure is part of the SLI too).
func (r *latencyRecorder) observe(k callKey, start time.Time, err error) {
	d := time.Since(start).Seconds()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[k] = append(r.calls[k], d)
	if err != nil {
		r.errs[k]++
	}
}

// apiLatency is one kind of call's latency in a phase, from one side.
type apiLatency struct {
	Verb     string `json:"verb"`
	Resource string `json:"resource"`
	Scope    string `json:"scope"`
	latencySummary
	Errors int `json:"errors,omitempty"`
}

// summaries returns the recorded latencies, sorted by kind.
func (r *latencyRecorder) summaries() []apiLatency {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]apiLatency, 0, len(r.calls))
	for k, ds := range r.calls {
		out = append(out, apiLatency{Verb: k.Verb, Resource: k.Resource, Scope: k.Scope, latencySummary: summarizeLatency(ds), Errors: r.errs[k]})
	}
	sortLatencies(out)
	return out
}

func sortLatencies(ls []apiLatency) {
	sort.Slice(ls, func(i, j int) bool {
		a, b := ls[i], ls[j]
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		if a.Verb != b.Verb {
			return a.Verb < b.Verb
		}
		return a.Scope < b.Scope
	})
}

// scrapeMetrics reads the API server's /metrics through client (the
// admin identity may read it).
func scrapeMetrics(ctx context.Context, client kubernetes.Interface) (metricstest.Families, error) {
	raw, err := client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scrape /metrics: %w", err)
	}
	fs, err := metricstest.Parse(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("scrape /metrics: %w", err)
	}
	return fs, nil
}

// histogram is cumulative bucket counts by upper bound (the +Inf bucket
// is count).
type histogram struct {
	bounds []float64
	counts []float64
	count  float64
}

// requestHistograms sums apiserver_request_duration_seconds by (verb,
// resource[/subresource], scope) over the other labels (group, version,
// component, dry_run). WATCH, WATCHLIST, CONNECT and PROXY requests last
// as long as the client keeps them: ClusterLoader2 leaves them out, so
// does this.
func requestHistograms(fs metricstest.Families) map[callKey]*histogram {
	out := map[callKey]*histogram{}
	f := fs["apiserver_request_duration_seconds"]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if h == nil {
			continue
		}
		l := labelMap(m.GetLabel())
		switch l["verb"] {
		case "WATCH", "WATCHLIST", "CONNECT", "PROXY":
			continue
		}
		res := l["resource"]
		if l["subresource"] != "" {
			res += "/" + l["subresource"]
		}
		k := callKey{Verb: l["verb"], Resource: res, Scope: l["scope"]}
		acc := out[k]
		if acc == nil {
			acc = &histogram{}
			for _, b := range h.GetBucket() {
				acc.bounds = append(acc.bounds, b.GetUpperBound())
			}
			acc.counts = make([]float64, len(acc.bounds))
			out[k] = acc
		}
		for i, b := range h.GetBucket() {
			if i < len(acc.counts) && b.GetUpperBound() == acc.bounds[i] {
				acc.counts[i] += float64(b.GetCumulativeCount())
			}
		}
		acc.count += float64(h.GetSampleCount())
	}
	return out
}

func labelMap(ls []*dto.LabelPair) map[string]string {
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.GetName()] = l.GetValue()
	}
	return m
}

// diffHistograms is after minus before: the requests of the phase.
func diffHistograms(before, after map[callKey]*histogram) map[callKey]*histogram {
	out := map[callKey]*histogram{}
	for k, a := range after {
		d := &histogram{bounds: a.bounds, counts: slices.Clone(a.counts), count: a.count}
		if b := before[k]; b != nil && slices.Equal(b.bounds, a.bounds) {
			for i := range d.counts {
				d.counts[i] -= b.counts[i]
			}
			d.count -= b.count
		}
		if d.count > 0 {
			out[k] = d
		}
	}
	return out
}

// quantile estimates the q-quantile as Prometheus' histogram_quantile:
// the rank q*count is found in its bucket and interpolated linearly
// between the bucket's bounds (the first bucket starts at 0); a rank in
// the +Inf bucket gives the highest finite bound.
func (h *histogram) quantile(q float64) float64 {
	if h.count == 0 || len(h.bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.count
	lower, below := 0.0, 0.0
	for i, ub := range h.bounds {
		if math.IsInf(ub, 1) {
			break
		}
		if h.counts[i] >= rank {
			inBucket := h.counts[i] - below
			if inBucket <= 0 {
				return ub
			}
			return lower + (ub-lower)*(rank-below)/inBucket
		}
		lower, below = ub, h.counts[i]
	}
	// Beyond the highest finite bound.
	for i := len(h.bounds) - 1; i >= 0; i-- {
		if !math.IsInf(h.bounds[i], 1) {
			return h.bounds[i]
		}
	}
	return math.NaN()
}

// serverLatencies summarizes the phase's histograms, as apiLatency rows.
func serverLatencies(hs map[callKey]*histogram) []apiLatency {
	out := make([]apiLatency, 0, len(hs))
	for k, h := range hs {
		out = append(out, apiLatency{Verb: k.Verb, Resource: k.Resource, Scope: k.Scope, latencySummary: latencySummary{
			Count: int(h.count),
			P50ms: h.quantile(0.50) * 1000, P90ms: h.quantile(0.90) * 1000, P99ms: h.quantile(0.99) * 1000,
		}})
	}
	sortLatencies(out)
	return out
}

// podTimes is one pod's way to Running. The server's timestamps
// (creationTimestamp, the PodScheduled condition's lastTransitionTime,
// the container's startedAt) have a resolution of one second; the bench's
// own times (the create call's return, the first watch event with
// spec.nodeName set, the first with phase Running) have the machine
// clock's, which the processes share.
type podTimes struct {
	created, scheduled, running time.Time // server, 1 s resolution
	createReturned              time.Time // client
	watchedScheduled, watched   time.Time // the bench's informer
}

// podStartup tracks pod startup latency for the pods created while it is
// armed: feed it every pod a watch delivers (saw) and every create's
// return (created).
type podStartup struct {
	mu    sync.Mutex
	armed bool
	// since is when the phase began, to the second (as creationTimestamp):
	// a pod created before it is not the phase's.
	since time.Time
	pods  map[string]*podTimes // by namespace/name
	// deleting are the pods the bench deleted (churn's victims).
	deleting map[string]bool
}

func newPodStartup() *podStartup {
	return &podStartup{pods: map[string]*podTimes{}, deleting: map[string]bool{}}
}

// deletes records that the bench deletes the pod key.
func (s *podStartup) deletes(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleting[key] = true
}

// deletedByBench reports whether the bench deleted the pod key.
func (s *podStartup) deletedByBench(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleting[key]
}

// arm starts a new phase: pods already known are forgotten, pods created
// from now on are tracked.
func (s *podStartup) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
	s.since = time.Now().Truncate(time.Second)
	s.pods = map[string]*podTimes{}
}

func (s *podStartup) entry(key string) *podTimes {
	t := s.pods[key]
	if t == nil {
		t = &podTimes{}
		s.pods[key] = t
	}
	return t
}

// created records the return of a pod's create call.
func (s *podStartup) created(key string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.armed {
		s.entry(key).createReturned = at
	}
}

// saw records what a watch event tells of pod, seen at now.
func (s *podStartup) saw(pod *v1.Pod, now time.Time) {
	key := pod.Namespace + "/" + pod.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed || pod.DeletionTimestamp != nil {
		return
	}
	t := s.pods[key]
	if t == nil {
		// A pod whose create has not returned yet, or one from before the
		// phase (its label patched, say): only the former is the phase's.
		if pod.CreationTimestamp.Time.Before(s.since) {
			return
		}
		t = s.entry(key)
	}
	if t.created.IsZero() {
		t.created = pod.CreationTimestamp.Time
	}
	if pod.Spec.NodeName != "" && t.watchedScheduled.IsZero() {
		t.watchedScheduled = now
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue && t.scheduled.IsZero() {
			t.scheduled = c.LastTransitionTime.Time
		}
	}
	if pod.Status.Phase == v1.PodRunning && t.watched.IsZero() {
		t.watched = now
		for _, c := range pod.Status.ContainerStatuses {
			if c.State.Running != nil && c.State.Running.StartedAt.After(t.running) {
				t.running = c.State.Running.StartedAt.Time
			}
		}
	}
}

// startupSLI is a phase's pod startup latencies. The first five are
// ClusterLoader2's (server timestamps, except watched); the last three
// use the bench's millisecond times.
type startupSLI struct {
	Pods int `json:"pods"`
	// NotRunning counts the phase's pods created but not yet seen Running
	// (a phase cut by the deadline has some).
	NotRunning       int            `json:"not_running,omitempty"`
	CreateToSchedule latencySummary `json:"create_to_schedule"`
	ScheduleToRun    latencySummary `json:"schedule_to_run"`
	RunToWatch       latencySummary `json:"run_to_watch"`
	ScheduleToWatch  latencySummary `json:"schedule_to_watch"`
	PodStartup       latencySummary `json:"pod_startup"`
	// Client clock: create call's return -> the bench's watch saw
	// spec.nodeName -> saw Running.
	ClientCreateToWatchedSchedule latencySummary `json:"client_create_to_watched_schedule"`
	ClientWatchedScheduleToWatch  latencySummary `json:"client_watched_schedule_to_watched_running"`
	ClientPodStartup              latencySummary `json:"client_pod_startup"`
}

// result summarizes the pods that reached Running in the phase.
func (s *podStartup) result() startupSLI {
	s.mu.Lock()
	defer s.mu.Unlock()
	var c2s, s2r, r2w, s2w, startup, cc2s, cs2w, cstartup []float64
	n, notRunning := 0, 0
	sec := func(from, to time.Time, into *[]float64) {
		if !from.IsZero() && !to.IsZero() {
			*into = append(*into, to.Sub(from).Seconds())
		}
	}
	for _, t := range s.pods {
		if t.watched.IsZero() {
			notRunning++
			continue
		}
		n++
		sec(t.created, t.scheduled, &c2s)
		sec(t.scheduled, t.running, &s2r)
		sec(t.running, t.watched, &r2w)
		sec(t.scheduled, t.watched, &s2w)
		sec(t.created, t.watched, &startup)
		sec(t.createReturned, t.watchedScheduled, &cc2s)
		sec(t.watchedScheduled, t.watched, &cs2w)
		sec(t.createReturned, t.watched, &cstartup)
	}
	return startupSLI{
		Pods: n, NotRunning: notRunning,
		CreateToSchedule: summarizeLatency(c2s), ScheduleToRun: summarizeLatency(s2r), RunToWatch: summarizeLatency(r2w),
		ScheduleToWatch: summarizeLatency(s2w), PodStartup: summarizeLatency(startup),
		ClientCreateToWatchedSchedule: summarizeLatency(cc2s), ClientWatchedScheduleToWatch: summarizeLatency(cs2w),
		ClientPodStartup: summarizeLatency(cstartup),
	}
}

// watchStartup feeds every pod event of inf to s, and counts the pods
// Running (not being deleted) in the counter it returns. The count is kept
// by the handler that records the times, after them, so that a wait for
// the count never returns before the times of the pods it counted are
// recorded (two handlers of one informer run apart).
// keepStartupFields is the bench's pod informer transform: it keeps what
// watchStartup and the counts read (a full pod is ~5 KB decoded; the bench
// holds every one, and its watch must keep up with the cluster's writes).
func keepStartupFields(obj any) (any, error) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   v1.PodSpec{NodeName: p.Spec.NodeName},
		Status: v1.PodStatus{Phase: p.Status.Phase, Conditions: p.Status.Conditions, ContainerStatuses: p.Status.ContainerStatuses},
	}, nil
}

func watchStartup(inf cache.SharedIndexInformer, s *podStartup) (*counter, error) {
	running := newBareCounter()
	saw := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok {
			return
		}
		s.saw(p, time.Now())
		running.set(p.Namespace+"/"+p.Name, p.Status.Phase == v1.PodRunning && p.DeletionTimestamp == nil)
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    saw,
		UpdateFunc: func(_, obj any) { saw(obj) },
		DeleteFunc: func(obj any) {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				return
			}
			if s.deletedByBench(key) {
				running.set(key, false)
			} else {
				running.markGone(key)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pod startup handler: %w", err)
	}
	return running, nil
}

// printLatencies writes rows as a compact table under title.
func printLatencies(w io.Writer, title string, rows []apiLatency) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "  %s\n", title)
	fmt.Fprintf(w, "    %-8s %-22s %-9s %8s %9s %9s %9s %6s\n", "verb", "resource", "scope", "count", "p50 ms", "p90 ms", "p99 ms", "errors")
	for _, r := range rows {
		fmt.Fprintf(w, "    %-8s %-22s %-9s %8d %9.1f %9.1f %9.1f %6d\n", r.Verb, r.Resource, r.Scope, r.Count, r.P50ms, r.P90ms, r.P99ms, r.Errors)
	}
}

// printStartup writes a phase's pod startup latencies.
func printStartup(w io.Writer, title string, s startupSLI) {
	if s.Pods == 0 && s.NotRunning == 0 {
		return
	}
	fmt.Fprintf(w, "  %s (%d pods Running", title, s.Pods)
	if s.NotRunning > 0 {
		fmt.Fprintf(w, ", %d created but not seen Running", s.NotRunning)
	}
	fmt.Fprintf(w, "; server timestamps have 1 s resolution, client_* use the bench's clock)\n")
	fmt.Fprintf(w, "    %-32s %8s %9s %9s %9s\n", "", "count", "p50 ms", "p90 ms", "p99 ms")
	row := func(name string, l latencySummary) {
		fmt.Fprintf(w, "    %-32s %8d %9.0f %9.0f %9.0f\n", name, l.Count, l.P50ms, l.P90ms, l.P99ms)
	}
	row("create_to_schedule", s.CreateToSchedule)
	row("schedule_to_run", s.ScheduleToRun)
	row("run_to_watch", s.RunToWatch)
	row("schedule_to_watch", s.ScheduleToWatch)
	row("pod_startup", s.PodStartup)
	row("client create->watched scheduled", s.ClientCreateToWatchedSchedule)
	row("client watched sched->running", s.ClientWatchedScheduleToWatch)
	row("client pod_startup", s.ClientPodStartup)
}
