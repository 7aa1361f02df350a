package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/corekube/corekube/storage/trace"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TransformFunc computes the object to store from the current one. It may
// be called several times (once per compare-and-swap attempt) and must not
// keep current. current is nil when the object does not exist and the
// resource allows create on update.
type TransformFunc func(ctx context.Context, current runtime.Object) (runtime.Object, error)

// UpdateOptions are the parts of metav1.UpdateOptions/PatchOptions the Store
// acts on.
type UpdateOptions struct {
	DryRun bool
	// FieldManager is who the write's changes are recorded for in
	// metadata.managedFields (kube: the fieldManager parameter, else
	// derived from the User-Agent). "" records nothing: the Store's own
	// writes on behalf of another request (binding, eviction).
	FieldManager string
}

// Update replaces the object namespace/name with what transform returns,
// atomically with respect to concurrent writers. created reports whether
// the object did not exist and was created (PUT to a new name, where the
// resource allows it).
func (s *Store) Update(ctx context.Context, namespace, name string, transform TransformFunc, opts UpdateOptions) (out runtime.Object, created bool, err error) {
	return s.write(ctx, namespace, name, transform, opts, false)
}

// write is Update; apply says transform is a server-side apply, which
// has recorded managedFields itself and may create the object.
func (s *Store) write(ctx context.Context, namespace, name string, transform TransformFunc, opts UpdateOptions, apply bool) (out runtime.Object, created bool, err error) {
	key := s.key(namespace, name)
	if opts.DryRun {
		kv, err := s.storage.Get(ctx, key)
		if errors.Is(err, storage.ErrNotFound) {
			return s.createOnUpdate(ctx, namespace, name, transform, opts, apply, err)
		}
		if err != nil {
			return nil, false, toAPIError(err, s.info.GroupResource(), name)
		}
		obj, _, _, err := s.updateFrom(ctx, kv, nil, namespace, transform, opts, apply)
		return obj, false, toAPIError(err, s.info.GroupResource(), name)
	}

	var updated runtime.Object
	var deleteNow bool
	tr := trace.From(ctx)
	writeOpts := s.writeOpts
	suggested := int64(-1)
	cached, decodeCached, ok := s.cachedCurrent(key)
	if ok {
		writeOpts = append(slices.Clip(writeOpts), storage.WithCurrent(cached))
		suggested = cached.Revision
	}
	kv, err := s.storage.GuaranteedUpdate(ctx, key, func(cur storage.KV) ([]byte, error) {
		if suggested >= 0 && cur.Revision != suggested {
			staleCurrents.Add(1)
			suggested = -1
		}
		decodeCur := decodeCached
		if !sameBytes(cur.Value, cached.Value) {
			decodeCur = nil // the stored value, read after a conflict
		}
		obj, del, data, err := s.updateFrom(ctx, cur, decodeCur, namespace, transform, opts, apply)
		if err != nil {
			return nil, err
		}
		updated, deleteNow = obj, del
		if data == nil {
			data, err = s.encode(obj)
		}
		tr.Mark(trace.StorageWrite)
		return data, err
	}, writeOpts...)
	tr.Mark(trace.StorageWritten)
	if errors.Is(err, storage.ErrNotFound) {
		return s.createOnUpdate(ctx, namespace, name, transform, opts, apply, err)
	}
	if err != nil {
		return nil, false, toAPIError(err, s.info.GroupResource(), name)
	}
	s.noteWritten(kv)
	accessor(updated).SetResourceVersion(fmt.Sprint(kv.Revision))
	s.setTypeMeta(updated)
	if deleteNow {
		// The last finalizer went away from an object whose deletion was
		// requested: finish the delete, unless it changed meanwhile.
		gone, err := s.storage.Delete(ctx, key, func(cur storage.KV) error {
			if cur.Revision != kv.Revision {
				return storage.ErrConflict
			}
			return nil
		}, storage.WithCurrent(kv)) // the value just written: no read
		if err != nil && !errors.Is(err, storage.ErrConflict) && !errors.Is(err, storage.ErrNotFound) {
			return nil, false, toAPIError(err, s.info.GroupResource(), name)
		}
		if err == nil {
			s.noteWritten(storage.KV{Key: key, Revision: gone.Revision})
		}
	}
	return updated, false, nil
}

