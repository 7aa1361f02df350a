package record

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"
)

// emit is one Event call; advance moves the clock before it.
type emit struct {
	advance   time.Duration
	ref       v1.ObjectReference
	source    v1.EventSource
	reason    string
	message   string
	fieldPath string
}

// want is one Event expected in the namespace, by reason and message.
type want struct {
	reason, message string
	count           int32
}

// TestRecorder: the de-duplication rules on a real server, one namespace
// per case: identical repeats are counted on the first Event (count,
// lastTimestamp), anything in the correlator's key that differs makes
// another Event, and a repeat after DedupWindow is written anew.
func TestRecorder(t *testing.T) {
	srv := testserver.StartMemory(t)
	node := v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "n1", UID: "u1"}
	pod := func(ns string) v1.ObjectReference {
		return v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: "p", UID: "pu"}
	}
	controller := v1.EventSource{Component: "node-controller"}
	kubelet := v1.EventSource{Component: "kubelet", Host: "n1"}
	tests := []struct {
		name    string
		workers int
		emits   func(ns string) []emit
		want    []want
	}{
		{name: "identical repeats are counted", emits: func(ns string) []emit {
			return []emit{
				{ref: pod(ns), source: controller, reason: "NodeNotReady", message: "Node is not ready"},
				{advance: time.Minute, ref: pod(ns), source: controller, reason: "NodeNotReady", message: "Node is not ready"},
				{advance: time.Minute, ref: pod(ns), source: controller, reason: "NodeNotReady", message: "Node is not ready"},
			}
		}, want: []want{{"NodeNotReady", "Node is not ready", 3}}},
		{name: "another message is another event", emits: func(ns string) []emit {
			return []emit{
				{ref: pod(ns), source: controller, reason: "TaintManagerEviction", message: "Marking for deletion Pod a"},
				{ref: pod(ns), source: controller, reason: "TaintManagerEviction", message: "Cancelling deletion of Pod a"},
			}
		}, want: []want{{"TaintManagerEviction", "Cancelling deletion of Pod a", 1}, {"TaintManagerEviction", "Marking for deletion Pod a", 1}}},
		{name: "another container or host is another event", workers: 4, emits: func(ns string) []emit {
			return []emit{
				{ref: pod(ns), source: kubelet, reason: "Pulled", message: "pulled", fieldPath: "spec.containers{a}"},
				{ref: pod(ns), source: kubelet, reason: "Pulled", message: "pulled", fieldPath: "spec.containers{b}"},
				{ref: pod(ns), source: kubelet, reason: "Pulled", message: "pulled", fieldPath: "spec.containers{b}"},
				{ref: pod(ns), source: v1.EventSource{Component: "kubelet", Host: "n2"}, reason: "Pulled", message: "pulled", fieldPath: "spec.containers{b}"},
			}
		}, want: []want{{"Pulled", "pulled", 1}, {"Pulled", "pulled", 1}, {"Pulled", "pulled", 2}}},
		{name: "a repeat after the window is written anew", emits: func(ns string) []emit {
			return []emit{
				{ref: pod(ns), source: controller, reason: "NodeNotReady", message: "Node is not ready"},
				{advance: DedupWindow - time.Second, ref: pod(ns), source: controller, reason: "NodeNotReady", message: "Node is not ready"},
				{advance: DedupWindow, ref: pod(ns), source: controller, reason: "NodeNotReady", message: "Node is not ready"},
			}
		}, want: []want{{"NodeNotReady", "Node is not ready", 1}, {"NodeNotReady", "Node is not ready", 2}}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }()
			ns := fmt.Sprintf("record-%d", i)
			if _, err := srv.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			clk := testingclock.NewFakePassiveClock(time.Now().Truncate(time.Second))
			r := New(srv.Client, clk, testserver.Logger(), Options{Workers: tc.workers})
			r.Run(ctx, &wg)
			emits := tc.emits(ns)
			for j, e := range emits {
				// Names are <object>.<hex nanoseconds>: a step of a
				// millisecond keeps two events of one object apart.
				clk.SetTime(clk.Now().Add(e.advance + time.Millisecond))
				ref := e.ref
				ref.FieldPath = e.fieldPath
				r.Event(ref, e.source, v1.EventTypeNormal, e.reason, e.message)
				// Each write lands before the next emit, so that the
				// outcome does not depend on the writer's pace.
				waitWritten(t, ctx, srv, ns, j+1)
			}
			list, err := srv.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []want
			for _, ev := range list.Items {
				got = append(got, want{ev.Reason, ev.Message, ev.Count})
				if ev.Source.Component != ev.ReportingController || ev.Source.Host != ev.ReportingInstance {
					t.Errorf("source %+v, reporting %q/%q", ev.Source, ev.ReportingController, ev.ReportingInstance)
				}
				if ev.LastTimestamp.Before(&ev.FirstTimestamp) {
					t.Errorf("event: first %v last %v", ev.FirstTimestamp, ev.LastTimestamp)
				}
			}
			sortWants(got)
			sortWants(tc.want)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("events %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("controller events of cluster-scoped objects go to default", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer func() { cancel(); wg.Wait() }()
		r := New(srv.Client, testingclock.NewFakePassiveClock(time.Now()), testserver.Logger(), Options{})
		r.Run(ctx, &wg)
		r.Eventf(node, "node-controller", v1.EventTypeNormal, "RegisteredNode", "Node %s event: Registered Node %s in Controller", "n1", "n1")
		waitWritten(t, ctx, srv, metav1.NamespaceDefault, 1)
		list, err := srv.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev := list.Items[0]
		if ev.Message != "Node n1 event: Registered Node n1 in Controller" || ev.Source.Component != "node-controller" ||
			ev.ReportingController != "node-controller" || ev.InvolvedObject.Name != "n1" || ev.Count != 1 {
			t.Errorf("event %+v", ev)
		}
	})

	t.Run("disabled drops every event", func(t *testing.T) {
		r := New(srv.Client, testingclock.NewFakePassiveClock(time.Now()), testserver.Logger(), Options{Disabled: true, QueueSize: 1})
		for range 3 {
			r.Event(pod("default"), controller, v1.EventTypeNormal, "X", "y")
		}
		for _, ch := range r.shards {
			if len(ch) != 0 {
				t.Errorf("%d events queued", len(ch))
			}
		}
	})
}

// waitWritten polls until the namespace's events add up to n emits (the
// sum of their counts).
func waitWritten(t *testing.T, ctx context.Context, srv *testserver.Server, ns string, n int) {
	t.Helper()
	var total int32
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := srv.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		total = 0
		for _, ev := range list.Items {
			total += ev.Count
		}
		return int(total) >= n, nil
	})
	if err != nil {
		t.Fatalf("%d events written in %s, want %d: %v", total, ns, n, err)
	}
}

func sortWants(w []want) {
	sort.Slice(w, func(i, j int) bool { return fmt.Sprint(w[i]) < fmt.Sprint(w[j]) })
}
