package flowcontrol

import (
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/handlers"
)

func res(verb, group, resource, sub, ns string) *handlers.RequestInfo {
	return &handlers.RequestInfo{IsResourceRequest: true, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns}
}

func nonRes(verb, path string) *handlers.RequestInfo {
	return &handlers.RequestInfo{Verb: verb, Path: path}
}

var (
	admin     = &user.Info{Name: "kubernetes-admin", Groups: []string{"system:masters", "system:authenticated"}}
	node      = &user.Info{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	scheduler = &user.Info{Name: "system:kube-scheduler", Groups: []string{"system:authenticated"}}
	kcm       = &user.Info{Name: "system:kube-controller-manager", Groups: []string{"system:authenticated"}}
	ksSA      = &user.Info{Name: "system:serviceaccount:kube-system:foo", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
	epSA      = &user.Info{Name: "system:serviceaccount:kube-system:endpoint-controller", Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	appSA     = &user.Info{Name: "system:serviceaccount:default:app", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"}}
	alice     = &user.Info{Name: "alice", Groups: []string{"system:authenticated"}}
	anonymous = &user.Info{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
)

// TestClassifyBootstrap classifies requests against kube's bootstrap
// configuration as kube-apiserver v1.32 does.
func TestClassifyBootstrap(t *testing.T) {
	c := New(Options{})
	tests := []struct {
		name   string
		u      *user.Info
		ri     *handlers.RequestInfo
		fs, pl string
	}{
		{"admin", admin, res("list", "", "pods", "", ""), "exempt", "exempt"},
		{"admin non-resource", admin, nonRes("get", "/metrics"), "exempt", "exempt"},
		{"node lease", node, res("update", "coordination.k8s.io", "leases", "", "kube-node-lease"), "system-node-high", "node-high"},
		{"node status", node, res("patch", "", "nodes", "status", ""), "system-node-high", "node-high"},
		{"node get node", node, res("get", "", "nodes", "", ""), "system-node-high", "node-high"},
		{"node pods", node, res("list", "", "pods", "", ""), "system-nodes", "system"},
		{"node pod status", node, res("patch", "", "pods", "status", "default"), "system-nodes", "system"},
		{"node other subresource of nodes", node, res("get", "", "nodes", "proxy", ""), "system-nodes", "system"},
		{"scheduler lease", scheduler, res("update", "coordination.k8s.io", "leases", "", "kube-system"), "system-leader-election", "leader-election"},
		{"scheduler watch lease", scheduler, res("watch", "coordination.k8s.io", "leases", "", "kube-system"), "kube-scheduler", "workload-high"},
		{"scheduler binding", scheduler, res("create", "", "pods", "binding", "default"), "kube-scheduler", "workload-high"},
		{"kcm endpoints", kcm, res("update", "", "endpoints", "", "default"), "endpoint-controller", "workload-high"},
		{"kcm configmap in kube-system (leases only lead, as kube 1.32)", kcm, res("get", "", "configmaps", "", "kube-system"), "kube-controller-manager", "workload-high"},
		{"kcm configmap elsewhere", kcm, res("get", "", "configmaps", "", "default"), "kube-controller-manager", "workload-high"},
		{"kube-system SA lease", ksSA, res("create", "coordination.k8s.io", "leases", "", "default"), "system-leader-election", "leader-election"},
		{"kube-system SA configmap elsewhere", ksSA, res("update", "", "configmaps", "", "default"), "workload-leader-election", "leader-election"},
		{"kube-system SA list", ksSA, res("list", "", "pods", "", ""), "kube-system-service-accounts", "workload-high"},
		{"endpoint controller SA", epSA, res("update", "", "endpoints", "", "default"), "endpoint-controller", "workload-high"},
		{"app SA", appSA, res("get", "", "pods", "", "default"), "service-accounts", "workload-low"},
		{"app SA lease", appSA, res("update", "coordination.k8s.io", "leases", "", "default"), "service-accounts", "workload-low"},
		{"anonymous probe", anonymous, nonRes("get", "/readyz"), "probes", "exempt"},
		{"anonymous probe post", anonymous, nonRes("post", "/readyz"), "global-default", "global-default"},
		{"probe subpath", alice, nonRes("get", "/readyz/etcd"), "global-default", "global-default"},
		{"anonymous version", anonymous, nonRes("get", "/version"), "global-default", "global-default"},
		{"user", alice, res("list", "", "pods", "", ""), "global-default", "global-default"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := c.Classify(tc.u, tc.ri)
			if got.FlowSchema != tc.fs || got.PriorityLevel != tc.pl {
				t.Errorf("got %s/%s, want %s/%s", got.FlowSchema, got.PriorityLevel, tc.fs, tc.pl)
			}
			if got.Exempt != (tc.pl == "exempt") {
				t.Errorf("exempt = %v", got.Exempt)
			}
		})
	}
}

// TestClassifyConfigChanges: precedence ties go by name, dangling schemas
// never match, and without any match the mandatory catch-all applies.
func TestClassifyConfigChanges(t *testing.T) {
	b := BootstrapConfiguration()
	c := New(Options{})
	extra := func(name, level string, prec int32, subject string) *flowcontrolv1.FlowSchema {
		return &flowcontrolv1.FlowSchema{
			ObjectMeta: metav1ObjectMeta(name),
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
				MatchingPrecedence:         prec,
				Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
					Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: subject}}},
					ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}, Namespaces: []string{"team-a"}}},
				}},
			},
		}
	}
	fss := append(b.FlowSchemas, extra("b-alice", "workload-low", 50, "alice"), extra("a-alice", "workload-high", 50, "alice"), extra("dangling", "missing", 10, "*"))
	c.Update(fss, b.PriorityLevels)
	if got := c.Classify(alice, res("list", "", "pods", "", "team-a")); got.FlowSchema != "a-alice" {
		t.Errorf("tie: got %s, want a-alice (by name)", got.FlowSchema)
	}
	if got := c.Classify(alice, res("list", "", "pods", "", "team-b")); got.FlowSchema != "global-default" {
		t.Errorf("other namespace: got %s", got.FlowSchema)
	}
	if got := c.Classify(alice, res("list", "", "pods", "", "")); got.FlowSchema != "global-default" {
		t.Errorf("cluster scope: got %s (namespaced rule)", got.FlowSchema)
	}
	// Only the exempt schema: everything else falls back to catch-all.
	c.Update(b.FlowSchemas[:1], b.PriorityLevels)
	if got := c.Classify(alice, res("get", "", "pods", "", "x")); got.FlowSchema != "catch-all" || got.PriorityLevel != "catch-all" {
		t.Errorf("fallback: got %+v", got)
	}
	// No levels at all: a level of the fallback's own.
	c.Update(nil, nil)
	if got := c.Classify(admin, res("get", "", "pods", "", "x")); got.FlowSchema != "catch-all" || got.Exempt {
		t.Errorf("no configuration: got %+v", got)
	}
}

