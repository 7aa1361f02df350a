package admission

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// priorityPlugin is a Priority reading the given classes.
func priorityPlugin(classes ...*schedulingv1.PriorityClass) *Priority {
	return &Priority{
		Get: func(_ context.Context, name string) (*schedulingv1.PriorityClass, error) {
			for _, pc := range classes {
				if pc.Name == name {
					return pc, nil
				}
			}
			return nil, apierrors.NewNotFound(priorityClassesResource, name)
		},
		Default: func(context.Context) (*schedulingv1.PriorityClass, error) {
			var def *schedulingv1.PriorityClass
			for _, pc := range classes {
				if pc.GlobalDefault && (def == nil || pc.Value < def.Value) {
					def = pc
				}
			}
			return def, nil
		},
	}
}

func priorityClass(name string, value int32, globalDefault bool, policy v1.PreemptionPolicy) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: globalDefault, PreemptionPolicy: &policy}
}

func podAttrs(op Operation, pod, old *v1.Pod) *Attributes {
	return &Attributes{Operation: op, Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: "ns", Name: pod.Name, Object: pod, OldObject: old}
}

func TestPriorityPods(t *testing.T) {
	high := priorityClass("high", 1000, false, v1.PreemptNever)
	def := priorityClass("def", 5, true, v1.PreemptLowerPriority)
	tests := []struct {
		name       string
		classes    []*schedulingv1.PriorityClass
		pod        func(*v1.PodSpec)
		wantErr    string
		wantClass  string
		wantValue  int32
		wantPolicy v1.PreemptionPolicy
	}{
		{"no class, no default", nil, nil, "", "", 0, v1.PreemptLowerPriority},
		{"no class, the default", []*schedulingv1.PriorityClass{high, def}, nil, "", "def", 5, v1.PreemptLowerPriority},
		{"the lowest of two defaults", []*schedulingv1.PriorityClass{priorityClass("def2", 9, true, v1.PreemptNever), def}, nil, "", "def", 5, v1.PreemptLowerPriority},
		{"named class", []*schedulingv1.PriorityClass{high, def}, func(s *v1.PodSpec) { s.PriorityClassName = "high" }, "", "high", 1000, v1.PreemptNever},
		{"unknown class", []*schedulingv1.PriorityClass{def}, func(s *v1.PodSpec) { s.PriorityClassName = "nope" },
			`pods "p" is forbidden: no PriorityClass with name nope was found`, "", 0, ""},
		{"the same priority given", []*schedulingv1.PriorityClass{high}, func(s *v1.PodSpec) { s.PriorityClassName = "high"; s.Priority = ptr.To[int32](1000) },
			"", "high", 1000, v1.PreemptNever},
		{"another priority given", []*schedulingv1.PriorityClass{high}, func(s *v1.PodSpec) { s.PriorityClassName = "high"; s.Priority = ptr.To[int32](7) },
			`pods "p" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name`, "", 0, ""},
		{"a priority without a class", nil, func(s *v1.PodSpec) { s.Priority = ptr.To[int32](3) },
			`pods "p" is forbidden: the integer value of priority (3) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name`, "", 0, ""},
		{"another policy given", []*schedulingv1.PriorityClass{high}, func(s *v1.PodSpec) {
			s.PriorityClassName = "high"
			s.PreemptionPolicy = ptr.To(v1.PreemptLowerPriority)
		}, `pods "p" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name`, "", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
			if tt.pod != nil {
				tt.pod(&pod.Spec)
			}
			err := priorityPlugin(tt.classes...).Admit(context.Background(), podAttrs(Create, pod, nil))
			if tt.wantErr != "" {
				if !apierrors.IsForbidden(err) || err.Error() != tt.wantErr {
					t.Fatalf("err %v, want Forbidden %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pod.Spec.PriorityClassName != tt.wantClass || pod.Spec.Priority == nil || *pod.Spec.Priority != tt.wantValue ||
				pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != tt.wantPolicy {
				t.Errorf("class %q priority %v policy %v, want %q %d %s", pod.Spec.PriorityClassName, pod.Spec.Priority,
					pod.Spec.PreemptionPolicy, tt.wantClass, tt.wantValue, tt.wantPolicy)
			}
		})
	}
}

func TestPriorityPodUpdateKeepsPriority(t *testing.T) {
	old := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Priority: ptr.To[int32](42), PreemptionPolicy: ptr.To(v1.PreemptNever)}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	if err := priorityPlugin().Admit(context.Background(), podAttrs(Update, pod, old)); err != nil {
		t.Fatal(err)
	}
	if *pod.Spec.Priority != 42 || *pod.Spec.PreemptionPolicy != v1.PreemptNever {
		t.Fatalf("priority %d policy %s, want the stored 42 Never", *pod.Spec.Priority, *pod.Spec.PreemptionPolicy)
	}
	if pod.Spec.Priority == old.Spec.Priority {
		t.Fatal("the stored pod's pointer is shared")
	}
	// A subresource is not the plugin's.
	status := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{PriorityClassName: "nope"}}
	a := podAttrs(Create, status, nil)
	a.Subresource = "status"
	if err := priorityPlugin().Admit(context.Background(), a); err != nil || status.Spec.Priority != nil {
		t.Fatalf("subresource admitted: %v %v", err, status.Spec.Priority)
	}
}

func TestPriorityOneGlobalDefault(t *testing.T) {
	def := priorityClass("def", 5, true, v1.PreemptLowerPriority)
	attrs := func(op Operation, pc *schedulingv1.PriorityClass) *Attributes {
		return &Attributes{Operation: op, Resource: schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"), Name: pc.Name, Object: pc}
	}
	p := priorityPlugin(def)
	want := `priorityclasses.scheduling.k8s.io "other" is forbidden: PriorityClass def is already marked as default. Only one default can exist`
	for _, op := range []Operation{Create, Update} {
		err := p.Validate(context.Background(), attrs(op, priorityClass("other", 1, true, v1.PreemptNever)))
		if !apierrors.IsForbidden(err) || err.Error() != want {
			t.Errorf("%s: %v, want %q", op, err, want)
		}
	}
	if err := p.Validate(context.Background(), attrs(Update, priorityClass("def", 5, true, v1.PreemptLowerPriority))); err != nil {
		t.Errorf("updating the default itself: %v", err)
	}
	if err := p.Validate(context.Background(), attrs(Create, priorityClass("other", 1, false, v1.PreemptNever))); err != nil {
		t.Errorf("a class not default: %v", err)
	}
	if err := priorityPlugin().Validate(context.Background(), attrs(Create, priorityClass("first", 1, true, v1.PreemptNever))); err != nil {
		t.Errorf("the first default: %v", err)
	}
}
