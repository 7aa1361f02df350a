package registry_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/pods"
	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/storage/storagetest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// newCachedPodStore is a pods Store on st with its watch cache running.
func newCachedPodStore(t *testing.T, st storage.Interface) *registry.Store {
	t.Helper()
	return newCachedPodStoreWith(t, st, registry.Options{})
}

// newCachedPodStoreWith is newCachedPodStore with opts.
func newCachedPodStoreWith(t *testing.T, st storage.Interface, opts registry.Options) *registry.Store {
	t.Helper()
	store, _ := newPodStores(st, true, opts)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = store.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for !store.CacheReady() {
		if time.Now().After(deadline) {
			t.Fatal("watch cache not ready after 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return store
}

// TestDeleteFromCache: a delete whose watch cache has the object's last
// revision reads nothing from storage, a graceful one and the final one
// alike (a graceful delete used to read the pod twice). The pod, stored as
// protobuf, is decoded from the cache's message, and the graceful delete's
// answer is the pod as stored.
func TestDeleteFromCache(t *testing.T) {
	st := &storagetest.ReadCounter{Interface: newTestStorage(t)}
	pods := newCachedPodStore(t, st)
	ctx := t.Context()
	scheduled := benchPod(benchPodName("cached"))
	scheduled.Spec.NodeName = "node-1" // else a delete is final at once
	created, err := pods.Create(ctx, "dc", scheduled, registry.CreateOptions{FieldManager: "test"})
	if err != nil {
		t.Fatal(err)
	}
	pod := created.(*v1.Pod)
	// Wait for the cache to have it (a GET at its resourceVersion does),
	// then count.
	if _, err := pods.Get(ctx, "dc", pod.Name, &metav1.GetOptions{ResourceVersion: pod.ResourceVersion}); err != nil {
		t.Fatal(err)
	}
	st.Gets.Store(0)
	fromMessages := registry.MessageStarts()
	out, deleted, err := pods.Delete(ctx, "dc", pod.Name, &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30),
		Preconditions: &metav1.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion}})
	if err != nil || deleted {
		t.Fatalf("graceful delete = deleted %v, %v; want the pod kept, terminating", deleted, err)
	}
	if got := st.Gets.Load(); got != 0 {
		t.Errorf("graceful delete from a fresh cache read storage %d times, want 0", got)
	}
	if registry.MessageStarts() == fromMessages {
		t.Error("graceful delete did not decode the pod from the watch cache's message")
	}
	terminating := out.(*v1.Pod)
	if terminating.DeletionTimestamp == nil {
		t.Fatal("graceful delete did not set deletionTimestamp")
	}
	stored, err := pods.Get(ctx, "dc", pod.Name, &metav1.GetOptions{}) // from storage
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(stored, out) {
		t.Errorf("graceful delete answered\n%v\nstorage holds\n%v", out, stored)
	}
	if _, err := pods.Get(ctx, "dc", pod.Name, &metav1.GetOptions{ResourceVersion: terminating.ResourceVersion}); err != nil {
		t.Fatal(err)
	}
	st.Gets.Store(0)
	if _, deleted, err := pods.Delete(ctx, "dc", pod.Name, &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
		Preconditions: &metav1.Preconditions{UID: &pod.UID}}); err != nil || !deleted {
		t.Fatalf("final delete = deleted %v, %v", deleted, err)
	}
	if got := st.Gets.Load(); got != 0 {
		t.Errorf("final delete from a fresh cache read storage %d times, want 0", got)
	}
}