// TestNominalConcurrency: each limited level's seats are
// ceil(serverCL × shares / Σ shares), kube's nominal concurrency limits.
func TestNominalConcurrency(t *testing.T) {
	c := New(Options{})
	// Σ shares of the bootstrap levels: 5+30+40+10+40+100+20 = 245 (exempt 0).
	want := map[string]int{"catch-all": 13, "system": 74, "node-high": 98, "leader-election": 25, "workload-high": 98, "workload-low": 245, "global-default": 49, "exempt": -1}
	for name, limit := range want {
		if got := c.LevelLimit(name); got != limit {
			t.Errorf("%s: %d seats, want %d", name, got, limit)
		}
	}
	small := New(Options{ServerConcurrencyLimit: 15})
	for name, limit := range map[string]int{"catch-all": 1, "node-high": 3, "global-default": 2, "workload-low": 7} {
		if got := small.LevelLimit(name); got != limit {
			t.Errorf("serverCL 15, %s: %d seats, want %d", name, got, limit)
		}
	}
}

func TestFlowHashDistinguishes(t *testing.T) {
	c := New(Options{})
	s := c.classify(alice, res("list", "", "pods", "", "a"))
	if s.flowOf(alice, res("list", "", "pods", "", "a")) == s.flowOf(&user.Info{Name: "bob", Groups: alice.Groups}, res("list", "", "pods", "", "a")) {
		t.Error("ByUser: alice and bob share a flow")
	}
	k := c.classify(kcm, res("list", "", "pods", "", "a"))
	if k.flowOf(kcm, res("list", "", "pods", "", "a")) == k.flowOf(kcm, res("list", "", "pods", "", "b")) {
		t.Error("ByNamespace: namespaces a and b share a flow")
	}
}

func TestAutoUpdate(t *testing.T) {
	key := flowcontrolv1.AutoUpdateAnnotationKey
	tests := []struct {
		mandatory  bool
		ann        map[string]string
		generation int64
		update     bool
		value      string
	}{
		{true, nil, 5, true, "true"},
		{true, map[string]string{key: "false"}, 1, true, "true"},
		{false, map[string]string{key: "false"}, 1, false, "false"},
		{false, map[string]string{key: "true"}, 7, true, "true"},
		{false, map[string]string{key: "TRUE"}, 7, true, "TRUE"},
		{false, nil, 1, true, "true"},
		{false, nil, 2, false, "false"},
		{false, map[string]string{key: "maybe"}, 3, false, "false"},
	}
	for _, tc := range tests {
		update, value := AutoUpdate(tc.mandatory, tc.ann, tc.generation)
		if update != tc.update || value != tc.value {
			t.Errorf("AutoUpdate(%v, %v, %d) = %v, %q; want %v, %q", tc.mandatory, tc.ann, tc.generation, update, value, tc.update, tc.value)
		}
	}
}

func TestBootstrapConfiguration(t *testing.T) {
	b := BootstrapConfiguration()
	if len(b.FlowSchemas) != 13 || len(b.PriorityLevels) != 8 {
		t.Fatalf("%d flow schemas, %d levels; kube v1.32 has 13 and 8", len(b.FlowSchemas), len(b.PriorityLevels))
	}
	for _, k := range []string{"FlowSchema/exempt", "FlowSchema/catch-all", "PriorityLevelConfiguration/exempt", "PriorityLevelConfiguration/catch-all"} {
		if !b.Mandatory[k] {
			t.Errorf("%s not mandatory", k)
		}
	}
	if len(b.Mandatory) != 4 {
		t.Errorf("mandatory: %v", b.Mandatory)
	}
	for _, fs := range b.FlowSchemas {
		if fs.Annotations != nil {
			t.Errorf("%s keeps annotations %v", fs.Name, fs.Annotations)
		}
	}
}
