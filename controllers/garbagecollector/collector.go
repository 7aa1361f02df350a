package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/retry"
)

var (
	// errVirtualDelete: the object is gone; a virtual delete event will
	// take it out of the graph, no retry.
	errVirtualDelete = errors.New("object gone, virtual delete event queued")
	// errNamespacedOwnerOfClusterScoped: a cluster-scoped object names a
	// namespaced owner, which no retry mends.
	errNamespacedOwnerOfClusterScoped = errors.New("cluster-scoped object references a namespaced owner")
)

// mappingError: a reference names a kind that is not served (perhaps not
// yet); retried.
type mappingError struct{ apiVersion, kind string }

func (e *mappingError) Error() string {
	return fmt.Sprintf("no resource serves %s %s", e.apiVersion, e.kind)
}

// errStillVirtual retries, without a log line, an owner not observed yet.
var errStillVirtual = errors.New("owner not observed yet")

// syncAttemptToDelete handles one item of attemptToDelete; an error
// retries it with the queue's back-off (attemptToDeleteFailed logs it).
func (c *Controller) syncAttemptToDelete(ctx context.Context, n *node) error {
	c.mu.RLock()
	current, inGraph := c.uidToNode[n.identity.UID]
	c.mu.RUnlock()
	if current != n || !inGraph {
		// Replaced or removed meanwhile.
		return nil
	}
	err := c.attemptToDeleteItem(ctx, n)
	c.mu.RLock()
	virtual := n.virtual
	c.mu.RUnlock()
	switch {
	case errors.Is(err, errVirtualDelete), errors.Is(err, errNamespacedOwnerOfClusterScoped):
		return nil
	case err != nil:
		return err
	case virtual:
		// Not observed yet: look again until the informer reports it or
		// a lookup finds it gone (an object added and removed while a
		// watch reconnected would otherwise stay virtual forever).
		return errStillVirtual
	}
	return nil
}

func (c *Controller) attemptToDeleteFailed(n *node, err error) {
	var me *mappingError
	switch {
	case errors.Is(err, errStillVirtual):
	case errors.As(err, &me):
		c.log.Debug("garbage collector: cannot map reference, retrying", "item", n.identity.String(), "err", err)
	default:
		c.log.Warn("garbage collector: error syncing item", "item", n.identity.String(), "err", err)
	}
}

// nodeState is a copy, taken under the lock, of what a worker reads of a
// node.
type nodeState struct {
	identity                         objectReference
	beingDeleted, deletingDependents bool
	dependents                       int
	dependentsDeleting               bool
}

func (c *Controller) stateOf(n *node) nodeState {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s := nodeState{identity: n.identity, beingDeleted: n.beingDeleted, deletingDependents: n.deletingDependents, dependents: len(n.dependents)}
	for dep := range n.dependents {
		if dep.deletingDependents {
			s.dependentsDeleting = true
		}
	}
	return s
}

// attemptToDeleteItem looks at the live object of n and deletes it when
// none of its owners exists any more, as kube's attemptToDeleteItem.
func (c *Controller) attemptToDeleteItem(ctx context.Context, n *node) error {
	st := c.stateOf(n)
	if st.beingDeleted && !st.deletingDependents {
		// On its way out; its dependents are handled once it is gone.
		return nil
	}
	latest, err := c.getObject(ctx, st.identity)
	switch {
	case apierrors.IsNotFound(err):
		c.queueVirtualDelete(st.identity)
		return errVirtualDelete
	case err != nil:
		return err
	}
	if latest.UID != st.identity.UID {
		c.queueVirtualDelete(st.identity)
		return errVirtualDelete
	}
	if st.deletingDependents {
		return c.processDeletingDependents(ctx, n)
	}
	refs := latest.OwnerReferences
	if len(refs) == 0 {
		return nil
	}
	solid, dangling, waiting, err := c.classifyReferences(ctx, st.identity, refs)
	if err != nil {
		return err
	}
	switch {
	case len(solid) != 0:
		if len(dangling) == 0 && len(waiting) == 0 {
			return nil
		}
		// An owner still exists: drop only the references to the gone
		// ones, and to owners in foreground deletion (which would
		// otherwise wait for this dependent forever).
		var uids []types.UID
		for _, ref := range append(dangling, waiting...) {
			uids = append(uids, ref.UID)
		}
		return c.removeOwnerReferences(ctx, st.identity, uids)
	case len(waiting) != 0 && st.dependents != 0:
		if st.dependentsDeleting {
			// A dependent of n waits for its own dependents while n's
			// owner waits for n: maybe a cycle. Stop n blocking its
			// owners (kube's cycle breaking, with its false positives).
			if err := c.unblockOwnerReferences(ctx, st.identity); err != nil {
				return err
			}
		}
		return c.deleteObject(ctx, st.identity, metav1.DeletePropagationForeground)
	default:
		// No owner left: collect it, with the policy its finalizers
		// already ask for, if any.
		policy := metav1.DeletePropagationBackground
		switch {
		case hasFinalizer(latest, metav1.FinalizerOrphanDependents):
			policy = metav1.DeletePropagationOrphan
		case hasFinalizer(latest, metav1.FinalizerDeleteDependents):
			policy = metav1.DeletePropagationForeground
		}
		c.log.Debug("garbage collector: deleting object", "item", st.identity.String(), "policy", policy)
		return c.deleteObject(ctx, st.identity, policy)
	}
}

