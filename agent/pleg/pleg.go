// Package pleg is the pod lifecycle event generator, as the kubelet's
// generic PLEG: it relists the container runtime periodically, compares
// each container's state with the previous relist and emits
// ContainerStarted / ContainerDied / ContainerRemoved events per pod, so
// that only the pods that changed are synced. Healthy reports false when
// the last successful relist is older than the threshold (3 minutes), which
// turns the node NotReady ("PLEG is not healthy: ...").
//
// A runtime that tracks its changes (ChangeLister, as the simulated one)
// is relisted incrementally: after the first, full relist only the pods
// that may have changed and those removed are listed and compared, so a
// relist costs what changed; the events, counts and timestamps are those
// of a full relist.
package pleg

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	"github.com/corekube/corekube/controllers/worker"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// PodLifeCycleEventType is the type of a pod lifecycle event.
type PodLifeCycleEventType string

// The event types, as the kubelet's.
const (
	// ContainerStarted: the container's new state is running.
	ContainerStarted PodLifeCycleEventType = "ContainerStarted"
	// ContainerDied: the container's new state is exited.
	ContainerDied PodLifeCycleEventType = "ContainerDied"
	// ContainerRemoved: the container's old state was exited and it is gone.
	ContainerRemoved PodLifeCycleEventType = "ContainerRemoved"
	// PodSync: the pod should be synced for a change no event above covers.
	PodSync PodLifeCycleEventType = "PodSync"
	// ContainerChanged: the new state is unknown; never sent.
	ContainerChanged PodLifeCycleEventType = "ContainerChanged"
)

// PodLifecycleEvent is an event about one pod.
type PodLifecycleEvent struct {
	// ID is the pod's UID.
	ID   types.UID
	Type PodLifeCycleEventType
	// Data is the container ID.
	Data string
}

// Defaults.
const (
	DefaultRelistPeriod    = time.Second
	DefaultRelistThreshold = 3 * time.Minute
	DefaultChannelCapacity = 1000
)

// Lister is the part of the runtime the PLEG needs.
type Lister interface {
	ListPods(ctx context.Context) ([]runtime.Pod, error)
}

// Options configure a GenericPLEG; zero values take the defaults.
type Options struct {
	RelistPeriod time.Duration
	// RelistThreshold is how old the last relist may be for Healthy.
	RelistThreshold time.Duration
	Clock           clock.WithTicker
	// Events receives the events; several PLEGs may share one channel.
	// Nil: a channel of DefaultChannelCapacity, returned by Watch.
	Events chan *PodLifecycleEvent
	Logger *slog.Logger
	// Metrics receive the relists' measurements; nil: none.
	Metrics *Metrics
}

// Metrics receive what a PLEG measures, as the kubelet's
// kubelet_pleg_relist_duration_seconds, kubelet_pleg_relist_interval_seconds
// and kubelet_pleg_discard_events. The owner creates them (per node, with
// its labels already applied) so that a relist costs no label lookup; nil
// fields are not measured.
type Metrics struct {
	// RelistDuration observes how long each relist took, in seconds of
	// real time (the cost of listing, whatever the PLEG's clock).
	RelistDuration prometheus.Observer
	// RelistInterval observes the time since the previous successful
	// relist, in seconds of the PLEG's clock, before each relist.
	RelistInterval prometheus.Observer
	// DiscardEvents counts the events dropped because the channel was
	// full.
	DiscardEvents prometheus.Counter
}

// Counts are what the last successful relist found: the pods whose
// sandbox runs and the containers by state (the kubelet's
// kubelet_running_pods and kubelet_running_containers{container_state}).
type Counts struct {
	RunningPods int
	// Containers by state, indexed as ContainerStates.
	Containers [len(ContainerStates)]int
	// Seen: the state has been counted at least once since the PLEG
	// started (the kubelet exposes a state's series from the first relist
	// that found a container in it).
	Seen [len(ContainerStates)]bool
}

// ContainerStates are the container states Counts counts, as the kubelet's
// container_state label values.
var ContainerStates = [...]runtime.ContainerState{
	runtime.ContainerStateCreated, runtime.ContainerStateRunning,
	runtime.ContainerStateExited, runtime.ContainerStateUnknown,
}

func stateIndex(s runtime.ContainerState) int {
	switch s {
	case runtime.ContainerStateCreated:
		return 0
	case runtime.ContainerStateRunning:
		return 1
	case runtime.ContainerStateExited:
		return 2
	default:
		return 3
	}
}

type plegContainerState string

const (
	plegContainerRunning     plegContainerState = "running"
	plegContainerExited      plegContainerState = "exited"
	plegContainerUnknown     plegContainerState = "unknown"
	plegContainerNonExistent plegContainerState = "non-existent"
)

func convertState(s runtime.ContainerState) plegContainerState {
	switch s {
	case runtime.ContainerStateRunning:
		return plegContainerRunning
	case runtime.ContainerStateExited:
		return plegContainerExited
	default: // created, unknown
		return plegContainerUnknown
	}
}

