package disruption

import (
	"log/slog"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Config configures a Controller. Zero fields take the defaults, which are
// kube-controller-manager's.
type Config struct {
	// Logger receives the controller's logs; nil is slog.Default().
	Logger *slog.Logger
	// Clock drives expiries and requeues; nil is the real clock.
	Clock clock.WithTicker

	// DeletionTimeout is how long a pod recorded in a budget's
	// disruptedPods by an eviction may take to be marked for deletion
	// before the budget counts it again (2m).
	DeletionTimeout time.Duration
	// StalePodDisruptionTimeout is how long a pod that is not being
	// deleted keeps a DisruptionTarget=True condition before it is reset
	// to False (2m).
	StalePodDisruptionTimeout time.Duration
	// ResyncPeriod is how often every budget is recomputed even without a
	// change (0: never; changes are what drive the controller).
	ResyncPeriod time.Duration
	// Workers is how many budgets are synced at once (1, as kube).
	Workers int
	// EventQueueSize bounds the events waiting to be written; more are
	// dropped, as kube's broadcaster drops them (1000).
	EventQueueSize int
	// QueueMetrics gives the controller's workqueues kube's workqueue_*
	// metrics under kube's queue names (workqueuemetrics.For); nil: none.
	QueueMetrics workqueue.MetricsProvider
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.DeletionTimeout <= 0 {
		c.DeletionTimeout = 2 * time.Minute
	}
	if c.StalePodDisruptionTimeout <= 0 {
		c.StalePodDisruptionTimeout = 2 * time.Minute
	}
	if c.ResyncPeriod < 0 {
		c.ResyncPeriod = 0
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.EventQueueSize <= 0 {
		c.EventQueueSize = 1000
	}
	return c
}
