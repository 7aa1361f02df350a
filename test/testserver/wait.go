package testserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// WaitTimeout bounds WaitFor: long enough for a loaded machine running
// the race detector, short enough that a hang fails the test.
const WaitTimeout = 30 * time.Second

// WaitFor polls cond (every 20ms, at once first) until it is true and
// fails the test with what it waited for, cond's error and describe's
// account of the last state (describe may be nil) when it returns an
// error or WaitTimeout passes.
func WaitFor(tb testing.TB, what string, cond func(ctx context.Context) (bool, error), describe func() string) {
	tb.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, WaitTimeout, true, cond); err != nil {
		last := ""
		if describe != nil {
			last = ": " + describe()
		}
		tb.Fatalf("waiting for %s: %v%s", what, err, last)
	}
}

// WaitEvent waits (WaitFor) for an event with reason and message msg about
// the object called name in namespace and returns it; on failure it lists
// the messages of the events with that reason it saw.
func WaitEvent(tb testing.TB, c kubernetes.Interface, namespace, name, reason, msg string) v1.Event {
	tb.Helper()
	var found v1.Event
	var seen []string
	sel := fields.Set{"involvedObject.name": name, "reason": reason}.String()
	WaitFor(tb, reason+" event for "+name, func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, ev := range list.Items {
			seen = append(seen, ev.Message)
			if ev.Message == msg {
				found = ev
				return true, nil
			}
		}
		return false, nil
	}, func() string { return fmt.Sprintf("events seen %q", seen) })
	return found
}