// podRecord is what the PLEG keeps of a listed pod.
type podRecord struct {
	// old is the listing the last events were generated against (nil:
	// none yet). The PLEG owns it (a copy, reused).
	old *runtime.Pod
	// ready and containers are the pod's share of Counts at its last
	// listing.
	ready      bool
	containers [len(ContainerStates)]int32
	// seen: listed by the current full relist.
	seen bool
}

// ChangeLister is a Lister that also tracks what changed, so that a relist
// costs what changed rather than every pod (a node agent relists thousands
// of pods a second, nearly all unchanged).
type ChangeLister interface {
	Lister
	// ListChanges lists the pods whose listing may differ from the
	// previous call's and the UIDs of the pods removed since; with all,
	// every pod (removed is then empty). The results are written into
	// the given buffers and valid until the next call.
	ListChanges(ctx context.Context, all bool, pods []runtime.Pod, removed []types.UID) ([]runtime.Pod, []types.UID, error)
}

type GenericPLEG struct {
	runtime   Lister
	period    time.Duration
	threshold time.Duration
	clock     clock.WithTicker
	events    chan *PodLifecycleEvent
	log       *slog.Logger
	metrics   Metrics

	mu         sync.Mutex // serialises Relist
	podRecords map[types.UID]*podRecord
	// changes is the runtime as a ChangeLister (nil: it is not one, every
	// relist lists every pod); full: the next relist must list all (the
	// first one).
	changes ChangeLister
	full    bool
	pods    []runtime.Pod // listing buffer, reused
	removed []types.UID   // removed-pods buffer, reused
	counts  Counts        // kept up to date pod by pod

	relistMu      sync.RWMutex
	relistTime    time.Time
	relistedCount Counts
}

