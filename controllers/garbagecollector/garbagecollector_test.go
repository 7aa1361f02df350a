package garbagecollector_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corekube/corekube/controllers/garbagecollector"
	"github.com/corekube/corekube/controllers/sharedinformers"
	"github.com/corekube/corekube/test/testserver"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const waitTimeout = 30 * time.Second

var (
	srv *testserver.Server
	cs  kubernetes.Interface
)

// TestGarbageCollector runs the collector against one real server and
// each deletion mode as a subtest in a namespace of its own.
func TestGarbageCollector(t *testing.T) {
	srv = testserver.StartMemory(t)
	cs = srv.Client
	// The test owns the shared informer factory, as a process does:
	// started after the collector took its informers, shut down after it
	// stopped.
	factory := sharedinformers.NewFactory(srv.Client)
	gc, err := garbagecollector.NewForConfig(srv.Config, factory, garbagecollector.Config{Logger: testserver.Logger(), Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- gc.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("garbage collector: %v", err)
		}
		factory.Shutdown()
		// net/http's Server.Shutdown waits for idle connections; close ours.
		if rt, err := rest.TransportFor(srv.Config); err == nil {
			if tr, ok := rt.(interface{ CloseIdleConnections() }); ok {
				tr.CloseIdleConnections()
			}
		}
	})
	poll(t, "the collector's informers to sync", func(context.Context) (bool, error) { return gc.Synced(), nil })

	t.Run("background", testBackground)
	t.Run("dangling uid mismatch", testUIDMismatch)
	t.Run("cluster-scoped owner", testClusterScopedOwner)
	t.Run("foreground", testForeground)
	t.Run("orphan", testOrphan)
	t.Run("owner from another namespace", testOtherNamespace)
	t.Run("solid owner keeps dependent", testSolidOwner)
}

var nsCount atomic.Int32

func newNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("gc-%d", nsCount.Add(1))
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "default ServiceAccount in "+name, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	return name
}

func poll(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func ref(apiVersion, kind, name string, uid types.UID, block bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
	if block {
		r.BlockOwnerDeletion = &block
	}
	return r
}

func podRef(p *v1.Pod, block bool) metav1.OwnerReference {
	return ref("v1", "Pod", p.Name, p.UID, block)
}

// createPod creates an unscheduled pod (its deletion is immediate) owned
// by owners.
func createPod(t *testing.T, ns, name string, finalizers []string, owners ...metav1.OwnerReference) *v1.Pod {
	t.Helper()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners, Finalizers: finalizers},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	created, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return created
}

func createLease(t *testing.T, ns, name string, owners ...metav1.OwnerReference) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners}}
	created, err := cs.CoordinationV1().Leases(ns).Create(t.Context(), l, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create lease %s: %v", name, err)
	}
	return created
}

func deletePod(t *testing.T, ns, name string, policy *metav1.DeletionPropagation) {
	t.Helper()
	if err := cs.CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{PropagationPolicy: policy}); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
}

