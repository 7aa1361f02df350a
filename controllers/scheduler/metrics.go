package scheduler

import (
	"reflect"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// Kube-scheduler's metric names, help texts (with component-base's
// stability prefix), labels and buckets (pkg/scheduler/metrics, v1.32).
const (
	resultScheduled     = "scheduled"
	resultUnschedulable = "unschedulable"
	resultError         = "error"

	// The queues of scheduler_pending_pods and
	// scheduler_queue_incoming_pods_total.
	queueActive        = "active"
	queueBackoff       = "backoff"
	queueUnschedulable = "unschedulable"
	queueGated         = "gated"

	// Events of scheduler_queue_incoming_pods_total: kube's labels (the
	// cluster event's resource and action, or a special event's name).
	eventPodAdd                 = "UnschedulablePodAdd"
	eventUnscheduledPodUpdate   = "UnschedulablePodUpdate"
	eventScheduleAttemptFailure = "ScheduleAttemptFailure"
	eventUnschedulableTimeout   = "UnschedulableTimeout"
	eventNodeAdd                = "NodeAdd"
	eventNodeAllocatable        = "NodeUpdateNodeAllocatable"
	eventNodeLabel              = "NodeUpdateNodeLabel"
	eventNodeTaint              = "NodeUpdateNodeTaint"
	eventNodeCondition          = "NodeUpdateNodeCondition"
	eventAssignedPodUpdate      = "AssignedPodUpdate"
	eventAssignedPodDelete      = "AssignedPodDelete"
	eventAssignedPodAdd         = "AssignedPodAdd"

	// maxAttemptsLabel: kube's attempts label stops counting at 15 ("15+").
	maxAttemptsLabel = 15
)

var pendingPodsDesc = prometheus.NewDesc("scheduler_pending_pods",
	"[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
	[]string{"queue"}, nil)

// schedulerMetrics are one scheduler's metrics. A nil *schedulerMetrics
// (no Registerer) records nothing.
type schedulerMetrics struct {
	attempts   [3]prometheus.Counter  // by result: scheduled, unschedulable, error
	durations  [3]prometheus.Observer // by result
	sli        [maxAttemptsLabel + 1]prometheus.Observer
	podTries   prometheus.Histogram
	preemption prometheus.Counter
	victims    prometheus.Histogram
	incoming   *prometheus.CounterVec
}

const (
	idxScheduled = iota
	idxUnschedulable
	idxError
)

// newSchedulerMetrics creates s's metrics and registers them, with the
// pending pods collector, on reg; nil reg means no metrics.
func newSchedulerMetrics(s *Scheduler, reg prometheus.Registerer) (*schedulerMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	profile := s.cfg.SchedulerName
	attempts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "scheduler_schedule_attempts_total",
		Help: "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
	}, []string{"result", "profile"})
	durations := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "scheduler_scheduling_attempt_duration_seconds",
		Help:    "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"result", "profile"})
	sli := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "scheduler_pod_scheduling_sli_duration_seconds",
		Help:    "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue an d might involve multiple scheduling attempts.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 20),
	}, []string{"attempts"})
	m := &schedulerMetrics{
		podTries: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "scheduler_pod_scheduling_attempts",
			Help:    "[STABLE] Number of attempts to successfully schedule a pod.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 5),
		}),
		preemption: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scheduler_preemption_attempts_total",
			Help: "[STABLE] Total preemption attempts in the cluster till now",
		}),
		victims: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "scheduler_preemption_victims",
			Help:    "[STABLE] Number of selected preemption victims",
			Buckets: prometheus.ExponentialBuckets(1, 2, 7),
		}),
		incoming: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scheduler_queue_incoming_pods_total",
			Help: "[STABLE] Number of pods added to scheduling queues by event and queue type.",
		}, []string{"queue", "event"}),
	}
	// The children are created up front so that the hot path indexes an
	// array, and so that every result shows (as 0) from the first scrape,
	// as kube's do once the scheduler has run.
	for i, result := range [...]string{resultScheduled, resultUnschedulable, resultError} {
		m.attempts[i] = attempts.WithLabelValues(result, profile)
		m.durations[i] = durations.WithLabelValues(result, profile)
	}
	for i := 1; i <= maxAttemptsLabel; i++ {
		label := strconv.Itoa(i)
		if i == maxAttemptsLabel {
			label += "+"
		}
		m.sli[i] = sli.WithLabelValues(label)
	}
	for _, c := range []prometheus.Collector{attempts, durations, sli, m.podTries, m.preemption, m.victims, m.incoming, pendingCollector{s}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// attempt records one scheduling attempt's result and its duration since
// start.
func (m *schedulerMetrics) attempt(result int, start time.Time, now time.Time) {
	if m == nil {
		return
	}
	m.attempts[result].Inc()
	m.durations[result].Observe(now.Sub(start).Seconds())
}

// scheduled records a pod placed after attempts attempts, the first of
// which started at first.
func (m *schedulerMetrics) scheduled(attempts int, first, now time.Time) {
	if m == nil {
		return
	}
	m.podTries.Observe(float64(attempts))
	m.sli[min(max(attempts, 1), maxAttemptsLabel)].Observe(now.Sub(first).Seconds())
}

// preemptionAttempt counts a run of the preemption post-filter.
func (m *schedulerMetrics) preemptionAttempt() {
	if m == nil {
		return
	}
	m.preemption.Inc()
}

// preemptionVictims records how many pods one preemption evicted.
func (m *schedulerMetrics) preemptionVictims(n int) {
	if m == nil {
		return
	}
	m.victims.Observe(float64(n))
}

// incomingPod counts a pod entering queue because of event.
func (m *schedulerMetrics) incomingPod(queue, event string) {
	if m == nil {
		return
	}
	m.incoming.WithLabelValues(queue, event).Inc()
}

// pendingCollector reports scheduler_pending_pods from the scheduler's
// pending pods at scrape time: the scheduling path keeps no counts.
type pendingCollector struct{ s *Scheduler }

func (c pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pendingPodsDesc }

func (c pendingCollector) Collect(ch chan<- prometheus.Metric) {
	var active, backoff, unschedulable, gated int
	s := c.s
	s.mu.Lock()
	now := s.cfg.Clock.Now()
	for _, e := range s.pending {
		switch e.queue(now) {
		case queueActive:
			active++
		case queueBackoff:
			backoff++
		case queueUnschedulable:
			unschedulable++
		case queueGated:
			gated++
		}
	}
	s.mu.Unlock()
	for _, q := range []struct {
		name string
		n    int
	}{{queueActive, active}, {queueBackoff, backoff}, {queueUnschedulable, unschedulable}, {queueGated, gated}} {
		ch <- prometheus.MustNewConstMetric(pendingPodsDesc, prometheus.GaugeValue, float64(q.n), q.name)
	}
}

// queue is the kube scheduling queue e would be in at now, "" while it is
// being bound (popped from kube's queue); s.mu is held.
func (e *podEntry) queue(now time.Time) string {
	switch e.state {
	case stateGated:
		return queueGated
	case stateQueued:
		if now.Before(e.readyAt) {
			return queueBackoff
		}
		return queueActive
	case stateFailing:
		// Kube queues a failed pod before it writes its status: in the
		// back-off queue when a change it may fit arrived meanwhile.
		if e.missed {
			return queueBackoff
		}
		return queueUnschedulable
	case stateParked:
		return queueUnschedulable
	}
	return ""
}

// nodeEvent is kube's label for the change from old (nil: none) to node:
// the first of kube's node changes that applies, in kube's order.
func nodeEvent(old, node *v1.Node) string {
	switch {
	case old == nil:
		return eventNodeAdd
	case old.Spec.Unschedulable && !node.Spec.Unschedulable:
		return eventNodeTaint
	case !reflect.DeepEqual(old.Status.Allocatable, node.Status.Allocatable):
		return eventNodeAllocatable
	case !reflect.DeepEqual(old.Labels, node.Labels):
		return eventNodeLabel
	case !reflect.DeepEqual(old.Spec.Taints, node.Spec.Taints):
		return eventNodeTaint
	}
	return eventNodeCondition
}
