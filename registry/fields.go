package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/corekube/corekube/registry/quantity"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v4/schema"
	"sigs.k8s.io/structured-merge-diff/v4/typed"
	"sigs.k8s.io/structured-merge-diff/v4/value"
)

// TypeConverterSource returns structured-merge-diff's view of the served
// types (built from the server's OpenAPI models). The Stores call it on
// their first write, so that a server that is never written to never
// builds it; it must return the same converter every time.
type TypeConverterSource func() (managedfields.TypeConverter, error)

// ResetFieldsStrategy is implemented by strategies (and status
// strategies) that reset some fields on every write of their resource or
// subresource: a pod's status on an update of the pod, its spec on an
// update of pods/status. Those fields are never recorded as owned by the
// writer, as kube's GetResetFields.
type ResetFieldsStrategy interface {
	GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set
}

// fieldTracker is one Store's (or subresource's) kube field manager,
// built on first use.
type fieldTracker struct {
	once sync.Once
	fm   *managedfields.FieldManager
	err  error
	// trusted holds the live objects of the updates under way that need
	// no validating walk when converted to typed form (trustedLive).
	// It is a side channel, not a cache: trackUpdate decides, and
	// lazyObjects.ObjectToTyped acts, but between the two the call goes
	// through managedfields' FieldManager, which passes the converter
	// nothing but the object, and wrapping the object would change what
	// the field manager sees. So the decision is keyed by the live
	// object's pointer and kept only while its UpdateNoErrors runs; an
	// object two updates share at once may lose the entry early, which
	// costs only the validating walk.
	trusted sync.Map // runtime.Object -> *trustedType
	// converter is the type converter fm was built with; liveType the
	// Store's kind in it, looked up once.
	converter managedfields.TypeConverter
	liveOnce  sync.Once
	liveType  *trustedType
}

// trustedType is the schema and type of one kind, looked up once.
type trustedType struct {
	schema  *smdschema.Schema
	typeRef smdschema.TypeRef
}

// skipLiveValidation turns the trusted-live conversion off; the tests
// compare managedFields with it on and off.
var skipLiveValidation = true

// trustedConversions counts the live objects converted without
// validation, for the tests to see that the fast path runs.
var trustedConversions atomic.Int64

// fieldManager returns the field manager of the Store's resource or
// subresource: it records managedFields on every write and merges
// server-side apply patches. It is nil when the Store tracks no fields
// (Options.TypeConverter unset).
func (s *Store) fieldManager() (*managedfields.FieldManager, error) {
	if s.opts.TypeConverter == nil {
		return nil, nil
	}
	s.fields.once.Do(func() {
		converter, err := s.opts.TypeConverter()
		if err != nil {
			s.fields.err = fmt.Errorf("managed fields of %s: %w", s.info.Resource, err)
			return
		}
		s.fields.converter = converter
		tc := lazyObjects{TypeConverter: converter, trusted: &s.fields.trusted}
		gvk := s.info.GroupVersion().WithKind(s.info.Kind)
		objects := objectInterfaces{store: s, gvk: gvk}
		resetSets := map[fieldpath.APIVersion]*fieldpath.Set{}
		if rs, ok := s.update.(ResetFieldsStrategy); ok {
			for v, set := range rs.GetResetFields() {
				resetSets[v] = set
			}
		}
		if s.subresource != "" {
			// A subresource write keeps the stored labels, annotations,
			// finalizers and owners (updateFrom): an apply to it must not
			// record them as owned either.
			for v, set := range subresourceResetFields(s.info.GroupVersion().String()) {
				if own, ok := resetSets[v]; ok {
					set = own.Union(set)
				}
				resetSets[v] = set
			}
		}
		var reset map[fieldpath.APIVersion]fieldpath.Filter
		if len(resetSets) > 0 {
			reset = map[fieldpath.APIVersion]fieldpath.Filter{}
			for v, set := range resetSets {
				reset[v] = fieldpath.NewExcludeSetFilter(set)
			}
		}
		s.fields.fm, s.fields.err = managedfields.NewDefaultFieldManager(tc, objects, objects, objects,
			gvk, s.info.GroupVersion(), s.subresource, reset)
	})
	return s.fields.fm, s.fields.err
}

