package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	coordinationv1ac "k8s.io/client-go/applyconfigurations/coordination/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
)

// The tests of this file drive server-side apply (PATCH with
// application/apply-patch+yaml) through raw HTTP and client-go's typed
// Apply and ApplyStatus, and check the objects, their managedFields and
// the errors against kube-apiserver v1.32's.

const applyPatchType = "application/apply-patch+yaml"

// applyRaw sends body as a server-side apply to path (with its query).
func applyRaw(t testing.TB, path, body string) rawResponse {
	t.Helper()
	return doRaw(t, "PATCH", path, []byte(body), "Content-Type", applyPatchType)
}

// decodeInto decodes a JSON answer into obj (a pointer, zeroed first so
// that nothing of an earlier answer stays), failing the test unless the
// answer has the HTTP status code.
func decodeInto(t testing.TB, r rawResponse, code int, obj any) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("HTTP %d, want %d: %s", r.Code, code, r.Body)
	}
	reflect.ValueOf(obj).Elem().SetZero()
	if err := json.Unmarshal(r.Body, obj); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// managedEntry returns the managedFields entry of manager for operation
// and subresource, or nil.
func managedEntry(entries []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType, subresource string) *metav1.ManagedFieldsEntry {
	for i, e := range entries {
		if e.Manager == manager && e.Operation == op && e.Subresource == subresource {
			return &entries[i]
		}
	}
	return nil
}

// mustEntry is managedEntry, failing the test when there is none or the
// entry is not a well-formed FieldsV1 entry of apiVersion. (Its time may
// be unset: kube's field manager renews a manager's time only when its
// apply changes the object.)
func mustEntry(t testing.TB, entries []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType, subresource, apiVersion string) *metav1.ManagedFieldsEntry {
	t.Helper()
	e := managedEntry(entries, manager, op, subresource)
	if e == nil {
		t.Fatalf("no managedFields entry for %s %s %q in %s", manager, op, subresource, managersOf(entries))
	}
	if e.APIVersion != apiVersion || e.FieldsType != "FieldsV1" || e.FieldsV1 == nil {
		t.Errorf("entry of %s: apiVersion %q fieldsType %q fieldsV1 %v, want %s FieldsV1",
			manager, e.APIVersion, e.FieldsType, e.FieldsV1, apiVersion)
	}
	return e
}

// managersOf lists entries as manager/operation/subresource, in order.
func managersOf(entries []metav1.ManagedFieldsEntry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
	}
	return out
}

// owns reports whether e's fieldsV1 holds the field at path, given as its
// fieldsV1 keys: owns(e, "f:metadata", "f:labels", "f:app").
func owns(t testing.TB, e *metav1.ManagedFieldsEntry, path ...string) bool {
	t.Helper()
	if e == nil || e.FieldsV1 == nil {
		return false
	}
	var m map[string]any
	if err := json.Unmarshal(e.FieldsV1.Raw, &m); err != nil {
		t.Fatalf("fieldsV1 of %s: %v", e.Manager, err)
	}
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			return false
		}
		m = next
	}
	return true
}

var labelApp = []string{"f:metadata", "f:labels", "f:app"}

func labelPath(name string) []string { return []string{"f:metadata", "f:labels", "f:" + name} }

// applyPod is the applied configuration of pod name with labels.
func applyPod(name, ns string, labels map[string]string) *corev1ac.PodApplyConfiguration {
	return corev1ac.Pod(name, ns).WithLabels(labels).
		WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("c").WithImage("busybox")))
}

