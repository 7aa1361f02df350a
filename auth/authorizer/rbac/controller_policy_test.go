package rbac

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/auth/authorizer"
)

// bootstrapAuthorizer decides against the whole bootstrap policy.
func bootstrapAuthorizer() *Authorizer {
	c := NewCache()
	var crs, crbs []runtime.Object
	for _, r := range BootstrapClusterRoles() {
		crs = append(crs, r)
	}
	for _, x := range BootstrapClusterRoleBindings() {
		crbs = append(crbs, x)
	}
	c.Replace(KindClusterRole, crs)
	c.Replace(KindClusterRoleBinding, crbs)
	c.Replace(KindRole, nil)
	c.Replace(KindRoleBinding, nil)
	return New(c)
}

// TestControllerPolicy spot-checks kube's control-plane roles through
// their default bindings: what each identity may do and, as importantly,
// what it may not.
func TestControllerPolicy(t *testing.T) {
	z := bootstrapAuthorizer()
	ctrl := func(name string) []string {
		return []string{"system:serviceaccount:kube-system:" + name, "system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}
	}
	tests := []struct {
		who  []string
		a    authorizer.Attributes
		want bool
	}{
		{[]string{"system:kube-scheduler", "system:authenticated"}, res("create", "", "pods", "binding", "ns", "p"), true},
		{[]string{"system:kube-scheduler", "system:authenticated"}, res("update", "", "persistentvolumeclaims", "", "ns", "c"), true}, // system:volume-scheduler
		{[]string{"system:kube-scheduler", "system:authenticated"}, res("patch", "", "persistentvolumes", "", "", "v"), true},
		{[]string{"system:kube-scheduler", "system:authenticated"}, res("create", "", "pods", "", "ns", ""), false},
		// Leader election, as kube's: create any lease, get and update
		// only the component's own.
		{[]string{"system:kube-scheduler", "system:authenticated"}, res("create", "coordination.k8s.io", "leases", "", "kube-system", ""), true},
		{[]string{"system:kube-scheduler", "system:authenticated"}, res("get", "coordination.k8s.io", "leases", "", "kube-system", "kube-scheduler"), true},
		{[]string{"system:kube-scheduler", "system:authenticated"}, res("update", "coordination.k8s.io", "leases", "", "kube-system", "kube-scheduler"), true},
		{[]string{"system:kube-scheduler", "system:authenticated"}, res("update", "coordination.k8s.io", "leases", "", "kube-system", "kube-controller-manager"), false},
		{[]string{"system:kube-controller-manager", "system:authenticated"}, res("create", "coordination.k8s.io", "leases", "", "kube-system", ""), true},
		{[]string{"system:kube-controller-manager", "system:authenticated"}, res("get", "coordination.k8s.io", "leases", "", "kube-system", "kube-controller-manager"), true},
		{[]string{"system:kube-controller-manager", "system:authenticated"}, res("update", "coordination.k8s.io", "leases", "", "kube-system", "kube-controller-manager"), true},
		{[]string{"system:kube-controller-manager", "system:authenticated"}, res("update", "coordination.k8s.io", "leases", "", "kube-system", "kube-scheduler"), false},
		{[]string{"system:kube-controller-manager", "system:authenticated"}, res("list", "apps", "deployments", "", "", ""), true},
		{[]string{"system:kube-controller-manager", "system:authenticated"}, res("delete", "", "pods", "", "ns", "p"), false},
		{ctrl("pod-garbage-collector"), res("delete", "", "pods", "", "ns", "p"), true},
		{ctrl("pod-garbage-collector"), res("patch", "", "pods", "status", "ns", "p"), true},
		{ctrl("pod-garbage-collector"), res("create", "", "pods", "", "ns", ""), false},
		{ctrl("node-controller"), res("delete", "", "nodes", "", "", "n"), true},
		{ctrl("node-controller"), res("update", "", "nodes", "status", "", "n"), true},
		{ctrl("node-controller"), res("create", "events.k8s.io", "events", "", "ns", ""), true},
		{ctrl("namespace-controller"), res("deletecollection", "apps", "deployments", "", "ns", ""), true},
		{ctrl("namespace-controller"), res("update", "", "namespaces", "finalize", "", "ns"), true},
		{ctrl("namespace-controller"), res("create", "", "configmaps", "", "ns", ""), false},
		{ctrl("service-account-controller"), res("create", "", "serviceaccounts", "", "ns", ""), true},
		{ctrl("service-account-controller"), res("delete", "", "serviceaccounts", "", "ns", "default"), false},
		{ctrl("disruption-controller"), res("update", "policy", "poddisruptionbudgets", "status", "ns", "b"), true},
		{ctrl("disruption-controller"), res("get", "apps", "statefulsets", "scale", "ns", "s"), true},
		{ctrl("certificate-controller"), res("sign", "certificates.k8s.io", "signers", "", "", "kubernetes.io/kube-apiserver-client-kubelet"), true},
		{ctrl("certificate-controller"), res("approve", "certificates.k8s.io", "signers", "", "", "kubernetes.io/kube-apiserver-client-kubelet"), true},
		{ctrl("certificate-controller"), res("approve", "certificates.k8s.io", "signers", "", "", "kubernetes.io/kube-apiserver-client"), false},
		{ctrl("certificate-controller"), res("update", "certificates.k8s.io", "certificatesigningrequests", "approval", "", "c"), true},
		{ctrl("clusterrole-aggregation-controller"), res("escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", "admin"), true},
		{ctrl("clusterrole-aggregation-controller"), res("delete", "rbac.authorization.k8s.io", "clusterroles", "", "", "admin"), false},
		// a controller's account elsewhere than kube-system is nobody special
		{[]string{"system:serviceaccount:default:pod-garbage-collector", "system:authenticated"}, res("delete", "", "pods", "", "ns", "p"), false},
	}
	for _, tt := range tests {
		a := tt.a
		a.User = who(tt.who[0], tt.who[1:]...)
		d, reason, err := z.Authorize(context.Background(), a)
		if err != nil {
			t.Fatalf("%s %+v: %v", tt.who[0], tt.a, err)
		}
		if got := d == authorizer.DecisionAllow; got != tt.want {
			t.Errorf("%s %s %s/%s %s: allowed %v (%q), want %v", tt.who[0], a.Verb, a.Resource, a.Subresource, a.Name, got, reason, tt.want)
		}
	}
}

// TestControllerRoleBindings: each controller role is bound, under its own
// name, to the ServiceAccount kube-system/<controller>, and carries the
// bootstrap label and autoupdate annotation reconciliation relies on.
func TestControllerRoleBindings(t *testing.T) {
	roles := map[string]*rbacv1.ClusterRole{}
	for _, r := range BootstrapClusterRoles() {
		if roles[r.Name] != nil {
			t.Fatalf("role %s twice", r.Name)
		}
		roles[r.Name] = r
	}
	bindings := map[string]*rbacv1.ClusterRoleBinding{}
	for _, b := range BootstrapClusterRoleBindings() {
		if bindings[b.Name] != nil {
			t.Fatalf("binding %s twice", b.Name)
		}
		bindings[b.Name] = b
	}
	for _, name := range []string{"namespace-controller", "service-account-controller", "node-controller", "disruption-controller",
		"pod-garbage-collector", "certificate-controller", "clusterrole-aggregation-controller"} {
		role := ControllerRolePrefix + name
		r, b := roles[role], bindings[role]
		if r == nil || b == nil {
			t.Fatalf("%s: role %v binding %v", role, r != nil, b != nil)
		}
		if r.Annotations[AutoUpdateAnnotation] != "true" || r.Labels["kubernetes.io/bootstrapping"] != "rbac-defaults" {
			t.Errorf("%s: metadata %v %v", role, r.Labels, r.Annotations)
		}
		want := rbacv1.Subject{Kind: "ServiceAccount", Name: name, Namespace: "kube-system"}
		if b.RoleRef.Name != role || len(b.Subjects) != 1 || b.Subjects[0] != want {
			t.Errorf("%s: binding %+v %+v", role, b.RoleRef, b.Subjects)
		}
	}
	for _, name := range []string{"system:kube-scheduler", "system:volume-scheduler"} {
		if b := bindings[name]; b == nil || b.RoleRef.Name != name || len(b.Subjects) != 1 || b.Subjects[0] != userSubject("system:kube-scheduler") {
			t.Errorf("%s binding: %+v", name, b)
		}
	}
	for name, r := range roles {
		for _, rl := range r.Rules {
			for _, l := range [][]string{rl.Verbs, rl.APIGroups, rl.Resources} {
				if !strings.EqualFold(strings.Join(l, ","), strings.Join(sorted(l), ",")) {
					t.Errorf("%s: rule list %v not sorted as kube's", name, l)
				}
			}
		}
	}
}
