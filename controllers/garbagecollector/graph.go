package garbagecollector

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// objectReference identifies an object: an owner reference's coordinates
// (apiVersion, kind, name, uid) and the namespace.
type objectReference struct {
	APIVersion, Kind, Name string
	UID                    types.UID
	Namespace              string
}

// String is kube's form, which its events print.
func (r objectReference) String() string {
	return fmt.Sprintf("[%s/%s, namespace: %s, name: %s, uid: %s]", r.APIVersion, r.Kind, r.Namespace, r.Name, r.UID)
}

func (r objectReference) gvk() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(r.APIVersion, r.Kind)
}

// refCoordinates is the identity an owner reference names, without a
// namespace.
func refCoordinates(ref metav1.OwnerReference) objectReference {
	return objectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID}
}

// refMatches reports whether ref names the object identity is: same uid,
// name and kind, and the same group (any version).
func refMatches(ref metav1.OwnerReference, identity objectReference) bool {
	if ref.UID != identity.UID || ref.Name != identity.Name || ref.Kind != identity.Kind {
		return false
	}
	a, errA := schema.ParseGroupVersion(ref.APIVersion)
	b, errB := schema.ParseGroupVersion(identity.APIVersion)
	return errA == nil && errB == nil && a.Group == b.Group
}

// node is an object of the graph. Its fields are guarded by the graph's
// lock (Controller.mu); the graph-changes goroutine is the only writer.
type node struct {
	identity objectReference
	// dependents are the nodes whose ownerReferences name this one.
	dependents map[*node]struct{}
	// owners are the object's ownerReferences as last observed.
	owners []metav1.OwnerReference
	// virtual: referenced as an owner, not observed by an informer (yet).
	virtual bool
	// beingDeleted: deletionTimestamp set. deletingDependents: and the
	// foregroundDeletion finalizer, so the collector deletes its
	// dependents first.
	beingDeleted, deletingDependents bool
}

// blockingDependents are the dependents whose reference to n has
// blockOwnerDeletion: a foreground deletion of n waits for them.
func (n *node) blockingDependents() []*node {
	var out []*node
	for dep := range n.dependents {
		for _, ref := range dep.owners {
			if ref.UID == n.identity.UID && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
				out = append(out, dep)
			}
		}
	}
	return out
}

func dependentsOf(n *node) []*node {
	out := make([]*node, 0, len(n.dependents))
	for dep := range n.dependents {
		out = append(out, dep)
	}
	return out
}

func beingDeleted(m metav1.Object) bool { return m.GetDeletionTimestamp() != nil }

func hasFinalizer(m metav1.Object, f string) bool { return slices.Contains(m.GetFinalizers(), f) }

// waitsForOrphaning / waitsForDependentsDeletion: deleted with the orphan
// / foregroundDeletion finalizer.
func waitsForOrphaning(m metav1.Object) bool {
	return m != nil && beingDeleted(m) && hasFinalizer(m, metav1.FinalizerOrphanDependents)
}

func waitsForDependentsDeletion(m metav1.Object) bool {
	return m != nil && beingDeleted(m) && hasFinalizer(m, metav1.FinalizerDeleteDependents)
}

type eventType int

const (
	addEvent eventType = iota
	updateEvent
	deleteEvent
)

// event is a change the informers (or, virtual, a worker that found an
// object gone) report to the graph.
type event struct {
	typ     eventType
	virtual bool
	obj     *metav1.PartialObjectMetadata
	old     *metav1.PartialObjectMetadata
	gvk     schema.GroupVersionKind
}

func (e *event) identity() objectReference {
	apiVersion, kind := e.gvk.ToAPIVersionAndKind()
	return objectReference{APIVersion: apiVersion, Kind: kind, Name: e.obj.Name, UID: e.obj.UID, Namespace: e.obj.Namespace}
}

// oldMeta is e.old as a metav1.Object, nil when there is none (a nil
// pointer in an interface is not nil).
func (e *event) oldMeta() metav1.Object {
	if e.old == nil {
		return nil
	}
	return e.old
}

