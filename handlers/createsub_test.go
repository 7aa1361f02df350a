package handlers

import (
	"context"
	"testing"

	"github.com/corekube/corekube/registry"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeEviction is an in-test Creater in pods/eviction's shape: it takes a
// policy/v1 Eviction (policy/v1beta1 too) and answers what answer says.
type fakeEviction struct {
	answer  runtime.Object
	err     error
	created *policyv1.Eviction
	dryRun  bool
}

func (*fakeEviction) New() runtime.Object { return &policyv1.Eviction{} }
func (*fakeEviction) GroupVersionKind() schema.GroupVersionKind {
	return policyv1.SchemeGroupVersion.WithKind("Eviction")
}
func (*fakeEviction) AcceptsGroupVersion(gv schema.GroupVersion) bool {
	return gv == schema.GroupVersion{Group: "policy", Version: "v1beta1"}
}

func (e *fakeEviction) Create(ctx context.Context, namespace, name string, obj runtime.Object, dryRun bool) (runtime.Object, error) {
	e.created, e.dryRun = obj.(*policyv1.Eviction), dryRun
	registry.AddWarning(ctx, "evicted "+namespace+"/"+name)
	return e.answer, e.err
}

func TestCreateSubresource(t *testing.T) {
	evictionBody := `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p","namespace":"ns"}}`
	success := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: 201}
	budgets := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: 500,
		Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}
	for _, c := range []struct {
		name, query, body string
		answer            runtime.Object
		err, admitErr     error
		code              int
		reason            metav1.StatusReason
		msg               string
		dryRun            bool
	}{
		{name: "created", body: evictionBody, answer: success, code: 201},
		{name: "dry run", query: "?dryRun=All", body: evictionBody, answer: success, code: 201, dryRun: true},
		{name: "other accepted version", body: `{"apiVersion":"policy/v1beta1","kind":"Eviction","metadata":{"name":"p"}}`, answer: success, code: 201},
		{name: "the Status's own code", body: evictionBody, answer: budgets, code: 500},
		{name: "object answer", body: evictionBody, answer: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, code: 201},
		{name: "bad dry run", query: "?dryRun=x", body: evictionBody, code: 422, reason: metav1.StatusReasonInvalid, msg: `CreateOptions.meta.k8s.io "" is invalid: dryRun[0]`},
		{name: "wrong kind", body: `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p"}}`, code: 400, reason: metav1.StatusReasonBadRequest, msg: "Binding"},
		{name: "denied by admission", body: evictionBody, admitErr: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errPlain("no")),
			code: 403, reason: metav1.StatusReasonForbidden, msg: `pods "p" is forbidden: no`},
		{name: "refused", body: evictionBody, err: apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0),
			code: 429, reason: metav1.StatusReasonTooManyRequests, msg: "Cannot evict pod as it would violate the pod's disruption budget."},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &fakeEviction{answer: c.answer, err: c.err}
			r := newRequest("POST", "/api/v1/namespaces/ns/pods/p/eviction"+c.query, c.body, "application/json")
			ri, _ := parseRequestInfo(r.URL.Path)
			w := newRecorder()
			var admitted runtime.Object
			q := &request{w: w, r: r, info: ri, store: newFakeStore()}
			q.createSubresource(e, func(_ context.Context, obj runtime.Object, dryRun bool) error {
				admitted = obj
				if dryRun != c.dryRun {
					t.Errorf("admitted with dryRun %v", dryRun)
				}
				return c.admitErr
			})
			if c.code >= 400 && c.answer == nil {
				wantStatus(t, w, c.code, c.reason, c.msg)
				if e.created != nil && c.err == nil {
					t.Error("created despite the error")
				}
				return
			}
			wantCode(t, w, c.code, "application/json")
			if e.created == nil || e.created.Name != "p" || admitted != e.created || e.dryRun != c.dryRun {
				t.Errorf("created %+v (admitted %v), dryRun %v", e.created, admitted, e.dryRun)
			}
			if e.created.Kind != "Eviction" || e.created.APIVersion != "policy/v1" {
				t.Errorf("body decoded as %s", e.created.GroupVersionKind())
			}
			if got := w.Header().Get("Warning"); got != `299 - "evicted ns/p"` {
				t.Errorf("Warning %q", got)
			}
		})
	}
}
