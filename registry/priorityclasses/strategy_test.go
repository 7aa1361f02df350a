package priorityclasses

import (
	"context"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func class(name string, value int32, tweak func(*schedulingv1.PriorityClass)) *schedulingv1.PriorityClass {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if tweak != nil {
		tweak(pc)
	}
	NewStrategy().PrepareForCreate(ctx, pc)
	return pc
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		pc   *schedulingv1.PriorityClass
		want []string
	}{
		{"user class", class("high", 1000, nil), nil},
		{"negative value", class("low", -5, nil), nil},
		{"highest user value", class("top", HighestUserDefinablePriority, nil), nil},
		{"above the user range", class("too-high", HighestUserDefinablePriority+1, nil),
			[]string{"value: Forbidden: maximum allowed value of a user defined priority is 1000000000"}},
		{"system-node-critical as built in", class(SystemNodeCritical, 2000001000, nil), nil},
		{"system-cluster-critical as built in", class(SystemClusterCritical, 2000000000, nil), nil},
		{"system class with another value", class(SystemClusterCritical, 5, nil),
			[]string{"metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-cluster-critical PriorityClass must be 2000000000"}},
		{"system class as global default", class(SystemNodeCritical, 2000001000, func(pc *schedulingv1.PriorityClass) { pc.GlobalDefault = true }),
			[]string{"metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: globalDefault of system-node-critical PriorityClass must be false"}},
		{"unknown system name", class("system-mine", 10, nil),
			[]string{"metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"}},
		{"Never", class("n", 1, func(pc *schedulingv1.PriorityClass) { pc.PreemptionPolicy = ptr.To(v1.PreemptNever) }), nil},
		{"unknown policy", class("n", 1, func(pc *schedulingv1.PriorityClass) { pc.PreemptionPolicy = ptr.To[v1.PreemptionPolicy]("Sometimes") }),
			[]string{`preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"`}},
		{"empty policy", class("n", 1, func(pc *schedulingv1.PriorityClass) { pc.PreemptionPolicy = ptr.To[v1.PreemptionPolicy]("") }),
			[]string{"preemptionPolicy: Required value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errStrings(NewStrategy().Validate(ctx, tt.pc))
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	pc := class("d", 1, nil)
	if pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != v1.PreemptLowerPriority {
		t.Fatalf("preemptionPolicy = %v, want PreemptLowerPriority", pc.PreemptionPolicy)
	}
	never := class("d", 1, func(pc *schedulingv1.PriorityClass) { pc.PreemptionPolicy = ptr.To(v1.PreemptNever) })
	if *never.PreemptionPolicy != v1.PreemptNever {
		t.Fatalf("a given policy was replaced: %v", *never.PreemptionPolicy)
	}
}

func TestValidateUpdate(t *testing.T) {
	old := class("p", 100, nil)
	tests := []struct {
		name  string
		tweak func(*schedulingv1.PriorityClass)
		want  []string
	}{
		{"description and default", func(pc *schedulingv1.PriorityClass) { pc.Description = "d"; pc.GlobalDefault = true }, nil},
		{"policy omitted reads as the default", func(pc *schedulingv1.PriorityClass) { pc.PreemptionPolicy = nil }, nil},
		{"value", func(pc *schedulingv1.PriorityClass) { pc.Value = 101 }, []string{"value: Forbidden: may not be changed in an update."}},
		{"policy", func(pc *schedulingv1.PriorityClass) { pc.PreemptionPolicy = ptr.To(v1.PreemptNever) },
			[]string{`preemptionPolicy: Invalid value: "Never": field is immutable`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc := old.DeepCopy()
			tt.tweak(pc)
			s := NewStrategy()
			s.PrepareForUpdate(ctx, pc, old)
			got := errStrings(s.ValidateUpdate(ctx, pc, old))
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCheckDelete(t *testing.T) {
	for _, name := range []string{SystemNodeCritical, SystemClusterCritical} {
		err := NewStrategy().CheckDelete(ctx, "", name)
		if !apierrors.IsForbidden(err) {
			t.Fatalf("%s: %v, want Forbidden", name, err)
		}
		want := `priorityclasses.scheduling.k8s.io "` + name + `" is forbidden: this is a system priority class and cannot be deleted`
		if err.Error() != want {
			t.Errorf("%s: %q, want %q", name, err.Error(), want)
		}
	}
	if err := NewStrategy().CheckDelete(ctx, "", "system-other"); err != nil {
		t.Errorf("a class not built in: %v", err)
	}
}

func TestSystemClasses(t *testing.T) {
	got := map[string]int32{}
	for _, pc := range SystemClasses() {
		got[pc.Name] = pc.Value
		if errs := Validate(pc); len(errs) > 0 {
			t.Errorf("%s is invalid: %v", pc.Name, errs)
		}
	}
	want := map[string]int32{SystemNodeCritical: 2000001000, SystemClusterCritical: 2000000000}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestTable(t *testing.T) {
	s := NewStrategy()
	var names []string
	for _, c := range s.TableColumns() {
		names = append(names, c.Name+"/"+c.Type)
	}
	wantCols := []string{"Name/string", "Value/integer", "Global-Default/boolean", "Age/string", "PreemptionPolicy/string"}
	if !reflect.DeepEqual(names, wantCols) {
		t.Fatalf("columns %v, want %v", names, wantCols)
	}
	now := time.Now()
	pc := class("high", 1000, func(pc *schedulingv1.PriorityClass) {
		pc.GlobalDefault = true
		pc.CreationTimestamp = metav1.NewTime(now.Add(-90 * time.Second))
	})
	row, err := s.TableRow(pc, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"high", int64(1000), true, "90s", "PreemptLowerPriority"}
	if !reflect.DeepEqual(row.Cells, want) {
		t.Errorf("cells %#v, want %#v", row.Cells, want)
	}
}
