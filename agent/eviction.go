package agent

// Node-pressure eviction, as the kubelet v1.32's eviction manager
// (pkg/kubelet/eviction): every EvictionMonitoringPeriod each node
// observes memory.available (its memory capacity minus the working sets of
// its running containers, as the simulated runtime reports them), checks
// the hard and soft thresholds, keeps MemoryPressure for the pressure
// transition period after the last time a threshold was met, and, once a
// threshold has been met for its grace period, evicts at most one pod, in
// the kubelet's order. The other signals (nodefs, imagefs, pid) are
// accepted in the flags as the kubelet's but never observed: the
// simulated runtime has no disks or process table to run short of.
//
// PodDisruptionBudgets are not consulted, as the kubelet does not: a
// starved node cannot wait for a budget.

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corekube/corekube/agent/runtime/sim"
	"github.com/corekube/corekube/controllers/scheduler/podresources"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The kubelet's eviction defaults.
const (
	// DefaultEvictionHard is the kubelet's --eviction-hard default on Linux.
	DefaultEvictionHard = "imagefs.available<15%,memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%"
	// DefaultEvictionPressureTransitionPeriod is how long a pressure
	// condition stays after its threshold was last met.
	DefaultEvictionPressureTransitionPeriod = 5 * time.Minute
	// DefaultEvictionMonitoringPeriod is the eviction manager's
	// housekeeping interval.
	DefaultEvictionMonitoringPeriod = 10 * time.Second
	// minimumGracePeriod is the least time the kubelet gives a container
	// to stop, whatever override it is asked for.
	minimumGracePeriod = 2 * time.Second
	// systemCriticalPriority: pods at or above it are critical and never
	// evicted.
	systemCriticalPriority = 2000000000
)

// The kubelet's eviction reason and message fragments (each ends with a
// space, as the kubelet's).
const (
	reasonEvicted          = "Evicted"
	nodeLowMessageFmt      = "The node was low on resource: %v. "
	thresholdMetMessageFmt = "Threshold quantity: %v, available: %v. "
	containerMessageFmt    = "Container %s was using %s, request is %s, has larger consumption of %v. "
	nodeConditionMsgFmt    = "The node had condition: %v. "
)

// The eviction signals the kubelet accepts, with the node condition and
// resource each stands for.
const signalMemoryAvailable = "memory.available"

var evictionSignals = map[string]v1.NodeConditionType{
	signalMemoryAvailable:         v1.NodeMemoryPressure,
	"allocatableMemory.available": v1.NodeMemoryPressure,
	"nodefs.available":            v1.NodeDiskPressure,
	"nodefs.inodesFree":           v1.NodeDiskPressure,
	"imagefs.available":           v1.NodeDiskPressure,
	"imagefs.inodesFree":          v1.NodeDiskPressure,
	"containerfs.available":       v1.NodeDiskPressure,
	"containerfs.inodesFree":      v1.NodeDiskPressure,
	"pid.available":               v1.NodePIDPressure,
}

// threshold is one eviction threshold: signal < value, where value is a
// quantity or a fraction of the capacity; grace is 0 for hard thresholds.
type threshold struct {
	signal     string
	quantity   *resource.Quantity
	percentage float64 // of capacity, when quantity is nil
	grace      time.Duration
	// minReclaim (a quantity, or a fraction of capacity) is how far above
	// the threshold the signal must come back before a threshold that drove
	// evictions counts as resolved (--eviction-minimum-reclaim).
	minReclaim           *resource.Quantity
	minReclaimPercentage float64
}

func (t threshold) hard() bool { return t.grace == 0 }

// value is the threshold's quantity against capacity (bytes).
func (t threshold) value(capacity int64) *resource.Quantity {
	if t.quantity != nil {
		return t.quantity
	}
	return resource.NewQuantity(int64(float64(capacity)*t.percentage), resource.BinarySI)
}

// resolvedAt is the value the signal must reach again for the threshold,
// once it drove evictions, to be resolved: the value plus the minimum
// reclaim (bytes).
func (t threshold) resolvedAt(capacity int64) int64 {
	v := t.value(capacity).Value()
	switch {
	case t.minReclaim != nil:
		v += t.minReclaim.Value()
	case t.minReclaimPercentage > 0:
		v += int64(float64(capacity) * t.minReclaimPercentage)
	}
	return v
}

