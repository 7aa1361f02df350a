package flowcontrol

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/corekube/corekube/handlers"
	flowcontrolregistry "github.com/corekube/corekube/registry/flowcontrol"
)

func TestDealHand(t *testing.T) {
	counts := make([]int, 128)
	for h := uint64(0); h < 20000; h++ {
		hash := h * 0x9E3779B97F4A7C15
		var hand []int
		dealHand(hash, 128, 6, func(i int) { hand = append(hand, i) })
		if len(hand) != 6 {
			t.Fatalf("hand %v", hand)
		}
		sorted := slices.Clone(hand)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != 6 || sorted[0] < 0 || sorted[5] >= 128 {
			t.Fatalf("hand %v: cards must be distinct, in [0,128)", hand)
		}
		for _, c := range hand {
			counts[c]++
		}
	}
	// Each queue is dealt about 20000×6/128 ≈ 937 times.
	for i, n := range counts {
		if n < 700 || n > 1200 {
			t.Errorf("queue %d dealt %d times: not uniform", i, n)
		}
	}
}

func limited(limit, queues, hand, qlen int) *level {
	l := newLevel("test", "", false)
	l.configure(limit, false, queues, hand, qlen)
	return l
}

func mustAcquire(t *testing.T, l *level, flow uint64, seats int) *ticket {
	t.Helper()
	tk, reason := l.acquire(context.Background(), flow, seats, time.Second)
	if tk == nil {
		t.Fatalf("rejected: %s", reason)
	}
	return tk
}

// acquireAsync queues a request and reports its ticket when dispatched.
func acquireAsync(l *level, flow uint64, seats int, wait time.Duration) <-chan *ticket {
	ch := make(chan *ticket, 1)
	go func() {
		tk, _ := l.acquire(context.Background(), flow, seats, wait)
		ch <- tk
	}()
	return ch
}

// waitFor polls the level's state (queue lengths, seats in use) until
// cond holds: a request parked in acquire by another goroutine sends no
// signal of having been queued, so the test looks, with a deadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

func (l *level) counts() (inUse, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inUse, l.waiting
}

func TestQueueDispatchOnRelease(t *testing.T) {
	l := limited(2, 4, 2, 10)
	a, b := mustAcquire(t, l, 1, 1), mustAcquire(t, l, 2, 1)
	third := acquireAsync(l, 3, 1, 5*time.Second)
	waitFor(t, func() bool { _, w := l.counts(); return w == 1 })
	a.release()
	a.release() // twice is harmless
	tk := <-third
	if tk == nil {
		t.Fatal("queued request not dispatched on release")
	}
	if inUse, waiting := l.counts(); inUse != 2 || waiting != 0 {
		t.Errorf("inUse %d waiting %d", inUse, waiting)
	}
	b.release()
	tk.release()
	if inUse, _ := l.counts(); inUse != 0 {
		t.Errorf("seats leaked: %d in use", inUse)
	}
}