// subresourceResetFields are the metadata fields every subresource write
// resets (metav1.ResetObjectMetaForStatus in updateFrom).
func subresourceResetFields(apiVersion string) map[fieldpath.APIVersion]*fieldpath.Set {
	return ResetFields(apiVersion, "metadata.labels", "metadata.annotations", "metadata.finalizers", "metadata.ownerReferences")
}

// trackUpdate records in obj's managedFields the fields manager changed
// from live (an empty object on create), as kube does for every create,
// update and non-apply patch. Without a manager (the Store's own writes
// on behalf of another request: binding, eviction) managedFields stay as
// they were.
func (s *Store) trackUpdate(live, obj runtime.Object, manager string) (runtime.Object, error) {
	fm, err := s.fieldManager()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if fm == nil || manager == "" {
		accessor(obj).SetManagedFields(accessor(live).GetManagedFields())
		return obj, nil
	}
	s.setTypeMeta(obj)
	if t := s.trustedLive(live); t != nil {
		s.fields.trusted.Store(live, t)
		defer s.fields.trusted.Delete(live)
	}
	return fm.UpdateNoErrors(live, obj, manager), nil
}

// trustedLive returns the type of live when its conversion to typed form
// may skip structured-merge-diff's validating walk (the field manager
// validates the new object of every write, and the stored object of the
// last one again as the live object of the next: a tenth of a lease
// renewal's CPU). It may when a validation of live is known to succeed:
// live is a built-in Go type, whose schema is generated from that very
// type, and it has managedFields, which only a write whose new object
// passed this validation leaves (a failed one drops them all, as
// UpdateNoErrors). Unstructured objects are always validated: their
// schema can change after they are stored.
func (s *Store) trustedLive(live runtime.Object) *trustedType {
	if !skipLiveValidation || live == nil || len(accessor(live).GetManagedFields()) == 0 {
		return nil
	}
	if _, ok := live.(*unstructured.Unstructured); ok {
		return nil
	}
	if _, ok := live.(runtime.Unstructured); ok {
		return nil
	}
	// The converter finds the type by the object's kind: one without it
	// fails there, and must keep failing.
	if live.GetObjectKind().GroupVersionKind() != s.info.GroupVersion().WithKind(s.info.Kind) {
		return nil
	}
	s.fields.liveOnce.Do(func() {
		tv, err := s.fields.converter.ObjectToTyped(s.newObject(), typed.AllowDuplicates)
		if err != nil {
			return // validated as ever
		}
		s.fields.liveType = &trustedType{schema: tv.Schema(), typeRef: tv.TypeRef()}
	})
	return s.fields.liveType
}

// keepValidManagedFields undoes a mutating admission plugin's or
// webhook's change to managedFields that does not decode (kube's
// managed fields validating admission controller): the object keeps what
// it had before admission.
func keepValidManagedFields(obj runtime.Object, before []metav1.ManagedFieldsEntry) {
	m := accessor(obj)
	after := m.GetManagedFields()
	if reflect.DeepEqual(after, before) {
		return
	}
	if err := managedfields.ValidateManagedFields(after); err != nil {
		m.SetManagedFields(before)
	}
}

// ApplyOptions are the parts of metav1.PatchOptions a server-side apply
// acts on.
type ApplyOptions struct {
	DryRun bool
	// FieldManager owns the applied fields; required.
	FieldManager string
	// Force takes fields other managers own instead of failing with a
	// conflict.
	Force bool
	// FailAfterMerge, when set, fails the apply once the merge succeeded
	// (kube's fieldValidation=Strict check of the patch, which comes
	// after the merge: a conflict or a schema error is answered first).
	FailAfterMerge error
}