// parseThresholds parses the kubelet's --eviction-hard, --eviction-soft,
// --eviction-soft-grace-period and --eviction-minimum-reclaim values
// ("memory.available<100Mi,...", "memory.available=1m30s,...",
// "memory.available=500Mi,...") with the kubelet's rules and messages.
func parseThresholds(hard, soft, softGrace, minReclaim string) ([]threshold, error) {
	h, err := parseThresholdStatements(hard)
	if err != nil {
		return nil, err
	}
	s, err := parseThresholdStatements(soft)
	if err != nil {
		return nil, err
	}
	graces, err := parseGracePeriods(softGrace)
	if err != nil {
		return nil, err
	}
	for i := range s {
		g, ok := graces[s[i].signal]
		if !ok {
			return nil, fmt.Errorf("grace period must be specified for the soft eviction threshold %v", s[i].signal)
		}
		s[i].grace = g
	}
	all := append(h, s...)
	pairs, err := splitPairs(minReclaim, "=")
	if err != nil {
		return nil, err
	}
	for _, p := range pairs {
		signal, val := p[0], p[1]
		if _, ok := evictionSignals[signal]; !ok {
			return nil, fmt.Errorf("unsupported eviction signal %v", signal)
		}
		var q *resource.Quantity
		var pct float64
		if strings.HasSuffix(val, "%") {
			f, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 32)
			if err != nil {
				return nil, err
			}
			if f <= 0 {
				return nil, fmt.Errorf("eviction percentage minimum reclaim %v must be positive: %s", signal, val)
			}
			pct = float64(float32(f)) / 100
		} else {
			v, err := resource.ParseQuantity(val)
			if err != nil {
				return nil, err
			}
			if v.Sign() < 0 {
				return nil, fmt.Errorf("negative eviction minimum reclaim specified for %v", signal)
			}
			q = &v
		}
		for i := range all {
			if all[i].signal == signal {
				all[i].minReclaim, all[i].minReclaimPercentage = q, pct
			}
		}
	}
	return all, nil
}

// splitPairs splits "k<v,k2<v2" (sep '<') or "k=v,..." into ordered pairs,
// refusing duplicate keys as the kubelet's flag types do.
func splitPairs(expr string, sep string) ([][2]string, error) {
	var out [][2]string
	seen := map[string]bool{}
	for _, item := range strings.Split(expr, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, sep)
		if !ok {
			return nil, fmt.Errorf("malformed pair, expect string%sstring", sep)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if seen[k] {
			return nil, fmt.Errorf("found duplicate eviction threshold for signal %v", k)
		}
		seen[k] = true
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

func parseThresholdStatements(expr string) ([]threshold, error) {
	pairs, err := splitPairs(expr, "<")
	if err != nil {
		return nil, err
	}
	var out []threshold
	for _, p := range pairs {
		signal, val := p[0], p[1]
		if _, ok := evictionSignals[signal]; !ok {
			return nil, fmt.Errorf("unsupported eviction signal %v", signal)
		}
		if strings.HasSuffix(val, "%") {
			// 0% and 100% turn the threshold off, as in the kubelet.
			if val == "0%" || val == "100%" {
				continue
			}
			f, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 32)
			if err != nil {
				return nil, err
			}
			if f < 0 {
				return nil, fmt.Errorf("eviction percentage threshold %v must be >= 0%%: %s", signal, val)
			}
			if f > 100 {
				return nil, fmt.Errorf("eviction percentage threshold %v must be <= 100%%: %s", signal, val)
			}
			out = append(out, threshold{signal: signal, percentage: float64(float32(f)) / 100})
			continue
		}
		q, err := resource.ParseQuantity(val)
		if err != nil {
			return nil, err
		}
		if q.Sign() <= 0 {
			return nil, fmt.Errorf("eviction threshold %v must be positive: %s", signal, &q)
		}
		out = append(out, threshold{signal: signal, quantity: &q})
	}
	return out, nil
}

func parseGracePeriods(expr string) (map[string]time.Duration, error) {
	pairs, err := splitPairs(expr, "=")
	if err != nil {
		return nil, err
	}
	out := map[string]time.Duration{}
	for _, p := range pairs {
		if _, ok := evictionSignals[p[0]]; !ok {
			return nil, fmt.Errorf("unsupported eviction signal %v", p[0])
		}
		d, err := time.ParseDuration(p[1])
		if err != nil {
			return nil, err
		}
		if d < 0 {
			return nil, fmt.Errorf("invalid eviction grace period specified: %v, must be a positive value", p[1])
		}
		out[p[0]] = d
	}
	return out, nil
}

// evictionState is one node's eviction manager state. The node task that
// runs synchronize writes it; status updates and pod admission read the
// pressure under mu.
type evictionState struct {
	mu sync.Mutex
	// firstObserved: when each threshold (index in Agent.thresholds) was
	// first seen met in the current run of observations.
	firstObserved map[int]time.Time
	// pressureSeen: the last time a memory threshold was met (zero: never).
	pressureSeen time.Time
	// memoryPressure: the MemoryPressure condition (within the transition
	// period of pressureSeen).
	memoryPressure bool

	// reclaiming: the thresholds (by index) that drove evictions in the
	// last round, met for their grace period; each stays met until the
	// signal is back above it by its minimum reclaim.
	reclaiming map[int]bool

	// stats is the buffer of the last observation (synchronize's alone).
	stats []sim.PodMemory
}

// underMemoryPressure reports the node's MemoryPressure condition as the
// eviction manager last computed it.
func (s *evictionState) underMemoryPressure() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.memoryPressure
}