func podGone(t *testing.T, ns, name string) {
	t.Helper()
	poll(t, "pod "+ns+"/"+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func leaseGone(t *testing.T, ns, name string) {
	t.Helper()
	poll(t, "lease "+ns+"/"+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// observed returns once the collector has seen what was written in ns
// so far (pods and leases: their informers are ordered): sentinels whose
// owners never existed, written last, are gone.
func observed(t *testing.T, ns string) {
	t.Helper()
	noOwner := ref("v1", "Pod", "no-such-owner", "00000000-0000-0000-0000-000000000000", false)
	createPod(t, ns, "sentinel", nil, noOwner)
	createLease(t, ns, "sentinel", noOwner)
	podGone(t, ns, "sentinel")
	leaseGone(t, ns, "sentinel")
}

// stays checks, over a few collector rounds, that a pod is not collected:
// a sentinel whose owner is gone is created after it and collected first,
// so the collector has had its look at the pod by then.
func stays(t *testing.T, ns, name string) *v1.Pod {
	t.Helper()
	sentinel := createLease(t, ns, "sentinel-"+name, ref("v1", "Pod", "no-such-owner", "00000000-0000-0000-0000-000000000000", false))
	leaseGone(t, ns, sentinel.Name)
	p, err := cs.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod %s was collected: %v", name, err)
	}
	return p
}

func policyPtr(p metav1.DeletionPropagation) *metav1.DeletionPropagation { return &p }

// testBackground: dependents of a deleted owner are deleted; a dependent
// of a dependent goes next; a dependent whose owner never existed goes
// too.
func testBackground(t *testing.T) {
	ns := newNamespace(t)
	owner := createPod(t, ns, "owner", nil)
	child := createPod(t, ns, "child", nil, podRef(owner, false))
	createPod(t, ns, "grandchild", nil, podRef(child, false))
	createLease(t, ns, "lease", podRef(owner, false))
	createLease(t, ns, "never-owned", ref("v1", "Pod", "ghost", "11111111-1111-1111-1111-111111111111", false))
	stays(t, ns, "child")
	deletePod(t, ns, "owner", nil)
	podGone(t, ns, "child")
	podGone(t, ns, "grandchild")
	leaseGone(t, ns, "lease")
	leaseGone(t, ns, "never-owned")
}

// testUIDMismatch: an owner recreated with the same name is another
// object: the dependent of the first is collected.
func testUIDMismatch(t *testing.T) {
	ns := newNamespace(t)
	first := createPod(t, ns, "owner", nil)
	stale := podRef(first, false)
	deletePod(t, ns, "owner", nil)
	podGone(t, ns, "owner")
	second := createPod(t, ns, "owner", nil)
	createPod(t, ns, "stale-child", nil, stale)
	createPod(t, ns, "good-child", nil, podRef(second, false))
	podGone(t, ns, "stale-child")
	stays(t, ns, "good-child")
}

// testClusterScopedOwner: a Node owns a namespaced Lease (a kubelet's);
// deleting the Node deletes the Lease.
func testClusterScopedOwner(t *testing.T) {
	ns := newNamespace(t)
	node, err := cs.CoreV1().Nodes().Create(t.Context(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gc-node"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createLease(t, ns, "gc-node", ref("v1", "Node", node.Name, node.UID, false))
	// A Namespace is cluster-scoped too.
	nsObj, err := cs.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createPod(t, ns, "ns-owned", nil, ref("v1", "Namespace", ns, nsObj.UID, false))
	stays(t, ns, "ns-owned")
	if _, err := cs.CoordinationV1().Leases(ns).Get(t.Context(), "gc-node", metav1.GetOptions{}); err != nil {
		t.Fatalf("lease of an existing node collected: %v", err)
	}
	if err := cs.CoreV1().Nodes().Delete(t.Context(), node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	leaseGone(t, ns, "gc-node")
}

// testForeground: an owner deleted in the foreground stays (with its
// deletionTimestamp and the foregroundDeletion finalizer) while a
// dependent with blockOwnerDeletion is there; dependents without it are
// deleted too but do not hold it.
func testForeground(t *testing.T) {
	ns := newNamespace(t)
	owner := createPod(t, ns, "owner", nil)
	createPod(t, ns, "blocker", []string{"example.com/hold"}, podRef(owner, true))
	createPod(t, ns, "free", nil, podRef(owner, false))
	deletePod(t, ns, "owner", policyPtr(metav1.DeletePropagationForeground))
	podGone(t, ns, "free")
	poll(t, "blocker being deleted", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "blocker", metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil, err
	})
	got := stays(t, ns, "owner")
	if got.DeletionTimestamp == nil || !slices.Contains(got.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Fatalf("owner: deletionTimestamp %v finalizers %q, want set and foregroundDeletion", got.DeletionTimestamp, got.Finalizers)
	}
	// The blocker's own finalizer goes: it goes, and then the owner.
	if _, err := cs.CoreV1().Pods(ns).Patch(t.Context(), "blocker", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	podGone(t, ns, "blocker")
	podGone(t, ns, "owner")

	// A dependent that stops blocking (blockOwnerDeletion=false) releases
	// the owner without going.
	owner = createPod(t, ns, "owner2", nil)
	createPod(t, ns, "held", []string{"example.com/hold"}, podRef(owner, true))
	deletePod(t, ns, "owner2", policyPtr(metav1.DeletePropagationForeground))
	poll(t, "held being deleted", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "held", metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil, err
	})
	patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"owner2","uid":%q,"blockOwnerDeletion":false}]}}`, owner.UID)
	if _, err := cs.CoreV1().Pods(ns).Patch(t.Context(), "held", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	podGone(t, ns, "owner2")
	if _, err := cs.CoreV1().Pods(ns).Patch(context.Background(), "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	podGone(t, ns, "held")
}

// testOrphan: an owner deleted with propagationPolicy=Orphan loses its
// dependents' references to it, then its orphan finalizer, then goes; its
// dependents stay, their other owners kept.
func testOrphan(t *testing.T) {
	ns := newNamespace(t)
	owner := createPod(t, ns, "owner", nil)
	other := createPod(t, ns, "other", nil)
	createPod(t, ns, "child", nil, podRef(owner, true), podRef(other, false))
	createLease(t, ns, "lease", podRef(owner, false))
	// Leases and pods come through different informers: the collector
	// orphans the dependents it knows of (kube's has the same window).
	observed(t, ns)
	deletePod(t, ns, "owner", policyPtr(metav1.DeletePropagationOrphan))
	podGone(t, ns, "owner")
	child, err := cs.CoreV1().Pods(ns).Get(t.Context(), "child", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("orphaned dependent collected: %v", err)
	}
	if len(child.OwnerReferences) != 1 || child.OwnerReferences[0].UID != other.UID {
		t.Errorf("orphaned dependent's ownerReferences %+v, want only the other owner", child.OwnerReferences)
	}
	lease, err := cs.CoordinationV1().Leases(ns).Get(t.Context(), "lease", metav1.GetOptions{})
	if err != nil || len(lease.OwnerReferences) != 0 {
		t.Errorf("orphaned lease: %v, ownerReferences %+v", err, lease)
	}
	stays(t, ns, "child")

	// The orphan finalizer set at create time is the default policy of
	// that object.
	owner = createPod(t, ns, "owner-finalizer", []string{metav1.FinalizerOrphanDependents})
	createPod(t, ns, "child2", nil, podRef(owner, false))
	observed(t, ns)
	deletePod(t, ns, "owner-finalizer", nil)
	podGone(t, ns, "owner-finalizer")
	if c, err := cs.CoreV1().Pods(ns).Get(t.Context(), "child2", metav1.GetOptions{}); err != nil || len(c.OwnerReferences) != 0 {
		t.Errorf("child2: %v %+v, want kept without owners", err, c)
	}
}

// testOtherNamespace: a namespaced owner is looked up in its dependent's
// namespace; a reference to an object of another namespace is invalid:
// kube's OwnerRefInvalidNamespace warning, and the dependent is
// collected.
func testOtherNamespace(t *testing.T) {
	nsA, nsB := newNamespace(t), newNamespace(t)
	owner := createPod(t, nsA, "owner", nil)
	stays(t, nsA, "owner") // observed by the collector
	createPod(t, nsB, "cross", nil, podRef(owner, false))
	podGone(t, nsB, "cross")
	poll(t, "OwnerRefInvalidNamespace event", func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Events(nsB).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == "OwnerRefInvalidNamespace" {
				want := fmt.Sprintf("ownerRef [v1/Pod, namespace: %s, name: owner, uid: %s] does not exist in namespace %q", nsB, owner.UID, nsB)
				if e.Message != want || e.Type != v1.EventTypeWarning || e.Source.Component != "garbage-collector-controller" || e.InvolvedObject.Name != "cross" {
					t.Errorf("event %q %s %s about %s, want %q", e.Message, e.Type, e.Source.Component, e.InvolvedObject.Name, want)
				}
				return true, nil
			}
		}
		return false, nil
	})
	if _, err := cs.CoreV1().Pods(nsA).Get(t.Context(), "owner", metav1.GetOptions{}); err != nil {
		t.Errorf("owner in the other namespace: %v", err)
	}
}

// testSolidOwner: a dependent with one owner left keeps living and loses
// its reference to the gone one.
func testSolidOwner(t *testing.T) {
	ns := newNamespace(t)
	a := createPod(t, ns, "a", nil)
	b := createPod(t, ns, "b", nil)
	createPod(t, ns, "child", nil, podRef(a, false), podRef(b, false))
	deletePod(t, ns, "a", nil)
	poll(t, "reference to the gone owner removed", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "child", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(p.OwnerReferences) == 1 && p.OwnerReferences[0].UID == b.UID, nil
	})
}
