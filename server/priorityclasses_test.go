package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/corekube/corekube/admission"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestPriorityClassSnapshotDefault(t *testing.T) {
	pc := func(name string, value int32, def bool) *schedulingv1.PriorityClass {
		return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: def}
	}
	s := newPriorityClassSnapshot([]*schedulingv1.PriorityClass{pc("a", 5, false), pc("b", 9, true), pc("c", 3, true), pc("d", 1, false)})
	if s.def == nil || s.def.Name != "c" {
		t.Fatalf("default %v, want c (the lowest of two defaults, as kube)", s.def)
	}
	if len(s.byName) != 4 || s.byName["d"].Value != 1 {
		t.Fatalf("byName %v", s.byName)
	}
	if s := newPriorityClassSnapshot(nil); s.def != nil {
		t.Fatalf("default %v with no class", s.def)
	}
}

// BenchmarkPriorityAdmit is the Priority plugin's cost per pod create with
// the server's class cache synced (20 classes): named class, and the
// default class looked up.
func BenchmarkPriorityAdmit(b *testing.B) {
	var classes []*schedulingv1.PriorityClass
	for i := range 20 {
		classes = append(classes, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("class-%d", i)},
			Value: int32(i), GlobalDefault: i == 7})
	}
	c := &priorityClassCache{}
	c.snap.Store(newPriorityClassSnapshot(classes))
	p := &admission.Priority{Get: c.get, Default: c.globalDefault}
	ctx := context.Background()
	for _, name := range []string{"class-3", ""} {
		b.Run("class="+name, func(b *testing.B) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			a := &admission.Attributes{Operation: admission.Create, Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Object: pod}
			b.ReportAllocs()
			for range b.N {
				// The plugin's own work: the same pod, as it came.
				pod.Spec.PriorityClassName, pod.Spec.Priority, pod.Spec.PreemptionPolicy = name, nil, nil
				if err := p.Admit(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