// evictionRequest is what the eviction manager asks of a pod's worker:
// stop the pod within grace and fail it with message.
type evictionRequest struct {
	message string
	grace   time.Duration
}

// evictionCandidate is a pod the manager may evict, with its usage.
type evictionCandidate struct {
	pod     *v1.Pod
	w       *podWorker
	stats   *sim.PodMemory
	request int64 // memory request (bytes)
}

// rankMemoryPressure orders candidates as the kubelet's rankMemoryPressure:
// pods whose usage exceeds their memory request first, then lower
// priority first, then the larger usage above request first.
func rankMemoryPressure(cands []evictionCandidate) {
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := &cands[i], &cands[j]
		aExceeds, bExceeds := a.stats.Bytes > a.request, b.stats.Bytes > b.request
		if aExceeds != bExceeds {
			return aExceeds
		}
		if pa, pb := podPriority(a.pod), podPriority(b.pod); pa != pb {
			return pa < pb
		}
		return a.stats.Bytes-a.request > b.stats.Bytes-b.request
	})
}

func podPriority(pod *v1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// criticalPod is the kubelet's IsCriticalPod: static and mirror pods (the
// agent has none, but an API pod may carry the annotations) and pods of
// system-critical priority.
func criticalPod(pod *v1.Pod) bool {
	if src, ok := pod.Annotations["kubernetes.io/config.source"]; ok && src != "api" {
		return true
	}
	if _, ok := pod.Annotations["kubernetes.io/config.mirror"]; ok {
		return true
	}
	return podPriority(pod) >= systemCriticalPriority
}

// memoryRequest is the pod's memory request as the kubelet reckons it
// (containers, init containers and overhead).
func memoryRequest(pod *v1.Pod) int64 {
	return podresources.PodRequests(pod, podresources.Options{}).Memory
}

// evictionMessage is the kubelet's message for a pod evicted to reclaim
// memory: the threshold and what was available, then every container
// using more than it requested.
func evictionMessage(pod *v1.Pod, stats *sim.PodMemory, quantity, available *resource.Quantity) string {
	var b strings.Builder
	fmt.Fprintf(&b, nodeLowMessageFmt, v1.ResourceMemory)
	fmt.Fprintf(&b, thresholdMetMessageFmt, quantity, available)
	for _, cs := range stats.Containers {
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if c.Name != cs.Name {
				continue
			}
			req := c.Resources.Requests[v1.ResourceMemory]
			usage := resource.NewQuantity(cs.Bytes, resource.BinarySI)
			if usage.Cmp(req) > 0 {
				fmt.Fprintf(&b, containerMessageFmt, c.Name, usage.String(), req.String(), v1.ResourceMemory)
			}
		}
	}
	return b.String()
}