// cachedCurrent is the watch cache's copy of the stored value of key, for
// an update to start from instead of reading etcd (kube's store starts
// from its cached object the same way): one etcd read less per update
// when, as nearly always, the cache has the latest revision, and only a
// retry when it has not (storage.WithCurrent). This server's own write of
// key that the cache has not caught up with yet (recentWrites) comes
// before the cache's older copy. The bool is false when the cache keeps
// nothing, does not have key or cannot give its stored bytes, when the
// newest write known is a delete, and for resources stored in another
// version than the cache's.
//
// The function, when not nil, decodes the copy from the protobuf message
// the cache keeps, which costs a fraction of decoding its JSON (decode)
// and gives the same object (TestUpdateFastPathsSameResults).
func (s *Store) cachedCurrent(key string) (storage.KV, func() (runtime.Object, error), bool) {
	if !useCachedCurrent || s.converted || s.cache == nil || s.cache.Disabled() {
		return storage.KV{}, nil, false
	}
	// The cache's revision first: a write it has not reached is newer than
	// any copy it holds.
	if kv, deleted, newer := s.written.newer(key, s.cache.Revision()); newer {
		return kv, nil, !deleted
	}
	o, ok := s.cache.Get(key)
	if !ok || o.Key != key {
		return storage.KV{}, nil, false
	}
	value, ok := o.Stored()
	if !ok {
		return storage.KV{}, nil, false
	}
	var decode func() (runtime.Object, error)
	if o.DecodesFromMessage() {
		decode = func() (runtime.Object, error) {
			messageStarts.Add(1)
			return o.Decode()
		}
	}
	return storage.KV{Key: key, Value: value, Revision: o.Revision}, decode, true
}

// sameBytes reports whether a and b are the same slice (not merely equal
// bytes): whether a value handed back by the storage is the caller's copy.
func sameBytes(a, b []byte) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

// noteWritten records kv as this server's latest write of its key (a nil
// Value: deleted), for cachedCurrent until the cache has it.
func (s *Store) noteWritten(kv storage.KV) {
	if !useCachedCurrent || s.converted || s.cache.Disabled() {
		return
	}
	s.written.wrote(kv, s.cache.Revision())
}

// useCachedCurrent turns cachedCurrent off when false; the tests compare
// updates with it on and off.
var useCachedCurrent = true

// staleCurrents counts the updates whose cached copy was stale (they were
// retried from the stored value), for the tests.
var staleCurrents atomic.Int64

// messageStarts counts the updates that started from an object decoded
// from the cache's protobuf message, for the tests.
var messageStarts atomic.Int64

// createOnUpdate handles PUT (or a server-side apply) to a name that does
// not exist.
func (s *Store) createOnUpdate(ctx context.Context, namespace, name string, transform TransformFunc, opts UpdateOptions, apply bool, notFound error) (runtime.Object, bool, error) {
	if s.subresource != "" || !(apply || s.strategy.AllowCreateOnUpdate()) {
		return nil, false, toAPIError(notFound, s.info.GroupResource(), name)
	}
	obj, err := transform(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	out, err := s.create(ctx, namespace, obj, CreateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager}, apply)
	return out, err == nil, err
}