// processDeletingDependents handles an owner in foreground deletion: once
// no dependent blocks it, its foregroundDeletion finalizer goes; until
// then its blocking dependents are queued for deletion.
func (c *Controller) processDeletingDependents(ctx context.Context, n *node) error {
	c.mu.RLock()
	blocking := n.blockingDependents()
	var queue []*node
	for _, dep := range blocking {
		if !dep.deletingDependents {
			queue = append(queue, dep)
		}
	}
	identity := n.identity
	c.mu.RUnlock()
	if len(blocking) == 0 {
		c.log.Debug("garbage collector: removing foregroundDeletion finalizer", "item", identity.String())
		return c.removeFinalizer(ctx, identity, metav1.FinalizerDeleteDependents)
	}
	for _, dep := range queue {
		c.attemptToDelete.Add(dep)
	}
	return nil
}

// classifyReferences sorts refs into owners that exist (solid), that are
// gone (dangling) and that exist but wait for their dependents' deletion.
func (c *Controller) classifyReferences(ctx context.Context, item objectReference, refs []metav1.OwnerReference) (solid, dangling, waiting []metav1.OwnerReference, err error) {
	for _, ref := range refs {
		gone, owner, err := c.isDangling(ctx, ref, item)
		if err != nil {
			return nil, nil, nil, err
		}
		switch {
		case gone:
			dangling = append(dangling, ref)
		case waitsForDependentsDeletion(owner):
			waiting = append(waiting, ref)
		default:
			solid = append(solid, ref)
		}
	}
	return solid, dangling, waiting, nil
}

// isDangling reports whether the owner ref names is gone: not found, or
// found with another uid (a new object of the same name is not the
// owner). A namespaced owner is looked up in the dependent's namespace.
func (c *Controller) isDangling(ctx context.Context, ref metav1.OwnerReference, item objectReference) (bool, *metav1.PartialObjectMetadata, error) {
	key := refCoordinates(ref)
	c.mu.RLock()
	absent := c.absentOwners.has(key)
	key.Namespace = item.Namespace
	absent = absent || c.absentOwners.has(key)
	c.mu.RUnlock()
	if absent {
		return true, nil, nil
	}
	info, err := c.resourceFor(ref.APIVersion, ref.Kind)
	if err != nil {
		return false, nil, err
	}
	if !info.namespaced {
		key.Namespace = ""
	}
	if item.Namespace == "" && info.namespaced {
		c.log.Debug("garbage collector: cluster-scoped item references a namespaced owner", "item", item.String(), "owner", ref.Name)
		return false, nil, errNamespacedOwnerOfClusterScoped
	}
	ns := ""
	if info.namespaced {
		ns = item.Namespace
	}
	owner, err := c.metadata.Resource(info.gvr).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		c.noteAbsent(key)
		return true, nil, nil
	case err != nil:
		return false, nil, fmt.Errorf("get owner %s %s: %w", ref.Kind, ref.Name, err)
	}
	if owner.UID != ref.UID {
		c.noteAbsent(key)
		return true, nil, nil
	}
	return false, owner, nil
}

func (c *Controller) noteAbsent(r objectReference) {
	c.mu.Lock()
	c.absentOwners.add(r)
	c.mu.Unlock()
}

// resourceFor maps a reference's apiVersion and kind to its resource.
func (c *Controller) resourceFor(apiVersion, kind string) (resourceInfo, error) {
	c.mu.RLock()
	info, ok := c.kinds[schema.FromAPIVersionAndKind(apiVersion, kind)]
	c.mu.RUnlock()
	if !ok {
		return resourceInfo{}, &mappingError{apiVersion: apiVersion, kind: kind}
	}
	return info, nil
}