// synchronize is one round of the node's eviction manager: observe, update
// the pressure condition, and evict at most one pod.
func (n *node) synchronize() error {
	a := n.a
	st := &n.eviction
	stats, used, err := n.runtime.MemoryStats(st.stats)
	if err != nil {
		// As the kubelet without stats: log, and try again next round.
		a.log.Error("eviction manager: failed to get summary stats", "node", n.name, "err", err)
		return nil
	}
	st.stats = stats
	capacity := a.cfg.Capacity.Memory().Value()
	availableBytes := max(capacity-used, 0)
	available := resource.NewQuantity(availableBytes, resource.BinarySI)
	now := a.clock.Now()

	st.mu.Lock()
	var firstObserved map[int]time.Time // nil while nothing is met
	met := false
	for i, t := range a.thresholds {
		if t.signal != signalMemoryAvailable {
			continue // never observed
		}
		limit := t.value(capacity).Value()
		if st.reclaiming[i] {
			limit = t.resolvedAt(capacity)
		}
		if limit <= availableBytes {
			continue
		}
		met = true
		at, ok := st.firstObserved[i]
		if !ok {
			at = now
		}
		if firstObserved == nil {
			firstObserved = map[int]time.Time{}
		}
		firstObserved[i] = at
	}
	st.firstObserved = firstObserved
	if met {
		st.pressureSeen = now
	}
	pressure := !st.pressureSeen.IsZero() && now.Sub(st.pressureSeen) < a.cfg.EvictionPressureTransitionPeriod
	if pressure != st.memoryPressure {
		a.log.Info("eviction manager: memory pressure", "node", n.name, "pressure", pressure, "available", available.String())
	}
	st.memoryPressure = pressure
	// The threshold to reclaim: one met for its grace period, hard ones
	// first (they act at once), then in flag order.
	reclaim := -1
	var reclaiming map[int]bool
	for i := range a.thresholds {
		at, ok := firstObserved[i]
		if !ok || now.Sub(at) < a.thresholds[i].grace {
			continue
		}
		if reclaiming == nil {
			reclaiming = map[int]bool{}
		}
		reclaiming[i] = true
		if reclaim < 0 || (a.thresholds[i].hard() && !a.thresholds[reclaim].hard()) {
			reclaim = i
		}
	}
	st.reclaiming = reclaiming
	st.mu.Unlock()
	if reclaim < 0 {
		return nil
	}
	t := a.thresholds[reclaim]

	cands := make([]evictionCandidate, 0, len(stats))
	for i := range stats {
		w := a.worker(stats[i].UID)
		if w == nil || w.node != n {
			continue
		}
		if w.evictionRequested() {
			// The kubelet's eviction blocks until the pod it evicted is
			// killed and cleaned up: nothing more goes while one still
			// runs.
			return nil
		}
		pod, removed := w.snapshot()
		if pod == nil || removed || isTerminalPhase(pod.Status.Phase) {
			continue
		}
		cands = append(cands, evictionCandidate{pod: pod, w: w, stats: &stats[i], request: memoryRequest(pod)})
	}
	// The kubelet announces each round that has to reclaim.
	a.events.nodeEvent(n, v1.EventTypeWarning, "EvictionThresholdMet", fmt.Sprintf("Attempting to reclaim %s", v1.ResourceMemory))
	if len(cands) == 0 {
		a.log.Warn("eviction manager: eviction thresholds have been met, but no pods are active to evict", "node", n.name)
		return nil
	}
	rankMemoryPressure(cands)
	for _, c := range cands {
		if criticalPod(c.pod) {
			a.log.Error("eviction manager: cannot evict a critical pod", "pod", c.pod.Namespace+"/"+c.pod.Name)
			continue
		}
		// Hard thresholds ask for a 1s stop; soft ones for
		// --eviction-max-pod-grace-period, or the pod's own grace period
		// when shorter (v1.32, AllowOverwriteTerminationGracePeriodSeconds
		// off). The kubelet's container kill gives at least 2s either way.
		grace := time.Second
		if !t.hard() {
			grace = time.Duration(a.cfg.EvictionMaxPodGracePeriod) * time.Second
			if tgps := c.pod.Spec.TerminationGracePeriodSeconds; tgps != nil {
				grace = min(grace, time.Duration(*tgps)*time.Second)
			}
		}
		grace = max(grace, minimumGracePeriod)
		msg := evictionMessage(c.pod, c.stats, t.value(capacity), available)
		a.log.Info("eviction manager: evicting pod", "node", n.name, "pod", c.pod.Namespace+"/"+c.pod.Name, "signal", t.signal)
		a.events.podEvent(c.pod, "", n, v1.EventTypeWarning, reasonEvicted, msg)
		c.w.requestEviction(&evictionRequest{message: msg, grace: grace})
		n.metrics.evictions(t.signal).Inc()
		a.podQueue.Add(c.w.uid)
		return nil
	}
	a.log.Info("eviction manager: unable to evict any pods from the node", "node", n.name)
	return nil
}

// evictionAdmit is the eviction manager's pod admission: under memory
// pressure alone only BestEffort pods that do not tolerate the
// memory-pressure taint are refused; critical pods always pass.
func (n *node) evictionAdmit(pod *v1.Pod) *rejection {
	if !n.eviction.underMemoryPressure() || criticalPod(pod) {
		return nil
	}
	if podQOS(pod) != v1.PodQOSBestEffort {
		return nil
	}
	taint := v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
	if slices.ContainsFunc(pod.Spec.Tolerations, func(t v1.Toleration) bool { return t.ToleratesTaint(&taint) }) {
		return nil
	}
	return &rejection{reason: reasonEvicted, message: fmt.Sprintf(nodeConditionMsgFmt, []v1.NodeConditionType{v1.NodeMemoryPressure})}
}

// requestEviction asks the worker to evict its pod (the first request
// stands).
func (w *podWorker) requestEviction(r *evictionRequest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.evict == nil {
		w.evict = r
	}
}

// evictionRequested reports whether the pod is being evicted.
func (w *podWorker) evictionRequested() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.evict != nil
}

// eviction is the pending eviction request, if any.
func (w *podWorker) eviction() *evictionRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.evict
}
