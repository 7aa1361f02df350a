package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Event sources, as kube-controller-manager names them.
const (
	sourceNodeController     = "node-controller"
	sourceEvictionController = "taint-eviction-controller"
)

// eventWriter writes core/v1 Events as kube-controller-manager's legacy
// recorder does (source.component, first/last timestamps, count 1),
// through a bounded queue drained by one owned goroutine; events that do
// not fit are dropped, as kube's broadcaster drops them.
type eventWriter struct {
	client kubernetes.Interface
	clock  clock.Clock
	log    *slog.Logger
	queue  chan *v1.Event
}

func newEventWriter(client kubernetes.Interface, clk clock.Clock, log *slog.Logger) *eventWriter {
	return &eventWriter{client: client, clock: clk, log: log, queue: make(chan *v1.Event, 1000)}
}

func (w *eventWriter) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-w.queue:
				if _, err := w.client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
					w.log.Debug("event write failed", "reason", ev.Reason, "object", ev.InvolvedObject.Name, "err", err)
				}
			}
		}
	}()
}

// eventf records an event about ref from source.
func (w *eventWriter) eventf(ref v1.ObjectReference, source, typ, reason, format string, args ...any) {
	now := metav1.NewTime(w.clock.Now())
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", ref.Name, now.UnixNano()), Namespace: ns},
		InvolvedObject: ref,
		Reason:         reason,
		Message:        fmt.Sprintf(format, args...),
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
		Type:           typ,
		Source:         v1.EventSource{Component: source},
	}
	select {
	case w.queue <- ev:
	default:
		w.log.Debug("event queue full, dropping event", "reason", reason, "object", ref.Name)
	}
}

func nodeRef(node *v1.Node) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
}

func podRef(pod *v1.Pod) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion}
}
