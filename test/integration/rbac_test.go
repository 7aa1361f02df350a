package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
)

// userClients returns a clientset and an HTTP client authenticating as
// name in groups (a client certificate of the test CA).
func userClients(t *testing.T, name string, groups ...string) (kubernetes.Interface, *http.Client, *rest.Config) {
	t.Helper()
	pair, err := testserver.IssueClient(name, groups...)
	if err != nil {
		t.Fatal(err)
	}
	c := clientWithCert(pair)
	clients, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		t.Fatal(err)
	}
	return clients, hc, c
}

// getBody sends method path with hc and returns the code and body.
func getBody(t *testing.T, hc *http.Client, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(data))
}

// untilNoError polls cond until it holds (RBAC changes reach the
// authorizer's cache through a watch), failing after 10s.
func untilNoError(t *testing.T, what string, cond func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, last)
	}
}

func forbiddenStatus(msg, group, kind, name string) string {
	details := map[string]string{}
	if group != "" {
		details["group"] = group
	}
	if kind != "" {
		details["kind"] = kind
	}
	if name != "" {
		details["name"] = name
	}
	st := map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure",
		"message": msg, "reason": "Forbidden", "details": details, "code": 403}
	data, _ := json.Marshal(st)
	return string(data)
}

// sameJSON compares two JSON documents by value.
func sameJSON(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("body %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gd, _ := json.Marshal(g)
	wd, _ := json.Marshal(w)
	if string(gd) != string(wd) {
		t.Errorf("body\n got %s\nwant %s", gd, wd)
	}
}

// TestRBACDenials: kube's 403 bodies for a namespaced list, a cluster-scoped
// list, a subresource, a deletecollection (including the /pods/%2F form),
// a non-resource path; anonymous may read health and version only.
func TestRBACDenials(t *testing.T) {
	_, hc, _ := userClients(t, "system:serviceaccount:ns:bot", "system:serviceaccounts", "system:serviceaccounts:ns")
	const who = `User "system:serviceaccount:ns:bot"`
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/api/v1/namespaces/ns/pods", forbiddenStatus(`pods is forbidden: `+who+` cannot list resource "pods" in API group "" in the namespace "ns"`, "", "pods", "")},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true", forbiddenStatus(`pods is forbidden: `+who+` cannot watch resource "pods" in API group "" in the namespace "ns"`, "", "pods", "")},
		{"GET", "/api/v1/nodes", forbiddenStatus(`nodes is forbidden: `+who+` cannot list resource "nodes" in API group "" at the cluster scope`, "", "nodes", "")},
		{"GET", "/api/v1/namespaces/ns/pods/p1/log", forbiddenStatus(`pods "p1" is forbidden: `+who+` cannot get resource "pods/log" in API group "" in the namespace "ns"`, "", "pods", "p1")},
		{"DELETE", "/api/v1/namespaces/ns/pods", forbiddenStatus(`pods is forbidden: `+who+` cannot deletecollection resource "pods" in API group "" in the namespace "ns"`, "", "pods", "")},
		{"DELETE", "/api/v1/namespaces/ns/pods/%2F", forbiddenStatus(`pods is forbidden: `+who+` cannot deletecollection resource "pods" in API group "" in the namespace "ns"`, "", "pods", "")},
		{"GET", "/apis/apps/v1/namespaces/ns/deployments/d", forbiddenStatus(`deployments.apps "d" is forbidden: `+who+` cannot get resource "deployments" in API group "apps" in the namespace "ns"`, "apps", "deployments", "d")},
		{"GET", "/metrics", forbiddenStatus(`forbidden: `+who+` cannot get path "/metrics"`, "", "", "")},
		{"GET", "/debug/pprof/", forbiddenStatus(`forbidden: `+who+` cannot get path "/debug/pprof/"`, "", "", "")},
		{"GET", "/debug/pprof/heap", forbiddenStatus(`forbidden: `+who+` cannot get path "/debug/pprof/heap"`, "", "", "")},
	} {
		code, body := getBody(t, hc, tt.method, tt.path)
		if code != http.StatusForbidden {
			t.Errorf("%s %s: %d %s, want 403", tt.method, tt.path, code, body)
			continue
		}
		sameJSON(t, body, tt.body)
	}
	// What every authenticated user may: discovery, version, health.
	for _, path := range []string{"/api", "/apis", "/version", "/healthz", "/readyz", "/livez"} {
		if code, body := getBody(t, hc, "GET", path); code != http.StatusOK {
			t.Errorf("GET %s: %d %s, want 200", path, code, body)
		}
	}

	anon := testserver.AnonymousHTTPClient()
	for _, path := range []string{"/version", "/healthz", "/readyz", "/livez"} {
		if code, body := getBody(t, anon, "GET", path); code != http.StatusOK {
			t.Errorf("anonymous GET %s: %d %s, want 200", path, code, body)
		}
	}
	code, body := getBody(t, anon, "GET", "/api/v1/namespaces/gold/pods")
	if code != http.StatusForbidden || body != strings.TrimSpace(string(goldenBody(t, "403-anonymous-no-token"))) {
		t.Errorf("anonymous list: %d %s, want kube's reference body", code, body)
	}
	for _, path := range []string{"/api", "/metrics", "/metrics/slis", "/debug/pprof/", "/debug/pprof/profile?seconds=1"} {
		if code, _ := getBody(t, anon, "GET", path); code != http.StatusForbidden {
			t.Errorf("anonymous GET %s: %d, want 403", path, code)
		}
	}
}