// processGraphChange applies one change to the graph and queues what it
// makes worth a look, as kube's GraphBuilder.processGraphChanges.
func (c *Controller) processGraphChange(e *event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	uid := e.obj.UID
	existing, found := c.uidToNode[uid]
	if found && !e.virtual && existing.virtual {
		// First observation of an object known as an owner only.
		observed := e.identity()
		if observed != existing.identity {
			// Dependents that named it otherwise (another namespace, kind
			// or name) may have lost their owner: have them checked.
			_, mismatched := partitionDependents(dependentsOf(existing), observed)
			for _, dep := range mismatched {
				if observed.Namespace != "" && dep.identity.Namespace != observed.Namespace {
					c.reportInvalidNamespaceOwnerRef(dep, observed.UID)
				}
				c.attemptToDelete.Add(dep)
			}
			existing.identity = observed
		}
		existing.virtual = false
	}
	switch {
	case e.typ != deleteEvent && !found:
		// dependents stays nil until the node has one: most objects
		// (every pod) own nothing, and an empty map costs ~50 bytes each.
		n := &node{
			identity:           e.identity(),
			owners:             e.obj.OwnerReferences,
			beingDeleted:       beingDeleted(e.obj),
			deletingDependents: waitsForDependentsDeletion(e.obj),
		}
		c.uidToNode[uid] = n
		c.addDependentToOwners(n, n.owners)
		c.processTransitions(e.oldMeta(), e.obj, n)
	case e.typ != deleteEvent:
		added, removed, changed := referencesDiffs(existing.owners, e.obj.OwnerReferences)
		if len(added)+len(removed)+len(changed) > 0 {
			// A foreground deletion may have been waiting for a
			// dependent that no longer blocks it.
			c.queueUnblockedOwners(removed, changed)
			existing.owners = e.obj.OwnerReferences
			c.addDependentToOwners(existing, added)
			c.removeDependentFromOwners(existing, removed)
		}
		if beingDeleted(e.obj) {
			existing.beingDeleted = true
		}
		c.processTransitions(e.oldMeta(), e.obj, existing)
	case !found:
		// A delete of an object never seen: nothing to do.
	default:
		c.processDelete(e, existing)
	}
}

// processDelete handles a delete event for n, observed or virtual.
func (c *Controller) processDelete(e *event, n *node) {
	if e.virtual {
		// A worker found the object gone under the identity it looked up.
		deleted := e.identity()
		matching, mismatched := partitionDependents(dependentsOf(n), deleted)
		if n.virtual && len(mismatched) > 0 {
			// Dependents disagree on the owner's coordinates: it is gone
			// only under the ones that were looked up.
			if len(matching) > 0 {
				c.absentOwners.add(deleted)
				for _, dep := range matching {
					c.attemptToDelete.Add(dep)
				}
			}
			if n.identity == deleted {
				// Look it up next under another identity.
				for _, dep := range mismatched {
					for _, ref := range dep.owners {
						if ref.UID == deleted.UID && !refMatches(ref, deleted) {
							alt := refCoordinates(ref)
							alt.Namespace = dep.identity.Namespace
							n.identity = alt
							c.attemptToDelete.AddRateLimited(n)
							return
						}
					}
				}
			}
			return
		}
		if !n.virtual && n.identity != deleted {
			// The object observed exists; only the references naming it
			// otherwise are dangling.
			if len(matching) > 0 {
				c.absentOwners.add(deleted)
				for _, dep := range matching {
					c.attemptToDelete.Add(dep)
				}
			}
			return
		}
	}
	c.removeNode(n)
	if len(n.dependents) > 0 {
		c.absentOwners.add(e.identity())
	}
	for dep := range n.dependents {
		c.attemptToDelete.Add(dep)
	}
	for _, ref := range n.owners {
		if owner, ok := c.uidToNode[ref.UID]; ok && owner.deletingDependents {
			// Its foreground deletion may have been waiting for n.
			c.attemptToDelete.Add(owner)
		}
	}
}

// processTransitions queues n for orphaning, or n and its dependents for
// deletion, when this change starts its orphan or foreground deletion.
func (c *Controller) processTransitions(old, cur metav1.Object, n *node) {
	if waitsForOrphaning(cur) && !waitsForOrphaning(old) {
		c.attemptToOrphan.Add(n)
		return
	}
	if waitsForDependentsDeletion(cur) && !waitsForDependentsDeletion(old) {
		n.deletingDependents = true
		for dep := range n.dependents {
			c.attemptToDelete.Add(dep)
		}
		c.attemptToDelete.Add(n)
	}
}

// addDependentToOwners links n to the owners that refs name, adding
// virtual nodes for the ones not in the graph (queued, so that a lookup
// tells whether they exist). n is queued too when a reference may be
// invalid: an owner observed in another namespace, or under other
// coordinates.
func (c *Controller) addDependentToOwners(n *node, refs []metav1.OwnerReference) {
	suspect := false
	for _, ref := range refs {
		owner, ok := c.uidToNode[ref.UID]
		if !ok {
			identity := refCoordinates(ref)
			identity.Namespace = n.identity.Namespace
			owner = &node{identity: identity, dependents: map[*node]struct{}{}, virtual: true}
			c.uidToNode[ref.UID] = owner
		}
		if owner.dependents == nil {
			owner.dependents = map[*node]struct{}{}
		}
		owner.dependents[n] = struct{}{}
		if !ok {
			c.attemptToDelete.Add(owner)
			continue
		}
		if owner.deletingDependents {
			// The informers' queues may deliver the owner's foreground
			// deletion before this dependent's creation (they order
			// changes by object, not overall): it goes like the others.
			// Kube's collector leaves it until the owner is gone.
			suspect = true
			continue
		}
		if suspect {
			continue
		}
		namespaced := owner.identity.Namespace != ""
		switch {
		case namespaced && owner.identity.Namespace != n.identity.Namespace:
			// A namespaced owner is in its dependents' namespace, always.
			if !owner.virtual {
				c.reportInvalidNamespaceOwnerRef(n, ref.UID)
			}
			suspect = true
		case !refMatches(ref, owner.identity):
			suspect = true
		case !namespaced && owner.identity.Namespace != n.identity.Namespace && owner.virtual:
			// A virtual cluster-scoped owner: maybe a namespaced kind that
			// a cluster-scoped dependent may not name.
			suspect = true
		}
	}
	if suspect {
		c.attemptToDelete.Add(n)
	}
}

