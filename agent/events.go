package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/corekube/corekube/controllers/record"
	v1 "k8s.io/api/core/v1"
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
)

// eventRecorder writes the kubelet's events through the recorder the
// controllers share (source kubelet/<node>, identical events counted),
// from a few workers.
type eventRecorder struct{ r *record.Recorder }

func newEventRecorder(client kubernetes.Interface, c clock.PassiveClock, log *slog.Logger, workers int, disabled bool) *eventRecorder {
	return &eventRecorder{r: record.New(client, c, log, record.Options{Workers: workers, QueueSize: eventQueueSize, Disabled: disabled})}
}

// run writes events until ctx ends.
func (r *eventRecorder) run(ctx context.Context) {
	var wg sync.WaitGroup
	r.r.Run(ctx, &wg)
	wg.Wait()
}

// record queues an event about ref, reported from host; it never blocks.
func (r *eventRecorder) record(ref v1.ObjectReference, host, eventType, reason, message string) {
	if r == nil {
		return
	}
	r.r.Event(ref, v1.EventSource{Component: eventComponent, Host: host}, eventType, reason, message)
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
	r.record(ref, n.name, eventType, reason, message)
}

// nodeEvent records an event about a node (in the default namespace, the
// node's name as its UID, as the kubelet's node reference has it).
func (r *eventRecorder) nodeEvent(n *node, eventType, reason, message string) {
	ref := v1.ObjectReference{Kind: "Node", Name: n.name, UID: types.UID(n.name)}
	r.record(ref, n.name, eventType, reason, message)
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
