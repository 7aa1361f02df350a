package events

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// TestWriterCountsRepeats: the first occurrence creates an Event with the
// legacy recorder's fields; a repeat bumps count and lastTimestamp on it
// rather than writing another; a different message is another Event.
func TestWriterCountsRepeats(t *testing.T) {
	srv := testserver.StartMemory(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	w := NewWriter(srv.Client, clock.RealClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)), 0)
	w.Run(ctx, &wg)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}
	w.Eventf(NodeRef(node), "node-controller", v1.EventTypeNormal, "NodeNotReady", "Node %s status is now: %s", "n1", "NodeNotReady")
	w.Eventf(NodeRef(node), "node-controller", v1.EventTypeNormal, "NodeNotReady", "Node %s status is now: %s", "n1", "NodeNotReady")
	w.Eventf(NodeRef(node), "node-controller", v1.EventTypeNormal, "RegisteredNode", "Node n1 event: Registered Node n1 in Controller")

	var list *v1.EventList
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		list, err = srv.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 2 {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason == "NodeNotReady" && ev.Count != 2 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("events never settled to 2 (NodeNotReady counted twice): %v; have %+v", err, list)
	}
	for _, ev := range list.Items {
		if ev.Source.Component != "node-controller" || ev.ReportingController != "node-controller" {
			t.Errorf("%s: source %q reportingController %q, want node-controller", ev.Reason, ev.Source.Component, ev.ReportingController)
		}
		if ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.Name != "n1" || ev.InvolvedObject.UID != "u1" {
			t.Errorf("%s: involvedObject %+v", ev.Reason, ev.InvolvedObject)
		}
		if ev.Reason == "NodeNotReady" && ev.Message != "Node n1 status is now: NodeNotReady" {
			t.Errorf("message %q", ev.Message)
		}
		if ev.FirstTimestamp.IsZero() || ev.LastTimestamp.Before(&ev.FirstTimestamp) {
			t.Errorf("%s: timestamps first %v last %v", ev.Reason, ev.FirstTimestamp, ev.LastTimestamp)
		}
	}
}
