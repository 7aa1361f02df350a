package sharedinformers

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTransformPod(t *testing.T) {
	created := metav1.Unix(100, 0)
	deleted := metav1.Unix(200, 0)
	ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
	target := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI", LastTransitionTime: created}
	toleration := v1.Toleration{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", Labels: map[string]string{"app": "a"},
			Annotations: map[string]string{"big": "x"}, CreationTimestamp: created, DeletionTimestamp: &deleted,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}, OwnerReferences: []metav1.OwnerReference{{Name: "o"}},
		},
		Spec: v1.PodSpec{
			NodeName: "n", Tolerations: []v1.Toleration{toleration},
			Containers: []v1.Container{{Name: "c", Image: "nginx"}},
		},
		Status: v1.PodStatus{
			Phase: v1.PodFailed, Reason: "Evicted", Message: "gone", PodIP: "10.0.0.1",
			Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}, ready, target},
		},
	}
	want := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", Labels: map[string]string{"app": "a"},
			CreationTimestamp: created, DeletionTimestamp: &deleted,
		},
		Spec:   v1.PodSpec{NodeName: "n", Tolerations: []v1.Toleration{toleration}},
		Status: v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Conditions: []v1.PodCondition{ready, target}},
	}
	got, err := Transform(pod)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("Transform(pod) = %+v\nwant %+v", got, want)
	}
	again, err := Transform(got)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(again, want) {
		t.Errorf("Transform is not idempotent: %+v", again)
	}
}

func TestTransformKeepsNodesWhole(t *testing.T) {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Status:     v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"nginx"}}}, Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}},
	}
	want := node.DeepCopy()
	got, err := Transform(node)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("a node was changed: %+v", got)
	}
}

func TestTransformDropsManagedFields(t *testing.T) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	got, err := Transform(lease)
	if err != nil {
		t.Fatal(err)
	}
	if l := got.(*coordinationv1.Lease); l.ManagedFields != nil || l.Name != "n" {
		t.Errorf("lease = %+v", l)
	}
}
