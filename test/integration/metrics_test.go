package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMetricsCountWatchers: /metrics reports the watch caches' watchers
// and the slow-watcher counter per resource.
func TestMetricsCountWatchers(t *testing.T) {
	ns := newNamespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	eventually(t, 10*time.Second, "a pod watcher in /metrics", func(context.Context) (bool, error) {
		body := string(doRaw(t, "GET", "/metrics", nil).Body)
		if !strings.Contains(body, `corekube_watch_cache_slow_watchers_closed_total{group="",resource="pods"} `) {
			t.Fatalf("/metrics lacks the slow-watcher counter:\n%s", body)
		}
		return !strings.Contains(body, `corekube_watch_cache_watchers{group="",resource="pods"} 0`), nil
	})
}
