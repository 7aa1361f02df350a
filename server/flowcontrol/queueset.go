package flowcontrol

import (
	"context"
	"sync"
	"time"
)

// rejectReason says why a request got no seats (kube's metric labels).
type rejectReason string

const (
	reasonQueueFull rejectReason = "queue-full"
	reasonTimeout   rejectReason = "time-out"
	reasonCanceled  rejectReason = "cancelled"
	reasonReject    rejectReason = "concurrency-limit"
)

// level is one priority level's seats and queues: kube's QueueSet with
// fair queuing over shuffle-sharded queues. A level outlives a
// configuration that drops it until its requests are done (they hold it).
type level struct {
	name string
	uid  string
	// exempt levels are never limited nor queued.
	exempt bool

	mu sync.Mutex
	// limit is the level's concurrency limit in seats.
	limit int
	// reject: no queues, a request that finds no free seat is rejected.
	reject           bool
	queues           []*queue
	handSize         int
	queueLengthLimit int
	// inUse is the seats taken by executing requests; waiting the
	// requests in all queues.
	inUse   int
	waiting int
	// vt is the level's virtual time: the start tag of the latest
	// dispatched request (start-time fair queuing).
	vt float64
	// serviceTime is a moving average of a request's execution, in
	// seconds: the work charged to a queue when it dispatches.
	serviceTime float64
	retry       retryAfter
	// now is time.Now but in tests, which need reproducible durations.
	now func() time.Time
}

// queue is one FIFO of a level. nextStart is the virtual start tag of its
// head: a queue that dispatched more work than the others waits longer.
type queue struct {
	reqs      []*waiter
	nextStart float64
	// seats of its requests executing, for shuffle sharding's choice.
	executing int
}

// waiter is a request in a queue.
type waiter struct {
	seats      int
	flow       uint64
	q          *queue
	dispatched chan struct{}
	charged    float64
	start      time.Time
}

// ticket is a dispatched request's hold on its seats.
type ticket struct {
	l       *level
	q       *queue
	seats   int
	charged float64
	start   time.Time
	once    sync.Once
}

func newLevel(name, uid string, exempt bool) *level {
	return &level{name: name, uid: uid, exempt: exempt, serviceTime: 0.01, now: time.Now}
}

// configure sets the level's limit and queuing. Requests waiting in
// queues that no longer exist move to the queues their flows deal now.
func (l *level) configure(limit int, reject bool, queues, handSize, queueLengthLimit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limit, l.reject = max(limit, 0), reject
	l.handSize, l.queueLengthLimit = handSize, queueLengthLimit
	if reject {
		queues = 0
	}
	if queues != len(l.queues) {
		old := l.queues
		l.queues = make([]*queue, queues)
		for i := range l.queues {
			l.queues[i] = &queue{nextStart: l.vt}
		}
		for _, q := range old {
			for _, w := range q.reqs {
				if len(l.queues) == 0 {
					// Now a Reject level: the waiters go first.
					l.queues = []*queue{{nextStart: l.vt}}
				}
				nq := l.queues[l.choose(w.flow)]
				w.q = nq
				nq.reqs = append(nq.reqs, w)
			}
		}
	}
	l.dispatchLocked()
}

// choose deals the flow a hand of queues and picks the one with the
// least work waiting and executing (kube's shuffle sharding).
func (l *level) choose(flow uint64) int {
	n := len(l.queues)
	// Validation keeps a hand within 60 bits of hash; 64 bounds dealHand.
	hand := min(l.handSize, n, 64)
	if hand <= 0 {
		hand = 1
	}
	best, bestLoad := -1, 0
	dealHand(flow, n, hand, func(i int) {
		q := l.queues[i]
		load := q.executing
		for _, w := range q.reqs {
			load += w.seats
		}
		if best < 0 || load < bestLoad {
			best, bestLoad = i, load
		}
	})
	return best
}

// dealHand is kube's shuffle sharding Dealer: it picks hand distinct
// cards of a deck of n from the bits of hash, each card equally likely.
func dealHand(hash uint64, n, hand int, pick func(int)) {
	var remainders [64]int
	for i := 0; i < hand; i++ {
		next := hash / uint64(n-i)
		remainders[i] = int(hash - uint64(n-i)*next)
		hash = next
	}
	for i := 0; i < hand; i++ {
		card := remainders[i]
		for j := i; j > 0; j-- {
			if card >= remainders[j-1] {
				card++
			}
		}
		pick(card)
	}
}

