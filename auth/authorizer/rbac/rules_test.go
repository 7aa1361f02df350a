package rbac

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/corekube/corekube/auth/authorizer"
)

func res(verb, group, resource, sub, ns, name string) authorizer.Attributes {
	return authorizer.Attributes{Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name, ResourceRequest: true}
}

func nonRes(verb, path string) authorizer.Attributes {
	return authorizer.Attributes{Verb: verb, Path: path}
}

func TestRuleAllows(t *testing.T) {
	tests := []struct {
		name string
		rule rbacv1.PolicyRule
		a    authorizer.Attributes
		want bool
	}{
		// verbs
		{"verb exact", rule([]string{"get"}, core, "pods"), res("get", "", "pods", "", "ns", "p"), true},
		{"verb other", rule([]string{"get"}, core, "pods"), res("list", "", "pods", "", "ns", ""), false},
		{"verb star", rule(all, core, "pods"), res("deletecollection", "", "pods", "", "ns", ""), true},
		{"verb impersonate", rule([]string{"impersonate"}, core, "users"), res("impersonate", "", "users", "", "", "bob"), true},
		// api groups
		{"group core only", rule(read, core, "deployments"), res("get", "apps", "deployments", "", "ns", "d"), false},
		{"group exact", rule(read, []string{"apps"}, "deployments"), res("get", "apps", "deployments", "", "ns", "d"), true},
		{"group star", rule(read, all, "deployments"), res("get", "apps", "deployments", "", "ns", "d"), true},
		// resources and subresources
		{"resource other", rule(read, core, "pods"), res("get", "", "secrets", "", "ns", "s"), false},
		{"resource star", rule(read, core, "*"), res("get", "", "secrets", "", "ns", "s"), true},
		{"star covers subresources", rule(read, core, "*"), res("get", "", "pods", "log", "ns", "p"), true},
		{"parent does not cover subresource", rule(read, core, "pods"), res("get", "", "pods", "log", "ns", "p"), false},
		{"subresource exact", rule(read, core, "pods/log"), res("get", "", "pods", "log", "ns", "p"), true},
		{"subresource rule not parent", rule(read, core, "pods/log"), res("get", "", "pods", "", "ns", "p"), false},
		{"subresource other", rule(read, core, "pods/log"), res("get", "", "pods", "status", "ns", "p"), false},
		{"subresource of other resource", rule(read, core, "pods/log"), res("get", "", "podx", "log", "ns", "p"), false},
		{"star subresource", rule([]string{"update"}, all, "*/scale"), res("update", "apps", "deployments", "scale", "ns", "d"), true},
		{"star subresource not parent", rule([]string{"update"}, all, "*/scale"), res("update", "apps", "deployments", "", "ns", "d"), false},
		{"star subresource other", rule([]string{"update"}, all, "*/scale"), res("update", "apps", "deployments", "status", "ns", "d"), false},
		{"eviction", rule(create, core, "pods/eviction"), res("create", "", "pods", "eviction", "ns", "p"), true},
		// resource names
		{"name listed", named(rule(read, core, "configmaps"), "a", "b"), res("get", "", "configmaps", "", "ns", "b"), true},
		{"name not listed", named(rule(read, core, "configmaps"), "a", "b"), res("get", "", "configmaps", "", "ns", "c"), false},
		{"names refuse list without name", named(rule(read, core, "configmaps"), "a"), res("list", "", "configmaps", "", "ns", ""), false},
		{"names allow watch of one by field selector", named(rule(read, core, "configmaps"), "a"), res("watch", "", "configmaps", "", "ns", "a"), true},
		// non-resource URLs
		{"url exact", urls(get, "/healthz"), nonRes("get", "/healthz"), true},
		{"url not prefix without star", urls(get, "/healthz"), nonRes("get", "/healthz/etcd"), false},
		{"url star suffix", urls(get, "/healthz/*"), nonRes("get", "/healthz/etcd"), true},
		{"url star suffix covers bare prefix", urls(get, "/api/*"), nonRes("get", "/api/"), true},
		{"url star suffix not parent", urls(get, "/api/*"), nonRes("get", "/api"), false},
		{"url all", urls(get, "*"), nonRes("get", "/metrics"), true},
		{"url verb", urls(get, "/metrics"), nonRes("post", "/metrics"), false},
		{"url rule for resource request", urls(all, "*"), res("get", "", "pods", "", "ns", ""), false},
		{"resource rule for url request", rule(all, all, "*"), nonRes("get", "/healthz"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RuleAllows(&tt.a, &tt.rule); got != tt.want {
				t.Errorf("RuleAllows(%+v, %s) = %v, want %v", tt.a, CompactString(tt.rule), got, tt.want)
			}
		})
	}
}

func TestCovers(t *testing.T) {
	tests := []struct {
		name         string
		owner, want  []rbacv1.PolicyRule
		covered      bool
		missingLines []string
	}{
		{"same", []rbacv1.PolicyRule{rule(read, core, "pods")}, []rbacv1.PolicyRule{rule(read, core, "pods")}, true, nil},
		{"star covers", []rbacv1.PolicyRule{rule(all, all, "*")}, []rbacv1.PolicyRule{rule(read, []string{"apps"}, "deployments/scale")}, true, nil},
		{"star subresource covers", []rbacv1.PolicyRule{rule(read, core, "*/log")}, []rbacv1.PolicyRule{rule(read, core, "pods/log")}, true, nil},
		{"unnamed covers named", []rbacv1.PolicyRule{rule(read, core, "secrets")}, []rbacv1.PolicyRule{named(rule(get, core, "secrets"), "s")}, true, nil},
		{"named does not cover unnamed", []rbacv1.PolicyRule{named(rule(get, core, "secrets"), "s")}, []rbacv1.PolicyRule{rule(get, core, "secrets")}, false,
			[]string{`{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`}},
		{"url prefix covers", []rbacv1.PolicyRule{urls(get, "/healthz*")}, []rbacv1.PolicyRule{urls(get, "/healthz/etcd")}, true, nil},
		{"missing verbs compacted", []rbacv1.PolicyRule{rule(get, core, "pods")}, []rbacv1.PolicyRule{rule([]string{"get", "list", "delete"}, core, "pods")}, false,
			[]string{`{APIGroups:[""], Resources:["pods"], Verbs:["delete" "list"]}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, missing := Covers(tt.owner, tt.want)
			if ok != tt.covered {
				t.Fatalf("Covers = %v (missing %v), want %v", ok, missing, tt.covered)
			}
			var lines []string
			for _, r := range CompactRules(missing) {
				lines = append(lines, CompactString(r))
			}
			if len(lines) != len(tt.missingLines) {
				t.Fatalf("missing %q, want %q", lines, tt.missingLines)
			}
			for i := range lines {
				if lines[i] != tt.missingLines[i] {
					t.Errorf("missing %q, want %q", lines, tt.missingLines)
				}
			}
		})
	}
}