// TestApplyPod: create (201), update, pruning, shared ownership, kube's
// conflicts (with Apply and Update managers) and force, on a pod.
func TestApplyPod(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	path := "/api/v1/namespaces/" + ns + "/pods/ap"
	ctx := t.Context()

	// A first apply creates: 201, one Apply entry owning exactly the
	// applied fields (no defaults, nothing admission added).
	var pod v1.Pod
	decodeInto(t, applyRaw(t, path+"?fieldManager=alice", `apiVersion: v1
kind: Pod
metadata:
  name: ap
  labels:
    app: web
    tier: front
spec:
  containers:
  - name: c
    image: busybox
`), http.StatusCreated, &pod)
	if pod.UID == "" || pod.Labels["app"] != "web" || pod.Spec.RestartPolicy != v1.RestartPolicyAlways || len(pod.Spec.Tolerations) != 2 {
		t.Errorf("created pod: uid %q labels %v restartPolicy %q tolerations %v", pod.UID, pod.Labels, pod.Spec.RestartPolicy, pod.Spec.Tolerations)
	}
	if len(pod.ManagedFields) != 1 {
		t.Fatalf("managedFields %s, want alice's Apply only", managersOf(pod.ManagedFields))
	}
	alice := mustEntry(t, pod.ManagedFields, "alice", metav1.ManagedFieldsOperationApply, "", "v1")
	if alice.Time == nil || alice.Time.IsZero() {
		t.Errorf("alice's entry has no time")
	}
	want := `{"f:metadata":{"f:labels":{"f:app":{},"f:tier":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{},"f:name":{}}}}}`
	if got := string(alice.FieldsV1.Raw); got != want {
		t.Errorf("alice's fieldsV1\n got  %s\n want %s", got, want)
	}

	// An update through client-go's typed Apply.
	out, err := pods.Apply(ctx, applyPod("ap", ns, map[string]string{"app": "web", "tier": "front", "extra": "1"}), metav1.ApplyOptions{FieldManager: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Labels["extra"] != "1" || len(out.ManagedFields) != 1 || !owns(t, &out.ManagedFields[0], labelPath("extra")...) {
		t.Errorf("after the second apply: labels %v managedFields %s", out.Labels, managersOf(out.ManagedFields))
	}

	// bob applies tier with the same value: both own it. (The object does
	// not change, so kube's field manager gives bob's entry no time.)
	out, err = pods.Apply(ctx, corev1ac.Pod("ap", ns).WithLabels(map[string]string{"tier": "front"}), metav1.ApplyOptions{FieldManager: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	bob := mustEntry(t, out.ManagedFields, "bob", metav1.ManagedFieldsOperationApply, "", "v1")
	if !owns(t, bob, labelPath("tier")...) || !owns(t, managedEntry(out.ManagedFields, "alice", metav1.ManagedFieldsOperationApply, ""), labelPath("tier")...) {
		t.Errorf("tier is not shared by alice and bob: %s", out.ManagedFields)
	}

	// alice applies without tier and extra: extra (hers alone) goes, tier
	// (bob's too) stays, now bob's alone.
	out, err = pods.Apply(ctx, applyPod("ap", ns, map[string]string{"app": "web"}), metav1.ApplyOptions{FieldManager: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Labels, map[string]string{"app": "web", "tier": "front"}) {
		t.Errorf("labels after alice dropped tier and extra: %v, want app and tier", out.Labels)
	}
	alice = mustEntry(t, out.ManagedFields, "alice", metav1.ManagedFieldsOperationApply, "", "v1")
	if owns(t, alice, labelPath("tier")...) || owns(t, alice, labelPath("extra")...) || !owns(t, alice, labelApp...) {
		t.Errorf("alice's fields after pruning: %s", alice.FieldsV1.Raw)
	}

	// carol applies another value of alice's field: kube's 409.
	r := applyRaw(t, path+"?fieldManager=carol", "metadata:\n  labels:\n    app: api\napiVersion: v1\nkind: Pod\n")
	checkApplyConflict(t, r, `Apply failed with 1 conflict: conflict with "alice": .metadata.labels.app`,
		metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "alice"`, Field: ".metadata.labels.app"})
	_, err = pods.Apply(ctx, corev1ac.Pod("ap", ns).WithLabels(map[string]string{"app": "api"}), metav1.ApplyOptions{FieldManager: "carol"})
	checkStatusErr(t, err, http.StatusConflict, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "alice": .metadata.labels.app`)

	// A field set by an update (operation Update) names its manager's
	// apiVersion in the conflict.
	if _, err := pods.Patch(ctx, "ap", types.MergePatchType, []byte(`{"metadata":{"labels":{"owner":"dave"}}}`), metav1.PatchOptions{FieldManager: "dave"}); err != nil {
		t.Fatal(err)
	}
	_, err = pods.Apply(ctx, corev1ac.Pod("ap", ns).WithLabels(map[string]string{"owner": "carol"}), metav1.ApplyOptions{FieldManager: "carol"})
	st := checkStatusErr(t, err, http.StatusConflict, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "dave" using v1: .metadata.labels.owner`)
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0] != (metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "dave" using v1`, Field: ".metadata.labels.owner"}) {
		t.Errorf("details %+v", st.Details)
	}

	// Two conflicts at once, with two managers.
	r = applyRaw(t, path+"?fieldManager=carol", `{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"app":"api","owner":"carol"}}}`)
	checkApplyConflict(t, r, "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .metadata.labels.app\nconflicts with \"dave\" using v1:\n- .metadata.labels.owner",
		metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "alice"`, Field: ".metadata.labels.app"},
		metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "dave" using v1`, Field: ".metadata.labels.owner"})

	// Force takes the fields over: carol owns them, alice and dave no more.
	out, err = pods.Apply(ctx, corev1ac.Pod("ap", ns).WithLabels(map[string]string{"app": "api", "owner": "carol"}), metav1.ApplyOptions{FieldManager: "carol", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	carol := mustEntry(t, out.ManagedFields, "carol", metav1.ManagedFieldsOperationApply, "", "v1")
	if out.Labels["app"] != "api" || out.Labels["owner"] != "carol" || !owns(t, carol, labelApp...) ||
		owns(t, managedEntry(out.ManagedFields, "alice", metav1.ManagedFieldsOperationApply, ""), labelApp...) {
		t.Errorf("after carol's forced apply: labels %v, managedFields %v", out.Labels, out.ManagedFields)
	}
	// dave owned nothing else: his entry is gone.
	if e := managedEntry(out.ManagedFields, "dave", metav1.ManagedFieldsOperationUpdate, ""); e != nil {
		t.Errorf("dave still has %s", e.FieldsV1.Raw)
	}
	// alice now conflicts with carol; force=yes is force as for kube's
	// query parameters (anything but false and 0). (Her configuration
	// keeps the container: she alone owns it, leaving it out would remove
	// it.)
	aliceConfig := "apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    app: web\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
	r = applyRaw(t, path+"?fieldManager=alice", aliceConfig)
	checkApplyConflict(t, r, `Apply failed with 1 conflict: conflict with "carol": .metadata.labels.app`,
		metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "carol"`, Field: ".metadata.labels.app"})
	decodeInto(t, applyRaw(t, path+"?fieldManager=alice&force=yes", aliceConfig), http.StatusOK, &pod)
	if pod.Labels["app"] != "web" || owns(t, managedEntry(pod.ManagedFields, "carol", metav1.ManagedFieldsOperationApply, ""), labelApp...) {
		t.Errorf("after alice's forced apply: labels %v managedFields %s", pod.Labels, managersOf(pod.ManagedFields))
	}
}

// checkApplyConflict checks r is kube's apply conflict: 409 Conflict with
// message and exactly causes (in any order: structured-merge-diff's
// order varies), no name or kind in the details.
func checkApplyConflict(t testing.TB, r rawResponse, message string, causes ...metav1.StatusCause) {
	t.Helper()
	var st metav1.Status
	decodeInto(t, r, http.StatusConflict, &st)
	if st.Details != nil {
		sort.Slice(st.Details.Causes, func(i, j int) bool { return st.Details.Causes[i].Field < st.Details.Causes[j].Field })
	}
	want := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: message, Reason: metav1.StatusReasonConflict,
		Details: &metav1.StatusDetails{Causes: causes}, Code: http.StatusConflict,
	}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("conflict\n got  %+v %+v\n want %+v %+v", st, st.Details, want, want.Details)
	}
}

// TestApplyLeasePDBNodeNamespace: typed Apply of other kinds, namespaced
// and cluster-scoped.
func TestApplyLeasePDBNodeNamespace(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()

	t.Run("Lease", func(t *testing.T) {
		leases := cs.CoordinationV1().Leases(ns)
		var l map[string]any
		decodeInto(t, applyRaw(t, "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/l1?fieldManager=m1",
			"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: l1\nspec:\n  holderIdentity: a\n  leaseDurationSeconds: 10\n"),
			http.StatusCreated, &l)
		out, err := leases.Apply(ctx, coordinationv1ac.Lease("l1", ns).WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("a")), metav1.ApplyOptions{FieldManager: "m1"})
		if err != nil {
			t.Fatal(err)
		}
		if out.Spec.HolderIdentity == nil || *out.Spec.HolderIdentity != "a" || out.Spec.LeaseDurationSeconds != nil {
			t.Errorf("lease spec after pruning leaseDurationSeconds: %+v", out.Spec)
		}
		e := mustEntry(t, out.ManagedFields, "m1", metav1.ManagedFieldsOperationApply, "", "coordination.k8s.io/v1")
		if string(e.FieldsV1.Raw) != `{"f:spec":{"f:holderIdentity":{}}}` {
			t.Errorf("m1's fields %s", e.FieldsV1.Raw)
		}
		_, err = leases.Apply(ctx, coordinationv1ac.Lease("l1", ns).WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("b")), metav1.ApplyOptions{FieldManager: "m2"})
		checkStatusErr(t, err, http.StatusConflict, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "m1": .spec.holderIdentity`)
	})

	t.Run("PodDisruptionBudget", func(t *testing.T) {
		pdbs := cs.PolicyV1().PodDisruptionBudgets(ns)
		selector := metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": "web"})
		out, err := pdbs.Apply(ctx, policyv1ac.PodDisruptionBudget("pdb", ns).
			WithSpec(policyv1ac.PodDisruptionBudgetSpec().WithMinAvailable(intstr.FromInt32(1)).WithSelector(selector)),
			metav1.ApplyOptions{FieldManager: "m1"})
		if err != nil {
			t.Fatal(err)
		}
		if out.Generation != 1 || out.Spec.MinAvailable == nil {
			t.Errorf("created pdb: generation %d spec %+v", out.Generation, out.Spec)
		}
		// minAvailable pruned, maxUnavailable added: valid again (both is
		// invalid), the generation moves.
		out, err = pdbs.Apply(ctx, policyv1ac.PodDisruptionBudget("pdb", ns).
			WithSpec(policyv1ac.PodDisruptionBudgetSpec().WithMaxUnavailable(intstr.FromInt32(1)).WithSelector(selector)),
			metav1.ApplyOptions{FieldManager: "m1"})
		if err != nil {
			t.Fatal(err)
		}
		if out.Spec.MinAvailable != nil || out.Spec.MaxUnavailable == nil || out.Generation != 2 {
			t.Errorf("pdb after switching to maxUnavailable: generation %d spec %+v", out.Generation, out.Spec)
		}
		e := mustEntry(t, out.ManagedFields, "m1", metav1.ManagedFieldsOperationApply, "", "policy/v1")
		// The selector is an atomic struct (x-kubernetes-map-type):
		// owned as a whole.
		if string(e.FieldsV1.Raw) != `{"f:spec":{"f:maxUnavailable":{},"f:selector":{}}}` {
			t.Errorf("m1's fields %s", e.FieldsV1.Raw)
		}
	})

	t.Run("Node", func(t *testing.T) {
		nodes := cs.CoreV1().Nodes()
		name := uniqueName(t, "n")
		t.Cleanup(func() { _ = nodes.Delete(ctx, name, metav1.DeleteOptions{}) })
		var node v1.Node
		decodeInto(t, applyRaw(t, "/api/v1/nodes/"+name+"?fieldManager=m1",
			`{"apiVersion":"v1","kind":"Node","metadata":{"name":"`+name+`","labels":{"zone":"a","rack":"1"}}}`), http.StatusCreated, &node)
		mustEntry(t, node.ManagedFields, "m1", metav1.ManagedFieldsOperationApply, "", "v1")
		out, err := nodes.Apply(ctx, corev1ac.Node(name).WithLabels(map[string]string{"zone": "b"}), metav1.ApplyOptions{FieldManager: "m1"})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(out.Labels, map[string]string{"zone": "b"}) || out.ResourceVersion == node.ResourceVersion {
			t.Errorf("node after the second apply: labels %v rv %s (was %s)", out.Labels, out.ResourceVersion, node.ResourceVersion)
		}
	})

	t.Run("Namespace", func(t *testing.T) {
		namespaces := cs.CoreV1().Namespaces()
		name := uniqueName(t, "ns")
		t.Cleanup(func() { _ = namespaces.Delete(ctx, name, metav1.DeleteOptions{}) })
		out, err := namespaces.Apply(ctx, corev1ac.Namespace(name).WithLabels(map[string]string{"team": "a"}), metav1.ApplyOptions{FieldManager: "m1"})
		if err != nil {
			t.Fatal(err)
		}
		// kube's strategy adds kubernetes.io/metadata.name after the field
		// manager ran: nobody owns it, and it is there.
		e := mustEntry(t, out.ManagedFields, "m1", metav1.ManagedFieldsOperationApply, "", "v1")
		if out.Labels["team"] != "a" || out.Labels[v1.LabelMetadataName] != name || string(e.FieldsV1.Raw) != `{"f:metadata":{"f:labels":{"f:team":{}}}}` {
			t.Errorf("namespace labels %v, m1's fields %s", out.Labels, e.FieldsV1.Raw)
		}
		out, err = namespaces.Apply(ctx, corev1ac.Namespace(name).WithLabels(map[string]string{"team": "b"}), metav1.ApplyOptions{FieldManager: "m1"})
		if err != nil || out.Labels["team"] != "b" || out.Labels[v1.LabelMetadataName] != name {
			t.Errorf("second apply: %v, labels %v", err, out.Labels)
		}
	})
}

// TestApplyStatus: ApplyStatus records its own entry (subresource
// status); spec fields in it are neither applied nor owned.
func TestApplyStatus(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()

	t.Run("Pod", func(t *testing.T) {
		pods := cs.CoreV1().Pods(ns)
		if _, err := pods.Apply(ctx, applyPod("st", ns, map[string]string{"app": "web"}), metav1.ApplyOptions{FieldManager: "spec-mgr"}); err != nil {
			t.Fatal(err)
		}
		// The status apply also sends a spec field: it is neither applied
		// nor owned.
		cond := corev1ac.PodCondition().WithType("example.com/Ready").WithStatus(v1.ConditionTrue)
		out, err := pods.ApplyStatus(ctx, corev1ac.Pod("st", ns).
			WithSpec(corev1ac.PodSpec().WithActiveDeadlineSeconds(30)).
			WithStatus(corev1ac.PodStatus().WithConditions(cond)), metav1.ApplyOptions{FieldManager: "status-mgr"})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Status.Conditions) != 1 || out.Status.Conditions[0].Type != "example.com/Ready" || out.Spec.ActiveDeadlineSeconds != nil {
			t.Errorf("after the status apply: conditions %+v activeDeadlineSeconds %v", out.Status.Conditions, out.Spec.ActiveDeadlineSeconds)
		}
		st := mustEntry(t, out.ManagedFields, "status-mgr", metav1.ManagedFieldsOperationApply, "status", "v1")
		if !owns(t, st, "f:status", "f:conditions", `k:{"type":"example.com/Ready"}`, "f:status") || owns(t, st, "f:spec") {
			t.Errorf("status-mgr's fields %s", st.FieldsV1.Raw)
		}
		mustEntry(t, out.ManagedFields, "spec-mgr", metav1.ManagedFieldsOperationApply, "", "v1")
		if len(out.ManagedFields) != 2 {
			t.Errorf("managedFields %s, want spec-mgr's and status-mgr's", managersOf(out.ManagedFields))
		}
		// The same manager applying the spec through the main resource
		// has an entry of its own; the status entry is kept.
		out, err = pods.Apply(ctx, corev1ac.Pod("st", ns).WithLabels(map[string]string{"by": "status-mgr"}), metav1.ApplyOptions{FieldManager: "status-mgr"})
		if err != nil {
			t.Fatal(err)
		}
		mustEntry(t, out.ManagedFields, "status-mgr", metav1.ManagedFieldsOperationApply, "", "v1")
		mustEntry(t, out.ManagedFields, "status-mgr", metav1.ManagedFieldsOperationApply, "status", "v1")
		// A status apply dropping the condition removes it.
		out, err = pods.ApplyStatus(ctx, corev1ac.Pod("st", ns).WithStatus(corev1ac.PodStatus().WithMessage("hello")), metav1.ApplyOptions{FieldManager: "status-mgr"})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Status.Conditions) != 0 || out.Status.Message != "hello" {
			t.Errorf("status after the second status apply: %+v", out.Status)
		}
		// An apply to the status of a missing pod is a 404, not a create.
		_, err = pods.ApplyStatus(ctx, corev1ac.Pod("missing", ns).WithStatus(corev1ac.PodStatus().WithMessage("x")), metav1.ApplyOptions{FieldManager: "status-mgr"})
		checkStatusErr(t, err, http.StatusNotFound, metav1.StatusReasonNotFound, `pods "missing" not found`)
	})

	t.Run("PodDisruptionBudget", func(t *testing.T) {
		pdbs := cs.PolicyV1().PodDisruptionBudgets(ns)
		if _, err := pdbs.Create(ctx, newPDB("pdb", nil), metav1.CreateOptions{FieldManager: "creator"}); err != nil {
			t.Fatal(err)
		}
		out, err := pdbs.ApplyStatus(ctx, policyv1ac.PodDisruptionBudget("pdb", ns).
			WithSpec(policyv1ac.PodDisruptionBudgetSpec().WithMinAvailable(intstr.FromInt32(5))).
			WithStatus(policyv1ac.PodDisruptionBudgetStatus().WithObservedGeneration(1).WithDesiredHealthy(1).WithExpectedPods(1)),
			metav1.ApplyOptions{FieldManager: "disruption", Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status.ObservedGeneration != 1 || out.Status.DesiredHealthy != 1 || out.Spec.MinAvailable.IntValue() != 1 || out.Generation != 1 {
			t.Errorf("after the status apply: generation %d spec %+v status %+v", out.Generation, out.Spec, out.Status)
		}
		e := mustEntry(t, out.ManagedFields, "disruption", metav1.ManagedFieldsOperationApply, "status", "policy/v1")
		if !owns(t, e, "f:status", "f:observedGeneration") || owns(t, e, "f:spec") {
			t.Errorf("disruption's fields %s", e.FieldsV1.Raw)
		}
		creator := mustEntry(t, out.ManagedFields, "creator", metav1.ManagedFieldsOperationUpdate, "", "policy/v1")
		if !owns(t, creator, "f:spec", "f:minAvailable") {
			t.Errorf("creator's fields %s", creator.FieldsV1.Raw)
		}
		// The spec manager's apply does not touch the status.
		var pdb policyv1.PodDisruptionBudget
		decodeInto(t, doRaw(t, "GET", "/apis/policy/v1/namespaces/"+ns+"/poddisruptionbudgets/pdb", nil), http.StatusOK, &pdb)
		if pdb.Status.DesiredHealthy != 1 || len(pdb.ManagedFields) != 2 {
			t.Errorf("GET after the status apply: status %+v managedFields %s", pdb.Status, managersOf(pdb.ManagedFields))
		}
	})
}

// TestApplyDryRun: dryRun=All answers the merged object and stores
// nothing, creating or not.
func TestApplyDryRun(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	ctx := t.Context()

	// A dry-run apply that would create answers 201 with the object and
	// stores nothing.
	var pod v1.Pod
	decodeInto(t, applyRaw(t, "/api/v1/namespaces/"+ns+"/pods/dry?fieldManager=m&dryRun=All",
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: dry\nspec:\n  containers:\n  - name: c\n    image: busybox\n"), http.StatusCreated, &pod)
	// As kube's dry-run create (201-create-pod-dry-run): a uid and a
	// creation time, no resourceVersion.
	if pod.Name != "dry" || pod.UID == "" || pod.CreationTimestamp.IsZero() || pod.ResourceVersion != "" || len(pod.ManagedFields) != 1 {
		t.Errorf("dry-run create: name %q uid %q created %v rv %q managedFields %s", pod.Name, pod.UID, pod.CreationTimestamp, pod.ResourceVersion, managersOf(pod.ManagedFields))
	}
	_, err := pods.Get(ctx, "dry", metav1.GetOptions{})
	checkStatusErr(t, err, http.StatusNotFound, metav1.StatusReasonNotFound, `pods "dry" not found`)

	// On an existing object: the merged object, nothing stored.
	created, err := pods.Apply(ctx, applyPod("dry", ns, map[string]string{"app": "web"}), metav1.ApplyOptions{FieldManager: "m"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := pods.Apply(ctx, applyPod("dry", ns, map[string]string{"app": "api", "new": "1"}), metav1.ApplyOptions{FieldManager: "m", DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Labels["app"] != "api" || out.Labels["new"] != "1" || !owns(t, managedEntry(out.ManagedFields, "m", metav1.ManagedFieldsOperationApply, ""), labelPath("new")...) {
		t.Errorf("dry-run apply answered labels %v managedFields %v", out.Labels, out.ManagedFields)
	}
	got, err := pods.Get(ctx, "dry", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != created.ResourceVersion || got.Labels["app"] != "web" || owns(t, managedEntry(got.ManagedFields, "m", metav1.ManagedFieldsOperationApply, ""), labelPath("new")...) {
		t.Errorf("after the dry run: rv %s (was %s) labels %v", got.ResourceVersion, created.ResourceVersion, got.Labels)
	}
	// A dry-run conflict is still a conflict.
	_, err = pods.Apply(ctx, applyPod("dry", ns, map[string]string{"app": "x"}), metav1.ApplyOptions{FieldManager: "other", DryRun: []string{metav1.DryRunAll}})
	checkStatusErr(t, err, http.StatusConflict, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "m": .metadata.labels.app`)
}

// TestApplyNoOp: applying or updating to what is stored writes nothing,
// though the field manager renews its entry's time (kube's
// IgnoreManagedFieldsTimestampsTransformer).
func TestApplyNoOp(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	ctx := t.Context()
	first, err := pods.Apply(ctx, applyPod("noop", ns, map[string]string{"app": "web"}), metav1.ApplyOptions{FieldManager: "m"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := pods.Apply(ctx, applyPod("noop", ns, map[string]string{"app": "web"}), metav1.ApplyOptions{FieldManager: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != first.ResourceVersion || !reflect.DeepEqual(again.ManagedFields, first.ManagedFields) {
		t.Errorf("re-apply: rv %s (was %s), managedFields %v (were %v)", again.ResourceVersion, first.ResourceVersion, again.ManagedFields, first.ManagedFields)
	}
	// A PUT of the object as read (by another manager: it changes
	// nothing, so it records nothing).
	updated, err := pods.Update(ctx, again, metav1.UpdateOptions{FieldManager: "updater"})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion != first.ResourceVersion {
		t.Errorf("no-op update: rv %s, want %s; managedFields %s", updated.ResourceVersion, first.ResourceVersion, managersOf(updated.ManagedFields))
	}
	// The same for a patch that changes nothing.
	patched, err := pods.Patch(ctx, "noop", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"web"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.ResourceVersion != first.ResourceVersion {
		t.Errorf("no-op patch: rv %s, want %s; managedFields %s", patched.ResourceVersion, first.ResourceVersion, managersOf(patched.ManagedFields))
	}
}

// TestApplyErrors: kube's answers to applies it refuses (most come from
// apimachinery's field manager itself).
func TestApplyErrors(t *testing.T) {
	ns := newNamespace(t)
	path := "/api/v1/namespaces/" + ns + "/pods/"
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod("exists", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
	for _, tc := range []struct {
		name, path, body string
		code             int
		reason           metav1.StatusReason
		message          string
	}{{
		name: "wrong apiVersion", path: path + "e1?fieldManager=m",
		body:    "apiVersion: v2\nkind: Pod\nmetadata:\n  name: e1\n",
		code:    400,
		reason:  metav1.StatusReasonBadRequest,
		message: "invalid object type: /v2, Kind=Pod",
	}, {
		name: "wrong apiVersion on an existing object", path: path + "exists?fieldManager=m",
		body:    "apiVersion: apps/v1\nkind: Pod\nmetadata:\n  name: exists\n",
		code:    400,
		reason:  metav1.StatusReasonBadRequest,
		message: "invalid object type: apps/v1, Kind=Pod",
	}, {
		name: "no apiVersion", path: path + "e1?fieldManager=m",
		body:    "kind: Pod\nmetadata:\n  name: e1\n",
		code:    400,
		reason:  metav1.StatusReasonBadRequest,
		message: "invalid object type: /, Kind=Pod",
	}, {
		name: "unknown kind", path: path + "e1?fieldManager=m",
		body:    "apiVersion: v1\nkind: Pud\nmetadata:\n  name: e1\n",
		code:    400,
		reason:  metav1.StatusReasonBadRequest,
		message: "invalid object type: /v1, Kind=Pud",
	}, {
		name: "name mismatch", path: path + "e2?fieldManager=m",
		body:    strings.ReplaceAll(pod, "%s", "other"),
		code:    400,
		reason:  metav1.StatusReasonBadRequest,
		message: "the name of the object (other) does not match the name on the URL (e2)",
	}, {
		name: "namespace mismatch", path: path + "e2?fieldManager=m",
		body:    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: e2\n  namespace: elsewhere\n",
		code:    400,
		reason:  metav1.StatusReasonBadRequest,
		message: "the namespace of the provided object does not match the namespace sent on the request",
	}, {
		name: "unknown field", path: path + "e3?fieldManager=m",
		body: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: e3\nspec:\n  foo: bar\n",
		// kube's answer for a plain error: 500, no reason, the bare
		// message (its namespace is the patch's, here none).
		code:    500,
		reason:  metav1.StatusReasonUnknown,
		message: `failed to create typed patch object (/e3; /v1, Kind=Pod): .spec.foo: field not declared in schema`,
	}, {
		name: "unknown field on an existing object", path: path + "exists?fieldManager=m",
		body:    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: exists\n  namespace: " + ns + "\nspec:\n  containers:\n  - name: c\n    bar: 1\n",
		code:    500,
		reason:  metav1.StatusReasonUnknown,
		message: `failed to create typed patch object (` + ns + `/exists; /v1, Kind=Pod): .spec.containers[name="c"].bar: field not declared in schema`,
	}, {
		name: "managedFields in the patch", path: path + "exists?fieldManager=m",
		body:    `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"exists","managedFields":[{"manager":"x","operation":"Apply"}]}}`,
		code:    400,
		reason:  metav1.StatusReasonBadRequest,
		message: "metadata.managedFields must be nil",
	}, {
		name: "malformed YAML", path: path + "e4?fieldManager=m",
		body:    "apiVersion: v1\nkind: [Pod\n",
		code:    400,
		reason:  metav1.StatusReasonBadRequest,
		message: "error decoding YAML: error converting YAML to JSON: yaml: line 2: did not find expected ',' or ']'",
	}, {
		name: "duplicate key, strict", path: path + "e5?fieldManager=m&fieldValidation=Strict",
		body:    strings.ReplaceAll(pod, "%s", "e5") + "kind: Pod\n",
		code:    400,
		reason:  metav1.StatusReasonBadRequest,
		message: `error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:` + "\n" + `  line 9: key "kind" already set in map`,
	}, {
		name: "uid on create", path: path + "e6?fieldManager=m",
		body:    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: e6\n  uid: \"1234\"\nspec:\n  containers:\n  - name: c\n    image: busybox\n",
		code:    409,
		reason:  metav1.StatusReasonConflict,
		message: `Operation cannot be fulfilled on pods "e6": uid mismatch: the provided object specified uid 1234, and no existing object was found`,
	}, {
		// No uid precondition for a patch (only a PUT's body is one): the
		// update's validation refuses the immutable field.
		name: "uid mismatch", path: path + "exists?fieldManager=m",
		body:    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: exists\n  uid: abc\n",
		code:    422,
		reason:  metav1.StatusReasonInvalid,
		message: `Pod "exists" is invalid: metadata.uid: Invalid value: "abc": field is immutable`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := applyRaw(t, tc.path, tc.body)
			st := statusMap(t, r.Body)
			reason, _ := st["reason"].(string) // absent for kube's reasonless 500
			if r.Code != tc.code || reason != string(tc.reason) || st["message"] != tc.message {
				t.Errorf("got %d %v %q\nwant %d %s %q", r.Code, st["reason"], st["message"], tc.code, tc.reason, tc.message)
			}
		})
	}
	// The other patch types check the same.
	for _, ct := range []string{"application/merge-patch+json", "application/strategic-merge-patch+json"} {
		for _, c := range []struct {
			patch, reason, message string
			code                   int
		}{
			{`{"metadata":{"name":"renamed"}}`, "BadRequest", "the name of the object (renamed) does not match the name on the URL (exists)", 400},
			{`{"metadata":{"uid":"abc"}}`, "Invalid", `Pod "exists" is invalid: metadata.uid: Invalid value: "abc": field is immutable`, 422},
		} {
			r := doRaw(t, "PATCH", path+"exists", []byte(c.patch), "Content-Type", ct)
			if st := statusMap(t, r.Body); r.Code != c.code || st["reason"] != c.reason || st["message"] != c.message {
				t.Errorf("%s %s: %d %s", ct, c.patch, r.Code, r.Body)
			}
		}
	}
	r := doRaw(t, "PATCH", path+"exists", []byte(`[{"op":"remove","path":"/metadata/name"}]`), "Content-Type", "application/json-patch+json")
	if st := statusMap(t, r.Body); r.Code != 400 || st["message"] != "the name of the object () does not match the name on the URL (exists)" {
		t.Errorf("json patch removing the name: %d %s", r.Code, r.Body)
	}
	// A PUT's uid is a precondition: 409.
	existing, err := cs.CoreV1().Pods(ns).Get(t.Context(), "exists", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	existing.UID = "abc"
	_, err = cs.CoreV1().Pods(ns).Update(t.Context(), existing, metav1.UpdateOptions{})
	checkStatusErr(t, err, http.StatusConflict, metav1.StatusReasonConflict, "")

	// None of them created anything.
	list, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "pods after the failed applies", names(t, list), "exists")

	// A duplicate key without Strict is accepted (the last one wins);
	// Warn (the default) says why, one warning per problem without the
	// decoder's prefix (kube's parseYAMLWarnings).
	dup := strings.ReplaceAll(pod, "%s", "e5") + "kind: Pod\nmetadata:\n  name: e5\n"
	for _, query := range []string{"&fieldValidation=Warn", ""} {
		r := applyRaw(t, path+"e5?fieldManager=m"+query, dup)
		want := []string{`299 - "line 9: key \"kind\" already set in map"`, `299 - "line 11: key \"metadata\" already set in map"`}
		if r.Code != http.StatusCreated && r.Code != http.StatusOK || !reflect.DeepEqual(r.Header.Values("Warning"), want) {
			t.Errorf("Warn%s: %d %q, want %q", query, r.Code, r.Header.Values("Warning"), want)
		}
	}
	r = applyRaw(t, path+"e5?fieldManager=m&fieldValidation=Ignore", dup)
	if r.Code != http.StatusOK || len(r.Header.Values("Warning")) != 0 {
		t.Errorf("Ignore: %d %q", r.Code, r.Header.Values("Warning"))
	}
	// Strict checks the patch only once the merge succeeded: a conflict
	// is answered first, and a failed apply warns about nothing.
	conflicting := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: e5\n  labels:\n    a: b\n  labels:\n    a: c\n"
	if r := applyRaw(t, path+"e5?fieldManager=m2", conflicting); r.Code != http.StatusOK {
		t.Fatalf("m2's labels: %d %s", r.Code, r.Body)
	}
	for _, fv := range []string{"Strict", "Warn"} {
		r = applyRaw(t, path+"e5?fieldManager=other&fieldValidation="+fv, strings.ReplaceAll(conflicting, "a: c", "a: d"))
		if st := statusMap(t, r.Body); r.Code != http.StatusConflict || st["message"] != `Apply failed with 1 conflict: conflict with "m2": .metadata.labels.a` || len(r.Header.Values("Warning")) != 0 {
			t.Errorf("%s with a conflict: %d %q %s", fv, r.Code, r.Header.Values("Warning"), r.Body)
		}
	}
}

// TestApplyEveryResource: every served resource takes a server-side
// apply (201 creating, 200 updating) and records its manager.
func TestApplyEveryResource(t *testing.T) {
	ns := newNamespace(t)
	request := base64.StdEncoding.EncodeToString(csrRequest(t, "apply-test"))
	for _, tc := range []struct {
		resource, prefix, apiVersion, kind, rest string
		clusterScoped                            bool
	}{
		{"namespaces", "/api/v1", "v1", "Namespace", "", true},
		{"nodes", "/api/v1", "v1", "Node", "", true},
		{"pods", "/api/v1", "v1", "Pod", `"spec":{"containers":[{"name":"c","image":"busybox"}]}`, false},
		{"serviceaccounts", "/api/v1", "v1", "ServiceAccount", "", false},
		{"events", "/api/v1", "v1", "Event", `"involvedObject":{"kind":"Pod","name":"p","namespace":"` + ns + `","apiVersion":"v1"},"reason":"R","message":"M","type":"Normal","source":{"component":"apply-test"}`, false},
		{"leases", "/apis/coordination.k8s.io/v1", "coordination.k8s.io/v1", "Lease", `"spec":{"holderIdentity":"h"}`, false},
		{"poddisruptionbudgets", "/apis/policy/v1", "policy/v1", "PodDisruptionBudget", `"spec":{"minAvailable":1,"selector":{"matchLabels":{"app":"x"}}}`, false},
		{"roles", "/apis/rbac.authorization.k8s.io/v1", "rbac.authorization.k8s.io/v1", "Role", `"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]`, false},
		{"clusterroles", "/apis/rbac.authorization.k8s.io/v1", "rbac.authorization.k8s.io/v1", "ClusterRole", `"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]`, true},
		{"rolebindings", "/apis/rbac.authorization.k8s.io/v1", "rbac.authorization.k8s.io/v1", "RoleBinding", `"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"},"subjects":[{"kind":"User","name":"u","apiGroup":"rbac.authorization.k8s.io"}]`, false},
		{"clusterrolebindings", "/apis/rbac.authorization.k8s.io/v1", "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", `"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"r"},"subjects":[{"kind":"User","name":"u","apiGroup":"rbac.authorization.k8s.io"}]`, true},
		{"mutatingwebhookconfigurations", "/apis/admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "", true},
		{"validatingwebhookconfigurations", "/apis/admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", true},
		{"certificatesigningrequests", "/apis/certificates.k8s.io/v1", "certificates.k8s.io/v1", "CertificateSigningRequest", `"spec":{"request":"` + request + `","signerName":"example.com/apply-test","usages":["client auth"]}`, true},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			name := uniqueName(t, "a")
			path := tc.prefix + "/namespaces/" + ns + "/" + tc.resource + "/" + name
			if tc.clusterScoped {
				path = tc.prefix + "/" + tc.resource + "/" + name
				t.Cleanup(func() { doRaw(t, "DELETE", path, nil) })
			}
			body := func(label string) string {
				s := `{"apiVersion":"` + tc.apiVersion + `","kind":"` + tc.kind + `","metadata":{"name":"` + name + `","labels":{"l":"` + label + `"}}`
				if tc.rest != "" {
					s += "," + tc.rest
				}
				return s + "}"
			}
			var obj metav1.PartialObjectMetadata
			decodeInto(t, applyRaw(t, path+"?fieldManager=applier", body("1")), http.StatusCreated, &obj)
			e := mustEntry(t, obj.ManagedFields, "applier", metav1.ManagedFieldsOperationApply, "", tc.apiVersion)
			if !owns(t, e, labelPath("l")...) || len(obj.ManagedFields) != 1 || obj.UID == "" {
				t.Errorf("created: uid %q managedFields %v", obj.UID, obj.ManagedFields)
			}
			decodeInto(t, applyRaw(t, path+"?fieldManager=applier", body("2")), http.StatusOK, &obj)
			if obj.Labels["l"] != "2" || len(obj.ManagedFields) != 1 {
				t.Errorf("updated: labels %v managedFields %v", obj.Labels, managersOf(obj.ManagedFields))
			}
			// Another manager's different value conflicts.
			r := applyRaw(t, path+"?fieldManager=other", body("3"))
			if st := statusMap(t, r.Body); r.Code != http.StatusConflict || !strings.HasPrefix(st["message"].(string), `Apply failed with `) {
				t.Errorf("other manager: %d %s", r.Code, r.Body)
			}
		})
	}
}

// TestApplyListSemantics: lists merge as their schema says: containers
// by name, ports by containerPort and protocol (defaulted), conditions by
// type; tolerations are atomic.
func TestApplyListSemantics(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()

	t.Run("pod", func(t *testing.T) {
		var pod v1.Pod
		decodeInto(t, applyRaw(t, "/api/v1/namespaces/"+ns+"/pods/lists?fieldManager=m1", `apiVersion: v1
kind: Pod
metadata:
  name: lists
spec:
  containers:
  - name: c
    image: busybox
    ports:
    - containerPort: 80
    env:
    - name: A
      value: "1"
  tolerations:
  - key: a
    operator: Exists
`), http.StatusCreated, &pod)
		m1 := mustEntry(t, pod.ManagedFields, "m1", metav1.ManagedFieldsOperationApply, "", "v1")
		c := []string{"f:spec", "f:containers", `k:{"name":"c"}`}
		for _, path := range [][]string{
			append(c, "f:ports", `k:{"containerPort":80,"protocol":"TCP"}`, "f:containerPort"),
			append(c, "f:env", `k:{"name":"A"}`, "f:value"),
			{"f:spec", "f:tolerations"},
		} {
			if !owns(t, m1, path...) {
				t.Errorf("m1 does not own %v: %s", path, m1.FieldsV1.Raw)
			}
		}
		if !strings.Contains(string(m1.FieldsV1.Raw), `"f:tolerations":{}`) {
			t.Errorf("tolerations are not owned atomically: %s", m1.FieldsV1.Raw)
		}
		// Admission appended two tolerations to m1's atomic list; another
		// manager's list conflicts with it as a whole.
		_, err := cs.CoreV1().Pods(ns).Apply(ctx, corev1ac.Pod("lists", ns).WithSpec(corev1ac.PodSpec().
			WithTolerations(corev1ac.Toleration().WithKey("b").WithOperator(v1.TolerationOpExists))), metav1.ApplyOptions{FieldManager: "m2"})
		checkStatusErr(t, err, http.StatusConflict, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "m1": .spec.tolerations`)
		// The same container and port by another manager, same values:
		// shared, no conflict.
		out, err := cs.CoreV1().Pods(ns).Apply(ctx, corev1ac.Pod("lists", ns).WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("c").WithPorts(corev1ac.ContainerPort().WithContainerPort(80).WithProtocol(v1.ProtocolTCP)))),
			metav1.ApplyOptions{FieldManager: "m2"})
		if err != nil {
			t.Fatal(err)
		}
		m2 := mustEntry(t, out.ManagedFields, "m2", metav1.ManagedFieldsOperationApply, "", "v1")
		if !owns(t, m2, append(c, "f:ports", `k:{"containerPort":80,"protocol":"TCP"}`, "f:protocol")...) || owns(t, m2, append(c, "f:image")...) {
			t.Errorf("m2's fields %s", m2.FieldsV1.Raw)
		}
	})

	t.Run("node conditions", func(t *testing.T) {
		nodes := cs.CoreV1().Nodes()
		name := uniqueName(t, "n")
		if _, err := nodes.Create(ctx, newNode(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nodes.Delete(ctx, name, metav1.DeleteOptions{}) })
		cond := func(typ string) *corev1ac.NodeConditionApplyConfiguration {
			return corev1ac.NodeCondition().WithType(v1.NodeConditionType(typ)).WithStatus(v1.ConditionTrue).WithReason("R")
		}
		apply := func(manager string, conds ...*corev1ac.NodeConditionApplyConfiguration) *v1.Node {
			t.Helper()
			out, err := nodes.ApplyStatus(ctx, corev1ac.Node(name).WithStatus(corev1ac.NodeStatus().WithConditions(conds...)), metav1.ApplyOptions{FieldManager: manager})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		types := func(n *v1.Node) []string {
			var out []string
			for _, c := range n.Status.Conditions {
				out = append(out, string(c.Type))
			}
			return out
		}
		apply("kubelet", cond("Ready"), cond("MemoryPressure"))
		out := apply("npd", cond("KernelDeadlock"))
		if got := types(out); !reflect.DeepEqual(got, []string{"Ready", "MemoryPressure", "KernelDeadlock"}) {
			t.Errorf("conditions %v", got)
		}
		// kubelet drops MemoryPressure: only its own item goes.
		out = apply("kubelet", cond("Ready"))
		if got := types(out); !reflect.DeepEqual(got, []string{"Ready", "KernelDeadlock"}) {
			t.Errorf("conditions after kubelet dropped MemoryPressure: %v", got)
		}
		npd := mustEntry(t, out.ManagedFields, "npd", metav1.ManagedFieldsOperationApply, "status", "v1")
		if !owns(t, npd, "f:status", "f:conditions", `k:{"type":"KernelDeadlock"}`, "f:status") {
			t.Errorf("npd's fields %s", npd.FieldsV1.Raw)
		}
		// A status manager's field in a conflict names the subresource.
		_, err := nodes.ApplyStatus(ctx, corev1ac.Node(name).WithStatus(corev1ac.NodeStatus().WithConditions(
			corev1ac.NodeCondition().WithType("KernelDeadlock").WithStatus(v1.ConditionFalse))), metav1.ApplyOptions{FieldManager: "kubelet"})
		checkStatusErr(t, err, http.StatusConflict, metav1.StatusReasonConflict,
			`Apply failed with 1 conflict: conflict with "npd" with subresource "status": .status.conditions[type="KernelDeadlock"].status`)
		// An apply of the node itself does not touch the status (the
		// strategy resets it): no conflict, nothing changes there.
		out, err = nodes.Apply(ctx, corev1ac.Node(name).WithStatus(corev1ac.NodeStatus().WithConditions(
			corev1ac.NodeCondition().WithType("KernelDeadlock").WithStatus(v1.ConditionFalse))), metav1.ApplyOptions{FieldManager: "spec-applier"})
		if err != nil {
			t.Fatal(err)
		}
		if got := types(out); !reflect.DeepEqual(got, []string{"Ready", "KernelDeadlock"}) || out.Status.Conditions[1].Status != v1.ConditionTrue {
			t.Errorf("conditions after a main-resource apply of status: %+v", out.Status.Conditions)
		}
		if e := managedEntry(out.ManagedFields, "spec-applier", metav1.ManagedFieldsOperationApply, ""); owns(t, e, "f:status") {
			t.Errorf("spec-applier owns status: %s", e.FieldsV1.Raw)
		}
	})
}

// TestApplyAggregatedClusterRole: the ClusterRole aggregation controller
// applies (forced) the rules it computes as its own field manager, as
// kube's does: a client applying rules to an aggregated role then
// conflicts with it.
func TestApplyAggregatedClusterRole(t *testing.T) {
	ctx := t.Context()
	roles := cs.RbacV1().ClusterRoles()
	name := uniqueName(t, "agg")
	label := "example.com/aggregate-to-" + name
	t.Cleanup(func() {
		_ = roles.Delete(ctx, name, metav1.DeleteOptions{})
		_ = roles.Delete(ctx, name+"-part", metav1.DeleteOptions{})
	})
	aggregated := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"` + name + `"},` +
		`"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"` + label + `":"true"}}]}%s}`
	path := "/apis/rbac.authorization.k8s.io/v1/clusterroles/" + name + "?fieldManager=helm"
	if r := applyRaw(t, path, fmt.Sprintf(aggregated, `,"rules":[]`)); r.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Code, r.Body)
	}
	if _, err := roles.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-part", Labels: map[string]string{label: "true"}},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	eventually(t, 10*time.Second, "aggregated rules", func(ctx context.Context) (bool, error) {
		var err error
		role, err = roles.Get(ctx, name, metav1.GetOptions{})
		return err == nil && len(role.Rules) == 1, err
	})
	e := mustEntry(t, role.ManagedFields, "clusterrole-aggregation-controller", metav1.ManagedFieldsOperationApply, "", "rbac.authorization.k8s.io/v1")
	if string(e.FieldsV1.Raw) != `{"f:rules":{}}` {
		t.Errorf("the controller's fields %s", e.FieldsV1.Raw)
	}
	if owns(t, managedEntry(role.ManagedFields, "helm", metav1.ManagedFieldsOperationApply, ""), "f:rules") {
		t.Errorf("helm still owns the rules: %v", role.ManagedFields)
	}
	r := applyRaw(t, path, fmt.Sprintf(aggregated, `,"rules":[]`))
	checkApplyConflict(t, r, `Apply failed with 1 conflict: conflict with "clusterrole-aggregation-controller": .rules`,
		metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "clusterrole-aggregation-controller"`, Field: ".rules"})
	if r := applyRaw(t, path, fmt.Sprintf(aggregated, "")); r.Code != http.StatusOK {
		t.Errorf("apply without rules: %d %s", r.Code, r.Body)
	}
}

// TestApplyUpgradeFromClientSideApply: kubectl's migration of a
// client-side applied object: a server-side apply by "kubectl" may take
// the fields whose live value is still the last-applied-configuration's
// (no conflict with kubectl-client-side-apply), and keeps that annotation
// up to date; any other manager conflicts.
func TestApplyUpgradeFromClientSideApply(t *testing.T) {
	ns := newNamespace(t)
	const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
	create := func(name string) {
		t.Helper()
		config := `{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{},"labels":{"app":"web"},"name":"` + name + `","namespace":"` + ns + `"},"spec":{"containers":[{"image":"busybox","name":"c"}]}}`
		pod := newPod(name, map[string]string{"app": "web"})
		pod.Annotations = map[string]string{lastApplied: config + "\n"}
		if r := doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods?fieldManager=kubectl-client-side-apply", mustJSON(t, pod)); r.Code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.Code, r.Body)
		}
	}
	apply := func(name, manager string) rawResponse {
		t.Helper()
		return applyRaw(t, "/api/v1/namespaces/"+ns+"/pods/"+name+"?fieldManager="+manager,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"`+name+`","labels":{"app":"api"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
	}

	create("csa")
	var pod v1.Pod
	decodeInto(t, apply("csa", "kubectl"), http.StatusOK, &pod)
	want := `{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"app":"api"},"name":"csa"},"spec":{"containers":[{"image":"busybox","name":"c"}]}}` + "\n"
	if pod.Labels["app"] != "api" || pod.Annotations[lastApplied] != want {
		t.Errorf("after kubectl's server-side apply: labels %v, last-applied\n got  %q\n want %q", pod.Labels, pod.Annotations[lastApplied], want)
	}
	kubectl := mustEntry(t, pod.ManagedFields, "kubectl", metav1.ManagedFieldsOperationApply, "", "v1")
	if !owns(t, kubectl, labelApp...) || owns(t, managedEntry(pod.ManagedFields, "kubectl-client-side-apply", metav1.ManagedFieldsOperationUpdate, ""), labelApp...) {
		t.Errorf("managedFields after the upgrade: %v", pod.ManagedFields)
	}

	// Another manager gets the conflict.
	create("csa2")
	checkApplyConflict(t, apply("csa2", "someone"), `Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .metadata.labels.app`,
		metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl-client-side-apply" using v1`, Field: ".metadata.labels.app"})

	// A field changed since the last client-side apply is a conflict for
	// kubectl too.
	create("csa3")
	if _, err := cs.CoreV1().Pods(ns).Patch(t.Context(), "csa3", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"edited"}}}`),
		metav1.PatchOptions{FieldManager: "kubectl-client-side-apply"}); err != nil {
		t.Fatal(err)
	}
	checkApplyConflict(t, apply("csa3", "kubectl"), `Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .metadata.labels.app`,
		metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "kubectl-client-side-apply" using v1`, Field: ".metadata.labels.app"})
}

