package flowcontrol

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// rejections counts the 429s by schema, level and reason, as kube's
// apiserver_flowcontrol_rejected_requests_total.
type rejections struct {
	mu     sync.Mutex
	counts map[[3]string]int64
}

func (r *rejections) add(schema, level string, reason rejectReason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[[3]string]int64{}
	}
	r.counts[[3]string{schema, level, string(reason)}]++
}

// The descriptions of kube's APF metrics this package keeps (a subset:
// rejections, and per level the seats executing, the requests waiting
// and the limit), with kube's names, help and labels.
var (
	rejectedDesc = prometheus.NewDesc("apiserver_flowcontrol_rejected_requests_total",
		"[BETA] Number of requests rejected by API Priority and Fairness subsystem",
		[]string{"flow_schema", "priority_level", "reason"}, nil)
	executingSeatsDesc = prometheus.NewDesc("apiserver_flowcontrol_current_executing_seats",
		"[BETA] Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem",
		[]string{"priority_level"}, nil)
	inqueueDesc = prometheus.NewDesc("apiserver_flowcontrol_current_inqueue_requests",
		"[BETA] Number of requests currently pending in queues of the API Priority and Fairness subsystem",
		[]string{"priority_level"}, nil)
	nominalLimitDesc = prometheus.NewDesc("apiserver_flowcontrol_nominal_limit_seats",
		"[BETA] Nominal number of execution seats configured for each priority level",
		[]string{"priority_level"}, nil)
)

// Describe implements prometheus.Collector: the controller is registered
// with the server's metrics registry and read at every scrape.
func (c *Controller) Describe(ch chan<- *prometheus.Desc) {
	ch <- rejectedDesc
	ch <- executingSeatsDesc
	ch <- inqueueDesc
	ch <- nominalLimitDesc
}

// Collect implements prometheus.Collector.
func (c *Controller) Collect(ch chan<- prometheus.Metric) {
	c.rejections.mu.Lock()
	for k, n := range c.rejections.counts {
		ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(n), k[0], k[1], k[2])
	}
	c.rejections.mu.Unlock()

	c.mu.Lock()
	levels := make(map[string]*level, len(c.levels))
	for name, l := range c.levels {
		if !l.exempt && name != fallbackLevel {
			levels[name] = l
		}
	}
	c.mu.Unlock()
	for name, l := range levels {
		l.mu.Lock()
		inUse, waiting, limit := l.inUse, l.waiting, l.limit
		l.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(executingSeatsDesc, prometheus.GaugeValue, float64(inUse), name)
		ch <- prometheus.MustNewConstMetric(inqueueDesc, prometheus.GaugeValue, float64(waiting), name)
		ch <- prometheus.MustNewConstMetric(nominalLimitDesc, prometheus.GaugeValue, float64(limit), name)
	}
}
