package integration

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The main resource ignores status changes; /status ignores everything but
// the status (pods are in pods_test.go).

func TestNodeStatus(t *testing.T) {
	nodes := cs.CoreV1().Nodes()
	name := uniqueName(t, "n")
	node, err := nodes.Create(t.Context(), newNode(name, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nodes.Delete(t.Context(), name, metav1.DeleteOptions{}) })

	n := node.DeepCopy()
	n.Spec.Unschedulable = true
	n.Spec.PodCIDR = "10.244.1.0/24"
	n.Status.Capacity = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourcePods: resource.MustParse("110")}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}}
	out, err := nodes.UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.Unschedulable || out.Spec.PodCIDR != "" {
		t.Errorf("/status changed the spec: %+v", out.Spec)
	}
	if cpu := out.Status.Capacity[v1.ResourceCPU]; cpu.String() != "4" || len(out.Status.Conditions) != 1 {
		t.Errorf("status not stored: %+v", out.Status)
	}

	// The main resource: spec changes stick, status changes do not.
	out.Spec.Unschedulable = true
	out.Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}}
	out.Status.Conditions = nil
	out, err = nodes.Update(t.Context(), out, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Spec.Unschedulable || len(out.Spec.Taints) != 1 || len(out.Status.Conditions) != 1 {
		t.Errorf("main update: spec %+v conditions %v", out.Spec, out.Status.Conditions)
	}
	// Patch through /status.
	out, err = nodes.Patch(t.Context(), name, types.MergePatchType,
		[]byte(`{"spec":{"unschedulable":false},"status":{"nodeInfo":{"kubeletVersion":"v1.32.3"}}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if !out.Spec.Unschedulable || out.Status.NodeInfo.KubeletVersion != "v1.32.3" {
		t.Errorf("status patch: unschedulable %v kubeletVersion %q", out.Spec.Unschedulable, out.Status.NodeInfo.KubeletVersion)
	}
	list, err := nodes.List(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name + ",spec.unschedulable=true"})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "unschedulable", names(t, list), name)
}

func TestPDBGenerationAndStatus(t *testing.T) {
	ns := newNamespace(t)
	pdbs := cs.PolicyV1().PodDisruptionBudgets(ns)
	pdb, err := pdbs.Create(t.Context(), newPDB("budget", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Generation != 1 {
		t.Errorf("generation %d on create, want 1", pdb.Generation)
	}

	// A spec change bumps the generation.
	two := intstr.FromInt32(2)
	pdb.Spec.MinAvailable = &two
	pdb, err = pdbs.Update(t.Context(), pdb, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Generation != 2 {
		t.Errorf("generation %d after a spec update, want 2", pdb.Generation)
	}
	// So does a spec patch.
	pdb, err = pdbs.Patch(t.Context(), "budget", types.MergePatchType, []byte(`{"spec":{"minAvailable":"50%"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Generation != 3 {
		t.Errorf("generation %d after a spec patch, want 3", pdb.Generation)
	}
	// Metadata-only changes and no-op spec writes do not.
	pdb.Labels = map[string]string{"x": "y"}
	pdb, err = pdbs.Update(t.Context(), pdb, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Generation != 3 {
		t.Errorf("generation %d after a label update, want 3", pdb.Generation)
	}
	// A client cannot set the generation.
	pdb.Generation = 42
	pdb, err = pdbs.Update(t.Context(), pdb, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Generation != 3 {
		t.Errorf("generation %d after a client set it, want 3", pdb.Generation)
	}

	// The main resource ignores the status.
	pdb.Status.DisruptionsAllowed = 5
	pdb, err = pdbs.Update(t.Context(), pdb, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Status.DisruptionsAllowed != 0 {
		t.Errorf("main update wrote status.disruptionsAllowed %d", pdb.Status.DisruptionsAllowed)
	}

	// /status writes the status only, without a generation bump.
	p := pdb.DeepCopy()
	p.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: 3, DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3,
		Conditions: []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason,
			ObservedGeneration: 3, LastTransitionTime: metav1.Now()}},
	}
	one := intstr.FromInt32(1)
	p.Spec.MinAvailable = &one
	out, err := pdbs.UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.DisruptionsAllowed != 1 || out.Status.ObservedGeneration != 3 || len(out.Status.Conditions) != 1 {
		t.Errorf("status not stored: %+v", out.Status)
	}
	if out.Spec.MinAvailable.String() != "50%" || out.Generation != 3 {
		t.Errorf("/status changed spec or generation: minAvailable %s generation %d", out.Spec.MinAvailable.String(), out.Generation)
	}
	// Invalid status is refused.
	p = out.DeepCopy()
	p.Status.DisruptionsAllowed = -1
	_, err = pdbs.UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
	checkCauses(t, st, map[string]metav1.CauseType{"status.disruptionsAllowed": metav1.CauseTypeFieldValueInvalid})
}

func TestNamespaceStatus(t *testing.T) {
	name := newNamespace(t)
	namespaces := cs.CoreV1().Namespaces()
	ns, err := namespaces.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Status.Phase != v1.NamespaceActive || len(ns.Spec.Finalizers) != 1 || ns.Spec.Finalizers[0] != v1.FinalizerKubernetes {
		t.Errorf("new namespace: phase %s finalizers %v", ns.Status.Phase, ns.Spec.Finalizers)
	}
	if ns.Labels["kubernetes.io/metadata.name"] != name {
		t.Errorf("labels %v lack kubernetes.io/metadata.name", ns.Labels)
	}
	// Terminating without a deletionTimestamp is invalid.
	ns.Status.Phase = v1.NamespaceTerminating
	_, err = namespaces.UpdateStatus(t.Context(), ns, metav1.UpdateOptions{})
	st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
	checkCauses(t, st, map[string]metav1.CauseType{"status.Phase": metav1.CauseTypeFieldValueInvalid})
	// The main resource ignores status and spec.finalizers.
	ns.Spec.Finalizers = nil
	out, err := namespaces.Update(t.Context(), ns, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.Phase != v1.NamespaceActive || len(out.Spec.Finalizers) != 1 {
		t.Errorf("main update: phase %s finalizers %v", out.Status.Phase, out.Spec.Finalizers)
	}

	// A generated name gets its kubernetes.io/metadata.name label too.
	gen, err := namespaces.Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-ns-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if gen.Labels["kubernetes.io/metadata.name"] != gen.Name {
		t.Errorf("generated namespace %s has labels %v", gen.Name, gen.Labels)
	}
	// DELETE of a namespace answers the namespace, now Terminating.
	r := doRaw(t, "DELETE", "/api/v1/namespaces/"+gen.Name, nil)
	var deleted v1.Namespace
	if err := json.Unmarshal(r.Body, &deleted); err != nil || r.Code != 200 || deleted.Kind != "Namespace" ||
		deleted.Status.Phase != v1.NamespaceTerminating || deleted.DeletionTimestamp == nil {
		t.Errorf("namespace delete answered %d %s", r.Code, r.Body)
	}
}