// TestApplyCreateNeedsCreatePermission: a server-side apply (or a PUT)
// that creates needs the create permission besides patch (update), as
// kube's withAuthorization of the create asks; denied, a 403 with the
// authorizer's reason (none from RBAC).
func TestApplyCreateNeedsCreatePermission(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	name := uniqueName(t, "patcher")
	ucs, _, _ := userClients(t, name)
	grant := func(roleName string, verbs ...string) {
		t.Helper()
		if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: roleName},
			Rules: []rbacv1.PolicyRule{{Verbs: verbs, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: roleName},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	grant("lease-patcher", "get", "patch", "update")
	leases := ucs.CoordinationV1().Leases(ns)
	untilNoError(t, "the patcher's role", func() error {
		_, err := leases.List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) {
			// get only: list stays forbidden; a get of a missing lease
			// says when the binding arrived.
			_, err = leases.Get(ctx, "none", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
		}
		return err
	})

	config := coordinationv1ac.Lease("l1", ns).WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("a"))
	forbidden := `leases.coordination.k8s.io "l1" is forbidden: `
	_, err := leases.Apply(ctx, config, metav1.ApplyOptions{FieldManager: "m"})
	checkStatusErr(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, forbidden)
	_, err = leases.Apply(ctx, config, metav1.ApplyOptions{FieldManager: "m", DryRun: []string{metav1.DryRunAll}})
	checkStatusErr(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, forbidden)
	_, err = leases.Update(ctx, newLease("l1", nil), metav1.UpdateOptions{})
	checkStatusErr(t, err, http.StatusForbidden, metav1.StatusReasonForbidden, forbidden)
	if _, err := cs.CoordinationV1().Leases(ns).Get(ctx, "l1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the lease after the refused creates: %v", err)
	}

	// Once it exists, patch is enough.
	if _, err := cs.CoordinationV1().Leases(ns).Create(ctx, newLease("l1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Apply(ctx, config, metav1.ApplyOptions{FieldManager: "m", Force: true}); err != nil {
		t.Errorf("apply to an existing lease: %v", err)
	}
	// With create, the apply creates.
	grant("lease-creator", "create")
	untilNoError(t, "the creator's role", func() error {
		_, err := leases.Apply(ctx, coordinationv1ac.Lease("l2", ns).WithSpec(coordinationv1ac.LeaseSpec().WithHolderIdentity("a")), metav1.ApplyOptions{FieldManager: "m"})
		return err
	})
}
