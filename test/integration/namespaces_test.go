package integration

import (
	"context"
	"errors"
	"fmt"
	"github.com/corekube/corekube/test/testserver"
	"testing"
	"time"

	"github.com/corekube/corekube/controllers/namespace"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

func TestSystemNamespaces(t *testing.T) {
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		ns, err := cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("system namespace %s: %v", name, err)
			continue
		}
		if ns.Status.Phase != v1.NamespaceActive {
			t.Errorf("%s: phase %s", name, ns.Status.Phase)
		}
	}
	for _, name := range []string{"default", "kube-system", "kube-public"} {
		err := cs.CoreV1().Namespaces().Delete(t.Context(), name, metav1.DeleteOptions{})
		checkStatusErr(t, err, 403, metav1.StatusReasonForbidden, fmt.Sprintf(`namespaces %q is forbidden: this namespace may not be deleted`, name))
		ns, err := cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil || ns.DeletionTimestamp != nil {
			t.Errorf("%s after a refused delete: %v %v", name, err, ns.DeletionTimestamp)
		}
	}
}

// startNamespaceController runs the namespace controller (which
// cmd/corekube runs) against the shared server until the test ends.
func startNamespaceController(t *testing.T) {
	t.Helper()
	c, err := namespace.New(cfg, testserver.Logger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("namespace controller: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("namespace controller did not stop")
		}
	})
}

func TestNamespaceDeletion(t *testing.T) {
	name := newNamespace(t)
	ns, err := cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := cs.CoreV1().Pods(name)
	if _, err := pods.Create(t.Context(), newPod("p1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	held := newPod("held", nil)
	held.Finalizers = []string{holdFinalizer}
	if _, err := pods.Create(t.Context(), held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoordinationV1().Leases(name).Create(t.Context(), newLease("l1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(name).Create(t.Context(), newPDB("b1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Events(name).Create(t.Context(), newEvent(name, "e1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Namespaces().Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: ns.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Deleting puts it in phase Terminating; it stays (finalizer
	// "kubernetes") with nothing running to empty it.
	if err := cs.CoreV1().Namespaces().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err = cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("namespace gone at once: %v", err)
	}
	if ns.Status.Phase != v1.NamespaceTerminating || ns.DeletionTimestamp == nil {
		t.Fatalf("after delete: phase %s deletionTimestamp %v, want Terminating and set", ns.Status.Phase, ns.DeletionTimestamp)
	}
	list, err := cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{FieldSelector: "status.phase=Terminating,metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "terminating namespaces", names(t, list), name)

	// Nothing new may be created in it: 403 with cause NamespaceTerminating.
	_, err = pods.Create(t.Context(), newPod("late", nil), metav1.CreateOptions{})
	st := checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		fmt.Sprintf(`pods "late" is forbidden: unable to create new content in namespace %s because it is being terminated`, name))
	found := false
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			found = found || (c.Type == v1.NamespaceTerminatingCause && c.Field == "metadata.namespace" &&
				c.Message == fmt.Sprintf("namespace %s is being terminated", name))
		}
	}
	if !found {
		t.Errorf("no NamespaceTerminating cause: %+v", st.Details)
	}
	_, err = cs.CoordinationV1().Leases(name).Create(t.Context(), newLease("late", nil), metav1.CreateOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden, "")
	// A dry run is refused the same way.
	_, err = pods.Create(t.Context(), newPod("late", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden, "")
	// What is there can still be changed (so that it can be finalized).
	if _, err := pods.Patch(t.Context(), "p1", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("update in a terminating namespace: %v", err)
	}

	// The namespace controller empties it; the pod with a finalizer holds
	// it until the finalizer goes.
	startNamespaceController(t)
	eventually(t, 30*time.Second, "the namespace to be emptied", func(ctx context.Context) (bool, error) {
		l, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(l.Items) != 1 || l.Items[0].Name != "held" || l.Items[0].DeletionTimestamp == nil {
			return false, nil
		}
		for _, n := range []func() (int, error){
			func() (int, error) { return lenOr(cs.CoordinationV1().Leases(name).List(ctx, metav1.ListOptions{})) },
			func() (int, error) {
				return lenOr(cs.PolicyV1().PodDisruptionBudgets(name).List(ctx, metav1.ListOptions{}))
			},
			func() (int, error) { return lenOr(cs.CoreV1().Events(name).List(ctx, metav1.ListOptions{})) },
		} {
			if c, err := n(); err != nil || c != 0 {
				return false, err
			}
		}
		return true, nil
	})
	if _, err := cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace gone while a pod with a finalizer is left: %v", err)
	}
	if _, err := pods.Patch(t.Context(), "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the namespace to go", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})

	evs := collectEvents(t, w, func(ev watch.Event) bool { return ev.Type == watch.Deleted })
	if evs[0].Type != watch.Modified || evs[0].Object.(*v1.Namespace).Status.Phase != v1.NamespaceTerminating {
		t.Errorf("first event %s %v, want MODIFIED to Terminating", evs[0].Type, evs[0].Object.(*v1.Namespace).Status.Phase)
	}
	// The name is free again.
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("recreate namespace: %v", err)
	}
}

// lenOr is the length of a list, or err.
func lenOr(l runtime.Object, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return meta.LenList(l), nil
}
