package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/corekube/corekube/storage/trace"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxDeleteAttempts bounds the retries of a delete whose object changed
// between the read and the compare-and-swap.
const maxDeleteAttempts = 10

// Delete deletes namespace/name as kube does: preconditions first; then a
// graceful delete (pods) or a pending one (finalizers, namespaces) only
// marks the object with deletionTimestamp; otherwise the object goes.
// deleted reports whether the object is gone.
func (s *Store) Delete(ctx context.Context, namespace, name string, opts *metav1.DeleteOptions) (out runtime.Object, deleted bool, err error) {
	return s.delete(ctx, namespace, name, opts, true)
}

// delete is Delete; DeleteCollection's skips the DeleteGuard (guard
// false), as kube's collection delete goes round a REST's Delete.
func (s *Store) delete(ctx context.Context, namespace, name string, opts *metav1.DeleteOptions, guard bool) (out runtime.Object, deleted bool, err error) {
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if errs := validateDeleteOptions(opts); len(errs) > 0 {
		return nil, false, apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("DeleteOptions").GroupKind(), "", errs)
	}
	dryRun := len(opts.DryRun) > 0
	// Mutating admission runs once, before the object is read, as in
	// kube's delete handler (NamespaceLifecycle refuses deleting the
	// system namespaces there).
	if err := s.admit(ctx, admission.Delete, name, namespace, nil, nil, dryRun, opts, false); err != nil {
		return nil, false, err
	}
	// Then the REST's Delete, which a DeleteGuard stands for.
	if g, ok := s.strategy.(DeleteGuard); ok && guard {
		if err := g.CheckDelete(ctx, namespace, name); err != nil {
			return nil, false, err
		}
	}
	for attempt := 0; attempt < maxDeleteAttempts; attempt++ {
		// The first attempt starts from the watch cache's copy, as an
		// update does; a retry, and a dry run (which writes nothing that
		// would find a stale copy out), from the stored value.
		out, deleted, err = s.deleteOnce(ctx, namespace, name, opts, dryRun, attempt == 0 && !dryRun)
		if !errors.Is(err, errRaced) {
			return out, deleted, toAPIError(err, s.info.GroupResource(), name)
		}
	}
	return nil, false, apierrors.NewConflict(s.info.GroupResource(), name, errors.New(optimisticLockMessage))
}

// errRaced: the object changed between read and write, or what was
// decided on a cached copy may not hold for the stored object; start over
// from the stored value.
var errRaced = errors.New("object changed during delete")

