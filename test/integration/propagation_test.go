package integration

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeletePropagation: a DELETE's propagationPolicy (or the deprecated
// orphanDependents) sets the garbage collector's finalizers, by kube's
// rules: options first, then the finalizers already set; the default
// (background) sets none. No garbage collector runs on this server, so the
// finalizers stay.
func TestDeletePropagation(t *testing.T) {
	ns := newNamespace(t)
	leases := cs.CoordinationV1().Leases(ns)
	policy := func(p metav1.DeletionPropagation) metav1.DeleteOptions {
		return metav1.DeleteOptions{PropagationPolicy: &p}
	}
	finalizers := func(t *testing.T, name string) []string {
		t.Helper()
		l, err := leases.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		if l.DeletionTimestamp == nil || l.DeletionGracePeriodSeconds == nil || *l.DeletionGracePeriodSeconds != 0 {
			t.Errorf("%s: deletionTimestamp %v grace %v, want set and 0", name, l.DeletionTimestamp, l.DeletionGracePeriodSeconds)
		}
		return l.Finalizers
	}
	release := func(t *testing.T, name string) {
		t.Helper()
		_, err := leases.Patch(context.Background(), name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("release %s: %v", name, err)
		}
	}

	t.Run("background deletes at once", func(t *testing.T) {
		if _, err := leases.Create(t.Context(), newLease("bg", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := leases.Delete(t.Context(), "bg", policy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Get(t.Context(), "bg", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after a background delete: %v, want NotFound", err)
		}
	})

	t.Run("foreground and orphan hold the object", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			opts metav1.DeleteOptions
			want string
		}{
			{"fg", policy(metav1.DeletePropagationForeground), metav1.FinalizerDeleteDependents},
			{"orphan", policy(metav1.DeletePropagationOrphan), metav1.FinalizerOrphanDependents},
			{"orphan-dependents", metav1.DeleteOptions{OrphanDependents: ptr(true)}, metav1.FinalizerOrphanDependents},
		} {
			if _, err := leases.Create(t.Context(), newLease(tc.name, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { release(t, tc.name) })
			if err := leases.Delete(t.Context(), tc.name, tc.opts); err != nil {
				t.Fatal(err)
			}
			if got := finalizers(t, tc.name); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("%s: finalizers %q, want [%s]", tc.name, got, tc.want)
			}
		}
	})

	t.Run("a later delete changes the policy", func(t *testing.T) {
		l := newLease("held", nil)
		l.Finalizers = []string{holdFinalizer}
		if _, err := leases.Create(t.Context(), l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { release(t, "held") })
		for _, step := range []struct {
			opts metav1.DeleteOptions
			want []string
		}{
			{policy(metav1.DeletePropagationForeground), []string{holdFinalizer, metav1.FinalizerDeleteDependents}},
			{metav1.DeleteOptions{}, []string{holdFinalizer, metav1.FinalizerDeleteDependents}}, // the finalizer set stays
			{policy(metav1.DeletePropagationOrphan), []string{holdFinalizer, metav1.FinalizerOrphanDependents}},
			{metav1.DeleteOptions{OrphanDependents: ptr(false)}, []string{holdFinalizer}},
		} {
			if err := leases.Delete(t.Context(), "held", step.opts); err != nil {
				t.Fatal(err)
			}
			if got := finalizers(t, "held"); !slices.Equal(got, step.want) {
				t.Errorf("after delete %+v: finalizers %q, want %q", step.opts, got, step.want)
			}
		}
	})

	t.Run("graceful pod", func(t *testing.T) {
		pods := cs.CoreV1().Pods(ns)
		p := newPod("fg-pod", nil)
		p.Spec.NodeName = "no-such-node" // graceful: 30s
		if _, err := pods.Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = pods.Patch(context.Background(), "fg-pod", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			_ = pods.Delete(context.Background(), "fg-pod", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		})
		if err := pods.Delete(t.Context(), "fg-pod", policy(metav1.DeletePropagationForeground)); err != nil {
			t.Fatal(err)
		}
		got, err := pods.Get(t.Context(), "fg-pod", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 30 || !slices.Equal(got.Finalizers, []string{metav1.FinalizerDeleteDependents}) {
			t.Errorf("grace %v finalizers %q, want 30 and [foregroundDeletion]", got.DeletionGracePeriodSeconds, got.Finalizers)
		}
		// Terminating gracefully: a delete that does not shorten the
		// period changes nothing, not even the finalizers.
		if err := pods.Delete(t.Context(), "fg-pod", policy(metav1.DeletePropagationOrphan)); err != nil {
			t.Fatal(err)
		}
		again, err := pods.Get(t.Context(), "fg-pod", metav1.GetOptions{})
		if err != nil || again.ResourceVersion != got.ResourceVersion {
			t.Errorf("second delete: %v, rv %s (was %s)", err, again.ResourceVersion, got.ResourceVersion)
		}
		// The kubelet's final delete (grace 0) leaves it to the finalizer.
		if err := pods.Delete(t.Context(), "fg-pod", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
			t.Fatal(err)
		}
		final, err := pods.Get(t.Context(), "fg-pod", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod with foregroundDeletion gone after the final delete: %v", err)
		}
		if *final.DeletionGracePeriodSeconds != 0 || !slices.Equal(final.Finalizers, []string{metav1.FinalizerDeleteDependents}) {
			t.Errorf("after the final delete: grace %v finalizers %q", *final.DeletionGracePeriodSeconds, final.Finalizers)
		}
	})

	t.Run("namespace", func(t *testing.T) {
		name := uniqueName(t, "gc-ns")
		if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Kube's namespace rules: orphanDependents=false is foreground.
		if err := cs.CoreV1().Namespaces().Delete(t.Context(), name, metav1.DeleteOptions{OrphanDependents: ptr(false)}); err != nil {
			t.Fatal(err)
		}
		got, err := cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Finalizers, []string{metav1.FinalizerDeleteDependents}) || got.Status.Phase != v1.NamespaceTerminating {
			t.Errorf("finalizers %q phase %s, want [foregroundDeletion] Terminating", got.Finalizers, got.Status.Phase)
		}
		// Once finalized (the namespace controller's step; none runs
		// here), the GC's finalizer holds it; removing that one deletes it.
		got.Spec.Finalizers = nil
		if _, err := cs.CoreV1().Namespaces().Finalize(t.Context(), got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			t.Fatalf("finalized namespace with foregroundDeletion: %v, want it kept", err)
		}
		if _, err := cs.CoreV1().Namespaces().Patch(t.Context(), name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace after its last finalizer went: %v, want NotFound", err)
		}
	})
}
