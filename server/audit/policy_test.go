package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	p := &Policy{Kind: "Policy", APIVersion: "audit.k8s.io/v1", OmitStages: []Stage{StageRequestReceived}, Rules: []PolicyRule{
		{Level: LevelNone, Users: []string{"system:kube-proxy"}, Verbs: []string{"watch"}},
		{Level: LevelNone, NonResourceURLs: []string{"/healthz*", "/version"}},
		{Level: LevelRequestResponse, Resources: []GroupResources{{Group: "", Resources: []string{"pods/log", "*/status"}}}},
		{Level: LevelRequest, Resources: []GroupResources{{Group: "rbac.authorization.k8s.io"}}, OmitStages: []Stage{StageResponseStarted}},
		{Level: LevelMetadata, Resources: []GroupResources{{Group: "", Resources: []string{"pods"}, ResourceNames: []string{"special"}}}},
		{Level: LevelNone, UserGroups: []string{"system:nodes"}},
		{Level: LevelRequest, Namespaces: []string{"kube-system"}},
		{Level: LevelMetadata},
	}}
	if err := p.validate(); err != nil {
		t.Fatal(err)
	}
	res := func(verb, group, resource, sub, ns, name string) *Attributes {
		return &Attributes{User: "alice", Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	for _, tc := range []struct {
		name  string
		attrs *Attributes
		want  Level
		omit  int
	}{
		{"user and verb", &Attributes{User: "system:kube-proxy", Verb: "watch", ResourceRequest: true, Resource: "pods"}, LevelNone, -1},
		{"user, other verb", &Attributes{User: "system:kube-proxy", Verb: "list", ResourceRequest: true, Resource: "pods"}, LevelMetadata, 1},
		{"non-resource prefix", &Attributes{Verb: "get", Path: "/healthz/etcd"}, LevelNone, -1},
		{"non-resource other", &Attributes{Verb: "get", Path: "/metrics"}, LevelMetadata, 1},
		{"resource/subresource", res("get", "", "pods", "log", "ns", "p"), LevelRequestResponse, 1},
		{"*/subresource", res("update", "", "nodes", "status", "", "n"), LevelRequestResponse, 1},
		{"whole group, rule's own omitted stage", res("create", "rbac.authorization.k8s.io", "roles", "", "ns", ""), LevelRequest, 2},
		{"resourceNames", res("get", "", "pods", "", "ns", "special"), LevelMetadata, 1},
		{"group", &Attributes{User: "system:node:n1", Groups: []string{"system:nodes"}, Verb: "get", ResourceRequest: true, Resource: "pods"}, LevelNone, -1},
		{"namespace", res("get", "", "pods", "", "kube-system", "p"), LevelRequest, 1},
		{"namespaces rule skips non-resource", &Attributes{Verb: "get", Path: "/api"}, LevelMetadata, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(tc.attrs)
			if d.Level != tc.want || (tc.omit >= 0 && len(d.OmitStages) != tc.omit) {
				t.Errorf("got %s omit %v, want %s with %d omitted", d.Level, d.OmitStages, tc.want, tc.omit)
			}
		})
	}
	if d := (&Policy{}).Decide(res("get", "", "pods", "", "", "")); d.Level != LevelNone {
		t.Errorf("empty policy: %s", d.Level)
	}
}

func TestLoadPolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		path := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	p, err := LoadPolicy(write("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"))
	if err != nil || len(p.Rules) != 1 || p.Rules[0].Level != LevelMetadata {
		t.Fatalf("valid policy: %+v %v", p, err)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"apiVersion: v1\nkind: Pod\n", "want kind Policy"},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n", `rules[0].level: Unsupported value: "Everything"`},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Sometimes]\nrules: []\n", `omitStages: Unsupported value: "Sometimes"`},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [/x]\n  namespaces: [a]\n", "both regular resources and non-resource URLs"},
		{"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  bogus: 1\n", "unknown field"},
	} {
		if _, err := LoadPolicy(write(bad.yaml)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want %q", bad.yaml, err, bad.want)
		}
	}
}
