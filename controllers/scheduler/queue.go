package scheduler

import (
	"container/heap"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"k8s.io/client-go/util/workqueue"
)

// queueItem is a pod ready for an attempt, with what kube's PrioritySort
// orders it by: spec.priority, then the time it entered the queue.
type queueItem struct {
	key      string
	priority int32
	queuedAt time.Time
}

// before is kube's PrioritySort Less: the higher priority first, then the
// one queued earlier.
func (a *queueItem) before(b *queueItem) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	return a.queuedAt.Before(b.queuedAt)
}

// itemHeap is a container/heap of queueItems, highest first.
type itemHeap []queueItem

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[i].before(&h[j]) }
func (h itemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)        { *h = append(*h, x.(queueItem)) }
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = queueItem{}
	*h = old[:len(old)-1]
	return it
}

// podQueue is the scheduler's active queue ordered as kube's PrioritySort
// orders it. Pods still backing off wait in a client-go delaying queue
// (driven by the scheduler's clock) and move to the heap when their time
// comes, so back-off keeps the workqueue's semantics. A key is in the heap
// at most once: adding a key already there keeps its place, as a
// workqueue keeps one copy of a key.
type podQueue struct {
	mu       sync.Mutex
	cond     *sync.Cond
	heap     itemHeap
	inHeap   map[string]struct{}
	delayed  map[string]queueItem // items waiting in the delaying queue
	shutdown bool

	delay workqueue.TypedDelayingInterface[string]
	done  chan struct{} // closed when the forwarder has ended
	once  sync.Once
}

// newPodQueue returns a running queue; ShutDown stops its forwarder.
func newPodQueue(clk clock.WithTicker) *podQueue {
	q := &podQueue{
		inHeap:  map[string]struct{}{},
		delayed: map[string]queueItem{},
		delay:   workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Clock: clk}),
		done:    make(chan struct{}),
	}
	q.cond = sync.NewCond(&q.mu)
	go q.forward()
	return q
}

// forward moves the items whose back-off ended into the heap.
func (q *podQueue) forward() {
	defer close(q.done)
	for {
		key, shutdown := q.delay.Get()
		if shutdown {
			return
		}
		q.mu.Lock()
		if it, ok := q.delayed[key]; ok {
			delete(q.delayed, key)
			q.pushLocked(it)
		}
		q.mu.Unlock()
		q.delay.Done(key)
	}
}

// add queues it now, or after delay when delay is positive.
func (q *podQueue) add(it queueItem, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	if delay <= 0 {
		delete(q.delayed, it.key)
		q.pushLocked(it)
		return
	}
	if _, ok := q.inHeap[it.key]; ok {
		return
	}
	q.delayed[it.key] = it
	q.delay.AddAfter(it.key, delay)
}

func (q *podQueue) pushLocked(it queueItem) {
	if _, ok := q.inHeap[it.key]; ok || q.shutdown {
		return
	}
	q.inHeap[it.key] = struct{}{}
	heap.Push(&q.heap, it)
	q.cond.Signal()
}

// get blocks until a key is ready and returns the first in PrioritySort
// order; shutdown is true once the queue is shut down.
func (q *podQueue) get() (key string, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.heap) == 0 && !q.shutdown {
		q.cond.Wait()
	}
	if q.shutdown {
		return "", true
	}
	it := heap.Pop(&q.heap).(queueItem)
	delete(q.inHeap, it.key)
	return it.key, false
}

// ShutDown wakes get's callers, ends the forwarder and waits for it. It
// may be called more than once.
func (q *podQueue) ShutDown() {
	q.once.Do(func() {
		q.mu.Lock()
		q.shutdown = true
		q.cond.Broadcast()
		q.mu.Unlock()
		q.delay.ShutDown()
		<-q.done
	})
}
