package integration

import (
	"context"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// nextAnyEvent returns the next event, bookmarks included.
func nextAnyEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	return watch.Event{}
}

// TestWatchByNodeName: node agents watch spec.nodeName=<node> (an indexed
// watch); binding a pod is an ADDED for its node's watcher only.
func TestWatchByNodeName(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	watchNode := func(node string) watch.Interface {
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		return w
	}
	n1, n2 := watchNode("n1"), watchNode("n2")
	createPods(t, ns, nil, "a", "b")
	bind := func(pod, node string) {
		err := pods.Bind(ctx, &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod}, Target: v1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	bind("a", "n1")
	bind("b", "n2")
	if ev := nextEvent(t, n1); ev.Type != watch.Added || ev.Object.(*v1.Pod).Name != "a" {
		t.Fatalf("n1 watcher: %s %s, want ADDED a", ev.Type, ev.Object.(*v1.Pod).Name)
	}
	if ev := nextEvent(t, n2); ev.Type != watch.Added || ev.Object.(*v1.Pod).Name != "b" {
		t.Fatalf("n2 watcher: %s %s, want ADDED b", ev.Type, ev.Object.(*v1.Pod).Name)
	}
	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	// Deletion is a MODIFIED (deletionTimestamp) then a DELETED, on n1 only.
	for _, want := range []watch.EventType{watch.Modified, watch.Deleted} {
		if ev := nextEvent(t, n1); ev.Type != want || ev.Object.(*v1.Pod).Name != "a" {
			t.Fatalf("n1 watcher: %s %s, want %s a", ev.Type, ev.Object.(*v1.Pod).Name, want)
		}
	}
	select {
	case ev := <-n2.ResultChan():
		t.Fatalf("n2 watcher got an event about another node's pod: %s %v", ev.Type, ev.Object)
	default:
	}
}

// TestPeriodicBookmarks: a watch that allows bookmarks gets BOOKMARK events
// carrying only kind, apiVersion and a current resourceVersion.
func TestPeriodicBookmarks(t *testing.T) {
	fast := testserver.StartWith(t, t.TempDir(), func(c *server.Config) {
		c.BookmarkInterval = 50 * time.Millisecond
		c.Logger = testserver.Logger()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	list, err := fast.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := fast.Client.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := nextAnyEvent(t, w)
	ns, ok := ev.Object.(*v1.Namespace)
	if ev.Type != watch.Bookmark || !ok || ns.ResourceVersion == "" || ns.Name != "" {
		t.Fatalf("got %s %+v, want a BOOKMARK with only a resourceVersion", ev.Type, ev.Object)
	}
}
