package rolebindings

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func errStrings(errs field.ErrorList) string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return strings.Join(out, "; ")
}

func binding(tweak func(*rbacv1.RoleBinding)) *rbacv1.RoleBinding {
	b := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"},
		RoleRef:    rbacv1.RoleRef{Kind: "Role", Name: "r"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "u"}, {Kind: "ServiceAccount", Name: "sa"}},
	}
	if tweak != nil {
		tweak(b)
	}
	return b
}

func TestValidate(t *testing.T) {
	s := NewStrategy()
	ctx := context.Background()
	tests := []struct {
		name  string
		tweak func(*rbacv1.RoleBinding)
		want  string
	}{
		{"valid", nil, ""},
		{"cluster role", func(b *rbacv1.RoleBinding) { b.RoleRef.Kind = "ClusterRole" }, ""},
		{"bad kind", func(b *rbacv1.RoleBinding) { b.RoleRef.Kind = "Thing" },
			`roleRef.kind: Unsupported value: "Thing": supported values: "Role", "ClusterRole"`},
		{"no role name", func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "" }, `roleRef.name: Required value`},
		{"role name with slash", func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "a/b" }, `roleRef.name: Invalid value: "a/b": may not contain '/'`},
		{"bad group", func(b *rbacv1.RoleBinding) { b.RoleRef.APIGroup = "x" },
			`roleRef.apiGroup: Unsupported value: "x": supported values: "rbac.authorization.k8s.io"`},
		{"subject without name", func(b *rbacv1.RoleBinding) { b.Subjects[0].Name = "" }, `subjects[0].name: Required value`},
		{"service account with group", func(b *rbacv1.RoleBinding) { b.Subjects[1].APIGroup = "rbac.authorization.k8s.io" },
			`subjects[1].apiGroup: Unsupported value: "rbac.authorization.k8s.io": supported values: ""`},
		{"bad service account name", func(b *rbacv1.RoleBinding) { b.Subjects[1].Name = "Bad_Name" },
			`subjects[1].name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain`},
		{"unknown subject kind", func(b *rbacv1.RoleBinding) { b.Subjects[0].Kind = "Robot" },
			`subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := binding(tt.tweak)
			s.PrepareForCreate(ctx, b)
			got := errStrings(s.Validate(ctx, b))
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("errors %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDefaultsAndImmutableRoleRef(t *testing.T) {
	s := NewStrategy()
	ctx := context.Background()
	b := binding(nil)
	s.PrepareForCreate(ctx, b)
	if b.RoleRef.APIGroup != rbacv1.GroupName || b.Subjects[0].APIGroup != rbacv1.GroupName || b.Subjects[1].APIGroup != "" {
		t.Errorf("defaults: %+v %+v", b.RoleRef, b.Subjects)
	}
	changed := b.DeepCopy()
	changed.RoleRef.Name = "other"
	got := errStrings(s.ValidateUpdate(ctx, changed, b))
	want := `roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"Role", Name:"other"}: cannot change roleRef`
	if got != want {
		t.Errorf("update errors %q, want %q", got, want)
	}
	more := b.DeepCopy()
	more.Subjects = append(more.Subjects, rbacv1.Subject{Kind: "Group", Name: "g"})
	s.PrepareForUpdate(ctx, more, b)
	if errs := s.ValidateUpdate(ctx, more, b); len(errs) > 0 {
		t.Errorf("adding a subject: %v", errs)
	}
}

func TestTable(t *testing.T) {
	s := NewStrategy()
	now := time.Now()
	b := binding(func(b *rbacv1.RoleBinding) {
		b.RoleRef.Kind = "ClusterRole"
		b.RoleRef.Name = "view"
		b.CreationTimestamp = metav1.NewTime(now.Add(-90 * time.Second))
		b.Subjects = []rbacv1.Subject{{Kind: "User", Name: "u1"}, {Kind: "Group", Name: "g"}, {Kind: "User", Name: "u2"},
			{Kind: "ServiceAccount", Namespace: "ns", Name: "sa"}}
	})
	var cols []string
	for _, c := range s.TableColumns() {
		cols = append(cols, c.Name)
		if c.Priority == 1 != (c.Name == "Users" || c.Name == "Groups" || c.Name == "ServiceAccounts") {
			t.Errorf("column %s priority %d", c.Name, c.Priority)
		}
	}
	if strings.Join(cols, ",") != "Name,Role,Age,Users,Groups,ServiceAccounts" {
		t.Errorf("columns %v", cols)
	}
	row, err := s.TableRow(b, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"b", "ClusterRole/view", "90s", "u1, u2", "g", "ns/sa"}
	for i := range want {
		if row.Cells[i] != want[i] {
			t.Errorf("cells %v, want %v", row.Cells, want)
			break
		}
	}
}

func TestNames(t *testing.T) {
	s := NewStrategy()
	for name, ok := range map[string]bool{"system:controller:x": true, "a@b": true, "a/b": false, "..": false, "a%b": false} {
		if got := len(s.ValidateName(name, false)) == 0; got != ok {
			t.Errorf("name %q valid %v, want %v", name, got, ok)
		}
	}
}
