package admission

import (
	"context"
	"fmt"
	"sync"
	"time"

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
	// Get reads the namespace from a cache (the watch cache): cheap, and
	// at most an instant behind.
	Get NamespaceGetter
	// GetLive reads it from storage. Used (when set) for namespaces
	// deleted through this server in the last forceLiveLookupTTL, as
	// kube's plugin does: a create sent right after the namespace's
	// DELETE returned must see it terminating even if the cache has not
	// caught up yet.
	GetLive NamespaceGetter

	mu       sync.Mutex
	deleted  map[string]time.Time // namespace -> when its DELETE was admitted
	lastTrim time.Time
}

// forceLiveLookupTTL is how long after a namespace's DELETE its creates
// read the namespace from storage (kube's value).
const forceLiveLookupTTL = 30 * time.Second

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
		if a.Operation == Delete {
			p.recordDelete(a.Name, time.Now())
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
	get := p.Get
	if a.Operation == Create && p.GetLive != nil && p.recentlyDeleted(a.Namespace, time.Now()) {
		get = p.GetLive
	}
	ns, err := get(ctx, a.Namespace)
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

// recordDelete notes that the namespace name is being deleted at now.
func (p *NamespaceLifecycle) recordDelete(name string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted == nil {
		p.deleted = map[string]time.Time{}
	}
	p.deleted[name] = now
	// Forget expired entries now and then, so that the map stays as small
	// as the namespaces deleted in the last TTL.
	if now.Sub(p.lastTrim) > forceLiveLookupTTL {
		p.lastTrim = now
		for n, at := range p.deleted {
			if now.Sub(at) > forceLiveLookupTTL {
				delete(p.deleted, n)
			}
		}
	}
}

// recentlyDeleted: the namespace's DELETE was admitted within the TTL.
func (p *NamespaceLifecycle) recentlyDeleted(name string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.deleted[name]
	return ok && now.Sub(at) <= forceLiveLookupTTL
}