// removeDependentFromOwners unlinks n from the owners refs name.
func (c *Controller) removeDependentFromOwners(n *node, refs []metav1.OwnerReference) {
	for _, ref := range refs {
		if owner, ok := c.uidToNode[ref.UID]; ok {
			delete(owner.dependents, n)
		}
	}
}

// removeNode takes n out of the graph and its owners' dependents.
func (c *Controller) removeNode(n *node) {
	delete(c.uidToNode, n.identity.UID)
	c.removeDependentFromOwners(n, n.owners)
}

// queueUnblockedOwners queues the owners in foreground deletion that a
// dependent no longer blocks: its reference removed, or its
// blockOwnerDeletion turned off.
func (c *Controller) queueUnblockedOwners(removed []metav1.OwnerReference, changed []refChange) {
	blocks := func(ref metav1.OwnerReference) bool { return ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion }
	queue := func(uid types.UID) {
		if owner, ok := c.uidToNode[uid]; ok && owner.deletingDependents {
			c.attemptToDelete.Add(owner)
		}
	}
	for _, ref := range removed {
		if blocks(ref) {
			queue(ref.UID)
		}
	}
	for _, ch := range changed {
		if blocks(ch.old) && !blocks(ch.cur) {
			queue(ch.cur.UID)
		}
	}
}

type refChange struct{ old, cur metav1.OwnerReference }

// referencesDiffs compares two ownerReferences lists by uid.
func referencesDiffs(old, cur []metav1.OwnerReference) (added, removed []metav1.OwnerReference, changed []refChange) {
	byUID := make(map[types.UID]metav1.OwnerReference, len(old))
	for _, ref := range old {
		byUID[ref.UID] = ref
	}
	for _, ref := range cur {
		prev, ok := byUID[ref.UID]
		switch {
		case !ok:
			added = append(added, ref)
		case !refEqual(prev, ref):
			changed = append(changed, refChange{old: prev, cur: ref})
		}
		delete(byUID, ref.UID)
	}
	for _, ref := range old {
		if _, ok := byUID[ref.UID]; ok {
			removed = append(removed, ref)
		}
	}
	return added, removed, changed
}

func refEqual(a, b metav1.OwnerReference) bool {
	boolEq := func(x, y *bool) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		boolEq(a.Controller, b.Controller) && boolEq(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

// partitionDependents splits deps into those whose reference matches the
// owner identity and those that name it (by uid) otherwise; a dependent
// outside a namespaced owner's namespace matches never.
func partitionDependents(deps []*node, owner objectReference) (matching, mismatched []*node) {
	for _, dep := range deps {
		match, mismatch := false, false
		if owner.Namespace != "" && owner.Namespace != dep.identity.Namespace {
			mismatch = true
		} else {
			for _, ref := range dep.owners {
				if ref.UID != owner.UID {
					continue
				}
				if refMatches(ref, owner) {
					match = true
				} else {
					mismatch = true
				}
			}
		}
		if match {
			matching = append(matching, dep)
		}
		if mismatch {
			mismatched = append(mismatched, dep)
		}
	}
	return matching, mismatched
}

// reportInvalidNamespaceOwnerRef records kube's warning on n: its
// reference to the owner uid names an object of another namespace.
func (c *Controller) reportInvalidNamespaceOwnerRef(n *node, uid types.UID) {
	for _, ref := range n.owners {
		if ref.UID != uid {
			continue
		}
		invalid := refCoordinates(ref)
		invalid.Namespace = n.identity.Namespace
		c.events.Eventf(v1.ObjectReference{
			Kind: n.identity.Kind, APIVersion: n.identity.APIVersion, Namespace: n.identity.Namespace,
			Name: n.identity.Name, UID: n.identity.UID,
		}, eventSource, v1.EventTypeWarning, "OwnerRefInvalidNamespace", "ownerRef %s does not exist in namespace %q", invalid, n.identity.Namespace)
		return
	}
}

// absentCache remembers owners found missing, so that their other
// dependents need no lookup: a bounded set, oldest out first.
type absentCache struct {
	set   map[objectReference]struct{}
	order []objectReference
	max   int
}

func newAbsentCache(max int) *absentCache {
	return &absentCache{set: map[objectReference]struct{}{}, max: max}
}

// add and has are called under the controller's lock (add from the
// graph goroutine holding it; workers take it for has and add).
func (a *absentCache) add(r objectReference) {
	if _, ok := a.set[r]; ok {
		return
	}
	if len(a.order) >= a.max {
		delete(a.set, a.order[0])
		a.order = a.order[1:]
	}
	a.set[r] = struct{}{}
	a.order = append(a.order, r)
}

func (a *absentCache) has(r objectReference) bool {
	_, ok := a.set[r]
	return ok
}