// Apply merges the applied configuration patch (a partial object, as
// decoded from an application/apply-patch+yaml body) into the object
// namespace/name as kube's server-side apply does: the configuration's
// fields become owned by opts.FieldManager, fields it applied before and
// applies no more are removed unless another manager owns them, and a
// field another manager owns with a different value is a 409 Conflict
// unless opts.Force. The object is created when it does not exist (then
// created reports true); on a subresource it must exist.
func (s *Store) Apply(ctx context.Context, namespace, name string, patch *unstructured.Unstructured, opts ApplyOptions) (out runtime.Object, created bool, err error) {
	fm, err := s.fieldManager()
	if err != nil {
		return nil, false, apierrors.NewInternalError(err)
	}
	if fm == nil {
		return nil, false, apierrors.NewInternalError(errors.New("server-side apply needs the type converter, which this server lacks"))
	}
	apply := func(_ context.Context, current runtime.Object) (runtime.Object, error) {
		live := current
		if live == nil {
			live = s.newObject()
		}
		obj, err := fm.Apply(live, patch.DeepCopy(), opts.FieldManager, opts.Force)
		if err != nil {
			return nil, applyError(err)
		}
		if opts.FailAfterMerge != nil {
			return nil, opts.FailAfterMerge
		}
		m := accessor(obj)
		if current == nil {
			if uid := m.GetUID(); uid != "" {
				return nil, apierrors.NewConflict(s.info.GroupResource(), name,
					fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid))
			}
			// kube's WipeObjectMetaSystemFields for a create.
			m.SetCreationTimestamp(metav1.Time{})
			m.SetDeletionTimestamp(nil)
			m.SetDeletionGracePeriodSeconds(nil)
			m.SetSelfLink("")
		}
		if s.info.Namespaced && m.GetNamespace() != "" && m.GetNamespace() != namespace {
			// kube's EnsureObjectNamespaceMatchesRequestNamespace.
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		if m.GetName() != name {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), name))
		}
		if err := s.CheckPatchedUID(current, obj); err != nil {
			return nil, err
		}
		return obj, nil
	}
	return s.write(ctx, namespace, name, apply, UpdateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager}, true)
}

// createAuthorizerKey keys a request's create authorizer in its context.
type createAuthorizerKey struct{}

// WithCreateAuthorizer returns ctx carrying authorize, which decides
// whether the request (a patch or an update, authorized for that verb)
// may also create: kube asks the authorizer for "create" when a
// server-side apply or a PUT to a missing name creates the object.
func WithCreateAuthorizer(ctx context.Context, authorize func(context.Context) error) context.Context {
	return context.WithValue(ctx, createAuthorizerKey{}, authorize)
}

// authorizeCreate runs the create authorizer of ctx, if it has one.
func authorizeCreate(ctx context.Context) error {
	if authorize, ok := ctx.Value(createAuthorizerKey{}).(func(context.Context) error); ok {
		return authorize(ctx)
	}
	return nil
}

// CheckPatchedUID is kube's answer to a patch (of any type, apply too)
// whose result has another metadata.uid than current's: a patch carries
// no uid precondition (only a PUT's body is one, a 409 Conflict), so the
// update's validation refuses the immutable field, a 422.
func (s *Store) CheckPatchedUID(current, patched runtime.Object) error {
	if current == nil {
		return nil
	}
	uid := accessor(patched).GetUID()
	if uid == "" || uid == accessor(current).GetUID() {
		return nil
	}
	return apierrors.NewInvalid(s.info.GroupVersion().WithKind(s.info.Kind).GroupKind(), accessor(current).GetName(), field.ErrorList{
		field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable"),
	})
}

// applyError is kube's answer to an error of the field manager's Apply:
// Status errors (conflicts, a wrong apiVersion) as they are; any other
// (the patch does not fit the schema: "failed to create typed patch
// object ...") reaches kube's handler as a plain error, which it answers
// as a 500 with the error's text and no reason, not as an internal error
// ("Internal error occurred: ..."), as clients that print the message
// see.
func applyError(err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonUnknown,
		Message: err.Error(),
	}}
}

// newObject is an empty object of the Store's kind, with its kind set.
func (s *Store) newObject() runtime.Object {
	obj := s.strategy.New()
	s.setTypeMeta(obj)
	return obj
}