// updateFrom computes, admits and validates the new object from the stored
// one, cur, which decodeCur decodes when not nil (else decode does).
// deleteNow reports that the update completes a pending deletion. data is
// the new object's encoding for storage when updateFrom had to make it
// (nil: the caller encodes it).
func (s *Store) updateFrom(ctx context.Context, cur storage.KV, decodeCur func() (runtime.Object, error), namespace string, transform TransformFunc, opts UpdateOptions, apply bool) (obj runtime.Object, deleteNow bool, data []byte, err error) {
	if decodeCur == nil {
		decodeCur = func() (runtime.Object, error) { return s.decode(cur) }
	}
	old, err := decodeCur()
	if err != nil {
		return nil, false, nil, err
	}
	obj, err = transform(ctx, old.DeepCopyObject())
	if err != nil {
		return nil, false, nil, err
	}
	newM, oldM := accessor(obj), accessor(old)
	if err := s.setNamespace(newM, namespace); err != nil {
		return nil, false, nil, err
	}
	if newM.GetName() == "" {
		newM.SetName(oldM.GetName())
	}
	if rv := newM.GetResourceVersion(); rv != "" && rv != oldM.GetResourceVersion() {
		return nil, false, nil, apierrors.NewConflict(s.info.GroupResource(), oldM.GetName(), errors.New(optimisticLockMessage))
	}
	if uid := newM.GetUID(); uid != "" && uid != oldM.GetUID() {
		return nil, false, nil, apierrors.NewConflict(s.info.GroupResource(), oldM.GetName(),
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, oldM.GetUID()))
	}
	// System fields clients cannot change (kube's FillObjectMetaSystemFields
	// on update).
	newM.SetUID(oldM.GetUID())
	newM.SetCreationTimestamp(oldM.GetCreationTimestamp())
	newM.SetDeletionTimestamp(oldM.GetDeletionTimestamp())
	newM.SetDeletionGracePeriodSeconds(oldM.GetDeletionGracePeriodSeconds())
	newM.SetGeneration(oldM.GetGeneration())
	newM.SetSelfLink("")
	newM.SetResourceVersion(oldM.GetResourceVersion())
	if s.subresource != "" {
		// A subresource write changes only what its strategy lets through;
		// labels, annotations, finalizers and owners stay as stored.
		metav1.ResetObjectMetaForStatus(newM, oldM)
	}

	if d, ok := s.strategy.(Defaulter); ok {
		d.Default(obj)
	}
	if !apply {
		if obj, err = s.trackUpdate(old, obj, opts.FieldManager); err != nil {
			return nil, false, nil, err
		}
		newM = accessor(obj)
	}
	managed := newM.GetManagedFields()
	if err := s.admit(ctx, admission.Update, oldM.GetName(), namespace, obj, old, opts.DryRun, updateOptions(opts.DryRun), false); err != nil {
		return nil, false, nil, err
	}
	keepValidManagedFields(obj, managed)
	s.update.PrepareForUpdate(ctx, obj, old)
	if gs, ok := s.strategy.(GenerationStrategy); ok && s.subresource == "" && gs.SpecChanged(obj, old) {
		newM.SetGeneration(oldM.GetGeneration() + 1)
	}
	errs := apivalidation.ValidateObjectMetaAccessorUpdate(newM, oldM, field.NewPath("metadata"))
	errs = append(errs, s.update.ValidateUpdate(ctx, obj, old)...)
	if len(errs) > 0 {
		return nil, false, nil, apierrors.NewInvalid(s.info.GroupVersion().WithKind(s.info.Kind).GroupKind(), oldM.GetName(), errs)
	}
	if err := s.admit(ctx, admission.Update, oldM.GetName(), namespace, obj, old, opts.DryRun, updateOptions(opts.DryRun), true); err != nil {
		return nil, false, nil, err
	}
	data = s.ignoreManagedFieldsTimestamps(obj, old, cur.Value)
	return obj, s.shouldDeleteDuringUpdate(ctx, obj, old), data, nil
}

// shouldDeleteDuringUpdate: an update that removes the last finalizer of an
// object whose deletion was requested (with no grace period left) completes
// that deletion, as in kube; for resources with a DeleteStrategy only once
// the strategy no longer keeps the object (namespaces: spec finalizers).
func (s *Store) shouldDeleteDuringUpdate(ctx context.Context, obj, old runtime.Object) bool {
	newM, oldM := accessor(obj), accessor(old)
	grace := oldM.GetDeletionGracePeriodSeconds()
	if len(newM.GetFinalizers()) > 0 || oldM.GetDeletionTimestamp() == nil || grace == nil || *grace != 0 {
		return false
	}
	if ds, ok := s.strategy.(DeleteStrategy); ok && ds.PrepareForDelete(ctx, obj.DeepCopyObject()) {
		return false
	}
	return true
}
