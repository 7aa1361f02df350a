package admission

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// NamespaceGetter looks a namespace up; it returns a NotFound Status error
// when it does not exist.
type NamespaceGetter func(ctx context.Context, name string) (*v1.Namespace, error)

// immortalNamespaces cannot be deleted, as in kube.
var immortalNamespaces = map[string]bool{
	metav1.NamespaceDefault: true, metav1.NamespaceSystem: true, metav1.NamespacePublic: true,
}

// NamespaceLifecycle refuses creates and updates in namespaces that do not
// exist (404), creates (subresource ones too: an eviction, a binding) in
// namespaces being deleted (403, cause NamespaceTerminating), and deleting
// the system namespaces, like kube's NamespaceLifecycle plugin.
type NamespaceLifecycle struct {
	Get NamespaceGetter
}

// It is a Mutator (it runs before defaulting and validation) so that a
// write into a missing namespace is 404 before it can be 422, as in kube.
var _ Mutator = (*NamespaceLifecycle)(nil)

var namespacesResource = schema.GroupResource{Resource: "namespaces"}

// Admit implements Mutator; it never changes the object.
func (p *NamespaceLifecycle) Admit(ctx context.Context, a *Attributes) error {
	if a.Resource.Group == "" && a.Resource.Resource == "namespaces" {
		if a.Operation == Delete && immortalNamespaces[a.Name] {
			return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
				fmt.Errorf("this namespace may not be deleted"))
		}
		return nil
	}
	if a.Namespace == "" || a.Operation == Delete || a.Operation == Connect {
		return nil
	}
	// An access review must not tell whether a namespace exists (kube's
	// exception, so that nobody can probe for namespace names).
	if a.Resource.Group == "authorization.k8s.io" && a.Resource.Resource == "localsubjectaccessreviews" {
		return nil
	}
	ns, err := p.Get(ctx, a.Namespace)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return apierrors.NewNotFound(namespacesResource, a.Namespace)
		}
		return err
	}
	// kube admits updates in a terminating namespace (as deletes) so that
	// its contents can be finalized and removed; only creates are refused.
	if a.Operation == Create && (ns.Status.Phase == v1.NamespaceTerminating || ns.DeletionTimestamp != nil) {
		err := apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", a.Namespace))
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type:    v1.NamespaceTerminatingCause,
			Message: fmt.Sprintf("namespace %s is being terminated", a.Namespace),
			Field:   "metadata.namespace",
		})
		return err
	}
	return nil
}
