package rbac

import (
	"context"
	"fmt"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/user"
)

func crb(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: subjects}
}

func rb(ns, name, kind, role string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}, Subjects: subjects}
}

func sa(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

// testCache holds a small policy: pod readers in ns "a" through a Role
// and a ServiceAccount bound without its namespace; a group bound to a
// ClusterRole in ns "b"; a binding to a missing role.
func testCache() *Cache {
	c := NewCache()
	c.Replace(KindClusterRole, []runtime.Object{
		clusterRole("reader", nil, rule(read, core, "pods", "pods/log")),
		clusterRole("urls", nil, urls(get, "/metrics")),
	})
	c.Replace(KindRole, []runtime.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "writer"}, Rules: []rbacv1.PolicyRule{rule([]string{"create"}, core, "configmaps")}},
	})
	c.Replace(KindClusterRoleBinding, []runtime.Object{
		crb("urls", "urls", userSubject("metrics-reader")),
		crb("broken", "missing", userSubject("alice")),
	})
	c.Replace(KindRoleBinding, []runtime.Object{
		rb("a", "writer", "Role", "writer", userSubject("alice"), sa("", "bot")),
		rb("b", "readers", "ClusterRole", "reader", group("devs")),
	})
	return c
}

func who(name string, groups ...string) *user.Info { return &user.Info{Name: name, Groups: groups} }

func TestAuthorize(t *testing.T) {
	z := New(testCache())
	with := func(u *user.Info, a authorizer.Attributes) authorizer.Attributes { a.User = u; return a }
	tests := []struct {
		name   string
		a      authorizer.Attributes
		want   authorizer.Decision
		reason string
	}{
		{"role in its namespace", with(who("alice"), res("create", "", "configmaps", "", "a", "")), authorizer.DecisionAllow,
			`RBAC: allowed by RoleBinding "writer/a" of Role "writer" to User "alice"`},
		{"role not in another namespace", with(who("alice"), res("create", "", "configmaps", "", "b", "")), authorizer.DecisionNoOpinion,
			`RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found`},
		{"namespaced binding not cluster-wide", with(who("carol", "devs"), res("list", "", "pods", "", "", "")), authorizer.DecisionNoOpinion, ""},
		{"group through clusterrole in namespace", with(who("carol", "devs"), res("get", "", "pods", "log", "b", "p")), authorizer.DecisionAllow,
			`RBAC: allowed by RoleBinding "readers/b" of ClusterRole "reader" to Group "devs"`},
		{"group not for other verbs", with(who("carol", "devs"), res("delete", "", "pods", "", "b", "p")), authorizer.DecisionNoOpinion, ""},
		{"service account defaults to the binding namespace", with(who("system:serviceaccount:a:bot"), res("create", "", "configmaps", "", "a", "")), authorizer.DecisionAllow,
			`RBAC: allowed by RoleBinding "writer/a" of Role "writer" to ServiceAccount "a/bot"`},
		{"same name other namespace's service account", with(who("system:serviceaccount:b:bot"), res("create", "", "configmaps", "", "a", "")), authorizer.DecisionNoOpinion, ""},
		{"non-resource url", with(who("metrics-reader"), nonRes("get", "/metrics")), authorizer.DecisionAllow,
			`RBAC: allowed by ClusterRoleBinding "urls" of ClusterRole "urls" to User "metrics-reader"`},
		{"non-resource url other user", with(who("bob"), nonRes("get", "/metrics")), authorizer.DecisionNoOpinion, ""},
		{"nil user", res("get", "", "pods", "", "a", ""), authorizer.DecisionNoOpinion, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, reason, err := z.Authorize(context.Background(), tt.a)
			if err != nil || d != tt.want || reason != tt.reason {
				t.Errorf("Authorize = %v, %q, %v; want %v, %q", d, reason, err, tt.want, tt.reason)
			}
		})
	}
}

func TestCacheUpdates(t *testing.T) {
	c := testCache()
	z := New(c)
	a := res("delete", "", "pods", "", "b", "p")
	a.User = who("carol", "devs")
	if d, _, _ := z.Authorize(context.Background(), a); d == authorizer.DecisionAllow {
		t.Fatal("allowed before the rule exists")
	}
	c.Upsert(clusterRole("reader", nil, rule(all, core, "pods")))
	if d, _, _ := z.Authorize(context.Background(), a); d != authorizer.DecisionAllow {
		t.Fatal("not allowed after the role grew")
	}
	c.Delete(rb("b", "readers", "ClusterRole", "reader"))
	if d, _, _ := z.Authorize(context.Background(), a); d == authorizer.DecisionAllow {
		t.Fatal("allowed after the binding went")
	}
}

func TestUnion(t *testing.T) {
	deny := authorizer.Func(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionDeny, "no", nil
	})
	u := authorizer.Union{authorizer.Privileged, New(testCache()), deny, authorizer.AlwaysAllow}
	a := res("get", "", "secrets", "", "a", "s")
	a.User = who("root", user.SystemPrivilegedGroup)
	if d, _, _ := u.Authorize(context.Background(), a); d != authorizer.DecisionAllow {
		t.Errorf("system:masters: %v, want Allow", d)
	}
	a.User = who("bob")
	if d, reason, _ := u.Authorize(context.Background(), a); d != authorizer.DecisionDeny || reason != "no" {
		t.Errorf("bob: %v %q, want the first Deny", d, reason)
	}
	a.User = who("alice")
	if d, reason, _ := (authorizer.Union{New(testCache()), authorizer.AlwaysDeny}).Authorize(context.Background(), a); d != authorizer.DecisionNoOpinion ||
		reason != "RBAC: clusterrole.rbac.authorization.k8s.io \"missing\" not found\nEverything is forbidden." {
		t.Errorf("no opinions: %v %q, want their reasons joined", d, reason)
	}
}

// BenchmarkAuthorize measures a decision against the bootstrap policy
// plus 200 namespaces with a binding each: a ServiceAccount allowed by its
// namespace's RoleBinding, and one denied (the slowest path, every
// binding visited).
func BenchmarkAuthorize(b *testing.B) {
	c := NewCache()
	var crs []runtime.Object
	for _, r := range BootstrapClusterRoles() {
		crs = append(crs, r)
	}
	c.Replace(KindClusterRole, crs)
	var crbs []runtime.Object
	for _, x := range BootstrapClusterRoleBindings() {
		crbs = append(crbs, x)
	}
	c.Replace(KindClusterRoleBinding, crbs)
	c.Replace(KindRole, nil)
	var rbs []runtime.Object
	for i := range 200 {
		ns := fmt.Sprintf("ns-%d", i)
		rbs = append(rbs, rb(ns, "edit", "ClusterRole", "system:aggregate-to-edit", sa(ns, "bot")))
	}
	c.Replace(KindRoleBinding, rbs)
	z := New(c)
	u := who("system:serviceaccount:ns-7:bot", "system:serviceaccounts", "system:serviceaccounts:ns-7", "system:authenticated")
	allowed := res("create", "", "configmaps", "", "ns-7", "")
	allowed.User = u
	denied := res("create", "rbac.authorization.k8s.io", "roles", "", "ns-7", "")
	denied.User = u
	ctx := context.Background()
	b.Run("allowed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if d, _, _ := z.Authorize(ctx, allowed); d != authorizer.DecisionAllow {
				b.Fatal(d)
			}
		}
	})
	b.Run("denied", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if d, _, _ := z.Authorize(ctx, denied); d != authorizer.DecisionNoOpinion {
				b.Fatal(d)
			}
		}
	})
}
