package namespaces

import (
	"context"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/corekube/corekube/registry/internal/strategytest"
)

var ctx = context.Background()

func ns(name string, finalizers ...v1.FinalizerName) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NamespaceSpec{Finalizers: finalizers}}
}

func TestPrepareForCreate(t *testing.T) {
	tests := []struct {
		name       string
		in         *v1.Namespace
		finalizers []v1.FinalizerName
		labels     map[string]string
	}{
		{"defaults", ns("a"), []v1.FinalizerName{"kubernetes"}, map[string]string{"kubernetes.io/metadata.name": "a"}},
		{"appends kubernetes", ns("a", "example.com/x"), []v1.FinalizerName{"example.com/x", "kubernetes"}, map[string]string{"kubernetes.io/metadata.name": "a"}},
		{"keeps existing kubernetes", ns("a", "kubernetes", "example.com/x"), []v1.FinalizerName{"kubernetes", "example.com/x"}, map[string]string{"kubernetes.io/metadata.name": "a"}},
		{"overrides label, keeps others", func() *v1.Namespace {
			n := ns("a")
			n.Labels = map[string]string{"kubernetes.io/metadata.name": "lie", "x": "y"}
			return n
		}(), []v1.FinalizerName{"kubernetes"}, map[string]string{"kubernetes.io/metadata.name": "a", "x": "y"}},
		{"no name yet", func() *v1.Namespace { n := ns(""); n.GenerateName = "gen-"; return n }(), []v1.FinalizerName{"kubernetes"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Status.Phase = v1.NamespaceTerminating
			tc.in.Status.Conditions = []v1.NamespaceCondition{{Type: "x"}}
			NewStrategy().PrepareForCreate(ctx, tc.in)
			if !reflect.DeepEqual(tc.in.Status, v1.NamespaceStatus{Phase: v1.NamespaceActive}) {
				t.Errorf("status %+v", tc.in.Status)
			}
			if !reflect.DeepEqual(tc.in.Spec.Finalizers, tc.finalizers) {
				t.Errorf("finalizers %v, want %v", tc.in.Spec.Finalizers, tc.finalizers)
			}
			if !reflect.DeepEqual(tc.in.Labels, tc.labels) {
				t.Errorf("labels %v, want %v", tc.in.Labels, tc.labels)
			}
		})
	}
}

func TestCanonicalize(t *testing.T) {
	n := ns("gen-abcde")
	NewStrategy().Canonicalize(n)
	if n.Labels[v1.LabelMetadataName] != "gen-abcde" {
		t.Errorf("labels %v", n.Labels)
	}
}

func TestPrepareForUpdate(t *testing.T) {
	old := ns("a", "kubernetes")
	old.Status.Phase = v1.NamespaceTerminating
	n := ns("a", "example.com/other")
	n.Labels = map[string]string{"team": "x"}
	NewStrategy().PrepareForUpdate(ctx, n, old)
	if !reflect.DeepEqual(n.Spec.Finalizers, []v1.FinalizerName{"kubernetes"}) {
		t.Errorf("finalizers %v", n.Spec.Finalizers)
	}
	if n.Status.Phase != v1.NamespaceTerminating {
		t.Errorf("status %v", n.Status)
	}
	if !reflect.DeepEqual(n.Labels, map[string]string{"team": "x", "kubernetes.io/metadata.name": "a"}) {
		t.Errorf("labels %v", n.Labels)
	}
}

func TestStatusPrepareForUpdate(t *testing.T) {
	old := ns("a", "kubernetes")
	n := ns("a")
	NewStatusStrategy().PrepareForUpdate(ctx, n, old)
	if !reflect.DeepEqual(n.Spec, old.Spec) || n.Status.Phase != v1.NamespaceActive {
		t.Errorf("got %+v", n)
	}
	n.Status.Phase = v1.NamespaceTerminating
	NewStatusStrategy().PrepareForUpdate(ctx, n, old)
	if n.Status.Phase != v1.NamespaceTerminating {
		t.Errorf("phase %v", n.Status.Phase)
	}
}

