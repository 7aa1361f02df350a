// Package record writes core/v1 Events the way kube components' legacy
// recorder (client-go tools/record) does, for the controllers and the node
// agent alike: names <object>.<hex nanoseconds>, source.component and
// reportingController set to the component, source.host and
// reportingInstance to the host when there is one, first and last
// timestamps, and repeats counted on the event already written.
//
// De-duplication follows client-go's EventCorrelator as far as it goes
// here (the agent's recorder was the closer of corekube's two and is the
// one kept): an event identical to one written before (same source
// component and host, involved object kind, namespace, name, fieldPath,
// UID and apiVersion, type, reason and message, the correlator's key) is
// not created again: a strategic-merge patch raises the first one's count
// and sets its lastTimestamp and message, as the correlator's logger does.
// Unlike client-go, a repeat more than DedupWindow after the last one is
// written anew, and when the written event is gone (its TTL, a deleted
// namespace) or the patch fails, the repeat is created anew. The memory of
// written events is bounded by CacheSize, as the correlator's LRU is.
// The correlator's aggregation of similar events (same object and reason,
// different messages: "(combined from similar events)") and its per-object
// spam filter are not applied.
//
// Writes go through bounded queues drained by a few goroutines the
// Recorder's owner starts with Run; each event key belongs to one
// goroutine, so a repeated event is never created twice. Events that do
// not fit are dropped, as client-go's broadcaster drops them, so that a
// slow API server never blocks a controller's loop or a pod's sync.
package record

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

const (
	// DefaultQueueSize is how many events may wait per writer.
	DefaultQueueSize = 1000
	// DedupWindow: an identical event within it raises the count of the
	// first one instead of creating another.
	DedupWindow = 10 * time.Minute
	// CacheSize bounds the written events remembered per writer.
	CacheSize = 4096
)

// Options configure a Recorder.
type Options struct {
	// Workers is how many goroutines write (1 when <= 0).
	Workers int
	// QueueSize bounds the events waiting per worker (DefaultQueueSize
	// when <= 0); more are dropped.
	QueueSize int
	// Disabled drops every event (the agent's --disable-events).
	Disabled bool
}

// Recorder records events. Its zero value is not usable: use New.
type Recorder struct {
	client   kubernetes.Interface
	clock    clock.PassiveClock
	log      *slog.Logger
	disabled bool
	shards   []chan *v1.Event
}

// New returns a Recorder that writes through client once Run started it.
func New(client kubernetes.Interface, clk clock.PassiveClock, log *slog.Logger, opts Options) *Recorder {
	if log == nil {
		log = slog.Default()
	}
	r := &Recorder{client: client, clock: clk, log: log, disabled: opts.Disabled}
	size := opts.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	for range max(opts.Workers, 1) {
		r.shards = append(r.shards, make(chan *v1.Event, size))
	}
	return r
}

// Run starts the goroutines that write queued events, registered in wg;
// they return when ctx ends.
func (r *Recorder) Run(ctx context.Context, wg *sync.WaitGroup) {
	for _, ch := range r.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.drain(ctx, ch)
		}()
	}
}

// key identifies repeats of one event (client-go's getEventKey fields).
type key struct {
	component, host                              string
	kind, namespace, name, fieldPath, apiVersion string
	uid                                          types.UID
	typ, reason, message                         string
}

type written struct {
	name  string
	count int32
	last  time.Time
}

func keyOf(ev *v1.Event) key {
	o := ev.InvolvedObject
	return key{component: ev.Source.Component, host: ev.Source.Host,
		kind: o.Kind, namespace: ev.Namespace, name: o.Name, fieldPath: o.FieldPath, apiVersion: o.APIVersion, uid: o.UID,
		typ: ev.Type, reason: ev.Reason, message: ev.Message}
}

// drain writes the events of one shard; cache is its own.
func (r *Recorder) drain(ctx context.Context, ch chan *v1.Event) {
	cache := map[key]*written{}
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-ch:
			if err := r.write(ctx, cache, ev); err != nil && ctx.Err() == nil {
				r.log.Debug("event not written", "reason", ev.Reason, "object", ev.InvolvedObject.Name, "err", err)
			}
		}
	}
}

// write creates ev, or counts it on the event written for an earlier
// repeat.
func (r *Recorder) write(ctx context.Context, cache map[key]*written, ev *v1.Event) error {
	k := keyOf(ev)
	now := ev.LastTimestamp.Time
	events := r.client.CoreV1().Events(ev.Namespace)
	if c, ok := cache[k]; ok && now.Sub(c.last) < DedupWindow {
		patch, err := json.Marshal(map[string]any{
			"count":         c.count + 1,
			"lastTimestamp": metav1.NewTime(now),
			"message":       ev.Message,
		})
		if err != nil {
			return fmt.Errorf("event patch: %w", err)
		}
		if _, err := events.Patch(ctx, c.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err == nil {
			c.count++
			c.last = now
			return nil
		}
		delete(cache, k) // gone (TTL, deleted namespace): create anew
	}
	if len(cache) >= CacheSize {
		// Expired entries go first; when none has, the memory is
		// cleared (a repeat is then written anew, as an entry evicted
		// from client-go's LRU is).
		for k, c := range cache {
			if now.Sub(c.last) >= DedupWindow || len(cache) >= CacheSize {
				delete(cache, k)
			}
		}
	}
	created, err := events.Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create event: %w", err)
	}
	cache[k] = &written{name: created.Name, count: created.Count, last: now}
	return nil
}

// Event records an event about ref reported by source. It never blocks:
// when the queue is full the event is dropped. The event goes to ref's
// namespace, default for a cluster-scoped object.
func (r *Recorder) Event(ref v1.ObjectReference, source v1.EventSource, typ, reason, message string) {
	if r == nil || r.disabled {
		return
	}
	now := metav1.NewTime(r.clock.Now())
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &v1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", ref.Name, now.UnixNano()), Namespace: ns},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             message,
		Source:              source,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Type:                typ,
		ReportingController: source.Component,
		ReportingInstance:   source.Host,
	}
	ch := r.shards[0]
	if len(r.shards) > 1 {
		h := fnv.New32a()
		fmt.Fprint(h, ns, "/", ref.Name, "/", ref.FieldPath, "/", reason)
		ch = r.shards[int(h.Sum32()%uint32(len(r.shards)))]
	}
	select {
	case ch <- ev:
	default:
		r.log.Debug("event queue full, dropping event", "reason", reason, "object", ref.Name)
	}
}

// Eventf records an event about ref reported by the component source (a
// controller: no host), its message formatted.
func (r *Recorder) Eventf(ref v1.ObjectReference, source, typ, reason, format string, args ...any) {
	r.Event(ref, v1.EventSource{Component: source}, typ, reason, fmt.Sprintf(format, args...))
}

// PodRef is the involvedObject of an event about pod (a v1.Pod, or what a
// cache keeps of one).
func PodRef(pod metav1.Object) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.GetNamespace(), Name: pod.GetName(), UID: pod.GetUID(), ResourceVersion: pod.GetResourceVersion()}
}

// NodeRef is the involvedObject of an event about node (kube's node
// controller leaves resourceVersion out).
func NodeRef(node *v1.Node) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
}
