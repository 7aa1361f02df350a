package scheduler

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRecorderSeries checks that repeats of an event become its series:
// the first repeat is written at once, later ones by the periodic flush.
func TestRecorderSeries(t *testing.T) {
	client := fake.NewClientset()
	cfg := Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), EventSeriesFlush: 20 * time.Millisecond}.withDefaults()
	r := newRecorder(client, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	r.run(ctx, &wg)
	defer func() {
		cancel()
		wg.Wait()
	}()

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "u1"}}
	count := func() (int, int32, string) {
		list, err := client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return 0, 0, ""
		}
		ev := list.Items[0]
		var c int32
		if ev.Series != nil {
			c = ev.Series.Count
		}
		return len(list.Items), c, ev.Note
	}
	waitCount := func(want int32) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			n, c, _ := count()
			return n == 1 && c == want, nil
		})
		if err != nil {
			n, c, _ := count()
			t.Fatalf("waiting for series count %d: %d events, count %d", want, n, c)
		}
	}

	r.Eventf(pod, v1.EventTypeWarning, "FailedScheduling", "Scheduling", true, "no room")
	waitCount(0)
	r.Eventf(pod, v1.EventTypeWarning, "FailedScheduling", "Scheduling", true, "no room")
	waitCount(2)
	r.Eventf(pod, v1.EventTypeWarning, "FailedScheduling", "Scheduling", true, "no room")
	r.Eventf(pod, v1.EventTypeWarning, "FailedScheduling", "Scheduling", true, "no room")
	waitCount(4)

	// A different message is a different event.
	r.Eventf(pod, v1.EventTypeWarning, "FailedScheduling", "Scheduling", true, "other")
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		list, err := client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 2, nil
	})
	if err != nil {
		t.Fatal("a new message did not make a new event")
	}
	list, _ := client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
	for _, ev := range list.Items {
		if ev.ReportingController != "default-scheduler" || ev.Action != "Scheduling" || ev.EventTime.IsZero() ||
			ev.ReportingInstance == "" || ev.Regarding.UID != "u1" || ev.Type != v1.EventTypeWarning {
			t.Errorf("event = %+v", ev)
		}
	}
}