func TestQueueFullAndTimeout(t *testing.T) {
	l := limited(1, 1, 1, 2)
	held := mustAcquire(t, l, 1, 1)
	q1, q2 := acquireAsync(l, 1, 1, 5*time.Second), acquireAsync(l, 1, 1, 5*time.Second)
	waitFor(t, func() bool { _, w := l.counts(); return w == 2 })
	if tk, reason := l.acquire(context.Background(), 1, 1, time.Second); tk != nil || reason != reasonQueueFull {
		t.Errorf("third waiter: %v %q, want queue-full", tk, reason)
	}
	start := time.Now()
	if tk, reason := limited(1, 1, 1, 5).acquireAfter(t, 50*time.Millisecond); tk != nil || reason != reasonTimeout {
		t.Errorf("wait limit: %v %q, want time-out", tk, reason)
	}
	if time.Since(start) > 2*time.Second {
		t.Error("time-out took too long")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if tk, reason := l.acquire(ctx, 2, 1, time.Minute); tk != nil || reason != reasonQueueFull && reason != reasonCanceled {
		t.Errorf("canceled: %v %q", tk, reason)
	}
	held.release()
	// Either waiter may be first in the queue: release each as it gets
	// its seat.
	for range 2 {
		var tk *ticket
		select {
		case tk = <-q1:
			q1 = nil
		case tk = <-q2:
			q2 = nil
		}
		if tk == nil {
			t.Fatal("a waiter timed out although the seat was released")
		}
		tk.release()
	}
}

// acquireAfter holds the level's only seat and queues one request that
// waits at most wait.
func (l *level) acquireAfter(t *testing.T, wait time.Duration) (*ticket, rejectReason) {
	held := mustAcquire(t, l, 9, 1)
	defer held.release()
	return l.acquire(context.Background(), 1, 1, wait)
}

func TestRejectLevel(t *testing.T) {
	l := newLevel("r", "", false)
	l.configure(2, true, 0, 0, 0)
	a := mustAcquire(t, l, 1, 1)
	b := mustAcquire(t, l, 2, 1)
	if tk, reason := l.acquire(context.Background(), 3, 1, time.Second); tk != nil || reason != reasonReject {
		t.Errorf("full Reject level: %v %q", tk, reason)
	}
	a.release()
	mustAcquire(t, l, 3, 1).release()
	b.release()
}

// TestFairQueuing: a flow with many requests waiting does not delay a
// flow with few: the light flow's requests go out among the first.
func TestFairQueuing(t *testing.T) {
	l := limited(1, 64, 1, 100)
	// Every request takes 1 ms: the clock steps by 1 ms per reading (one
	// at dispatch, one at release, under the level's lock).
	clock := time.Unix(0, 0)
	l.now = func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	held := mustAcquire(t, l, 0, 1)
	heavy, light := uint64(1), uint64(2)
	// Make sure the two flows land in different queues.
	for l.queueOf(heavy) == l.queueOf(light) {
		light++
	}
	order := make(chan uint64, 30)
	run := func(flow uint64) {
		tk, _ := l.acquire(context.Background(), flow, 1, 10*time.Second)
		if tk != nil {
			order <- flow
			tk.release()
		}
	}
	for i := 0; i < 20; i++ {
		go run(heavy)
	}
	waitFor(t, func() bool { _, w := l.counts(); return w == 20 })
	for i := 0; i < 3; i++ {
		go run(light)
	}
	waitFor(t, func() bool { _, w := l.counts(); return w == 23 })
	held.release()
	var got []uint64
	for i := 0; i < 23; i++ {
		got = append(got, <-order)
	}
	last := 0
	for i, f := range got {
		if f == light {
			last = i
		}
	}
	if last > 8 {
		t.Errorf("light flow's last request dispatched %dth of 23 (%v): not fair", last+1, got)
	}
}

func (l *level) queueOf(flow uint64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.choose(flow)
}

// TestWideRequestWaits: a request wider than the free seats waits for
// them and is not overtaken.
func TestWideRequestWaits(t *testing.T) {
	l := limited(4, 8, 2, 10)
	a := mustAcquire(t, l, 1, 3)
	wide := acquireAsync(l, 2, 4, 5*time.Second)
	waitFor(t, func() bool { _, w := l.counts(); return w == 1 })
	narrow := acquireAsync(l, 3, 1, 5*time.Second)
	waitFor(t, func() bool { _, w := l.counts(); return w == 2 })
	a.release()
	w := <-wide
	if inUse, waiting := l.counts(); inUse != 4 || waiting != 1 {
		t.Errorf("inUse %d waiting %d, want the wide request alone", inUse, waiting)
	}
	w.release()
	(<-narrow).release()
}

func TestSeatsEstimate(t *testing.T) {
	c := New(Options{Count: func(group, resource string) int64 {
		if resource == "pods" {
			return 1234
		}
		return 0
	}})
	tests := []struct {
		url  string
		ri   *handlers.RequestInfo
		want int
	}{
		{"/api/v1/pods", res("list", "", "pods", "", ""), 10},                                      // from the cache: 13 seats, capped
		{"/api/v1/pods?limit=100&resourceVersion=0", res("list", "", "pods", "", ""), 10},          // RV 0: the cache
		{"/api/v1/pods?limit=100", res("list", "", "pods", "", ""), 2},                             // etcd page: 2×100 objects
		{"/api/v1/pods?limit=100&labelSelector=a", withLabel(res("list", "", "pods", "", "")), 10}, // 1234+100
		{"/api/v1/pods?watch=1", res("watch", "", "pods", "", ""), 1},
		{"/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", res("watch", "", "pods", "", ""), 10},
		{"/api/v1/pods?fieldSelector=metadata.name%3Dx", withName(res("list", "", "pods", "", "")), 1},
		{"/api/v1/nodes", res("list", "", "nodes", "", ""), 1},
		{"/api/v1/namespaces/a/pods/x", res("get", "", "pods", "", "a"), 1},
		{"/api/v1/namespaces/a/pods", res("create", "", "pods", "", "a"), 1},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("GET", tc.url, nil)
		if got := c.seats(r, tc.ri); got != tc.want {
			t.Errorf("%s %s: %d seats, want %d", tc.ri.Verb, tc.url, got, tc.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	var r retryAfter
	now := time.Unix(1000, 0)
	if got := r.record(now); got != 1 {
		t.Fatalf("first: %d", got)
	}
	// Ten rejections a second: it doubles while they go on, up to 32 s.
	var got int64
	var seen []int64
	for i := 1; i < 600; i++ {
		got = r.record(now.Add(time.Duration(i/10) * time.Second))
		if len(seen) == 0 || seen[len(seen)-1] != got {
			seen = append(seen, got)
		}
	}
	if !slices.Equal(seen, []int64{1, 2, 4, 8, 16, 32}) {
		t.Errorf("sustained: %v, want doubling to 32", seen)
	}
	// A lone rejection much later: one second less.
	if got := r.record(now.Add(time.Hour)); got != maxRetryAfter-1 {
		t.Errorf("after an hour: %d", got)
	}
	// Rare rejections: it stays at 1.
	var rare retryAfter
	for i := 0; i < 100; i++ {
		if got := rare.record(now.Add(time.Duration(i) * time.Second)); got != 1 {
			t.Fatalf("one rejection a second: Retry-After %d", got)
		}
	}
}

// TestBootstrapValid: the bootstrap objects pass the registry's
// validation (kube's) as they are, defaults included.
func TestBootstrapValid(t *testing.T) {
	b := BootstrapConfiguration()
	ctx := context.Background()
	fsS, plS := flowcontrolregistry.NewFlowSchemaStrategy(), flowcontrolregistry.NewPriorityLevelStrategy()
	for _, fs := range b.FlowSchemas {
		if errs := fsS.Validate(ctx, fs); len(errs) > 0 {
			t.Errorf("%s: %v", fs.Name, errs)
		}
		c := fs.DeepCopy()
		fsS.Default(c)
		if !equalJSON(c, fs) {
			t.Errorf("%s changes when defaulted", fs.Name)
		}
	}
	for _, pl := range b.PriorityLevels {
		if errs := plS.Validate(ctx, pl); len(errs) > 0 {
			t.Errorf("%s: %v", pl.Name, errs)
		}
		c := pl.DeepCopy()
		plS.Default(c)
		if !equalJSON(c, pl) {
			t.Errorf("%s changes when defaulted", pl.Name)
		}
	}
}
