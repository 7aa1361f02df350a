package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
)

// TestAccessReviews: the four authorization.k8s.io reviews answer as the
// authorizer decides requests, for a certificate user with a Role.
func TestAccessReviews(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, uniqueName(t, "reviews"))
	name := uniqueName(t, "reviewer")
	ucs, _, _ := userClients(t, name)

	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-maker"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"create", "get"}, APIGroups: []string{""}, Resources: []string{"pods"}},
		{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "makers"},
		RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "pod-maker"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: name}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allowedReason := `RBAC: allowed by RoleBinding "makers/` + ns + `" of Role "pod-maker" to User "` + name + `"`

	self := func(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) (authorizationv1.SubjectAccessReviewStatus, error) {
		r, err := ucs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra, NonResourceAttributes: nra}}, metav1.CreateOptions{})
		if err != nil {
			return authorizationv1.SubjectAccessReviewStatus{}, err
		}
		return r.Status, nil
	}
	// The binding reaches the authorizer through a watch.
	untilNoError(t, "self review allowed once bound", func() error {
		st, err := self(&authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "pods"}, nil)
		if err != nil {
			return err
		}
		if !st.Allowed || st.Reason != allowedReason {
			return &reviewMismatch{st}
		}
		return nil
	})
	for _, c := range []struct {
		ra    *authorizationv1.ResourceAttributes
		nra   *authorizationv1.NonResourceAttributes
		allow bool
	}{
		{ra: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "delete", Resource: "pods"}},
		{ra: &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "create", Resource: "pods"}},
		{ra: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods", Subresource: "log"}, allow: true},
		{ra: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods", Subresource: "exec"}},
		// system:public-info-viewer lets everyone read /healthz.
		{nra: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/healthz"}, allow: true},
		{nra: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/metrics"}},
	} {
		st, err := self(c.ra, c.nra)
		if err != nil {
			t.Fatal(err)
		}
		if st.Allowed != c.allow || st.Denied {
			t.Errorf("%+v %+v: %+v, want allowed %v", c.ra, c.nra, st, c.allow)
		}
	}
	_, err := self(nil, nil)
	checkStatusErr(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		`.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified`)

	// SubjectAccessReview: cluster-admin asks about the user (the user may
	// not: only system:masters and the like may review others).
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: name, Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods", Name: "p"}}}
	got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Status.Allowed || got.Status.Reason != allowedReason || got.Spec.User != name {
		t.Errorf("subject access review: %+v", got)
	}
	sar.Spec.User = "someone-else"
	if got, err = cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{}); err != nil || got.Status.Allowed {
		t.Errorf("review of another user: %+v %v", got, err)
	}
	if _, err := ucs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{}); err == nil {
		t.Error("a plain user created a subjectaccessreview")
	}
	sar.Spec.User = ""
	sar.Spec.Groups = nil
	_, err = cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	checkStatusErr(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		`.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least one of user or group must be specified`)

	// LocalSubjectAccessReview: the review's namespace must be the URL's.
	local := &authorizationv1.LocalSubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: name,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "pods"}}}
	lgot, err := cs.AuthorizationV1().LocalSubjectAccessReviews(ns).Create(ctx, local, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !lgot.Status.Allowed || lgot.Namespace != ns {
		t.Errorf("local review: %+v", lgot)
	}
	_, err = cs.AuthorizationV1().LocalSubjectAccessReviews("default").Create(ctx, local, metav1.CreateOptions{})
	checkStatusErr(t, err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		`.authorization.k8s.io "" is invalid: spec.resourceAttributes.namespace: Invalid value: "`+ns+`": must match metadata.namespace`)
	// A namespace that does not exist is not revealed (kube's
	// NamespaceLifecycle lets access reviews through).
	missing := &authorizationv1.LocalSubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: name,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "no-such-ns", Verb: "get", Resource: "pods"}}}
	if lgot, err = cs.AuthorizationV1().LocalSubjectAccessReviews("no-such-ns").Create(ctx, missing, metav1.CreateOptions{}); err != nil || lgot.Status.Allowed {
		t.Errorf("local review in a missing namespace: %+v %v", lgot, err)
	}
	local.Namespace = ns
	_, err = cs.AuthorizationV1().LocalSubjectAccessReviews("default").Create(ctx, local, metav1.CreateOptions{})
	checkStatusErr(t, err, http.StatusBadRequest, metav1.StatusReasonBadRequest,
		"the namespace of the provided object does not match the namespace sent on the request")

	// SelfSubjectRulesReview: the Role's rules, and what everyone holds.
	rr, err := ucs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	has := func(rules []authorizationv1.ResourceRule, verbs []string, resource string) bool {
		return slices.ContainsFunc(rules, func(r authorizationv1.ResourceRule) bool {
			return slices.Equal(r.Verbs, verbs) && slices.Contains(r.Resources, resource)
		})
	}
	if !has(rr.Status.ResourceRules, []string{"create", "get"}, "pods") || !has(rr.Status.ResourceRules, []string{"get"}, "pods/log") ||
		!has(rr.Status.ResourceRules, []string{"create"}, "selfsubjectaccessreviews") {
		t.Errorf("rules in %s: %+v", ns, rr.Status.ResourceRules)
	}
	if !slices.ContainsFunc(rr.Status.NonResourceRules, func(r authorizationv1.NonResourceRule) bool { return slices.Contains(r.NonResourceURLs, "/healthz") }) {
		t.Errorf("non-resource rules: %+v", rr.Status.NonResourceRules)
	}
	if rr.Status.Incomplete || rr.Status.EvaluationError != "" {
		t.Errorf("status: incomplete %v, error %q", rr.Status.Incomplete, rr.Status.EvaluationError)
	}
	rr, err = ucs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil || has(rr.Status.ResourceRules, []string{"create", "get"}, "pods") {
		t.Errorf("rules in default: %+v %v", rr, err)
	}
	_, err = ucs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{}, metav1.CreateOptions{})
	checkStatusErr(t, err, http.StatusBadRequest, metav1.StatusReasonBadRequest, "no namespace on request")

	// A node cannot have its rules listed: the Node authorizer cannot
	// enumerate them.
	nodeCS, _, _ := userClients(t, "system:node:"+uniqueName(t, "n"), "system:nodes")
	rr, err = nodeCS.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil || !rr.Status.Incomplete || !strings.Contains(rr.Status.EvaluationError, "node authorizer does not support user rule resolution") {
		t.Errorf("node rules review: %+v %v", rr, err)
	}
}