func TestFinalizePrepareForUpdate(t *testing.T) {
	old := ns("a", "kubernetes")
	old.Status.Phase = v1.NamespaceTerminating
	n := ns("a")
	n.Status.Phase = v1.NamespaceActive
	NewFinalizeStrategy().PrepareForUpdate(ctx, n, old)
	if len(n.Spec.Finalizers) != 0 || n.Status.Phase != v1.NamespaceTerminating {
		t.Errorf("got %+v", n)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		in   *v1.Namespace
		want []string
	}{
		{"standard", ns("a", "kubernetes", "orphan", "foregroundDeletion"), nil},
		{"qualified", ns("a", "example.com/fin"), nil},
		{"not standard", ns("a", "custom"), []string{"FieldValueInvalid spec.finalizers"}},
		{"not qualified", ns("a", "example.com/bad name"), []string{"FieldValueInvalid spec.finalizers"}},
		{"empty", ns("a", ""), []string{"FieldValueInvalid spec.finalizers", "FieldValueInvalid spec.finalizers", "FieldValueInvalid spec.finalizers"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == nil {
				tc.want = []string{}
			}
			if got := strategytest.ErrKeys(NewStrategy().Validate(ctx, tc.in)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("create: got %v, want %v", got, tc.want)
			}
			if got := strategytest.ErrKeys(NewStrategy().ValidateUpdate(ctx, tc.in, ns("a"))); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("update: got %v, want %v", got, tc.want)
			}
		})
	}
	errs := NewStrategy().Validate(ctx, ns("a", "custom"))
	want := `spec.finalizers: Invalid value: "custom": name is neither a standard finalizer name nor is it fully qualified`
	if errs[0].Error() != want {
		t.Errorf("got %q", errs[0].Error())
	}
}

func TestFinalizeValidateUpdate(t *testing.T) {
	got := strategytest.ErrKeys(NewFinalizeStrategy().ValidateUpdate(ctx, ns("a", "kubernetes", "custom"), ns("a", "kubernetes")))
	if want := []string{"FieldValueInvalid spec.finalizers[1]"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if errs := NewFinalizeStrategy().ValidateUpdate(ctx, ns("a"), ns("a", "kubernetes")); len(errs) != 0 {
		t.Errorf("removing finalizers: %v", errs)
	}
}

func TestStatusValidateUpdate(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name     string
		phase    v1.NamespacePhase
		deleting bool
		want     string
	}{
		{"active", v1.NamespaceActive, false, ""},
		{"terminating while deleting", v1.NamespaceTerminating, true, ""},
		{"terminating not deleting", v1.NamespaceTerminating, false,
			"status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"},
		{"active while deleting", v1.NamespaceActive, true,
			"status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := ns("a")
			n.Status.Phase = tc.phase
			if tc.deleting {
				n.DeletionTimestamp = &now
			}
			errs := NewStatusStrategy().ValidateUpdate(ctx, n, ns("a"))
			got := ""
			if len(errs) > 0 {
				got = errs.ToAggregate().Error()
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGetAttrsAndInfo(t *testing.T) {
	s := NewStrategy()
	n := ns("a")
	n.Labels = map[string]string{"x": "y"}
	n.Status.Phase = v1.NamespaceActive
	l, f, err := s.GetAttrs(n)
	if err != nil || l["x"] != "y" {
		t.Fatalf("labels %v err %v", l, err)
	}
	if want := (fields.Set{"metadata.name": "a", "status.phase": "Active"}); !reflect.DeepEqual(f, want) {
		t.Errorf("fields %v", f)
	}
	if _, _, err := s.GetAttrs(&v1.Node{}); err == nil {
		t.Error("expected error")
	}
	info := s.Info()
	if info.APIVersion() != "v1" || info.Resource != "namespaces" || info.Singular != "namespace" || info.Kind != "Namespace" ||
		info.ListKind != "NamespaceList" || info.Namespaced || !reflect.DeepEqual(info.ShortNames, []string{"ns"}) ||
		info.Categories != nil || !info.CustomFieldSelectors || s.AllowCreateOnUpdate() {
		t.Errorf("info %+v", info)
	}
	if _, ok := s.New().(*v1.Namespace); !ok {
		t.Error("New")
	}
	if _, ok := s.NewList().(*v1.NamespaceList); !ok {
		t.Error("NewList")
	}
}
