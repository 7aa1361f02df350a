package sim

import (
	"context"

	"github.com/corekube/corekube/agent/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Change tracking, for a PLEG that relists every second: with thousands of
// pods per node agent nearly all unchanged, listing only the pods whose
// listing may differ from the previous one makes a relist cost what
// changed. A pod's listing (sandbox readiness, its containers and their
// running/exited states) changes only through a call of the runtime (a
// sandbox or container started, stopped or removed) or when one of its
// containers exits; a container exits by itself only at its next scheduled
// change (a sleep's end, a due kill), which the wake heap orders so that a
// listing advances exactly the containers that are due.
//
// Tracking starts with the first ListChanges call (one consumer: the
// node's PLEG); a runtime nobody relists that way keeps nothing.

// markChanged queues p for the next ListChanges.
func (r *Runtime) markChanged(p *pod) {
	if !r.tracking || p.queued {
		return
	}
	p.queued = true
	r.changed = append(r.changed, p)
}

// changed is called whenever c's listed state may have changed
// (it exited).
func (c *container) changed() {
	if c.pod != nil {
		c.pod.rt.markChanged(c.pod)
	}
}

// schedule keeps c's next scheduled change in the wake heap: one entry
// per container, so a removed container leaves it at once (no stale entry
// keeps its memory alive).
func (c *container) schedule() {
	if c.pod == nil || !c.pod.rt.tracking {
		return
	}
	h := &c.pod.rt.wakes
	next := c.nextChange()
	if next.IsZero() || c.removed {
		if c.wakeIdx > 0 {
			h.remove(int(c.wakeIdx - 1))
		}
		c.wakeNs = 0
		return
	}
	ns := next.UnixNano()
	switch {
	case c.wakeIdx == 0:
		c.wakeNs = ns
		h.push(c)
	case ns != c.wakeNs:
		c.wakeNs = ns
		h.fix(int(c.wakeIdx - 1))
	}
}

// unschedule takes a removed container out of the wake heap.
func (c *container) unschedule() {
	if c.pod != nil && c.wakeIdx > 0 {
		c.pod.rt.wakes.remove(int(c.wakeIdx - 1))
	}
}

// wakeHeap is a min-heap of containers by their scheduled change
// (wakeNs); each knows its place (wakeIdx, 1-based, 0: not in it).
// Hand-written: container/heap would box each element in an interface.
type wakeHeap []*container

func (h wakeHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].wakeIdx, h[j].wakeIdx = int32(i+1), int32(j+1)
}

func (h wakeHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent].wakeNs <= h[i].wakeNs {
			return
		}
		h.swap(parent, i)
		i = parent
	}
}

func (h wakeHeap) down(i int) {
	for {
		l, small := 2*i+1, i
		if l < len(h) && h[l].wakeNs < h[small].wakeNs {
			small = l
		}
		if r := l + 1; r < len(h) && h[r].wakeNs < h[small].wakeNs {
			small = r
		}
		if small == i {
			return
		}
		h.swap(i, small)
		i = small
	}
}

func (h *wakeHeap) push(c *container) {
	*h = append(*h, c)
	c.wakeIdx = int32(len(*h))
	h.up(len(*h) - 1)
}

func (h wakeHeap) fix(i int) {
	h.up(i)
	h.down(i)
}

func (h *wakeHeap) remove(i int) {
	s := *h
	last := len(s) - 1
	if i != last {
		s.swap(i, last)
	}
	s[last].wakeIdx = 0
	s[last] = nil
	s = s[:last]
	*h = s
	if i < len(s) {
		s.fix(i)
	}
}

// ListChanges lists, advanced to now, the pods whose listing may differ
// from what the previous call returned, and the UIDs of the pods removed
// since (a UID removed and created again is listed, not removed). With all
// (and on the first call) it lists every pod, as ListPods, and forgets the
// changes queued so far: the caller compares the whole listing. The pods
// are written into the pods buffer and the UIDs into the removed buffer,
// reusing their room (a pod's Containers too), so a relist where nothing
// changed allocates nothing; they are valid until the next call. On error
// nothing is consumed.
func (r *Runtime) ListChanges(_ context.Context, all bool, pods []runtime.Pod, removed []types.UID) ([]runtime.Pod, []types.UID, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pods, removed = pods[:0], removed[:0]
	if r.down != nil {
		return pods, removed, r.down
	}
	now := r.clock.Now()
	if all || !r.tracking {
		r.tracking = true
		for _, p := range r.changed {
			p.queued = false
		}
		clear(r.changed)
		r.changed = r.changed[:0]
		for _, p := range r.pods {
			for _, c := range p.containers {
				c.advance(now) // schedules it
			}
			pods = appendListing(pods, p)
		}
		for _, p := range r.changed { // what advancing changed is listed already
			p.queued = false
		}
		clear(r.changed)
		r.changed = r.changed[:0]
		return pods, removed, nil
	}
	// Containers whose scheduled change is due: advancing them may exit
	// them, which queues their pod.
	// At most the heap's size: a container due again at once (nothing
	// should be) waits for the next call rather than spinning here.
	nowNs := now.UnixNano()
	for n := len(r.wakes); n > 0 && len(r.wakes) > 0 && r.wakes[0].wakeNs <= nowNs; n-- {
		c := r.wakes[0]
		r.wakes.remove(0)
		c.wakeNs = 0
		c.advance(now) // schedules its next change
	}
	for _, p := range r.changed {
		if cur, ok := r.pods[p.uid]; !ok {
			removed = append(removed, p.uid)
		} else if cur == p { // else a new pod of the same UID, listed as itself
			for _, c := range p.containers {
				c.advance(now) // p is queued: an exit does not queue it again
			}
			pods = appendListing(pods, p)
		}
		p.queued = false
	}
	clear(r.changed)
	r.changed = r.changed[:0]
	return pods, removed, nil
}

// appendListing appends p's listing to pods, reusing the room of the slot
// it fills.
func appendListing(pods []runtime.Pod, p *pod) []runtime.Pod {
	var cs []runtime.Container
	if len(pods) < cap(pods) {
		cs = pods[:len(pods)+1][len(pods)].Containers[:0]
	}
	for _, c := range p.containers {
		cs = append(cs, runtime.Container{ID: c.fullID, Name: c.name, State: c.state()})
	}
	return append(pods, runtime.Pod{ID: p.uid, Name: p.name, Namespace: p.ns, SandboxReady: p.sandboxReady, Containers: cs})
}