// TestRBACRoleGrants: a Role bound to a user allows exactly its rules, in
// its namespace; a ClusterRole bound by a RoleBinding only in that
// namespace; removing the binding takes the access away.
func TestRBACRoleGrants(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, uniqueName(t, "rbac"))
	other := createNamespace(t, uniqueName(t, "rbac-other"))
	name := uniqueName(t, "dev")
	ucs, _, _ := userClients(t, name)

	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}},
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"allowed"}},
	}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dev-reads"},
		RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: name}}}
	created, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.RoleRef.APIGroup != rbacv1.GroupName || created.Subjects[0].APIGroup != rbacv1.GroupName {
		t.Errorf("defaults not applied: %+v %+v", created.RoleRef, created.Subjects)
	}
	untilNoError(t, "list pods once bound", func() error {
		_, err := ucs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err
	})
	if _, err := ucs.CoreV1().Pods(other).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list pods in another namespace: %v, want 403", err)
	}
	if err := ucs.CoreV1().Pods(ns).Delete(ctx, "p", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete a pod: %v, want 403", err)
	}
	for cm, want := range map[string]bool{"allowed": true, "other": false} {
		_, err := ucs.CoreV1().ConfigMaps(ns).Get(ctx, cm, metav1.GetOptions{})
		if got := !apierrors.IsForbidden(err); got != want {
			t.Errorf("get configmap %s: %v, want allowed %v", cm, err, want)
		}
	}

	// The ClusterRole "view" (aggregated) through a RoleBinding: in ns only.
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dev-view"},
		RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	untilNoError(t, "list serviceaccounts through view", func() error {
		_, err := ucs.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{})
		return err
	})
	if _, err := ucs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("view lists secrets: %v, want 403", err)
	}

	for _, b := range []string{"dev-reads", "dev-view"} {
		if err := cs.RbacV1().RoleBindings(ns).Delete(ctx, b, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	untilNoError(t, "refused once unbound", func() error {
		_, err := ucs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			return err
		}
		return nil
	})
}