// objectInterfaces are what kube's field manager needs of a scheme, for
// the one kind and version a Store serves.
type objectInterfaces struct {
	store *Store
	gvk   schema.GroupVersionKind
}

// New returns an empty object of the Store's kind.
func (o objectInterfaces) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if gvk != o.gvk {
		return nil, runtime.NewNotRegisteredErrForKind("corekube", gvk)
	}
	return o.store.newObject(), nil
}

// Default applies the scheme defaults of the kind, where it has them.
func (o objectInterfaces) Default(obj runtime.Object) {
	if d, ok := o.store.strategy.(Defaulter); ok {
		d.Default(obj)
	}
}

// ConvertToVersion converts between the one served version's typed and
// unstructured forms. Every other version is not registered: the field
// manager drops managedFields entries recorded for versions not served.
func (o objectInterfaces) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	if gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{o.gvk}); !ok || gvk != o.gvk {
		return nil, runtime.NewNotRegisteredGVKErrForTarget("corekube", in.GetObjectKind().GroupVersionKind(), target)
	}
	if lazy, ok := in.(*typedValueObject); ok {
		var err error
		if in, err = lazy.converter.TypedToObject(lazy.value); err != nil {
			return nil, fmt.Errorf("convert %s: %w", o.gvk.Kind, err)
		}
	}
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return in, nil
	}
	out := o.store.strategy.New()
	// Converting parses the quantities: a costly one is refused first.
	if err := quantity.CheckUnstructured(u.Object, reflect.TypeOf(out)); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", o.gvk.Kind, o.gvk.Version, o.gvk.Kind, err))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("convert %s: %w", o.gvk.Kind, err)
	}
	out.GetObjectKind().SetGroupVersionKind(o.gvk)
	return out, nil
}

// lazyObjects is the type converter the field managers use: TypedToObject
// defers the conversion of a typed value to an object until someone needs
// more than its kind. structured-merge-diff asks for the live object in
// the version of every managedFields entry on every write, only to find it
// is the version it has (schema reconciliation); converting the whole
// value to an unstructured map for that was a third of a status update.
// The one reader of the whole object, objectInterfaces.ConvertToVersion,
// converts it then.
type lazyObjects struct {
	managedfields.TypeConverter
	trusted *sync.Map
}

// ObjectToTyped converts a trusted live object (trustedLive) without the
// validating walk: the same typed value as FromStructured's, which
// validates it and returns it unchanged.
func (c lazyObjects) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if c.trusted != nil {
		if t, ok := c.trusted.Load(obj); ok {
			tt := t.(*trustedType)
			v, err := value.NewValueReflect(obj)
			if err != nil {
				return nil, fmt.Errorf("typed live object: %w", err)
			}
			trustedConversions.Add(1)
			return typed.AsTypedUnvalidated(v, tt.schema, tt.typeRef), nil
		}
	}
	return c.TypeConverter.ObjectToTyped(obj, opts...)
}

func (c lazyObjects) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	if v == nil || !v.AsValue().IsMap() {
		return c.TypeConverter.TypedToObject(v)
	}
	m := v.AsValue().AsMap()
	field := func(name string) string {
		if f, ok := m.Get(name); ok && f.IsString() {
			return f.AsString()
		}
		return ""
	}
	return &typedValueObject{value: v, converter: c.TypeConverter,
		gvk: schema.FromAPIVersionAndKind(field("apiVersion"), field("kind"))}, nil
}

// typedValueObject is a typed value standing for the object it converts
// to, of which only the kind has been read.
type typedValueObject struct {
	value     *typed.TypedValue
	converter managedfields.TypeConverter
	gvk       schema.GroupVersionKind
}

func (o *typedValueObject) GetObjectKind() schema.ObjectKind                { return o }
func (o *typedValueObject) SetGroupVersionKind(gvk schema.GroupVersionKind) { o.gvk = gvk }
func (o *typedValueObject) GroupVersionKind() schema.GroupVersionKind       { return o.gvk }