// client is the metadata client of identity's resource and namespace.
func (c *Controller) client(identity objectReference) (metadata.ResourceInterface, error) {
	info, err := c.resourceFor(identity.APIVersion, identity.Kind)
	if err != nil {
		return nil, err
	}
	if !info.namespaced {
		return c.metadata.Resource(info.gvr), nil
	}
	return c.metadata.Resource(info.gvr).Namespace(identity.Namespace), nil
}

func (c *Controller) getObject(ctx context.Context, identity objectReference) (*metav1.PartialObjectMetadata, error) {
	client, err := c.client(identity)
	if err != nil {
		return nil, err
	}
	return client.Get(ctx, identity.Name, metav1.GetOptions{})
}

// deleteObject deletes the object identity names, only if it still has
// its uid.
func (c *Controller) deleteObject(ctx context.Context, identity objectReference, policy metav1.DeletionPropagation) error {
	client, err := c.client(identity)
	if err != nil {
		return err
	}
	uid := identity.UID
	err = client.Delete(ctx, identity.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &policy})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone, or another object now: the informers will say.
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", identity, err)
	}
	return nil
}

// queueVirtualDelete tells the graph that identity was found gone.
func (c *Controller) queueVirtualDelete(identity objectReference) {
	c.graphChanges.Add(&event{
		typ: deleteEvent, virtual: true, gvk: identity.gvk(),
		obj: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: identity.Name, Namespace: identity.Namespace, UID: identity.UID}},
	})
}

// removeOwnerReferences removes from the object identity names its
// references to the owners uids, with a strategic merge patch whose uid
// makes sure it is the same object.
func (c *Controller) removeOwnerReferences(ctx context.Context, identity objectReference, uids []types.UID) error {
	client, err := c.client(identity)
	if err != nil {
		return err
	}
	refs := make([]map[string]any, 0, len(uids))
	for _, uid := range uids {
		refs = append(refs, map[string]any{"$patch": "delete", "uid": uid})
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs, "uid": identity.UID}})
	if err != nil {
		return fmt.Errorf("owner references patch: %w", err)
	}
	_, err = client.Patch(ctx, identity.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove owner references of %s: %w", identity, err)
	}
	return nil
}

// unblockOwnerReferences sets blockOwnerDeletion=false on every reference
// of identity that had it true.
func (c *Controller) unblockOwnerReferences(ctx context.Context, identity objectReference) error {
	c.mu.RLock()
	n := c.uidToNode[identity.UID]
	var refs []map[string]any
	if n != nil {
		for _, ref := range n.owners {
			if ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				refs = append(refs, map[string]any{"uid": ref.UID, "blockOwnerDeletion": false})
			}
		}
	}
	c.mu.RUnlock()
	if len(refs) == 0 {
		return nil
	}
	client, err := c.client(identity)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs, "uid": identity.UID}})
	if err != nil {
		return fmt.Errorf("owner references patch: %w", err)
	}
	if _, err := client.Patch(ctx, identity.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("unblock owner references of %s: %w", identity, err)
	}
	return nil
}

// removeFinalizer removes finalizer from the object identity names (that
// object, not a new one of the same name), retrying on conflicts.
func (c *Controller) removeFinalizer(ctx context.Context, identity objectReference, finalizer string) error {
	client, err := c.client(identity)
	if err != nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := client.Get(ctx, identity.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get %s: %w", identity, err)
		}
		if cur.UID != identity.UID || !hasFinalizer(cur, finalizer) {
			return nil
		}
		kept := []string{}
		for _, f := range cur.Finalizers {
			if f != finalizer {
				kept = append(kept, f)
			}
		}
		// The resourceVersion makes it a compare-and-swap.
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": kept, "resourceVersion": cur.ResourceVersion}})
		if err != nil {
			return err
		}
		_, err = client.Patch(ctx, identity.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("remove finalizer %s of %s: %w", finalizer, identity, err)
	}
	return nil
}

func (c *Controller) attemptToOrphanFailed(owner *node, err error) {
	c.log.Warn("garbage collector: orphaning failed, retrying", "owner", owner.identity.String(), "err", err)
}

// orphanDependents removes the references to owner from its dependents,
// then owner's orphan finalizer, as kube's attemptToOrphanWorker.
func (c *Controller) orphanDependents(ctx context.Context, owner *node) error {
	c.mu.RLock()
	identity := owner.identity
	var deps []objectReference
	for dep := range owner.dependents {
		deps = append(deps, dep.identity)
	}
	c.mu.RUnlock()
	var errs []error
	for _, dep := range deps {
		if err := c.removeOwnerReferences(ctx, dep, []types.UID{identity.UID}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("orphan dependents of %s: %w", identity, err)
	}
	return c.removeFinalizer(ctx, identity, metav1.FinalizerOrphanDependents)
}
