package flowcontrol

import (
	"fmt"
	"io"
	"slices"
	"sync"
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

// WriteMetrics writes kube's APF metrics (a subset: rejections, and per
// level the seats executing, the requests waiting and the limit) in the
// Prometheus text format.
func (c *Controller) WriteMetrics(w io.Writer) {
	c.rejections.mu.Lock()
	keys := make([][3]string, 0, len(c.rejections.counts))
	for k := range c.rejections.counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [3]string) int { return slices.Compare(a[:], b[:]) })
	fmt.Fprintf(w, "# HELP apiserver_flowcontrol_rejected_requests_total Number of requests rejected by API Priority and Fairness subsystem\n# TYPE apiserver_flowcontrol_rejected_requests_total counter\n")
	for _, k := range keys {
		fmt.Fprintf(w, "apiserver_flowcontrol_rejected_requests_total{flow_schema=%q,priority_level=%q,reason=%q} %d\n", k[0], k[1], k[2], c.rejections.counts[k])
	}
	c.rejections.mu.Unlock()

	c.mu.Lock()
	names := make([]string, 0, len(c.levels))
	levels := map[string]*level{}
	for name, l := range c.levels {
		if !l.exempt && name != fallbackLevel {
			names = append(names, name)
			levels[name] = l
		}
	}
	c.mu.Unlock()
	slices.Sort(names)
	type gauge struct{ name, help string }
	gauges := []gauge{
		{"apiserver_flowcontrol_current_executing_seats", "Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem"},
		{"apiserver_flowcontrol_current_inqueue_requests", "Number of requests currently pending in queues of the API Priority and Fairness subsystem"},
		{"apiserver_flowcontrol_nominal_limit_seats", "Nominal number of execution seats configured for each priority level"},
	}
	values := map[string][3]int{}
	for _, name := range names {
		l := levels[name]
		l.mu.Lock()
		values[name] = [3]int{l.inUse, l.waiting, l.limit}
		l.mu.Unlock()
	}
	for i, g := range gauges {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", g.name, g.help, g.name)
		for _, name := range names {
			fmt.Fprintf(w, "%s{priority_level=%q} %d\n", g.name, name, values[name][i])
		}
	}
}
