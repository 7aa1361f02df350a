package scheduler

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"k8s.io/utils/clock"
)

// DefaultSchedulerName is the spec.schedulerName of the pods this
// scheduler places unless Config says otherwise.
const DefaultSchedulerName = "default-scheduler"

// Config configures a Scheduler. Zero fields take the defaults, which are
// kube-scheduler's.
type Config struct {
	// SchedulerName selects the pods to place by spec.schedulerName and is
	// the reporting controller of the events: "default-scheduler".
	SchedulerName string
	// Logger receives the scheduler's logs; nil is slog.Default().
	Logger *slog.Logger
	// Metrics is where the scheduler registers kube-scheduler's metrics
	// (scheduler_*); nil means none.
	Metrics prometheus.Registerer
	// Clock drives back-offs and periodic work; nil is the real clock.
	Clock clock.WithTicker

	// InitialBackoff is how long a pod waits before its second attempt;
	// each further failure doubles it up to MaxBackoff (1s and 10s).
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// MaxUnschedulableDuration is how long an unschedulable pod that no
	// cluster change made schedulable waits before it is tried again (5m).
	MaxUnschedulableDuration time.Duration
	// FlushInterval is how often parked pods are checked against
	// MaxUnschedulableDuration (30s).
	FlushInterval time.Duration
	// PercentageOfNodesToScore is kube's setting of that name: how much of
	// a large cluster is searched for feasible nodes; 0 is kube's adaptive
	// value (50% minus 1% per 125 nodes, at least 5%, at least 100 nodes).
	PercentageOfNodesToScore int

	// APIWorkers is how many bindings and status writes run at once (16).
	APIWorkers int
	// EventWorkers is how many event writes run at once (4).
	EventWorkers int
	// EventQueueSize bounds the events waiting to be written; more are
	// dropped, as kube's broadcaster drops them (1000).
	EventQueueSize int
	// EventSeriesFlush is how often the counts of repeated events are
	// written (30s).
	EventSeriesFlush time.Duration
}

func (c Config) withDefaults() Config {
	if c.SchedulerName == "" {
		c.SchedulerName = DefaultSchedulerName
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.InitialBackoff <= 0 {
		c.InitialBackoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 10 * time.Second
	}
	if c.MaxBackoff < c.InitialBackoff {
		c.MaxBackoff = c.InitialBackoff
	}
	if c.MaxUnschedulableDuration <= 0 {
		c.MaxUnschedulableDuration = 5 * time.Minute
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = 30 * time.Second
	}
	if c.PercentageOfNodesToScore < 0 || c.PercentageOfNodesToScore > 100 {
		c.PercentageOfNodesToScore = 0
	}
	if c.APIWorkers <= 0 {
		c.APIWorkers = 16
	}
	if c.EventWorkers <= 0 {
		c.EventWorkers = 4
	}
	if c.EventQueueSize <= 0 {
		c.EventQueueSize = 1000
	}
	if c.EventSeriesFlush <= 0 {
		c.EventSeriesFlush = 30 * time.Second
	}
	return c
}
