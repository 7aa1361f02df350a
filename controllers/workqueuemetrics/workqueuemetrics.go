// Package workqueuemetrics gives client-go workqueues the metrics
// kube-controller-manager exposes for them (workqueue_depth,
// workqueue_adds_total, ... by queue name, with component-base's help
// texts and buckets), on a registry of the caller's choosing.
//
// Kube sets one provider for the whole process (workqueue.SetProvider);
// corekube runs several servers and controller sets in one test process,
// so each registry has its own provider, handed to each queue through its
// config (MetricsProvider), and nothing is global.
package workqueuemetrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Provider is a workqueue.MetricsProvider whose metrics live on one
// registry.
type Provider struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, work              *prometheus.HistogramVec
}

var _ workqueue.MetricsProvider = (*Provider)(nil)

// For returns the provider of reg: it registers the workqueue metrics on
// reg, or, when an earlier call did (every controller of a process asks
// for the provider of the process' registry), uses the ones registered.
// A nil reg gives a nil provider, which client-go treats as no metrics.
func For(reg prometheus.Registerer) (workqueue.MetricsProvider, error) {
	if reg == nil {
		return nil, nil
	}
	// Component-base's buckets: 10ns to 10s by factors of ten.
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 10)
	p := &Provider{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_depth",
			Help: "[ALPHA] Current depth of workqueue",
		}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_adds_total",
			Help: "[ALPHA] Total number of adds handled by workqueue",
		}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "workqueue_queue_duration_seconds",
			Help:    "[ALPHA] How long in seconds an item stays in workqueue before being requested.",
			Buckets: buckets,
		}, []string{"name"}),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "workqueue_work_duration_seconds",
			Help:    "[ALPHA] How long in seconds processing an item from workqueue takes.",
			Buckets: buckets,
		}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_unfinished_work_seconds",
			Help: "[ALPHA] How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
		}, []string{"name"}),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_longest_running_processor_seconds",
			Help: "[ALPHA] How many seconds has the longest running processor for workqueue been running.",
		}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_retries_total",
			Help: "[ALPHA] Total number of retries handled by workqueue",
		}, []string{"name"}),
	}
	if err := register(reg, &p.depth); err != nil {
		return nil, err
	}
	if err := register(reg, &p.adds); err != nil {
		return nil, err
	}
	if err := register(reg, &p.latency); err != nil {
		return nil, err
	}
	if err := register(reg, &p.work); err != nil {
		return nil, err
	}
	if err := register(reg, &p.unfinished); err != nil {
		return nil, err
	}
	if err := register(reg, &p.longest); err != nil {
		return nil, err
	}
	if err := register(reg, &p.retries); err != nil {
		return nil, err
	}
	return p, nil
}

// register registers *c on reg or, when an equal collector is there
// already, points *c at that one.
func register[C prometheus.Collector](reg prometheus.Registerer, c *C) error {
	err := reg.Register(*c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		existing, ok := already.ExistingCollector.(C)
		if !ok {
			return fmt.Errorf("workqueue metrics: %T registered where a %T was expected", already.ExistingCollector, *c)
		}
		*c = existing
		return nil
	}
	if err != nil {
		return fmt.Errorf("workqueue metrics: %w", err)
	}
	return nil
}

// NewDepthMetric implements workqueue.MetricsProvider.
func (p *Provider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name)
}

// NewAddsMetric implements workqueue.MetricsProvider.
func (p *Provider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.adds.WithLabelValues(name)
}

// NewLatencyMetric implements workqueue.MetricsProvider.
func (p *Provider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name)
}

// NewWorkDurationMetric implements workqueue.MetricsProvider.
func (p *Provider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.work.WithLabelValues(name)
}

// NewUnfinishedWorkSecondsMetric implements workqueue.MetricsProvider.
func (p *Provider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name)
}

// NewLongestRunningProcessorSecondsMetric implements
// workqueue.MetricsProvider.
func (p *Provider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longest.WithLabelValues(name)
}

// NewRetriesMetric implements workqueue.MetricsProvider.
func (p *Provider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retries.WithLabelValues(name)
}
