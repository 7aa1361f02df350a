package agent

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
	// eventComponent is the source of the agent's events, as the kubelet's.
	eventComponent = "kubelet"
	// eventQueueSize bounds the events waiting per worker; more are dropped
	// (as client-go's broadcaster drops when its queue is full).
	eventQueueSize = 2000
	// eventDedupWindow: an identical event within it raises the count of
	// the first one instead of creating another, as client-go's correlator.
	eventDedupWindow = 10 * time.Minute
	eventCacheSize   = 4096
)

// eventRecorder writes core/v1 Events the way the kubelet's recorder does
// (names <object>.<hex nanoseconds>, source kubelet/<node>, identical events
// counted), from a few workers; each event key belongs to one worker, so a
// repeated event is never created twice.
type eventRecorder struct {
	client   kubernetes.Interface
	clock    clock.PassiveClock
	log      *slog.Logger
	disabled bool
	shards   []chan *v1.Event
}

func newEventRecorder(client kubernetes.Interface, c clock.PassiveClock, log *slog.Logger, workers int, disabled bool) *eventRecorder {
	r := &eventRecorder{client: client, clock: c, log: log, disabled: disabled}
	for i := 0; i < workers; i++ {
		r.shards = append(r.shards, make(chan *v1.Event, eventQueueSize))
	}
	return r
}

// run writes events until ctx ends.
func (r *eventRecorder) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, ch := range r.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.worker(ctx, ch)
		}()
	}
	wg.Wait()
}

type eventKey struct {
	ns, kind, name, fieldPath string
	uid                       types.UID
	typ, reason, message      string
	host                      string
}

type cachedEvent struct {
	name  string
	count int32
	last  time.Time
}

func keyOf(ev *v1.Event) eventKey {
	o := ev.InvolvedObject
	return eventKey{ns: ev.Namespace, kind: o.Kind, name: o.Name, fieldPath: o.FieldPath, uid: o.UID,
		typ: ev.Type, reason: ev.Reason, message: ev.Message, host: ev.Source.Host}
}

func (r *eventRecorder) worker(ctx context.Context, ch chan *v1.Event) {
	cache := map[eventKey]*cachedEvent{}
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-ch:
			r.write(ctx, cache, ev)
		}
	}
}

func (r *eventRecorder) write(ctx context.Context, cache map[eventKey]*cachedEvent, ev *v1.Event) {
	key := keyOf(ev)
	now := ev.LastTimestamp.Time
	events := r.client.CoreV1().Events(ev.Namespace)
	if c, ok := cache[key]; ok && now.Sub(c.last) < eventDedupWindow {
		c.count++
		c.last = now
		patch, _ := json.Marshal(map[string]any{
			"count":         c.count,
			"lastTimestamp": metav1.NewTime(now),
			"message":       ev.Message,
		})
		if _, err := events.Patch(ctx, c.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err == nil {
			return
		}
		delete(cache, key) // gone (TTL, deleted namespace): create anew
	}
	if len(cache) >= eventCacheSize {
		for k, c := range cache {
			if now.Sub(c.last) >= eventDedupWindow || len(cache) >= eventCacheSize {
				delete(cache, k)
			}
		}
	}
	created, err := events.Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Debug("event not written", "reason", ev.Reason, "object", ev.InvolvedObject.Name, "err", err)
		}
		return
	}
	cache[key] = &cachedEvent{name: created.Name, count: created.Count, last: now}
}

// record queues an event; it never blocks.
func (r *eventRecorder) record(ns string, ref v1.ObjectReference, host, eventType, reason, message string) {
	if r == nil || r.disabled {
		return
	}
	now := r.clock.Now()
	t := metav1.NewTime(now)
	ev := &v1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", ref.Name, now.UnixNano()), Namespace: ns},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             message,
		Source:              v1.EventSource{Component: eventComponent, Host: host},
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                eventType,
		ReportingController: eventComponent,
		ReportingInstance:   host,
	}
	h := fnv.New32a()
	fmt.Fprint(h, ns, "/", ref.Name, "/", ref.FieldPath, "/", reason)
	ch := r.shards[int(h.Sum32())%len(r.shards)]
	select {
	case ch <- ev:
	default:
		r.log.Debug("event queue full, dropping event", "reason", reason, "object", ref.Name)
	}
}

// podEvent records an event about a pod, or one of its containers when
// fieldPath is set (spec.containers{name}).
func (r *eventRecorder) podEvent(pod *v1.Pod, fieldPath string, n *node, eventType, reason, message string) {
	ref := v1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, FieldPath: fieldPath,
	}
	if fieldPath == "" {
		ref.ResourceVersion = pod.ResourceVersion
	}
	r.record(pod.Namespace, ref, n.name, eventType, reason, message)
}

// nodeEvent records an event about a node (in the default namespace, the
// node's name as its UID, as the kubelet's node reference has it).
func (r *eventRecorder) nodeEvent(n *node, eventType, reason, message string) {
	ref := v1.ObjectReference{Kind: "Node", Name: n.name, UID: types.UID(n.name)}
	r.record(metav1.NamespaceDefault, ref, n.name, eventType, reason, message)
}

// nodeStatusEvent is the kubelet's "Node X status is now: E".
func (r *eventRecorder) nodeStatusEvent(n *node, event string) {
	r.nodeEvent(n, v1.EventTypeNormal, event, fmt.Sprintf("Node %s status is now: %s", n.name, event))
}

// containerFieldPath is an event's fieldPath for a container.
func containerFieldPath(pod *v1.Pod, name string) string {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return fmt.Sprintf("spec.initContainers{%s}", name)
		}
	}
	return fmt.Sprintf("spec.containers{%s}", name)
}
