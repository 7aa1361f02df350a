package nodelifecycle

import (
	"log/slog"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Config configures a Controller. Zero fields take the defaults, kube's
// (kube-controller-manager flags in parentheses).
type Config struct {
	// Logger receives the controller's logs; nil is slog.Default().
	Logger *slog.Logger
	// Clock drives every timestamp and period; nil is the real clock.
	Clock clock.WithTicker

	// MonitorPeriod is how often node health is checked: 5s
	// (--node-monitor-period).
	MonitorPeriod time.Duration
	// GracePeriod is how long a node may go without renewing its lease or
	// posting status before it is Unknown: 40s (--node-monitor-grace-period).
	GracePeriod time.Duration
	// StartupGracePeriod replaces GracePeriod for a node that never posted
	// a Ready condition: 60s (--node-startup-grace-period).
	StartupGracePeriod time.Duration

	// EvictionRate is how many nodes per second per zone get NoExecute
	// taints: 0.1 (--node-eviction-rate).
	EvictionRate float64
	// SecondaryEvictionRate replaces it in an unhealthy zone of a large
	// cluster: 0.01 (--secondary-node-eviction-rate).
	SecondaryEvictionRate float64
	// LargeClusterThreshold is the zone size above which an unhealthy zone
	// is slowed rather than stopped: 50 (--large-cluster-size-threshold).
	LargeClusterThreshold int
	// UnhealthyZoneThreshold is the share of not-ready nodes that makes a
	// zone unhealthy: 0.55 (--unhealthy-zone-threshold).
	UnhealthyZoneThreshold float64

	// Workers is how many nodes are checked at once: 8.
	Workers int
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
	if c.MonitorPeriod <= 0 {
		c.MonitorPeriod = 5 * time.Second
	}
	if c.GracePeriod <= 0 {
		c.GracePeriod = 40 * time.Second
	}
	if c.StartupGracePeriod <= 0 {
		c.StartupGracePeriod = 60 * time.Second
	}
	if c.EvictionRate <= 0 {
		c.EvictionRate = 0.1
	}
	if c.SecondaryEvictionRate <= 0 {
		c.SecondaryEvictionRate = 0.01
	}
	if c.LargeClusterThreshold <= 0 {
		c.LargeClusterThreshold = 50
	}
	if c.UnhealthyZoneThreshold <= 0 {
		c.UnhealthyZoneThreshold = 0.55
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	return c
}
