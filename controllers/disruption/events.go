package disruption

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

// eventSource is the component kube's disruption controller reports as.
const eventSource = "controllermanager"

// maxTrackedEvents bounds the repeats remembered for counting.
const maxTrackedEvents = 4096

// eventWriter writes core/v1 Events as kube-controller-manager's legacy
// recorder does (source.component, first and last timestamps), through a
// bounded queue drained by one owned goroutine; events that do not fit are
// dropped, as kube's broadcaster drops them. A repeat of an event (same
// object, type, reason and message) bumps the count of the one already
// written, as kube's event correlator does.
type eventWriter struct {
	client kubernetes.Interface
	clock  clock.Clock
	log    *slog.Logger
	queue  chan *v1.Event

	// written is touched only by the writer goroutine.
	written map[eventKey]*writtenEvent
}

type eventKey struct {
	uid                   types.UID
	kind, namespace, name string
	typ, reason, message  string
}

type writtenEvent struct {
	namespace, name string
	count           int32
}

func newEventWriter(client kubernetes.Interface, clk clock.Clock, log *slog.Logger, size int) *eventWriter {
	return &eventWriter{client: client, clock: clk, log: log, queue: make(chan *v1.Event, size), written: map[eventKey]*writtenEvent{}}
}

// run drains the queue until ctx ends.
func (w *eventWriter) run(ctx context.Context, wg *sync.WaitGroup) {
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

func (w *eventWriter) write(ctx context.Context, ev *v1.Event) error {
	key := eventKey{
		uid: ev.InvolvedObject.UID, kind: ev.InvolvedObject.Kind, namespace: ev.InvolvedObject.Namespace, name: ev.InvolvedObject.Name,
		typ: ev.Type, reason: ev.Reason, message: ev.Message,
	}
	if prev, ok := w.written[key]; ok {
		patch, err := json.Marshal(map[string]any{"count": prev.count + 1, "lastTimestamp": ev.LastTimestamp})
		if err != nil {
			return err
		}
		_, err = w.client.CoreV1().Events(prev.namespace).Patch(ctx, prev.name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			prev.count++
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		delete(w.written, key) // expired: write it anew
	}
	if _, err := w.client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return err
	}
	if len(w.written) >= maxTrackedEvents {
		clear(w.written)
	}
	w.written[key] = &writtenEvent{namespace: ev.Namespace, name: ev.Name, count: 1}
	return nil
}

// eventf records an event about obj (a Pod or PodDisruptionBudget).
func (w *eventWriter) eventf(ref v1.ObjectReference, typ, reason, format string, args ...any) {
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
		Source:              v1.EventSource{Component: eventSource},
		ReportingController: eventSource,
	}
	select {
	case w.queue <- ev:
	default:
		w.log.Debug("event queue full, dropping event", "reason", reason, "object", ref.Name)
	}
}

func podRef(pod *v1.Pod) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion}
}

func pdbRef(namespace, name string, uid types.UID, rv string) v1.ObjectReference {
	return v1.ObjectReference{Kind: "PodDisruptionBudget", APIVersion: "policy/v1", Namespace: namespace, Name: name, UID: uid, ResourceVersion: rv}
}
