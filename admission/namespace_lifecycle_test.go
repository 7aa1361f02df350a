package admission

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestNamespaceLifecycle(t *testing.T) {
	namespaces := map[string]*v1.Namespace{
		"live":        {ObjectMeta: metav1.ObjectMeta{Name: "live"}, Status: v1.NamespaceStatus{Phase: v1.NamespaceActive}},
		"terminating": {ObjectMeta: metav1.ObjectMeta{Name: "terminating"}, Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}},
	}
	p := &NamespaceLifecycle{Get: func(_ context.Context, name string) (*v1.Namespace, error) {
		if ns, ok := namespaces[name]; ok {
			return ns, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}}
	tests := []struct {
		name      string
		a         Attributes
		wantCode  int32
		wantMsg   string
		wantCause metav1.CauseType
	}{
		{name: "create in a live namespace", a: Attributes{Operation: Create, Resource: podsGVR, Namespace: "live", Name: "p"}},
		{name: "create in a missing namespace", a: Attributes{Operation: Create, Resource: podsGVR, Namespace: "gone", Name: "p"},
			wantCode: 404, wantMsg: `namespaces "gone" not found`},
		{name: "update in a missing namespace", a: Attributes{Operation: Update, Resource: podsGVR, Namespace: "gone", Name: "p"},
			wantCode: 404, wantMsg: `namespaces "gone" not found`},
		{name: "create in a terminating namespace", a: Attributes{Operation: Create, Resource: podsGVR, Namespace: "terminating", Name: "p"},
			wantCode: 403, wantMsg: `pods "p" is forbidden: unable to create new content in namespace terminating because it is being terminated`,
			wantCause: v1.NamespaceTerminatingCause},
		{name: "eviction in a terminating namespace", a: Attributes{Operation: Create, Resource: podsGVR, Subresource: "eviction", Namespace: "terminating", Name: "p"},
			wantCode: 403, wantMsg: `pods "p" is forbidden: unable to create new content in namespace terminating because it is being terminated`,
			wantCause: v1.NamespaceTerminatingCause},
		{name: "update in a terminating namespace", a: Attributes{Operation: Update, Resource: podsGVR, Namespace: "terminating", Name: "p"}},
		{name: "delete in a missing namespace", a: Attributes{Operation: Delete, Resource: podsGVR, Namespace: "gone", Name: "p"}},
		{name: "cluster-scoped", a: Attributes{Operation: Create, Resource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, Name: "n"}},
		{name: "delete kube-system", a: Attributes{Operation: Delete, Resource: namespacesGVR, Name: "kube-system"},
			wantCode: 403, wantMsg: `namespaces "kube-system" is forbidden: this namespace may not be deleted`},
		{name: "delete another namespace", a: Attributes{Operation: Delete, Resource: namespacesGVR, Name: "live"}},
		{name: "create a namespace", a: Attributes{Operation: Create, Resource: namespacesGVR, Name: "new"}},
		{name: "access review in a missing namespace", a: Attributes{Operation: Create,
			Resource: schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "localsubjectaccessreviews"}, Namespace: "gone"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Admit(context.Background(), &tc.a)
			if tc.wantCode == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			st, ok := err.(apierrors.APIStatus)
			if !ok {
				t.Fatalf("error %v, want %d %q", err, tc.wantCode, tc.wantMsg)
			}
			if st.Status().Code != tc.wantCode || st.Status().Message != tc.wantMsg {
				t.Errorf("got %d %q, want %d %q", st.Status().Code, st.Status().Message, tc.wantCode, tc.wantMsg)
			}
			if tc.wantCause != "" && (st.Status().Details == nil || len(st.Status().Details.Causes) != 1 || st.Status().Details.Causes[0].Type != tc.wantCause) {
				t.Errorf("details %+v, want cause %s", st.Status().Details, tc.wantCause)
			}
		})
	}
}

// TestNamespaceLifecycleLiveLookupAfterDelete: a create right after its
// namespace's DELETE reads the namespace from storage, not the cache that
// may not have seen the deletion yet, as kube's forceLiveLookup does.
func TestNamespaceLifecycleLiveLookupAfterDelete(t *testing.T) {
	stale := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: v1.NamespaceStatus{Phase: v1.NamespaceActive}}
	now := metav1.Now()
	live := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", DeletionTimestamp: &now}, Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}}
	p := &NamespaceLifecycle{
		Get:     func(context.Context, string) (*v1.Namespace, error) { return stale, nil },
		GetLive: func(context.Context, string) (*v1.Namespace, error) { return live, nil },
	}
	create := &Attributes{Operation: Create, Resource: podsGVR, Namespace: "ns", Name: "p"}
	if err := p.Admit(context.Background(), create); err != nil {
		t.Fatalf("create before the delete (cache says active): %v", err)
	}
	if err := p.Admit(context.Background(), &Attributes{Operation: Delete, Resource: namespacesGVR, Name: "ns"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Admit(context.Background(), create); !apierrors.IsForbidden(err) {
		t.Fatalf("create right after the namespace's delete = %v, want 403 (live lookup)", err)
	}
	if err := p.Admit(context.Background(), &Attributes{Operation: Create, Resource: podsGVR, Namespace: "other", Name: "p"}); err != nil {
		t.Fatalf("create in another namespace: %v", err)
	}
	if p.recentlyDeleted("ns", time.Now().Add(forceLiveLookupTTL+time.Second)) {
		t.Error("still looked up live after the TTL")
	}
}