// deleteOnce is one attempt of a delete: read, decide, write. fromCache
// lets it start from the watch cache's copy (cachedCurrent): one etcd
// read less per delete (a graceful one made two), which kube makes too
// (its delete starts from a read, its writes from the object read). Every
// write is a compare-and-swap on the revision decided on, so a stale copy
// costs a retry, never a wrong write; and a refusal decided on a copy
// (preconditions, validating admission), like an answer that writes
// nothing, is decided again on the stored object.
func (s *Store) deleteOnce(ctx context.Context, namespace, name string, opts *metav1.DeleteOptions, dryRun, fromCache bool) (runtime.Object, bool, error) {
	key := s.key(namespace, name)
	kv, cached := storage.KV{}, false
	decode := func() (runtime.Object, error) { return s.decode(kv) }
	if fromCache {
		var decodeCached func() (runtime.Object, error)
		if kv, decodeCached, cached = s.cachedCurrent(key); decodeCached != nil {
			decode = decodeCached
		}
	}
	if !cached {
		var err error
		if kv, err = s.storage.Get(ctx, key); err != nil {
			return nil, false, err
		}
	}
	// refused is the answer to a refusal: a copy's is not final.
	refused := func(err error) error {
		if cached {
			return errRaced
		}
		return err
	}
	obj, err := decode()
	if err != nil {
		return nil, false, refused(err)
	}
	m := accessor(obj)
	if err := s.checkPreconditions(m, opts.Preconditions); err != nil {
		return nil, false, refused(err)
	}
	if err := s.admit(ctx, admission.Delete, name, namespace, nil, obj, dryRun, opts, true); err != nil {
		return nil, false, refused(err)
	}

	changed, pending := s.beforeDelete(ctx, obj, opts)
	if pending && !changed && cached {
		// An answer that writes nothing is the stored object's, as a
		// no-op update's (storage.UpdateFrom.Stands).
		return nil, false, errRaced
	}
	if changed {
		if dryRun {
			return obj, !pending, nil
		}
		data, err := s.encode(obj)
		if err != nil {
			return nil, false, err
		}
		updated, err := s.storage.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
			if cur.Revision != kv.Revision {
				return nil, errRaced
			}
			return data, nil
		}, storage.WithCurrent(kv))
		if err != nil {
			return nil, false, err
		}
		s.noteWritten(updated)
		m.SetResourceVersion(fmt.Sprint(updated.Revision))
		kv = updated
	}
	if pending {
		return obj, false, nil
	}
	if dryRun {
		return obj, true, nil
	}
	tr := trace.From(ctx)
	tr.Mark(trace.StorageWrite)
	defer tr.Mark(trace.StorageWritten)
	gone, err := s.storage.Delete(ctx, key, func(cur storage.KV) error {
		if cur.Revision == kv.Revision {
			return nil
		}
		if !changed {
			return errRaced
		}
		// A graceless delete of an object that supports graceful deletion
		// has just written deletionTimestamp; writers that see it (the node
		// agent posting a final status) may change it before this second
		// step. As kube's, the delete goes on: what was decided holds for
		// the same object, not for a new one of the same name.
		curObj, err := s.decode(cur)
		if err != nil {
			return err
		}
		if accessor(curObj).GetUID() != m.GetUID() {
			return errRaced
		}
		return nil
	}, storage.WithCurrent(kv))
	if changed && errors.Is(err, storage.ErrNotFound) {
		// Or they may remove it first (the agent deletes a pod once its
		// containers stopped). Kube tolerates that race
		// (kubernetes#19403) and answers the last state it wrote.
		return obj, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	s.noteWritten(storage.KV{Key: key, Revision: gone.Revision})
	out, err := s.decode(gone)
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// beforeDelete applies kube's BeforeDelete rules to obj in place, and the
// garbage collector's deletion finalizers that opts asks for
// (deletionFinalizers). changed reports that obj must be written back
// (deletionTimestamp set or shortened, finalizers changed); pending that it
// must stay stored after that.
func (s *Store) beforeDelete(ctx context.Context, obj runtime.Object, opts *metav1.DeleteOptions) (changed, pending bool) {
	m := accessor(obj)
	now := s.opts.Now()

	graceful := false
	if gs, ok := s.strategy.(GracefulDeleteStrategy); ok {
		o := opts.DeepCopy()
		if gs.CheckGracefulDelete(ctx, obj, o) && o.GracePeriodSeconds != nil {
			grace := *o.GracePeriodSeconds
			switch ts, cur := m.GetDeletionTimestamp(), m.GetDeletionGracePeriodSeconds(); {
			case ts != nil && (cur == nil || *cur == 0):
				// Marked for graceless deletion, by a delete whose second
				// step (the removal) did not happen or lost a race, or held
				// by finalizers: not graceful any more, as in kube's
				// BeforeDelete; removed now unless finalizers hold it.
			case ts != nil:
				// Already terminating: a delete may only shorten the
				// period, and one that does not changes nothing (not even
				// the deletion finalizers).
				if grace >= *cur {
					return false, true
				}
				start := ts.Add(-time.Duration(*cur) * time.Second)
				m.SetDeletionTimestamp(ptrTime(start.Add(time.Duration(grace) * time.Second)))
				m.SetDeletionGracePeriodSeconds(&grace)
				graceful = true
			default:
				m.SetDeletionTimestamp(ptrTime(now.Add(time.Duration(grace) * time.Second)))
				m.SetDeletionGracePeriodSeconds(&grace)
				bumpGeneration(m)
				graceful = true
			}
		}
	}
	changed = graceful
	ds, isDS := s.strategy.(DeleteStrategy)
	first := m.GetDeletionTimestamp() == nil
	if isDS && first {
		// Kube's namespace REST: the first delete sets the deletion
		// finalizers by its own rules.
		changed = setNamespaceDeletionFinalizers(m, opts)
	}
	if isDS && ds.PrepareForDelete(ctx, obj) {
		// Later deletes change nothing while the strategy holds the
		// object.
		if first {
			m.SetDeletionTimestamp(ptrTime(now))
			m.SetDeletionGracePeriodSeconds(ptrInt64(0))
			bumpGeneration(m)
		}
		return true, true
	}
	if !(isDS && first) && s.setDeletionFinalizers(ctx, m, opts) {
		changed = true
	}
	hasFinalizers := len(m.GetFinalizers()) > 0
	if graceful {
		return true, *m.GetDeletionGracePeriodSeconds() > 0 || hasFinalizers
	}
	if !hasFinalizers {
		return changed, false
	}
	// Kube's markAsDeleting: deletionTimestamp now unless an earlier one
	// is set, no grace period.
	if ts := m.GetDeletionTimestamp(); ts == nil || ts.After(now) {
		if ts == nil {
			bumpGeneration(m)
		}
		m.SetDeletionTimestamp(ptrTime(now))
		changed = true
	}
	if g := m.GetDeletionGracePeriodSeconds(); g == nil || *g != 0 {
		m.SetDeletionGracePeriodSeconds(ptrInt64(0))
		changed = true
	}
	return changed, true
}

func bumpGeneration(m metav1.Object) {
	if m.GetGeneration() > 0 {
		m.SetGeneration(m.GetGeneration() + 1)
	}
}

// checkPreconditions is the early check of kube's rest.BeforeDelete, which
// names the resource by its kind ("Pod", "PodDisruptionBudget.policy").
// Namespaces (a DeleteStrategy) keep the wording of kube's namespace
// storage, which checks first.
func (s *Store) checkPreconditions(m metav1.Object, p *metav1.Preconditions) error {
	if p == nil {
		return nil
	}
	if _, ok := s.strategy.(DeleteStrategy); !ok {
		byKind := schema.GroupResource{Group: s.info.Group, Resource: s.info.Kind}
		if p.UID != nil && *p.UID != m.GetUID() {
			return apierrors.NewConflict(byKind, m.GetName(), fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, m.GetUID()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion() {
			return apierrors.NewConflict(byKind, m.GetName(), fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, m.GetResourceVersion()))
		}
		return nil
	}
	if p.UID != nil && *p.UID != m.GetUID() {
		return apierrors.NewConflict(s.info.GroupResource(), m.GetName(),
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, m.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion() {
		return apierrors.NewConflict(s.info.GroupResource(), m.GetName(),
			fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in meta: %v", *p.ResourceVersion, m.GetResourceVersion()))
	}
	return nil
}

// validateDeleteOptions mirrors kube's ValidateDeleteOptions.
func validateDeleteOptions(o *metav1.DeleteOptions) field.ErrorList {
	var errs field.ErrorList
	//nolint:staticcheck // OrphanDependents is deprecated but still accepted.
	if o.OrphanDependents != nil && o.PropagationPolicy != nil {
		errs = append(errs, field.Invalid(field.NewPath("propagationPolicy"), o.PropagationPolicy,
			"orphanDependents and deletionPropagation cannot be both set"))
	}
	if p := o.PropagationPolicy; p != nil && *p != metav1.DeletePropagationForeground &&
		*p != metav1.DeletePropagationBackground && *p != metav1.DeletePropagationOrphan {
		errs = append(errs, field.NotSupported(field.NewPath("propagationPolicy"), *p,
			[]string{string(metav1.DeletePropagationForeground), string(metav1.DeletePropagationBackground), string(metav1.DeletePropagationOrphan), "nil"}))
	}
	for i, d := range o.DryRun {
		if d != metav1.DryRunAll {
			errs = append(errs, field.NotSupported(field.NewPath("dryRun").Index(i), d, []string{metav1.DryRunAll}))
		}
	}
	return errs
}

// DeleteCollection deletes every object of the list that opts selects and
// returns them as a list.
func (s *Store) DeleteCollection(ctx context.Context, namespace string, listOpts *metainternalversion.ListOptions, opts *metav1.DeleteOptions) (runtime.Object, error) {
	lo := metainternalversion.ListOptions{}
	if listOpts != nil {
		lo = *listOpts
	}
	lo.Limit, lo.Continue = 0, ""
	list, err := s.List(ctx, namespace, &lo)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	deleted := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		m := accessor(item)
		out, _, err := s.delete(ctx, m.GetNamespace(), m.GetName(), opts, false)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		deleted = append(deleted, out)
	}
	if err := meta.SetList(list, deleted); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return list, nil
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

func ptrInt64(v int64) *int64 { return &v }

// GarbageCollectionPolicy is what a delete without a propagation policy
// does to the dependents of an object, as kube's
// rest.GarbageCollectionPolicy.
type GarbageCollectionPolicy string

const (
	// DeleteDependents: the garbage collector deletes them in the
	// background (or in the foreground when the object has the
	// foregroundDeletion finalizer). Kube's default, and every served
	// resource's.
	DeleteDependents GarbageCollectionPolicy = "DeleteDependents"
	// OrphanDependents: the delete adds the orphan finalizer (kube's
	// legacy workload versions).
	OrphanDependents GarbageCollectionPolicy = "OrphanDependents"
	// Unsupported: deletes never add the deletion finalizers.
	Unsupported GarbageCollectionPolicy = "Unsupported"
)

// GarbageCollectionDeleteStrategy is implemented by resources whose
// default policy is not DeleteDependents.
type GarbageCollectionDeleteStrategy interface {
	DefaultGarbageCollectionPolicy(ctx context.Context) GarbageCollectionPolicy
}

// setDeletionFinalizers sets the orphan and foregroundDeletion finalizers
// of m as a delete with opts asks, by kube's rules (its generic store's
// deletionFinalizersForGarbageCollection): the options first, then the
// finalizers already set, then the resource's default policy. It reports
// whether the set changed.
func (s *Store) setDeletionFinalizers(ctx context.Context, m metav1.Object, opts *metav1.DeleteOptions) bool {
	policy := DeleteDependents
	if gs, ok := s.strategy.(GarbageCollectionDeleteStrategy); ok {
		policy = gs.DefaultGarbageCollectionPolicy(ctx)
	}
	if policy == Unsupported {
		return false
	}
	orphan, foreground := policy == OrphanDependents, false
	existing := ""
	for _, f := range m.GetFinalizers() {
		if f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents {
			existing = f
			break
		}
	}
	//nolint:staticcheck // OrphanDependents is deprecated but still accepted.
	switch o := opts.OrphanDependents; {
	case o != nil:
		orphan, foreground = *o, false
	case opts.PropagationPolicy != nil:
		orphan = *opts.PropagationPolicy == metav1.DeletePropagationOrphan
		foreground = *opts.PropagationPolicy == metav1.DeletePropagationForeground
	case existing != "":
		orphan = existing == metav1.FinalizerOrphanDependents
		foreground = existing == metav1.FinalizerDeleteDependents
	}
	return replaceDeletionFinalizers(m, orphan, foreground)
}

// setNamespaceDeletionFinalizers is setDeletionFinalizers by the rules of
// kube's namespace REST, which differ: orphanDependents=false asks for
// foreground deletion, and no default policy applies.
func setNamespaceDeletionFinalizers(m metav1.Object, opts *metav1.DeleteOptions) bool {
	fs := m.GetFinalizers()
	orphan := slices.Contains(fs, metav1.FinalizerOrphanDependents)
	foreground := slices.Contains(fs, metav1.FinalizerDeleteDependents)
	//nolint:staticcheck // OrphanDependents is deprecated but still accepted.
	switch o := opts.OrphanDependents; {
	case o != nil:
		orphan, foreground = *o, !*o
	case opts.PropagationPolicy != nil:
		orphan = *opts.PropagationPolicy == metav1.DeletePropagationOrphan
		foreground = *opts.PropagationPolicy == metav1.DeletePropagationForeground
	}
	return replaceDeletionFinalizers(m, orphan, foreground)
}

// replaceDeletionFinalizers makes the orphan and foregroundDeletion
// finalizers of m those asked for, appended after the others, and reports
// whether the set changed.
func replaceDeletionFinalizers(m metav1.Object, orphan, foreground bool) bool {
	old := m.GetFinalizers()
	if slices.Contains(old, metav1.FinalizerOrphanDependents) == orphan &&
		slices.Contains(old, metav1.FinalizerDeleteDependents) == foreground {
		return false
	}
	out := make([]string, 0, len(old)+1)
	for _, f := range old {
		if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			out = append(out, f)
		}
	}
	if orphan {
		out = append(out, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		out = append(out, metav1.FinalizerDeleteDependents)
	}
	m.SetFinalizers(out)
	return true
}