// TestAccessReviewsDiscovery: the reviews are create-only resources of
// discovery and the OpenAPI documents, and a rules review answers its
// status alone, as kube's.
func TestAccessReviewsDiscovery(t *testing.T) {
	res, err := cs.Discovery().ServerResourcesForGroupVersion("authorization.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res.APIResources {
		got = append(got, fmt.Sprintf("%s %v %s %v", r.Name, r.Namespaced, r.Kind, r.Verbs))
	}
	want := []string{"localsubjectaccessreviews true LocalSubjectAccessReview [create]", "selfsubjectaccessreviews false SelfSubjectAccessReview [create]",
		"selfsubjectrulesreviews false SelfSubjectRulesReview [create]", "subjectaccessreviews false SubjectAccessReview [create]"}
	if !slices.Equal(got, want) {
		t.Errorf("discovery:\n got  %v\n want %v", got, want)
	}

	doc := doRaw(t, "GET", "/openapi/v3/apis/authorization.k8s.io/v1", nil)
	var v3 struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(doc.Body, &v3); err != nil || doc.Code != 200 {
		t.Fatalf("openapi v3: %d %v", doc.Code, err)
	}
	for _, p := range []string{"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
		"/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", "/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews"} {
		if ops := v3.Paths[p]; ops["post"] == nil || ops["get"] != nil {
			t.Errorf("openapi path %s: %v, want POST alone", p, ops)
		}
	}

	resp := doRaw(t, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
		[]byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"default"}}`))
	var body map[string]any
	if err := json.Unmarshal(resp.Body, &body); err != nil || resp.Code != 201 {
		t.Fatalf("rules review: %d %s", resp.Code, resp.Body)
	}
	st, _ := body["status"].(map[string]any)
	if _, hasSpec := body["spec"].(map[string]any)["namespace"]; hasSpec || st["resourceRules"] == nil || st["nonResourceRules"] == nil || st["incomplete"] != false {
		t.Errorf("rules review body: %s", resp.Body)
	}
	resp = doRaw(t, "GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", nil)
	if resp.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET selfsubjectaccessreviews: %d, want 405", resp.Code)
	}
}

type reviewMismatch struct {
	st authorizationv1.SubjectAccessReviewStatus
}

func (e *reviewMismatch) Error() string { return "review status " + e.st.String() }

// TestAccessReviewsAlwaysAllow: with --authorization-mode=AlwaysAllow
// every review is allowed, and a rules review lists kube's everything
// rules (system:masters aside, no RBAC).
func TestAccessReviewsAlwaysAllow(t *testing.T) {
	s := testserver.StartWith(t, t.TempDir(), func(c *server.Config) { c.AuthorizationModes = []string{"AlwaysAllow"} })
	ctx := context.Background()
	pair, err := testserver.IssueClient("anyone")
	if err != nil {
		t.Fatal(err)
	}
	c := rest.CopyConfig(s.Config)
	c.CertData, c.KeyData = pair.CertPEM, pair.KeyPEM
	ucs, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ucs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Resource: "nodes"}}}, metav1.CreateOptions{})
	if err != nil || !r.Status.Allowed || r.Status.Reason != "" {
		t.Errorf("self review: %+v %v", r, err)
	}
	rr, err := ucs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    []authorizationv1.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
		NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
	}
	if !apiequality.Semantic.DeepEqual(rr.Status, want) {
		t.Errorf("rules:\n got  %+v\n want %+v", rr.Status, want)
	}
}
