package integration

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// expiryTimeout bounds the wait for an event to expire: the TTL is a second,
// which etcd rounds up to its minimum lease TTL (about two) and checks
// every half second.
const expiryTimeout = 30 * time.Second

// TestEventsExpire: with --event-ttl of a second, an event disappears
// TTL after its last write: an informer and a watch see DELETED with its
// last state, LIST (consistent and from the cache) and GET no longer find
// it. Other resources written meanwhile stay.
func TestEventsExpire(t *testing.T) {
	s := testserver.StartWith(t, t.TempDir(), func(c *server.Config) { c.EventTTL = time.Second })
	ctx := t.Context()
	const ns = metav1.NamespaceDefault
	events := s.Client.CoreV1().Events(ns)

	deleted := make(chan *v1.Event, 10)
	factory := informers.NewSharedInformerFactoryWithOptions(s.Client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Events().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if ev, ok := obj.(*v1.Event); ok {
				deleted <- ev
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	infCtx, stopInformers := context.WithCancel(ctx)
	factory.Start(infCtx.Done())
	t.Cleanup(func() {
		stopInformers()
		factory.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("event informer did not sync")
	}

	ev, err := events.Create(ctx, newEvent(ns, "expiring", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create event: %v", err)
	}
	w, err := events.Watch(ctx, metav1.ListOptions{ResourceVersion: ev.ResourceVersion})
	if err != nil {
		t.Fatalf("watch events: %v", err)
	}
	defer w.Stop()
	// An update, as a recorder counting a repeated event makes, writes the
	// event again with the TTL: it is the state the DELETED events carry.
	ev.Count, ev.Message = 2, "seen twice"
	updated, err := events.Update(ctx, ev, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update event: %v", err)
	}
	pod, err := s.Client.CoreV1().Pods(ns).Create(ctx, newPod("stays", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}

	select {
	case got := <-deleted:
		if got.Name != updated.Name || got.Count != 2 || got.Message != "seen twice" {
			t.Errorf("informer deleted %s (count %d, %q), want %s with count 2", got.Name, got.Count, got.Message, updated.Name)
		}
	case <-time.After(expiryTimeout):
		t.Fatalf("the informer saw no DELETED within %v", expiryTimeout)
	}
	checkWatchSeesExpiry(t, w, updated)

	list, err := events.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("LIST after expiry = %v, %v; want no events", names(t, list), err)
	}
	list, err = events.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("LIST from the cache after expiry = %v, %v; want no events", names(t, list), err)
	}
	if _, err := events.Get(ctx, ev.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("GET after expiry: err = %v, want NotFound", err)
	}
	if got, err := s.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil || got.ResourceVersion != pod.ResourceVersion {
		t.Errorf("pod written next to the event: %v, want it unchanged", err)
	}
}

// checkWatchSeesExpiry reads w, a watch from the event's creation, up to the
// DELETED of updated: MODIFIED with the update, then DELETED with the same
// state at a later resourceVersion.
func checkWatchSeesExpiry(t *testing.T, w watch.Interface, updated *v1.Event) {
	t.Helper()
	timeout := time.After(expiryTimeout)
	var sawUpdate bool
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed before the event expired")
			}
			ev, isEvent := e.Object.(*v1.Event)
			switch {
			case !isEvent:
				t.Fatalf("watch sent %s %T, want events", e.Type, e.Object)
			case e.Type == watch.Modified && ev.ResourceVersion == updated.ResourceVersion:
				sawUpdate = true
			case e.Type == watch.Deleted:
				if !sawUpdate {
					t.Error("watch: DELETED before the MODIFIED of the update")
				}
				if ev.Name != updated.Name || ev.Count != 2 || ev.Message != updated.Message {
					t.Errorf("watch: DELETED %s (count %d, %q), want the last state of %s", ev.Name, ev.Count, ev.Message, updated.Name)
				}
				if rv, _ := strconv.ParseInt(ev.ResourceVersion, 10, 64); rv <= mustRV(t, updated) {
					t.Errorf("watch: DELETED at resourceVersion %s, want after the update's %s", ev.ResourceVersion, updated.ResourceVersion)
				}
				return
			default:
				t.Fatalf("watch: unexpected %s of %s", e.Type, ev.Name)
			}
		case <-timeout:
			t.Fatalf("the watch saw no DELETED within %v", expiryTimeout)
		}
	}
}

func mustRV(t *testing.T, obj metav1.Object) int64 {
	t.Helper()
	rv, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", obj.GetResourceVersion(), err)
	}
	return rv
}
