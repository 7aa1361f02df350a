package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

const holdFinalizer = "example.com/hold"

// TestFinalizers: an object with finalizers stays, marked with a
// deletionTimestamp, until its finalizers are removed; then it is gone.
func TestFinalizers(t *testing.T) {
	ns := newNamespace(t)

	t.Run("lease", func(t *testing.T) {
		leases := cs.CoordinationV1().Leases(ns)
		l := newLease("held", nil)
		l.Finalizers = []string{holdFinalizer}
		created, err := leases.Create(t.Context(), l, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := leases.Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=held", ResourceVersion: created.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()

		// DELETE answers the object, still there, marked.
		r := doRaw(t, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/held", nil)
		if r.Code != 200 {
			t.Fatalf("delete: %d %s", r.Code, r.Body)
		}
		var answered coordinationv1.Lease
		if err := json.Unmarshal(r.Body, &answered); err != nil || answered.Kind != "Lease" || answered.DeletionTimestamp == nil {
			t.Fatalf("delete of an object with finalizers answered %s, want the marked Lease", r.Body)
		}
		got, err := leases.Get(t.Context(), "held", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("object with finalizers is gone after delete: %v", err)
		}
		if got.DeletionTimestamp == nil || got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 0 {
			t.Errorf("deletionTimestamp %v deletionGracePeriodSeconds %v, want set and 0", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
		}
		// A second delete changes nothing.
		if err := leases.Delete(t.Context(), "held", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		again, err := leases.Get(t.Context(), "held", metav1.GetOptions{})
		if err != nil || again.ResourceVersion != got.ResourceVersion {
			t.Errorf("second delete: %v, rv %s (was %s)", err, again.ResourceVersion, got.ResourceVersion)
		}
		// No new finalizer may be added now.
		add := again.DeepCopy()
		add.Finalizers = append(add.Finalizers, "example.com/another")
		_, err = leases.Update(t.Context(), add, metav1.UpdateOptions{})
		st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"metadata.finalizers": metav1.CauseTypeForbidden})
		// Other updates still work.
		again.Labels = map[string]string{"still": "here"}
		again, err = leases.Update(t.Context(), again, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update while terminating: %v", err)
		}
		// Removing the last finalizer removes the object.
		again.Finalizers = nil
		if _, err := leases.Update(t.Context(), again, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Get(t.Context(), "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get after removing the finalizers: %v, want NotFound", err)
		}
		evs := collectEvents(t, w, func(ev watch.Event) bool { return ev.Type == watch.Deleted })
		checkEventOrder(t, append([]watch.Event{{Type: watch.Added, Object: created}}, evs...), false)
	})

	t.Run("pdb generation", func(t *testing.T) {
		pdbs := cs.PolicyV1().PodDisruptionBudgets(ns)
		p := newPDB("held", nil)
		p.Finalizers = []string{holdFinalizer}
		created, err := pdbs.Create(t.Context(), p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := pdbs.Delete(t.Context(), "held", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := pdbs.Get(t.Context(), "held", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// kube bumps a generation-tracking object's generation when it
		// sets deletionTimestamp.
		if got.DeletionTimestamp == nil || got.Generation != created.Generation+1 {
			t.Errorf("generation %d (was %d), deletionTimestamp %v", got.Generation, created.Generation, got.DeletionTimestamp)
		}
		_, err = pdbs.Patch(t.Context(), "held", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pdbs.Get(t.Context(), "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get after patching the finalizers away: %v, want NotFound", err)
		}
	})

	t.Run("node and pod", func(t *testing.T) {
		node := newNode(uniqueName(t, "held"), nil)
		node.Finalizers = []string{holdFinalizer}
		if _, err := cs.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := newPod("held", nil)
		pod.Finalizers = []string{holdFinalizer}
		if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().Nodes().Delete(t.Context(), node.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().Pods(ns).Delete(t.Context(), "held", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		n, err := cs.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{})
		if err != nil || n.DeletionTimestamp == nil {
			t.Fatalf("node: %v, deletionTimestamp %v", err, n.DeletionTimestamp)
		}
		p, err := cs.CoreV1().Pods(ns).Get(t.Context(), "held", metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp == nil {
			t.Fatalf("pod: %v, deletionTimestamp %v", err, p.DeletionTimestamp)
		}
		// Strategic merge patch with $deleteFromPrimitiveList / a merge
		// patch to null: both clear the finalizers.
		if _, err := cs.CoreV1().Nodes().Patch(t.Context(), node.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Pods(ns).Patch(t.Context(), "held", types.StrategicMergePatchType,
			[]byte(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["`+holdFinalizer+`"]}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("node: %v, want NotFound", err)
		}
		if _, err := cs.CoreV1().Pods(ns).Get(t.Context(), "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("pod: %v, want NotFound", err)
		}
	})

	t.Run("dry run keeps it unmarked", func(t *testing.T) {
		leases := cs.CoordinationV1().Leases(ns)
		l := newLease("dry", nil)
		l.Finalizers = []string{holdFinalizer}
		created, err := leases.Create(t.Context(), l, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := leases.Delete(t.Context(), "dry", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		got, err := leases.Get(t.Context(), "dry", metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp != nil || got.ResourceVersion != created.ResourceVersion {
			t.Errorf("dry-run delete changed the object: %v %v", err, got.DeletionTimestamp)
		}
	})
}

// TestDeleteResponses: a delete that removes the object answers a Success
// Status (the deleted object for pods), as kube does.
func TestDeleteResponses(t *testing.T) {
	ns := newNamespace(t)
	lease, err := cs.CoordinationV1().Leases(ns).Create(t.Context(), newLease("gone", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := doRaw(t, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/gone", nil)
	if r.Code != 200 {
		t.Fatalf("%d %s", r.Code, r.Body)
	}
	var st metav1.Status
	if err := json.Unmarshal(r.Body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusSuccess || st.Details == nil ||
		st.Details.Name != "gone" || st.Details.Group != "coordination.k8s.io" || st.Details.Kind != "leases" || st.Details.UID != lease.UID {
		t.Errorf("delete answered %s", r.Body)
	}

	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod("gp1", map[string]string{"app": "gold"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = doRaw(t, "DELETE", "/api/v1/namespaces/"+ns+"/pods/gp1", nil)
	var pod v1.Pod
	if err := json.Unmarshal(r.Body, &pod); err != nil || r.Code != 200 {
		t.Fatalf("%d %s", r.Code, r.Body)
	}
	// As 200-delete-pod.json: the pod, with the deletionTimestamp set by the
	// graceful (here immediate) deletion.
	if pod.Kind != "Pod" || pod.APIVersion != "v1" || pod.Name != "gp1" || pod.DeletionTimestamp == nil ||
		pod.DeletionGracePeriodSeconds == nil || *pod.DeletionGracePeriodSeconds != 0 {
		t.Errorf("pod delete answered %s", r.Body)
	}
}

// TestDeletePreconditions: uid and resourceVersion preconditions are
// 409 Conflicts worded as kube words them.
func TestDeletePreconditions(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	pod, err := pods.Create(t.Context(), newPod("pre", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wrongUID := types.UID("00000000-0000-0000-0000-000000000000")
	err = pods.Delete(t.Context(), "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}})
	st := checkStatusErr(t, err, 409, metav1.StatusReasonConflict, fmt.Sprintf(
		`Operation cannot be fulfilled on Pod "pre": the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated`,
		wrongUID, pod.UID))
	if st.Details == nil || st.Details.Name != "pre" || st.Details.Kind != "Pod" {
		t.Errorf("details %+v", st.Details)
	}
	err = pods.Delete(t.Context(), "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr("1")}})
	checkStatusErr(t, err, 409, metav1.StatusReasonConflict, fmt.Sprintf(
		`Operation cannot be fulfilled on Pod "pre": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (%s). The object might have been modified`,
		pod.ResourceVersion))
	if _, err := pods.Get(t.Context(), "pre", metav1.GetOptions{}); err != nil {
		t.Fatalf("a failed precondition deleted the pod: %v", err)
	}
	// The group is in the resource of the message for grouped kinds.
	pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), newPDB("pre", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = cs.PolicyV1().PodDisruptionBudgets(ns).Delete(t.Context(), "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}})
	st = checkStatusErr(t, err, 409, metav1.StatusReasonConflict, fmt.Sprintf(
		`Operation cannot be fulfilled on PodDisruptionBudget.policy "pre": the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated`,
		wrongUID, pdb.UID))
	if st.Details == nil || st.Details.Group != "policy" || st.Details.Kind != "PodDisruptionBudget" {
		t.Errorf("details %+v", st.Details)
	}

	// Matching preconditions delete.
	err = pods.Delete(t.Context(), "pre", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion}})
	if err != nil {
		t.Fatalf("delete with matching preconditions: %v", err)
	}
	if _, err := pods.Get(t.Context(), "pre", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get: %v, want NotFound", err)
	}

	// Namespaces word it as kube's namespace storage does.
	nsObj, err := cs.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = cs.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}})
	checkStatusErr(t, err, 409, metav1.StatusReasonConflict, fmt.Sprintf(
		`Operation cannot be fulfilled on namespaces %q: Precondition failed: UID in precondition: %s, UID in object meta: %s`, ns, wrongUID, nsObj.UID))
}

func TestDeleteOptionsValidation(t *testing.T) {
	ns := newNamespace(t)
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod("opts", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bogus := metav1.DeletionPropagation("Sideways")
	err := cs.CoreV1().Pods(ns).Delete(t.Context(), "opts", metav1.DeleteOptions{PropagationPolicy: &bogus})
	st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid,
		`DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sideways": supported values: "Foreground", "Background", "Orphan", "nil"`)
	checkCauses(t, st, map[string]metav1.CauseType{"propagationPolicy": metav1.CauseTypeFieldValueNotSupported})
	err = cs.CoreV1().Pods(ns).Delete(t.Context(), "opts", metav1.DeleteOptions{DryRun: []string{"Maybe"}})
	checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
	// Every valid propagation policy is accepted.
	for i, p := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan} {
		name := fmt.Sprintf("prop%d", i)
		if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{PropagationPolicy: &p}); err != nil {
			t.Errorf("propagationPolicy %s: %v", p, err)
		}
	}
	// DeleteOptions in the query work too.
	r := doRaw(t, "DELETE", "/api/v1/namespaces/"+ns+"/pods/opts?dryRun=All&gracePeriodSeconds=0&propagationPolicy=Background", nil)
	if r.Code != 200 {
		t.Errorf("query DeleteOptions: %d %s", r.Code, r.Body)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(t.Context(), "opts", metav1.GetOptions{}); err != nil {
		t.Errorf("dry-run query delete removed the pod: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "opts", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
