package rbac

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/user"
)

func escalationCheck() *EscalationCheck {
	c := NewCache()
	c.Replace(KindClusterRole, []runtime.Object{
		clusterRole("pod-reader", nil, rule(read, core, "pods")),
		clusterRole("rbac-writer", nil, rule([]string{"create", "update"}, []string{rbacv1.GroupName}, "roles", "rolebindings", "clusterroles")),
		clusterRole("escalator", nil, rule([]string{"escalate"}, []string{rbacv1.GroupName}, "roles")),
		clusterRole("binder", nil, named(rule([]string{"bind"}, []string{rbacv1.GroupName}, "clusterroles"), "cluster-admin")),
		clusterRole("cluster-admin", nil, rule(all, all, "*"), urls(all, "*")),
	})
	c.Replace(KindRole, nil)
	c.Replace(KindClusterRoleBinding, []runtime.Object{
		crb("writers", "rbac-writer", group("writers")),
		crb("escalators", "escalator", group("escalators")),
	})
	c.Replace(KindRoleBinding, []runtime.Object{
		rb("ns", "readers", "ClusterRole", "pod-reader", group("writers")),
		rb("ns", "binders", "ClusterRole", "binder", group("binders")),
	})
	z := New(c)
	return &EscalationCheck{Authorizer: authorizer.Union{authorizer.Privileged, z}, Rules: z}
}

func roleAttrs(op admission.Operation, obj, old runtime.Object, resource, ns string) *admission.Attributes {
	return &admission.Attributes{Operation: op, Resource: rbacv1.SchemeGroupVersion.WithResource(resource), Namespace: ns, Name: "x", Object: obj, OldObject: old}
}

