package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// nextEvent returns the next non-bookmark event, failing after 10s.
func nextEvent(t testing.TB, w watch.Interface) watch.Event {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			return ev
		case <-timeout.C:
			t.Fatal("timed out waiting for a watch event")
		}
	}
}

func eventName(ev watch.Event) string {
	if m, ok := ev.Object.(metav1.Object); ok {
		return m.GetName()
	}
	return ""
}

func TestWatchSelectors(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	list, err := pods.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: "app=a", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Not matching: nothing. Starts matching: ADDED. Changes while
	// matching: MODIFIED. Stops matching: DELETED.
	createPods(t, ns, map[string]string{"app": "b"}, "w1")
	patch := func(app string) {
		t.Helper()
		if _, err := pods.Patch(t.Context(), "w1", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"`+app+`"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch("a")
	if _, err := pods.Patch(t.Context(), "w1", types.MergePatchType, []byte(`{"metadata":{"annotations":{"n":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	patch("c")
	createPods(t, ns, map[string]string{"app": "a"}, "w2")
	want := []struct {
		typ  watch.EventType
		name string
	}{{watch.Added, "w1"}, {watch.Modified, "w1"}, {watch.Deleted, "w1"}, {watch.Added, "w2"}}
	for i, w1 := range want {
		ev := nextEvent(t, w)
		if ev.Type != w1.typ || eventName(ev) != w1.name {
			t.Fatalf("event %d: %s %s, want %s %s", i, ev.Type, eventName(ev), w1.typ, w1.name)
		}
	}
	// The DELETED for "stopped matching" carried the new state.
}

func TestWatchInitialEvents(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	createPods(t, ns, nil, "i1", "i2")
	for _, rv := range []string{"", "0"} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for i := 0; i < 2; i++ {
			ev := nextEvent(t, w)
			if ev.Type != watch.Added {
				t.Errorf("rv=%q: initial event %s, want ADDED", rv, ev.Type)
			}
			got[eventName(ev)] = true
		}
		if !got["i1"] || !got["i2"] {
			t.Errorf("rv=%q: initial events for %v", rv, got)
		}
		w.Stop()
		cancel()
	}

	// Watch list (sendInitialEvents): ADDED for what exists, then a
	// BOOKMARK marked k8s.io/initial-events-end.
	list, err := pods.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err := pods.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var types []watch.EventType
	for {
		select {
		case ev := <-w.ResultChan():
			types = append(types, ev.Type)
			if ev.Type != watch.Bookmark {
				continue
			}
			m := ev.Object.(metav1.Object)
			if m.GetAnnotations()["k8s.io/initial-events-end"] != "true" {
				t.Errorf("bookmark without initial-events-end: %v", m.GetAnnotations())
			}
			rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
			min, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
			if rv < min {
				t.Errorf("bookmark resourceVersion %d older than the list's %d", rv, min)
			}
			if len(types) != 3 || types[0] != watch.Added || types[1] != watch.Added {
				t.Errorf("events %v, want ADDED ADDED BOOKMARK", types)
			}
			return
		case <-ctx.Done():
			t.Fatalf("no initial-events-end bookmark; events %v", types)
		}
	}
}

func TestWatchAcrossNamespaces(t *testing.T) {
	ns1, ns2 := newNamespace(t), newNamespace(t)
	list, err := cs.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "metadata.namespace=" + ns2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	createPods(t, ns1, nil, "x1")
	createPods(t, ns2, nil, "x2")
	ev := nextEvent(t, w)
	if ev.Type != watch.Added || eventName(ev) != "x2" || ev.Object.(*v1.Pod).Namespace != ns2 {
		t.Errorf("event %s %s, want ADDED x2 in %s", ev.Type, eventName(ev), ns2)
	}
}

func TestWatchTimeoutAndExpiry(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)

	// timeoutSeconds ends the watch.
	w, err := pods.Watch(t.Context(), metav1.ListOptions{TimeoutSeconds: ptr(int64(1)), ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	closed := false
	for !closed {
		select {
		case _, ok := <-w.ResultChan():
			closed = !ok
		case <-deadline.C:
			t.Fatal("watch with timeoutSeconds=1 still open after 10s")
		}
	}

	// As in kube, a watch from a revision etcd has compacted is still
	// served while the watch cache holds the events after it.
	createPods(t, ns, nil, "old")
	list, err := pods.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createPods(t, ns, nil, "newer", "newest")
	compactNow(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err = pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, name := range []string{"newer", "newest"} {
		select {
		case ev := <-w.ResultChan():
			if pod, ok := ev.Object.(*v1.Pod); ev.Type != watch.Added || !ok || pod.Name != name {
				t.Fatalf("watch from a compacted revision still in the cache: got %s %v, want ADDED %s", ev.Type, ev.Object, name)
			}
		case <-ctx.Done():
			t.Fatal("no event from a watch at a compacted revision still in the cache")
		}
	}
}

// TestWatchOlderThanCacheIs410: a watch from a revision older than the
// watch cache's window gets a 200 stream with one ERROR event, 410 Expired
// "too old resource version: N (oldest)", as kube answers.
func TestWatchOlderThanCacheIs410(t *testing.T) {
	small := testserver.StartWith(t, t.TempDir(), func(c *server.Config) { c.WatchCacheSize = 2; c.Logger = testserver.Logger() })
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "expiry"}}
	if _, err := small.Client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := small.Client.CoreV1().Pods("expiry")
	first, err := pods.Create(t.Context(), newPod("p0", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"p1", "p2", "p3"} {
		if _, err := pods.Create(t.Context(), newPod(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A consistent list proves the cache has seen the writes.
	if _, err := pods.List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		st, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
			t.Errorf("first event %s %+v, want ERROR with a 410 Expired Status", ev.Type, ev.Object)
		} else if want := regexp.MustCompile(`^too old resource version: ` + first.ResourceVersion + ` \(\d+\)$`); !want.MatchString(st.Message) {
			t.Errorf("410 message %q, want kube's %q", st.Message, want)
		}
	case <-ctx.Done():
		t.Fatal("no event from a watch older than the cache")
	}

	// Raw: the stream is 200, one JSON event per line.
	req, _ := http.NewRequestWithContext(ctx, "GET", small.URL()+"/api/v1/namespaces/expiry/pods?watch=1&resourceVersion="+first.ResourceVersion, nil)
	resp, err := testserver.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("watch answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatal("no line in the watch stream")
	}
	var line struct {
		Type   string        `json:"type"`
		Object metav1.Status `json:"object"`
	}
	if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Type != "ERROR" || line.Object.Code != 410 || line.Object.Reason != "Expired" {
		t.Errorf("raw event %s", sc.Bytes())
	}
}

// TestWatchReplaySelectorTransitions: a watch started from a past
// resourceVersion replays, under its field selector, the pods that entered
// the selection in the meantime as ADDED (kwok's pod watch selects bound
// pods, spec.nodeName!=, and resumes from its last resourceVersion when the
// server closes it), the ones that changed inside it as MODIFIED and the
// ones that left it as DELETED; then it goes on live.
func TestWatchReplaySelectorTransitions(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	createPods(t, ns, nil, "r1", "r2", "r3")
	list, err := pods.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bind := func(name, node string) {
		t.Helper()
		if err := pods.Bind(t.Context(), &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name}, Target: v1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Before the watch starts: r1 and r2 bound (enter), r2 then changed,
	// r3 bound and deleted (enters, then is gone).
	bind("r1", "n1")
	bind("r2", "n2")
	if _, err := pods.Patch(t.Context(), "r2", types.MergePatchType, []byte(`{"metadata":{"annotations":{"n":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	bind("r3", "n1")
	if err := pods.Delete(t.Context(), "r3", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!=", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	createPods(t, ns, nil, "r4")
	bind("r4", "n2")
	want := []struct {
		typ  watch.EventType
		name string
	}{{watch.Added, "r1"}, {watch.Added, "r2"}, {watch.Modified, "r2"}, {watch.Added, "r3"},
		// A bound pod's delete sets its deletionTimestamp first, as kube's.
		{watch.Modified, "r3"}, {watch.Deleted, "r3"}, {watch.Added, "r4"}}
	for i, w1 := range want {
		ev := nextEvent(t, w)
		if ev.Type != w1.typ || eventName(ev) != w1.name {
			t.Fatalf("event %d: %s %s, want %s %s", i, ev.Type, eventName(ev), w1.typ, w1.name)
		}
		if pod, ok := ev.Object.(*v1.Pod); !ok || pod.Spec.NodeName == "" && ev.Type != watch.Deleted {
			t.Errorf("event %d: %s of a pod bound to no node", i, ev.Type)
		}
	}
}