// DeepCopyObject shares the value: typed values are not changed in place.
func (o *typedValueObject) DeepCopyObject() runtime.Object { c := *o; return &c }

// Convert is not needed by the field manager.
func (o objectInterfaces) Convert(in, out, context any) error {
	return fmt.Errorf("corekube: no conversion from %T to %T", in, out)
}

// ConvertFieldLabel is not needed by the field manager.
func (o objectInterfaces) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return "", "", fmt.Errorf("corekube: no field label conversion for %v", gvk)
}

// ignoreManagedFieldsTimestamps keeps old's managedFields timestamps when
// they are all that a write changes (kube's
// IgnoreManagedFieldsTimestampsTransformer): a write that changes nothing
// else then changes nothing, and is not stored. stored is old as stored:
// comparing encodings is several times cheaper than kube's reflective
// DeepEqual of the objects, which ran on nearly every status write (the
// same manager writing the same fields gets a new time and the same sets).
// When it encoded obj, it returns obj's encoding for storage (encode's),
// so that the write does not encode it again; else nil.
func (s *Store) ignoreManagedFieldsTimestamps(obj, old runtime.Object, stored []byte) []byte {
	newM := accessor(obj)
	fresh, was := newM.GetManagedFields(), accessor(old).GetManagedFields()
	if len(fresh) == 0 || len(fresh) != len(was) {
		return nil
	}
	timesChanged := false
	for i := range fresh {
		a, b := &fresh[i], &was[i]
		if !a.Time.Equal(b.Time) {
			timesChanged = true
		}
		if !sameEntryButTime(a, b) {
			return nil
		}
	}
	if !timesChanged {
		return nil
	}
	reverted := make([]metav1.ManagedFieldsEntry, len(fresh))
	for i := range fresh {
		reverted[i] = fresh[i]
		reverted[i].Time = was[i].Time
	}
	if rest, ok := s.encodeWithoutManagedFields(obj); ok && !encodeTwice {
		// The object without its managedFields is encoded once, for both
		// lists of entries: the one with the old times is the stored
		// value exactly when the write changes nothing else.
		if data, err := spliceManagedFields(rest, reverted); err == nil && bytes.Equal(data, stored) {
			newM.SetManagedFields(reverted)
			return data
		}
		if data, err := spliceManagedFields(rest, fresh); err == nil {
			return data
		}
		return nil
	}
	newM.SetManagedFields(reverted)
	if data, err := s.encode(obj); err != nil || !bytes.Equal(data, stored) {
		newM.SetManagedFields(fresh)
	}
	return nil
}

// encodeTwice turns the shared encoding of ignoreManagedFieldsTimestamps
// off; the tests compare the stored values with it on and off.
var encodeTwice = false

// sameEntryButTime reports whether two managedFields entries are equal
// but for their times.
func sameEntryButTime(a, b *metav1.ManagedFieldsEntry) bool {
	if a.Manager != b.Manager || a.Operation != b.Operation || a.APIVersion != b.APIVersion ||
		a.FieldsType != b.FieldsType || a.Subresource != b.Subresource || (a.FieldsV1 == nil) != (b.FieldsV1 == nil) {
		return false
	}
	return a.FieldsV1 == nil || bytes.Equal(a.FieldsV1.Raw, b.FieldsV1.Raw)
}

// ResetFields is the value of a GetResetFields (ResetFieldsStrategy): the
// dotted paths ("status", "metadata.ownerReferences") of the fields the
// strategy resets on every write of apiVersion.
func ResetFields(apiVersion string, paths ...string) map[fieldpath.APIVersion]*fieldpath.Set {
	set := fieldpath.NewSet()
	for _, p := range paths {
		var path fieldpath.Path
		for _, name := range strings.Split(p, ".") {
			name := name
			path = append(path, fieldpath.PathElement{FieldName: &name})
		}
		set.Insert(path)
	}
	return map[fieldpath.APIVersion]*fieldpath.Set{fieldpath.APIVersion(apiVersion): set}
}