// New returns a PLEG over the runtime.
func New(rt Lister, opts Options) *GenericPLEG {
	if opts.RelistPeriod <= 0 {
		opts.RelistPeriod = DefaultRelistPeriod
	}
	if opts.RelistThreshold <= 0 {
		opts.RelistThreshold = DefaultRelistThreshold
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Events == nil {
		opts.Events = make(chan *PodLifecycleEvent, DefaultChannelCapacity)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	g := &GenericPLEG{
		runtime: rt, period: opts.RelistPeriod, threshold: opts.RelistThreshold, clock: opts.Clock,
		events: opts.Events, log: opts.Logger, podRecords: map[types.UID]*podRecord{}, full: true,
	}
	g.changes, _ = rt.(ChangeLister)
	if opts.Metrics != nil {
		g.metrics = *opts.Metrics
	}
	return g
}

// Watch returns the channel the events are sent to.
func (g *GenericPLEG) Watch() chan *PodLifecycleEvent { return g.events }

// Run relists every period until ctx ends. (An agent running many nodes
// calls Relist on all its PLEGs from one loop instead.)
func (g *GenericPLEG) Run(ctx context.Context) error {
	g.Relist(ctx)
	worker.Tick(ctx, g.clock, g.log, "pleg", g.period, g.Relist)
	return nil
}

// Healthy reports whether the last successful relist is recent enough.
func (g *GenericPLEG) Healthy() (bool, error) {
	g.relistMu.RLock()
	last := g.relistTime
	g.relistMu.RUnlock()
	if last.IsZero() {
		return false, fmt.Errorf("pleg has yet to be successful")
	}
	if elapsed := g.clock.Since(last); elapsed > g.threshold {
		return false, fmt.Errorf("pleg was last seen active %v ago; threshold is %v", elapsed, g.threshold)
	}
	return true, nil
}

// RelistTime is the time of the last successful relist.
func (g *GenericPLEG) RelistTime() time.Time {
	g.relistMu.RLock()
	defer g.relistMu.RUnlock()
	return g.relistTime
}

// Counts are what the last successful relist counted.
func (g *GenericPLEG) Counts() Counts {
	g.relistMu.RLock()
	defer g.relistMu.RUnlock()
	return g.relistedCount
}

// Relist lists the runtime, compares with the previous listing and sends
// the events. A failed listing leaves the relist time (and so Healthy)
// where it was.
func (g *GenericPLEG) Relist(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.metrics.RelistDuration != nil {
		start := time.Now()
		defer func() { g.metrics.RelistDuration.Observe(time.Since(start).Seconds()) }()
	}
	timestamp := g.clock.Now()
	if last := g.RelistTime(); g.metrics.RelistInterval != nil && !last.IsZero() {
		g.metrics.RelistInterval.Observe(timestamp.Sub(last).Seconds())
	}
	var err error
	full := g.full || g.changes == nil
	if g.changes != nil {
		g.pods, g.removed, err = g.changes.ListChanges(ctx, full, g.pods, g.removed)
	} else {
		g.pods, err = g.runtime.ListPods(ctx)
		g.removed = g.removed[:0]
	}
	if err != nil {
		g.log.Warn("PLEG: unable to retrieve pods", "err", err)
		return
	}
	g.full = false
	g.relistMu.Lock()
	g.relistTime = timestamp
	g.relistMu.Unlock()

	// Only the pods listed (with a ChangeLister: those that may have
	// changed) and those gone are compared; every other pod's listing is
	// the previous relist's, against which it generated all its events.
	if full {
		for _, r := range g.podRecords {
			r.seen = false
		}
	}
	for i := range g.pods {
		g.update(g.pods[i].ID, &g.pods[i])
	}
	if full {
		for pid, r := range g.podRecords {
			if !r.seen {
				g.update(pid, nil)
			}
		}
	} else {
		for _, pid := range g.removed {
			g.update(pid, nil)
		}
	}
	if g.changes == nil {
		g.pods = nil // the runtime's listing: not ours to keep
	}

	g.relistMu.Lock()
	g.relistedCount = g.counts
	g.relistMu.Unlock()
}

// update compares the pod's listing (nil: gone) with its record, sends the
// events and updates the record and the counts.
func (g *GenericPLEG) update(pid types.UID, current *runtime.Pod) {
	r := g.podRecords[pid]
	if r == nil {
		if current == nil {
			return
		}
		r = &podRecord{}
		g.podRecords[pid] = r
	}
	r.seen = true
	// Counts: the pod's old share out, its new one in.
	if r.ready {
		g.counts.RunningPods--
	}
	for j, n := range r.containers {
		g.counts.Containers[j] -= int(n)
	}
	r.ready, r.containers = false, [len(ContainerStates)]int32{}
	if current != nil {
		r.ready = current.SandboxReady
		for _, c := range current.Containers {
			r.containers[stateIndex(c.State)]++
		}
		if r.ready {
			g.counts.RunningPods++
		}
		for j, n := range r.containers {
			g.counts.Containers[j] += int(n)
			if n > 0 {
				g.counts.Seen[j] = true
			}
		}
	}

	var events []*PodLifecycleEvent
	forEachContainerID(r.old, current, func(cid string) {
		events = append(events, generateEvents(pid, cid, containerState(r.old, cid), containerState(current, cid))...)
	})
	switch {
	case current == nil:
		// A pod that is gone is forgotten.
		delete(g.podRecords, pid)
	case len(events) > 0:
		// The current listing becomes the old one: a copy, as the
		// listing's buffer is reused.
		if r.old == nil {
			r.old = &runtime.Pod{}
		}
		cs := append(r.old.Containers[:0], current.Containers...)
		*r.old = *current
		r.old.Containers = cs
	}
	for _, e := range events {
		if e.Type == ContainerChanged {
			continue // not reliable, nobody uses it
		}
		select {
		case g.events <- e:
		default:
			if g.metrics.DiscardEvents != nil {
				g.metrics.DiscardEvents.Inc()
			}
			g.log.Error("PLEG: event channel is full, discarding this relist() cycle event", "pod", pid, "type", e.Type)
		}
	}
}

// forEachContainerID calls fn for each container ID of old and current,
// once each.
func forEachContainerID(old, current *runtime.Pod, fn func(string)) {
	if old != nil {
		for _, c := range old.Containers {
			fn(c.ID)
		}
	}
	if current != nil {
		for _, c := range current.Containers {
			if old != nil && hasContainer(old, c.ID) {
				continue
			}
			fn(c.ID)
		}
	}
}

func hasContainer(p *runtime.Pod, id string) bool {
	for _, c := range p.Containers {
		if c.ID == id {
			return true
		}
	}
	return false
}

func containerState(p *runtime.Pod, id string) plegContainerState {
	if p == nil {
		return plegContainerNonExistent
	}
	for _, c := range p.Containers {
		if c.ID == id {
			return convertState(c.State)
		}
	}
	return plegContainerNonExistent
}

// generateEvents names the transition from oldState to newState.
func generateEvents(pid types.UID, cid string, oldState, newState plegContainerState) []*PodLifecycleEvent {
	if newState == oldState {
		return nil
	}
	switch newState {
	case plegContainerRunning:
		return []*PodLifecycleEvent{{ID: pid, Type: ContainerStarted, Data: cid}}
	case plegContainerExited:
		return []*PodLifecycleEvent{{ID: pid, Type: ContainerDied, Data: cid}}
	case plegContainerUnknown:
		return []*PodLifecycleEvent{{ID: pid, Type: ContainerChanged, Data: cid}}
	default: // non-existent
		if oldState == plegContainerExited {
			// Its death was reported already.
			return []*PodLifecycleEvent{{ID: pid, Type: ContainerRemoved, Data: cid}}
		}
		return []*PodLifecycleEvent{{ID: pid, Type: ContainerDied, Data: cid}, {ID: pid, Type: ContainerRemoved, Data: cid}}
	}
}
