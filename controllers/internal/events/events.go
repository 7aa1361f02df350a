// Package events writes core/v1 Events for corekube's controllers the way
// kube-controller-manager's legacy recorder (client-go tools/record) does:
// source.component and reportingController set to the component, first and
// last timestamps, and repeats of one event counted on the event already
// written, as the recorder's correlator does.
//
// Writes go through a bounded queue drained by one goroutine the Writer's
// owner starts with Run; events that do not fit are dropped, as kube's
// broadcaster drops them, so that a slow API server never blocks a
// controller's reconcile loop.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// DefaultQueueSize is how many events may wait to be written.
const DefaultQueueSize = 1000

// maxTracked bounds the written events remembered for counting repeats;
// when full, the memory is cleared (a repeat is then written anew, which
// kube's LRU-based correlator also does for evicted entries).
const maxTracked = 4096

// Writer records events. Its zero value is not usable: use NewWriter.
type Writer struct {
	client kubernetes.Interface
	clock  clock.Clock
	log    *slog.Logger
	queue  chan *v1.Event

	// written is touched only by the goroutine Run starts.
	written map[key]*written
}

// key identifies repeats of one event.
type key struct {
	uid                   types.UID
	kind, namespace, name string
	source, typ, reason   string
	message               string
}

type written struct {
	namespace, name string
	count           int32
}

// NewWriter returns a Writer that writes through client; queueSize <= 0
// means DefaultQueueSize.
func NewWriter(client kubernetes.Interface, clk clock.Clock, log *slog.Logger, queueSize int) *Writer {
	if queueSize <= 0 {
		queueSize = DefaultQueueSize
	}
	return &Writer{client: client, clock: clk, log: log, queue: make(chan *v1.Event, queueSize), written: map[key]*written{}}
}

// Run starts the goroutine that writes queued events, registered in wg; it
// returns when ctx ends.
func (w *Writer) Run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-w.queue:
				if err := w.write(ctx, ev); err != nil && ctx.Err() == nil {
					w.log.Debug("event write failed", "reason", ev.Reason, "object", ev.InvolvedObject.Name, "err", err)
				}
			}
		}
	}()
}

// write creates ev, or counts it on the event written for an earlier
// repeat.
func (w *Writer) write(ctx context.Context, ev *v1.Event) error {
	k := key{
		uid: ev.InvolvedObject.UID, kind: ev.InvolvedObject.Kind, namespace: ev.InvolvedObject.Namespace, name: ev.InvolvedObject.Name,
		source: ev.Source.Component, typ: ev.Type, reason: ev.Reason, message: ev.Message,
	}
	if prev, ok := w.written[k]; ok {
		patch, err := json.Marshal(map[string]any{"count": prev.count + 1, "lastTimestamp": ev.LastTimestamp})
		if err != nil {
			return fmt.Errorf("event patch: %w", err)
		}
		_, err = w.client.CoreV1().Events(prev.namespace).Patch(ctx, prev.name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			prev.count++
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("count event %s/%s: %w", prev.namespace, prev.name, err)
		}
		delete(w.written, k) // expired (event TTL): write it anew
	}
	if _, err := w.client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create event: %w", err)
	}
	if len(w.written) >= maxTracked {
		clear(w.written)
	}
	w.written[k] = &written{namespace: ev.Namespace, name: ev.Name, count: 1}
	return nil
}

// Eventf records an event about ref, reported by the component source.
// It never blocks: when the queue is full the event is dropped.
func (w *Writer) Eventf(ref v1.ObjectReference, source, typ, reason, format string, args ...any) {
	now := metav1.NewTime(w.clock.Now())
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &v1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", ref.Name, now.UnixNano()), Namespace: ns},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             fmt.Sprintf(format, args...),
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Type:                typ,
		Source:              v1.EventSource{Component: source},
		ReportingController: source,
	}
	select {
	case w.queue <- ev:
	default:
		w.log.Debug("event queue full, dropping event", "reason", reason, "object", ref.Name)
	}
}

// PodRef is the involvedObject of an event about pod.
func PodRef(pod *v1.Pod) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion}
}

// NodeRef is the involvedObject of an event about node (kube's node
// controller leaves resourceVersion out).
func NodeRef(node *v1.Node) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
}
