package integration

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBindingPreconditionsAndCondition: a binding's uid and resourceVersion
// are preconditions (409 when stale), and binding replaces an
// Unschedulable PodScheduled condition whole, as kube does.
func TestBindingPreconditionsAndCondition(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	createPods(t, ns, nil, "p")
	pod, err := pods.Get(t.Context(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}
	pod, err = pods.UpdateStatus(t.Context(), pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "00000000-0000-0000-0000-000000000000"}, Target: v1.ObjectReference{Kind: "Node", Name: "n1"}}
	checkStatusErr(t, pods.Bind(t.Context(), stale, metav1.CreateOptions{}), 409, metav1.StatusReasonConflict, "")
	staleRV := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: pod.UID, ResourceVersion: "1"}, Target: v1.ObjectReference{Kind: "Node", Name: "n1"}}
	checkStatusErr(t, pods.Bind(t.Context(), staleRV, metav1.CreateOptions{}), 409, metav1.StatusReasonConflict, "")

	good := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: pod.UID, ResourceVersion: pod.ResourceVersion}, Target: v1.ObjectReference{Kind: "Node", Name: "n1"}}
	if err := pods.Bind(t.Context(), good, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bound, err := pods.Get(t.Context(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bound.Spec.NodeName != "n1" || len(bound.Status.Conditions) != 1 {
		t.Fatalf("bound pod: node %q conditions %+v", bound.Spec.NodeName, bound.Status.Conditions)
	}
	if c := bound.Status.Conditions[0]; c.Status != v1.ConditionTrue || c.Reason != "" || c.Message != "" {
		t.Errorf("PodScheduled after binding = %+v, want True with no reason or message", c)
	}
}