// acquire waits for seats: at once when free and no one waits, else in
// the flow's queue until fair queuing dispatches it, ctx ends or wait
// passes. It returns the ticket to release, or why the request was
// rejected.
func (l *level) acquire(ctx context.Context, flow uint64, seats int, wait time.Duration) (*ticket, rejectReason) {
	l.mu.Lock()
	seats = min(max(seats, 1), max(l.limit, 1))
	if l.waiting == 0 && (l.inUse+seats <= l.limit || (l.inUse == 0 && l.limit > 0)) {
		t := l.startLocked(nil, seats)
		l.mu.Unlock()
		return t, ""
	}
	if l.reject || len(l.queues) == 0 {
		l.mu.Unlock()
		return nil, reasonReject
	}
	q := l.queues[l.choose(flow)]
	if len(q.reqs) >= l.queueLengthLimit {
		l.mu.Unlock()
		return nil, reasonQueueFull
	}
	w := &waiter{seats: seats, flow: flow, q: q, dispatched: make(chan struct{})}
	if len(q.reqs) == 0 && q.executing == 0 {
		// An idle queue starts at the level's present, not its past.
		q.nextStart = max(q.nextStart, l.vt)
	}
	q.reqs = append(q.reqs, w)
	l.waiting++
	l.dispatchLocked()
	l.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	var reason rejectReason
	select {
	case <-w.dispatched:
		return &ticket{l: l, q: w.q, seats: seats, charged: w.charged, start: w.start}, ""
	case <-ctx.Done():
		reason = reasonCanceled
	case <-timer.C:
		reason = reasonTimeout
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-w.dispatched:
		// Dispatched meanwhile: the seats are this request's.
		return &ticket{l: l, q: w.q, seats: seats, charged: w.charged, start: w.start}, ""
	default:
	}
	rq := w.q
	for i, x := range rq.reqs {
		if x == w {
			rq.reqs = append(rq.reqs[:i], rq.reqs[i+1:]...)
			break
		}
	}
	l.waiting--
	return nil, reason
}

// startLocked takes seats for a request (from q, or at once when nil).
func (l *level) startLocked(q *queue, seats int) *ticket {
	l.inUse += seats
	t := &ticket{l: l, q: q, seats: seats, start: l.now()}
	return t
}

// dispatchLocked starts waiting requests while seats are free: each time
// the head of the queue with the earliest virtual start tag, so that
// flows get equal shares of the level's seat-seconds. A head that does
// not fit waits for seats (no overtaking, so wide requests are not
// starved), unless nothing executes.
func (l *level) dispatchLocked() {
	for l.waiting > 0 {
		var q *queue
		for _, c := range l.queues {
			if len(c.reqs) > 0 && (q == nil || c.nextStart < q.nextStart) {
				q = c
			}
		}
		if q == nil {
			return
		}
		w := q.reqs[0]
		if l.inUse+w.seats > l.limit && l.inUse > 0 {
			return
		}
		if l.limit == 0 {
			return
		}
		q.reqs[0] = nil
		q.reqs = q.reqs[1:]
		l.waiting--
		l.inUse += w.seats
		q.executing += w.seats
		l.vt = max(l.vt, q.nextStart)
		w.charged = float64(w.seats) * l.serviceTime
		q.nextStart += w.charged
		w.start = l.now()
		close(w.dispatched)
	}
}

// release gives the seats back, corrects the queue's charge with the
// request's real duration, and dispatches what now fits. Safe to call
// more than once.
func (t *ticket) release() {
	t.once.Do(func() {
		l := t.l
		l.mu.Lock()
		defer l.mu.Unlock()
		took := l.now().Sub(t.start).Seconds()
		l.inUse -= t.seats
		l.serviceTime = 0.9*l.serviceTime + 0.1*took
		if q := t.q; q != nil {
			q.executing -= t.seats
			q.nextStart += float64(t.seats)*took - t.charged
		}
		l.dispatchLocked()
	})
}