func createNamespace(t *testing.T, name string) string {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// TestRBACEscalation: a user who may write roles and rolebindings may not
// grant more than they hold (kube's message), unless allowed to escalate
// or bind.
func TestRBACEscalation(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, uniqueName(t, "esc"))
	name := uniqueName(t, "lead")
	ucs, _, _ := userClients(t, name, "leads")
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "rbac-writer"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"create", "update", "get"}, APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}},
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "lead"},
		RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "rbac-writer"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	held := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "held"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	untilNoError(t, "create a role of held rules", func() error {
		_, err := ucs.RbacV1().Roles(ns).Create(ctx, held, metav1.CreateOptions{})
		return err
	})

	more := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "more"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get", "delete", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	_, err := ucs.RbacV1().Roles(ns).Create(ctx, more, metav1.CreateOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`roles.rbac.authorization.k8s.io "more" is forbidden: user "`+name+`" (groups=["leads" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:[""], Resources:["pods"], Verbs:["delete" "list"]}`)

	// As kube, escalation is refused before validation: an invalid role
	// that escalates is a 403, not a 422.
	invalid := more.DeepCopy()
	invalid.Name = "invalid"
	invalid.Rules = append(invalid.Rules, rbacv1.PolicyRule{Resources: []string{"pods"}})
	_, err = ucs.RbacV1().Roles(ns).Create(ctx, invalid, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("invalid escalating role: %v, want 403", err)
	}

	bindAdmin := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admin"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: name}}}
	_, err = ucs.RbacV1().RoleBindings(ns).Create(ctx, bindAdmin, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `rolebindings.rbac.authorization.k8s.io "admin" is forbidden: user "`+name+`"`) ||
		!strings.Contains(err.Error(), `{APIGroups:["*"], Resources:["*"], Verbs:["*"]}`) {
		t.Errorf("bind cluster-admin: %v, want kube's escalation 403", err)
	}
	// Binding a role whose rules are held is fine (once the role is in
	// the authorizer's cache, as kube's listers).
	untilNoError(t, "bind a held role", func() error {
		_, err := ucs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "held"},
			RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "held"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "anyone"}}}, metav1.CreateOptions{})
		return err
	})

	// escalate on roles, bind on cluster-admin: now both pass.
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "escalator"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"escalate"}, APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles"}},
		{Verbs: []string{"bind"}, APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, ResourceNames: []string{"cluster-admin"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "escalator"},
		RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "escalator"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "leads"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	untilNoError(t, "create a role with escalate", func() error {
		_, err := ucs.RbacV1().Roles(ns).Create(ctx, more, metav1.CreateOptions{})
		return err
	})
	if _, err := ucs.RbacV1().RoleBindings(ns).Create(ctx, bindAdmin, metav1.CreateOptions{}); err != nil {
		t.Errorf("bind cluster-admin with bind: %v", err)
	}
}

