package leases

import (
	"context"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/corekube/corekube/registry/internal/strategytest"
)

var ctx = context.Background()

func lease(tweak func(*coordinationv1.LeaseSpec)) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"}}
	if tweak != nil {
		tweak(&l.Spec)
	}
	return l
}

func TestValidate(t *testing.T) {
	now := metav1.NewMicroTime(time.Now())
	tests := []struct {
		name string
		spec func(*coordinationv1.LeaseSpec)
		want []string
	}{
		{"empty", nil, nil},
		{"full", func(s *coordinationv1.LeaseSpec) {
			s.HolderIdentity = ptr.To("node-1")
			s.LeaseDurationSeconds = ptr.To[int32](40)
			s.LeaseTransitions = ptr.To[int32](0)
			s.AcquireTime, s.RenewTime = &now, &now
		}, nil},
		{"empty holder", func(s *coordinationv1.LeaseSpec) { s.HolderIdentity = ptr.To("") }, nil},
		{"zero duration", func(s *coordinationv1.LeaseSpec) { s.LeaseDurationSeconds = ptr.To[int32](0) }, []string{"FieldValueInvalid spec.leaseDurationSeconds"}},
		{"negative duration", func(s *coordinationv1.LeaseSpec) { s.LeaseDurationSeconds = ptr.To[int32](-1) }, []string{"FieldValueInvalid spec.leaseDurationSeconds"}},
		{"negative transitions", func(s *coordinationv1.LeaseSpec) { s.LeaseTransitions = ptr.To[int32](-1) }, []string{"FieldValueInvalid spec.leaseTransitions"}},
		{"known strategy", func(s *coordinationv1.LeaseSpec) {
			s.Strategy = ptr.To(coordinationv1.OldestEmulationVersion)
			s.PreferredHolder = ptr.To("x")
		}, nil},
		{"unknown strategy", func(s *coordinationv1.LeaseSpec) { s.Strategy = ptr.To[coordinationv1.CoordinatedLeaseStrategy]("Foo") },
			[]string{"FieldValueNotSupported spec.strategy.strategy"}},
		{"custom strategy", func(s *coordinationv1.LeaseSpec) {
			s.Strategy = ptr.To[coordinationv1.CoordinatedLeaseStrategy]("example.com/mine")
		}, nil},
		{"bad custom strategy", func(s *coordinationv1.LeaseSpec) {
			s.Strategy = ptr.To[coordinationv1.CoordinatedLeaseStrategy]("example.com/a/b")
		},
			[]string{"FieldValueInvalid spec.strategy.strategy"}},
		{"preferred holder without strategy", func(s *coordinationv1.LeaseSpec) { s.PreferredHolder = ptr.To("x") },
			[]string{"FieldValueForbidden spec.preferredHolder"}},
		{"empty preferred holder", func(s *coordinationv1.LeaseSpec) { s.PreferredHolder = ptr.To("") }, nil},
	}
	s := NewStrategy()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			strategytest.ExpectBoth(t, s, lease(tc.spec), lease(tc.spec), lease(nil), tc.want)
		})
	}
}

func TestValidateMessages(t *testing.T) {
	s := NewStrategy()
	tests := []struct {
		spec func(*coordinationv1.LeaseSpec)
		want string
	}{
		{func(s *coordinationv1.LeaseSpec) { s.LeaseDurationSeconds = ptr.To[int32](0) },
			"spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"},
		{func(s *coordinationv1.LeaseSpec) { s.LeaseTransitions = ptr.To[int32](-2) },
			"spec.leaseTransitions: Invalid value: -2: must be greater than or equal to 0"},
		{func(s *coordinationv1.LeaseSpec) { s.PreferredHolder = ptr.To("x") },
			"spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"},
		{func(s *coordinationv1.LeaseSpec) { s.Strategy = ptr.To[coordinationv1.CoordinatedLeaseStrategy]("Foo") },
			`spec.strategy.strategy: Unsupported value: "Foo": supported values: "OldestEmulationVersion"`},
	}
	for _, tc := range tests {
		if errs := s.Validate(ctx, lease(tc.spec)); len(errs) != 1 || errs[0].Error() != tc.want {
			t.Errorf("got %v, want %s", errs, tc.want)
		}
	}
}

func TestPrepare(t *testing.T) {
	s := NewStrategy()
	withCLE := func(sp *coordinationv1.LeaseSpec) {
		sp.HolderIdentity = ptr.To("me")
		sp.Strategy = ptr.To(coordinationv1.OldestEmulationVersion)
		sp.PreferredHolder = ptr.To("you")
	}

	l := lease(withCLE)
	s.PrepareForCreate(ctx, l)
	if l.Spec.Strategy != nil || l.Spec.PreferredHolder != nil || *l.Spec.HolderIdentity != "me" {
		t.Errorf("create: %+v", l.Spec)
	}

	l = lease(withCLE)
	s.PrepareForUpdate(ctx, l, lease(nil))
	if l.Spec.Strategy != nil || l.Spec.PreferredHolder != nil || *l.Spec.HolderIdentity != "me" {
		t.Errorf("update without stored fields: %+v", l.Spec)
	}

	l = lease(withCLE)
	s.PrepareForUpdate(ctx, l, lease(withCLE))
	if l.Spec.Strategy == nil || l.Spec.PreferredHolder == nil {
		t.Errorf("update with stored fields: %+v", l.Spec)
	}
}

func TestGetAttrsAndInfo(t *testing.T) {
	s := NewStrategy()
	l := lease(nil)
	l.Labels = map[string]string{"a": "b"}
	lbls, f, err := s.GetAttrs(l)
	if err != nil || lbls["a"] != "b" {
		t.Fatalf("labels %v err %v", lbls, err)
	}
	if want := (fields.Set{"metadata.name": "node-1", "metadata.namespace": "kube-node-lease"}); !reflect.DeepEqual(f, want) {
		t.Errorf("fields %v", f)
	}
	if _, _, err := s.GetAttrs(&v1.Pod{}); err == nil {
		t.Error("expected error")
	}
	info := s.Info()
	want := "coordination.k8s.io/v1"
	if info.APIVersion() != want || info.Resource != "leases" || info.Singular != "lease" || info.Kind != "Lease" ||
		info.ListKind != "LeaseList" || !info.Namespaced || info.ShortNames != nil || info.Categories != nil ||
		info.CustomFieldSelectors || !s.AllowCreateOnUpdate() {
		t.Errorf("info %+v", info)
	}
	if _, ok := s.New().(*coordinationv1.Lease); !ok {
		t.Error("New")
	}
	if _, ok := s.NewList().(*coordinationv1.LeaseList); !ok {
		t.Error("NewList")
	}
}