// TestDeleteFromStaleCache: deletes through a Store whose watch cache has
// not yet seen the last write (made through another Store, as another API
// server would) answer as if it had: a precondition on the newest
// resourceVersion holds, and the pod deleted is the newest one.
func TestDeleteFromStaleCache(t *testing.T) {
	st := newTestStorage(t)
	pods := newCachedPodStore(t, st)
	other, _ := newPodStores(st, true, registry.Options{})
	ctx := t.Context()
	for i := range 40 {
		scheduled := benchPod(benchPodName("stale"))
		scheduled.Spec.NodeName = "node-1"
		created, err := pods.Create(ctx, "dc", scheduled, registry.CreateOptions{FieldManager: "test"})
		if err != nil {
			t.Fatal(err)
		}
		name := created.(*v1.Pod).Name
		if _, err := pods.Get(ctx, "dc", name, &metav1.GetOptions{ResourceVersion: created.(*v1.Pod).ResourceVersion}); err != nil {
			t.Fatal(err)
		}
		labelled, _, err := other.Update(ctx, "dc", name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			cur.(*v1.Pod).Labels["round"] = fmt.Sprint(i)
			return cur, nil
		}, registry.UpdateOptions{FieldManager: "labeller"})
		if err != nil {
			t.Fatalf("round %d: label: %v", i, err)
		}
		rv := labelled.(*v1.Pod).ResourceVersion
		grace := int64(30 * (i % 2)) // graceful and graceless
		out, _, err := pods.Delete(ctx, "dc", name, &metav1.DeleteOptions{GracePeriodSeconds: &grace,
			Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err != nil {
			t.Fatalf("round %d: delete with the newest resourceVersion as its precondition: %v", i, err)
		}
		if got := out.(*v1.Pod).Labels["round"]; got != fmt.Sprint(i) {
			t.Fatalf("round %d: the delete answered a pod labelled round=%q, not the newest", i, got)
		}
		if grace == 0 {
			continue
		}
		// Deleting a terminating pod again changes nothing: the answer is
		// still the newest pod.
		if _, _, err := other.Update(ctx, "dc", name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			cur.(*v1.Pod).Labels["again"] = fmt.Sprint(i)
			return cur, nil
		}, registry.UpdateOptions{FieldManager: "labeller"}); err != nil {
			t.Fatalf("round %d: label the terminating pod: %v", i, err)
		}
		out, deleted, err := pods.Delete(ctx, "dc", name, &metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil || deleted {
			t.Fatalf("round %d: a second graceful delete = deleted %v, %v; want the pod still terminating", i, deleted, err)
		}
		if got := out.(*v1.Pod).Labels["again"]; got != fmt.Sprint(i) {
			t.Fatalf("round %d: the second delete answered a pod labelled again=%q, not the newest", i, got)
		}
	}
}

// pausedWatchStorage holds back the events its watches relay while paused
// is locked, so that a test writes while the watch cache stays behind.
type pausedWatchStorage struct {
	*storagetest.ReadCounter
	paused sync.RWMutex
}

func (p *pausedWatchStorage) Watch(ctx context.Context, prefix string, fromRevision int64) (<-chan storage.Event, error) {
	in, err := p.ReadCounter.Watch(ctx, prefix, fromRevision)
	if err != nil {
		return nil, err
	}
	out := make(chan storage.Event)
	go func() { // ends with in, which ends with ctx
		defer close(out)
		for ev := range in {
			p.paused.RLock()
			p.paused.RUnlock() //nolint:staticcheck // waits out a pause
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TestWriteAfterOwnWrite: a write that follows this server's own write of
// the key before the watch cache has it (the agent's final status, then
// its DELETE) starts from what was written, not from the cache's older
// copy: no compare-and-swap lost, nothing read from etcd. A write another
// server made meanwhile is still found (the copy loses its
// compare-and-swap) and the answers are the newest object's.
func TestWriteAfterOwnWrite(t *testing.T) {
	st := &pausedWatchStorage{ReadCounter: &storagetest.ReadCounter{Interface: newTestStorage(t)}}
	store := newCachedPodStore(t, st)
	status := store.Subresource("status", pods.NewStatusStrategy())
	other, _ := newPodStores(st, true, registry.Options{}) // another server
	ctx := t.Context()
	newPod := func(prefix string) *v1.Pod {
		p := benchPod(benchPodName(prefix))
		p.Spec.NodeName = "node-1"
		created, err := store.Create(ctx, "ow", p, registry.CreateOptions{FieldManager: "test"})
		if err != nil {
			t.Fatal(err)
		}
		pod := created.(*v1.Pod)
		if _, err := store.Get(ctx, "ow", pod.Name, &metav1.GetOptions{ResourceVersion: pod.ResourceVersion}); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	setStatus := func(s *registry.Store, name string, change func(*v1.Pod)) *v1.Pod {
		t.Helper()
		out, _, err := s.Update(ctx, "ow", name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			change(cur.(*v1.Pod))
			return cur, nil
		}, registry.UpdateOptions{FieldManager: "kubelet"})
		if err != nil {
			t.Fatal(err)
		}
		return out.(*v1.Pod)
	}
	gracelessDelete := func(name string, rv string) *v1.Pod {
		t.Helper()
		out, deleted, err := store.Delete(ctx, "ow", name, &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
			Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err != nil || !deleted {
			t.Fatalf("delete at resourceVersion %s = deleted %v, %v", rv, deleted, err)
		}
		return out.(*v1.Pod)
	}

	own, raced := newPod("own"), newPod("raced")
	st.paused.Lock()
	// Resumed before the cache stops (Cleanups run last first), also when
	// the test fails while paused.
	resume := sync.OnceFunc(st.paused.Unlock)
	t.Cleanup(resume)
	st.Gets.Store(0)
	stale := registry.StaleCurrents()
	setStatus(status, own.Name, func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded })
	last := setStatus(status, own.Name, func(p *v1.Pod) { p.Status.Message = "done" })
	gone := gracelessDelete(own.Name, last.ResourceVersion)
	ownGets, ownStale := st.Gets.Load(), registry.StaleCurrents()-stale

	// Our write, then another server's: what we wrote is stale.
	setStatus(status, raced.Name, func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded })
	theirs := setStatus(other, raced.Name, func(p *v1.Pod) { p.Labels["by"] = "other" })
	racedGone := gracelessDelete(raced.Name, theirs.ResourceVersion)
	resume()

	if ownGets != 0 || ownStale != 0 {
		t.Errorf("after our own writes: %d storage reads, %d stale starting points; want none", ownGets, ownStale)
	}
	if gone.Status.Message != "done" {
		t.Errorf("the delete answered message %q, want the last status write's %q", gone.Status.Message, "done")
	}
	if racedGone.Labels["by"] != "other" || racedGone.Status.Phase != v1.PodSucceeded {
		t.Errorf("after another server's write, the delete answered labels %v phase %s, want the newest pod",
			racedGone.Labels, racedGone.Status.Phase)
	}
}

// TestGetAnyVersionFromCache: a GET with resourceVersion "0" (any version,
// as the kubelet asks for its node) is the watch cache's copy, read from
// no storage, and the same object a read of etcd gives; a name the cache
// does not have is read from etcd (NotFound there too).
func TestGetAnyVersionFromCache(t *testing.T) {
	st := &storagetest.ReadCounter{Interface: newTestStorage(t)}
	pods := newCachedPodStore(t, st)
	ctx := t.Context()
	created, err := pods.Create(ctx, "any", benchPod(benchPodName("any")), registry.CreateOptions{FieldManager: "test"})
	if err != nil {
		t.Fatal(err)
	}
	pod := created.(*v1.Pod)
	fromEtcd, err := pods.Get(ctx, "any", pod.Name, &metav1.GetOptions{ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	st.Gets.Store(0)
	got, err := pods.Get(ctx, "any", pod.Name, &metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if n := st.Gets.Load(); n != 0 {
		t.Errorf("GET at resourceVersion 0 read storage %d times, want 0", n)
	}
	if !equality.Semantic.DeepEqual(got, fromEtcd) {
		t.Errorf("GET at resourceVersion 0 = %+v\nwant etcd's %+v", got, fromEtcd)
	}
	if _, err := pods.Get(ctx, "any", "missing", &metav1.GetOptions{ResourceVersion: "0"}); !apierrors.IsNotFound(err) {
		t.Errorf("GET of a missing name at resourceVersion 0: %v, want NotFound", err)
	}
	if n := st.Gets.Load(); n != 1 {
		t.Errorf("a missing name read storage %d times, want once", n)
	}
}