func TestEscalationCheck(t *testing.T) {
	e := escalationCheck()
	held := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}, Rules: []rbacv1.PolicyRule{rule([]string{"get"}, core, "pods")}}
	more := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}, Rules: []rbacv1.PolicyRule{rule([]string{"get", "delete"}, core, "pods", "secrets")}}
	aggregating := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "x"}, AggregationRule: &rbacv1.AggregationRule{
		ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b"}}}}}
	bindAdmin := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}}
	bindMissing := bindAdmin.DeepCopy()
	bindMissing.RoleRef.Name = "missing"
	tests := []struct {
		name string
		u    *user.Info
		a    *admission.Attributes
		want string // "" allowed, else a part of the 403 message
	}{
		{"held rules", who("w", "writers"), roleAttrs(admission.Create, held, nil, "roles", "ns"), ""},
		{"held rules only in their namespace", who("w", "writers"), roleAttrs(admission.Create, held, nil, "roles", "other"),
			`roles.rbac.authorization.k8s.io "x" is forbidden: user "w" (groups=["writers"]) is attempting to grant RBAC permissions not currently held:` + "\n" +
				`{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`},
		{"more than held", who("w", "writers"), roleAttrs(admission.Create, more, nil, "roles", "ns"),
			"{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"delete\" \"get\"]}"},
		{"escalate", who("e", "writers", "escalators"), roleAttrs(admission.Create, more, nil, "roles", "ns"), ""},
		{"masters", who("root", user.SystemPrivilegedGroup), roleAttrs(admission.Create, more, nil, "roles", "ns"), ""},
		{"aggregation needs everything", who("w", "writers"), roleAttrs(admission.Create, aggregating, nil, "clusterroles", ""),
			`clusterroles.rbac.authorization.k8s.io "x" is forbidden: must have cluster-admin privileges to use the aggregationRule`},
		{"dropping an aggregation needs everything", who("w", "writers"), roleAttrs(admission.Update, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, aggregating, "clusterroles", ""),
			"must have cluster-admin privileges to use the aggregationRule"},
		{"update of owner references only", who("w", "writers"), roleAttrs(admission.Update, withOwner(more), more, "roles", "ns"), ""},
		{"update of rules", who("w", "writers"), roleAttrs(admission.Update, more, held, "roles", "ns"), "attempting to grant"},
		{"bind more than held", who("w", "writers"), roleAttrs(admission.Create, bindAdmin, nil, "rolebindings", "ns"),
			`rolebindings.rbac.authorization.k8s.io "x" is forbidden: user "w"`},
		{"bind with bind verb", who("b", "writers", "binders"), roleAttrs(admission.Create, bindAdmin, nil, "rolebindings", "ns"), ""},
		{"bind verb, roleRef not defaulted yet", who("b", "writers", "binders"), roleAttrs(admission.Create, undefaulted(bindAdmin), nil, "rolebindings", "ns"), ""},
		{"bind verb only in its namespace", who("b", "writers", "binders"), roleAttrs(admission.Create, bindAdmin, nil, "rolebindings", "other"), "attempting to grant"},
		{"bind a missing role", who("w", "writers"), roleAttrs(admission.Create, bindMissing, nil, "rolebindings", "ns"),
			`404 clusterrole.rbac.authorization.k8s.io "missing" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.Admit(user.WithUser(context.Background(), tt.u), tt.a)
			if tt.want == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if msg, ok := strings.CutPrefix(tt.want, "404 "); ok {
				if !apierrors.IsNotFound(err) || err.Error() != msg {
					t.Errorf("got %v, want 404 %q", err, msg)
				}
				return
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want 403 with %q", err, tt.want)
			}
		})
	}
}

func undefaulted(b *rbacv1.RoleBinding) *rbacv1.RoleBinding {
	out := b.DeepCopy()
	out.RoleRef.APIGroup = ""
	return out
}

func withOwner(r *rbacv1.Role) *rbacv1.Role {
	out := r.DeepCopy()
	out.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "u"}}
	return out
}

func TestReconcile(t *testing.T) {
	want := clusterRole("r", map[string]string{"l": "1"}, rule(read, core, "pods"), urls(get, "/healthz"))
	existing := clusterRole("r", map[string]string{"mine": "x"}, rule([]string{"get"}, core, "pods"), rule(all, core, "secrets"))
	out, changed := ReconcileClusterRole(existing, want)
	if !changed || out.Labels["mine"] != "x" || out.Labels["l"] != "1" {
		t.Fatalf("changed %v labels %v", changed, out.Labels)
	}
	if ok, missing := Covers(out.Rules, want.Rules); !ok {
		t.Errorf("reconciled role lacks %v", missing)
	}
	if ok, _ := Covers(out.Rules, existing.Rules); !ok {
		t.Error("reconciled role lost the existing rules")
	}
	if _, changed := ReconcileClusterRole(out, want); changed {
		t.Error("second reconcile changed something")
	}
	frozen := existing.DeepCopy()
	frozen.Annotations[AutoUpdateAnnotation] = "false"
	if _, changed := ReconcileClusterRole(frozen, want); changed {
		t.Error("autoupdate false changed")
	}

	wantB := clusterBinding("b", "r", group("g1"), group("g2"))
	haveB := clusterBinding("b", "r", group("g2"), userSubject("u"))
	outB, changed, recreate := ReconcileClusterRoleBinding(haveB, wantB)
	if !changed || recreate || len(outB.Subjects) != 3 || outB.Subjects[2] != group("g1") {
		t.Errorf("binding: %v %v %v", changed, recreate, outB.Subjects)
	}
	other := clusterBinding("b", "other", group("g1"))
	if _, _, recreate := ReconcileClusterRoleBinding(other, wantB); !recreate {
		t.Error("a binding to another role is not recreated")
	}
}

func TestAggregatedRules(t *testing.T) {
	view := BootstrapClusterRoles()
	var agg *rbacv1.ClusterRole
	for _, r := range view {
		if r.Name == "view" {
			agg = r
		}
	}
	extra := clusterRole("a-extra", map[string]string{aggregateToView: "true"}, rule(read, core, "pods"), rule(get, []string{"x"}, "y"))
	rules, ok := AggregatedRules(agg, append(view, extra))
	if !ok {
		t.Fatal("view does not aggregate")
	}
	a := res("get", "x", "y", "", "ns", "")
	if ok, _ := Covers(rules, []rbacv1.PolicyRule{rule(get, []string{"x"}, "y"), rule(read, core, "pods/log")}); !ok {
		t.Errorf("aggregated rules %v", rules)
	}
	n := 0
	for i := range rules {
		if RuleAllows(&a, &rules[i]) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("rule of a-extra %d times", n)
	}
}