// TestRBACImpersonateVerb: impersonation needs impersonate on each of the
// user, groups, uid and extras, refused with kube's 403 otherwise.
func TestRBACImpersonateVerb(t *testing.T) {
	ctx := context.Background()
	name := uniqueName(t, "imp")
	_, _, c := userClients(t, name)
	crName := uniqueName(t, "impersonator")
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: crName}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"impersonate"}, APIGroups: []string{""}, Resources: []string{"users"}, ResourceNames: []string{"bob"}},
		{Verbs: []string{"impersonate"}, APIGroups: []string{""}, Resources: []string{"groups"}, ResourceNames: []string{"readers"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.RbacV1().ClusterRoles().Delete(ctx, crName, metav1.DeleteOptions{}) })
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: crName},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: crName}, Subjects: []rbacv1.Subject{{Kind: "User", Name: name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.RbacV1().ClusterRoleBindings().Delete(ctx, crName, metav1.DeleteOptions{}) })

	asWith := func(imp rest.ImpersonationConfig) kubernetes.Interface {
		ic := rest.CopyConfig(c)
		ic.Impersonate = imp
		x, err := kubernetes.NewForConfig(ic)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	as := func(u string, groups ...string) kubernetes.Interface {
		ic := rest.CopyConfig(c)
		ic.Impersonate = rest.ImpersonationConfig{UserName: u, Groups: groups}
		x, err := kubernetes.NewForConfig(ic)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	// bob has no rights: a 403 naming bob shows the impersonation worked.
	untilNoError(t, "impersonate bob", func() error {
		_, err := as("bob").CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), `User "bob" cannot list resource "namespaces"`) {
			return nil
		}
		return err
	})
	_, err := as("carol").CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`users "carol" is forbidden: User "`+name+`" cannot impersonate resource "users" in API group "" at the cluster scope`)
	if _, err := as("bob", "readers").CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "bob"`) {
		t.Errorf("bob in readers: %v", err)
	}
	_, err = as("bob", "system:masters").CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`groups "system:masters" is forbidden: User "`+name+`" cannot impersonate resource "groups" in API group "" at the cluster scope`)
	_, err = asWith(rest.ImpersonationConfig{UserName: "bob", UID: "u-1"}).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`uids.authentication.k8s.io "u-1" is forbidden: User "`+name+`" cannot impersonate resource "uids" in API group "authentication.k8s.io" at the cluster scope`)
	_, err = asWith(rest.ImpersonationConfig{UserName: "bob", Extra: map[string][]string{"scopes": {"view"}}}).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`userextras.authentication.k8s.io "view" is forbidden: User "`+name+`" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope`)
	_, err = as("system:serviceaccount:kube-system:default").CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	checkStatusErr(t, err, 403, metav1.StatusReasonForbidden,
		`serviceaccounts "default" is forbidden: User "`+name+`" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "kube-system"`)
}

// TestRBACResources: the bootstrap policy is there (autoupdate, aggregated
// roles filled by the controller), kubectl's Tables for bindings, roleRef
// is immutable, names are path segments.
func TestRBACResources(t *testing.T) {
	ctx := context.Background()
	admin, err := cs.RbacV1().ClusterRoles().Get(ctx, "cluster-admin", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if admin.Annotations["rbac.authorization.kubernetes.io/autoupdate"] != "true" || admin.Labels["kubernetes.io/bootstrapping"] != "rbac-defaults" {
		t.Errorf("cluster-admin metadata: %v %v", admin.Labels, admin.Annotations)
	}
	untilNoError(t, "view aggregated into edit and admin", func() error {
		for _, n := range []string{"admin", "edit", "view"} {
			r, err := cs.RbacV1().ClusterRoles().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			found := false
			for _, rule := range r.Rules {
				for _, res := range rule.Resources {
					found = found || res == "pods/log"
				}
			}
			if !found {
				return &aggregationMissing{n}
			}
		}
		return nil
	})

	// Discovery and OpenAPI come from the generic mechanism.
	resources, err := cs.Discovery().ServerResourcesForGroupVersion("rbac.authorization.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range resources.APIResources {
		got = append(got, fmt.Sprintf("%s:%v:%d:%s", r.Name, r.Namespaced, len(r.ShortNames), strings.Join(r.Verbs, ",")))
	}
	verbs := "create,delete,deletecollection,get,list,patch,update,watch"
	if want := []string{"clusterrolebindings:false:0:" + verbs, "clusterroles:false:0:" + verbs, "rolebindings:true:0:" + verbs, "roles:true:0:" + verbs}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("discovery %v, want %v", got, want)
	}
	oa := doRaw(t, "GET", "/openapi/v3/apis/rbac.authorization.k8s.io/v1", nil)
	if oa.Code != http.StatusOK || !strings.Contains(string(oa.Body), `"io.k8s.api.rbac.v1.ClusterRoleBinding"`) {
		t.Errorf("OpenAPI v3 of rbac: %d", oa.Code)
	}

	ns := createNamespace(t, uniqueName(t, "rbac-table"))
	b, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewers"},
		RoleRef:  rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "u1"}, {Kind: "Group", Name: "g1"}, {Kind: "ServiceAccount", Name: "sa1", Namespace: ns}, {Kind: "User", Name: "u2"}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp := doRaw(t, "GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/rolebindings", nil, "Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")
	var table metav1.Table
	if err := json.Unmarshal(resp.Body, &table); err != nil {
		t.Fatalf("%d %s: %v", resp.Code, resp.Body, err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols, ",") != "Name,Role,Age,Users,Groups,ServiceAccounts" || len(table.Rows) != 1 {
		t.Fatalf("table %v with %d rows", cols, len(table.Rows))
	}
	cells := table.Rows[0].Cells
	if cells[0] != "viewers" || cells[1] != "ClusterRole/view" || cells[3] != "u1, u2" || cells[4] != "g1" || cells[5] != ns+"/sa1" {
		t.Errorf("row %v", cells)
	}

	b.RoleRef.Name = "edit"
	_, err = cs.RbacV1().RoleBindings(ns).Update(ctx, b, metav1.UpdateOptions{})
	checkStatusErr(t, err, 422, metav1.StatusReasonInvalid,
		`RoleBinding.rbac.authorization.k8s.io "viewers" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: cannot change roleRef`)

	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "a:b@c"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}, Resources: []string{"pods"}}}}, metav1.CreateOptions{})
	checkStatusErr(t, err, 422, metav1.StatusReasonInvalid,
		`ClusterRole.rbac.authorization.k8s.io "a:b@c" is invalid: rules[0].nonResourceURLs: Invalid value: []string{"/x"}: rules cannot apply to both regular resources and non-resource URLs`)
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}}, {Resources: []string{"pods"}}}}, metav1.CreateOptions{})
	checkStatusErr(t, err, 422, metav1.StatusReasonInvalid,
		`Role.rbac.authorization.k8s.io "r" is invalid: [rules[0].nonResourceURLs: Invalid value: []string{"/x"}: namespaced rules cannot apply to non-resource URLs, rules[1].verbs: Required value: verbs must contain at least one value, rules[1].apiGroups: Required value: resource rules must supply at least one api group]`)
}

type aggregationMissing struct{ role string }

func (e *aggregationMissing) Error() string { return "clusterrole " + e.role + " lacks pods/log" }

// TestRBACAggregation: a ClusterRole labelled to aggregate into view has its
// rules added to view (and through view's label to edit and admin), and
// removed when it goes.
func TestRBACAggregation(t *testing.T) {
	ctx := context.Background()
	name := uniqueName(t, "widgets-view")
	resource := name + "s"
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{resource}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	has := func(role string) (bool, error) {
		r, err := cs.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, rule := range r.Rules {
			for _, res := range rule.Resources {
				if res == resource {
					return true, nil
				}
			}
		}
		return false, nil
	}
	for _, role := range []string{"view", "edit", "admin"} {
		untilNoError(t, "aggregated into "+role, func() error {
			ok, err := has(role)
			if err == nil && !ok {
				return &aggregationMissing{role}
			}
			return err
		})
	}
	if err := cs.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	untilNoError(t, "removed from admin", func() error {
		ok, err := has("admin")
		if err == nil && ok {
			return &aggregationMissing{"admin (still there)"}
		}
		return err
	})
}

// TestRBACAlwaysAllow: with --authorization-mode=AlwaysAllow any
// authenticated user may do anything, impersonation included.
func TestRBACAlwaysAllow(t *testing.T) {
	s := testserver.StartWith(t, t.TempDir(), func(c *server.Config) { c.AuthorizationModes = []string{"AlwaysAllow"} })
	pair, err := testserver.IssueClient("nobody")
	if err != nil {
		t.Fatal(err)
	}
	c := rest.CopyConfig(s.Config)
	c.CertData, c.KeyData = pair.CertPEM, pair.KeyPEM
	c.Impersonate.UserName = "someone"
	ucs, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ucs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("list nodes: %v", err)
	}
}

// TestRBACBootstrapReconcile: on restart the bootstrap policy gets back
// what was taken from it (roles' rules, bindings' subjects), except from
// what is annotated autoupdate "false"; what was added stays.
func TestRBACBootstrapReconcile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := testserver.StartInDir(t, dir)
	crs := s.Client.RbacV1().ClusterRoles()
	discovery, err := crs.Get(ctx, "system:discovery", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	discovery.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/custom"}}}
	if _, err := crs.Update(ctx, discovery, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	basic, err := crs.Get(ctx, "system:basic-user", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	basic.Annotations["rbac.authorization.kubernetes.io/autoupdate"] = "false"
	basic.Rules = nil
	if _, err := crs.Update(ctx, basic, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	crbs := s.Client.RbacV1().ClusterRoleBindings()
	viewer, err := crbs.Get(ctx, "system:public-info-viewer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	viewer.Subjects = viewer.Subjects[:1]
	if _, err := crbs.Update(ctx, viewer, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := crs.Delete(ctx, "system:monitoring", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Stop(t)

	s = testserver.StartInDir(t, dir)
	crs = s.Client.RbacV1().ClusterRoles()
	discovery, err = crs.Get(ctx, "system:discovery", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, r := range discovery.Rules {
		urls = append(urls, r.NonResourceURLs...)
	}
	if got := strings.Join(urls, " "); !strings.Contains(got, "/custom") || !strings.Contains(got, "/apis/*") || !strings.Contains(got, "/version") {
		t.Errorf("system:discovery URLs after restart: %s", got)
	}
	if basic, err = crs.Get(ctx, "system:basic-user", metav1.GetOptions{}); err != nil || len(basic.Rules) != 0 {
		t.Errorf("system:basic-user (autoupdate false) after restart: %v %v", basic.Rules, err)
	}
	if _, err := crs.Get(ctx, "system:monitoring", metav1.GetOptions{}); err != nil {
		t.Errorf("system:monitoring not recreated: %v", err)
	}
	viewer, err = s.Client.RbacV1().ClusterRoleBindings().Get(ctx, "system:public-info-viewer", metav1.GetOptions{})
	if err != nil || len(viewer.Subjects) != 2 {
		t.Errorf("system:public-info-viewer subjects after restart: %v %v", viewer.Subjects, err)
	}
	// Anonymous health checks work again right after the restart.
	resp, err := testserver.AnonymousHTTPClient().Get(s.URL() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("anonymous /healthz after restart: %d", resp.StatusCode)
	}
}
