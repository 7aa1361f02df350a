package intern

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func same(a, b any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestEqualValuesShared(t *testing.T) {
	l1, l2 := Labels(map[string]string{"app": "web", "tier": "x"}), Labels(map[string]string{"tier": "x", "app": "web"})
	if !same(l1, l2) {
		t.Error("equal label maps not shared")
	}
	if l3 := Labels(map[string]string{"app": "web", "tier": "y"}); same(l1, l3) || l3["tier"] != "y" {
		t.Errorf("different labels shared: %v", l3)
	}
	// Keys are length-prefixed: no two maps spell the same.
	if a, b := Labels(map[string]string{"a": "b1:c"}), Labels(map[string]string{"a1:b": "c"}); same(a, b) {
		t.Error("maps with different entries shared")
	}
	if Labels(map[string]string{}) != nil || Tolerations(nil) != nil || ResourceList(v1.ResourceList{}) != nil || OwnerReferences(nil) != nil {
		t.Error("empty values are not nil")
	}

	tol := func(secs *int64) []v1.Toleration {
		return []v1.Toleration{{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: secs}}
	}
	t1, t2 := Tolerations(tol(ptr.To[int64](300))), Tolerations(tol(ptr.To[int64](300)))
	if !same(t1, t2) {
		t.Error("equal tolerations not shared")
	}
	for _, other := range [][]v1.Toleration{tol(nil), tol(ptr.To[int64](0)), tol(ptr.To[int64](30))} {
		if got := Tolerations(other); same(got, t1) || !reflect.DeepEqual(got, other) {
			t.Errorf("tolerations %v became %v", other, got)
		}
	}

	r1 := ResourceList(v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")})
	r2 := ResourceList(v1.ResourceList{v1.ResourceCPU: resource.MustParse("0.1"), v1.ResourceMemory: resource.MustParse("64Mi")})
	if !same(r1, r2) {
		t.Error("equal quantities spelled apart not shared")
	}
	if r3 := ResourceList(v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")}); same(r1, r3) || r3.Cpu().MilliValue() != 200 {
		t.Errorf("different requests shared: %v", r3)
	}

	ref := func(controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "u1", Controller: ptr.To(controller)}}
	}
	if !same(OwnerReferences(ref(true)), OwnerReferences(ref(true))) || same(OwnerReferences(ref(true)), OwnerReferences(ref(false))) {
		t.Error("owner references shared wrongly")
	}
	if s := String("kube-system"); s != "kube-system" || String("") != "" {
		t.Errorf("String = %q", s)
	}
}

// TestTableBound: a full table forgets its values and keeps sharing the
// ones seen next.
func TestTableBound(t *testing.T) {
	tab := NewTable[*int](3)
	one := tab.Share("1", new(int))
	for i, k := range []string{"2", "3"} {
		tab.Share(k, new(int))
		if tab.Len() != i+2 {
			t.Fatalf("len %d", tab.Len())
		}
	}
	if got := tab.Share("1", new(int)); got != one {
		t.Error("a kept value was not shared")
	}
	four := tab.Share("4", new(int))
	if tab.Len() != 1 {
		t.Errorf("a full table kept %d values, want 1", tab.Len())
	}
	if got := tab.Share("4", new(int)); got != four {
		t.Error("the value kept after the reset was not shared")
	}
	if got := tab.Share("1", new(int)); got == one {
		t.Error("a forgotten value was shared")
	}
}
