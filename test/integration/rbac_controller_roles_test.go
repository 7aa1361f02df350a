package integration

import (
	"context"
	"fmt"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corekube/corekube/test/testserver"
)

// TestRBACBootstrapControlPlaneRoles: the scheduler's and controllers'
// bootstrap roles are served and bound as kube binds them, so a
// SubjectAccessReview for those identities answers as kube-apiserver's.
func TestRBACBootstrapControlPlaneRoles(t *testing.T) {
	ctx := context.Background()
	s := testserver.Start(t)
	gc := "system:serviceaccount:kube-system:pod-garbage-collector"
	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}
	tests := []struct {
		user   string
		groups []string
		attrs  authzv1.ResourceAttributes
		want   bool
	}{
		{"system:kube-scheduler", []string{"system:authenticated"},
			authzv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "default", Name: "p"}, true},
		{"system:kube-scheduler", []string{"system:authenticated"},
			authzv1.ResourceAttributes{Verb: "update", Resource: "persistentvolumeclaims", Namespace: "default", Name: "c"}, true},
		{"system:kube-scheduler", []string{"system:authenticated"},
			authzv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: "default"}, false},
		{gc, saGroups, authzv1.ResourceAttributes{Verb: "delete", Resource: "pods", Namespace: "default", Name: "p"}, true},
		{gc, saGroups, authzv1.ResourceAttributes{Verb: "create", Resource: "pods", Namespace: "default"}, false},
		{"system:serviceaccount:kube-system:node-controller", saGroups,
			authzv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Subresource: "status", Name: "n"}, true},
		{"system:serviceaccount:kube-system:namespace-controller", saGroups,
			authzv1.ResourceAttributes{Verb: "deletecollection", Group: "apps", Resource: "deployments", Namespace: "default"}, true},
	}
	for _, tt := range tests {
		attrs := tt.attrs
		untilNoError(t, fmt.Sprintf("%s %s %s/%s", tt.user, attrs.Verb, attrs.Resource, attrs.Subresource), func() error {
			r, err := s.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
				Spec: authzv1.SubjectAccessReviewSpec{User: tt.user, Groups: tt.groups, ResourceAttributes: &attrs},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if r.Status.Allowed != tt.want {
				return fmt.Errorf("allowed %v (%q), want %v", r.Status.Allowed, r.Status.Reason, tt.want)
			}
			return nil
		})
	}
	// The controller roles are listed as kube's are.
	for _, name := range []string{"system:controller:pod-garbage-collector", "system:controller:certificate-controller", "system:volume-scheduler"} {
		if _, err := s.Client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("clusterrole %s: %v", name, err)
		}
		if _, err := s.Client.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("clusterrolebinding %s: %v", name, err)
		}
	}
}
