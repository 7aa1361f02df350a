package pods

import (
	"encoding/json"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDecodeForAttrs: the attributes of the partial decode are those of
// the whole pod.
func TestDecodeForAttrs(t *testing.T) {
	s := NewStrategy()
	for name, pod := range map[string]*v1.Pod{
		"empty": {},
		"full": {
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "web", "tier": "x"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}},
			Spec: v1.PodSpec{NodeName: "n1", RestartPolicy: v1.RestartPolicyNever, SchedulerName: "s", ServiceAccountName: "sa", HostNetwork: true,
				Containers: []v1.Container{{Name: "c", Image: "i"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1", NominatedNodeName: "n2"},
		},
		"podIPs only": {Status: v1.PodStatus{PodIPs: []v1.PodIP{{IP: "10.0.0.2"}}}},
	} {
		data, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		partial, err := s.DecodeForAttrs(data)
		if err != nil {
			t.Fatal(err)
		}
		wantL, wantF, _ := s.GetAttrs(pod)
		gotL, gotF, err := s.GetAttrs(partial)
		if err != nil || !reflect.DeepEqual(gotL, wantL) || !reflect.DeepEqual(gotF, wantF) {
			t.Errorf("%s: got %v %v %v, want %v %v", name, gotL, gotF, err, wantL, wantF)
		}
	}
}
