package registry

import (
	"context"
	"errors"
	"fmt"
	"github.com/corekube/corekube/storage/trace"
	"strconv"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CreateOptions are the parts of metav1.CreateOptions the Store acts on.
type CreateOptions struct {
	DryRun bool
	// FieldManager is who the new object's fields are recorded for in
	// metadata.managedFields; "" records nothing (the server's own
	// objects).
	FieldManager string
}

// Create stores a new object in namespace (ignored for cluster-scoped
// resources). obj is consumed: the Store fills in its metadata.
func (s *Store) Create(ctx context.Context, namespace string, obj runtime.Object, opts CreateOptions) (runtime.Object, error) {
	return s.create(ctx, namespace, obj, opts, false)
}

// create is Create; applied says obj comes from a server-side apply,
// which recorded its managedFields.
func (s *Store) create(ctx context.Context, namespace string, obj runtime.Object, opts CreateOptions, applied bool) (runtime.Object, error) {
	m := accessor(obj)
	if err := s.setNamespace(m, namespace); err != nil {
		return nil, err
	}
	if m.GetResourceVersion() != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	generated := m.GetName() == "" && m.GetGenerateName() != ""
	if generated {
		m.SetName(generateName(m.GetGenerateName()))
	}
	if d, ok := s.strategy.(Defaulter); ok {
		d.Default(obj)
	}
	if !applied {
		var err error
		if obj, err = s.trackUpdate(s.newObject(), obj, opts.FieldManager); err != nil {
			return nil, err
		}
		m = accessor(obj)
	}
	managed := m.GetManagedFields()
	if err := s.admit(ctx, admission.Create, m.GetName(), m.GetNamespace(), obj, nil, opts.DryRun, createOptions(opts.DryRun), false); err != nil {
		return nil, err
	}
	keepValidManagedFields(obj, managed)
	s.prepareForCreate(ctx, obj)
	if errs := s.validateCreate(ctx, obj); len(errs) > 0 {
		return nil, apierrors.NewInvalid(s.info.GroupVersion().WithKind(s.info.Kind).GroupKind(), m.GetName(), errs)
	}
	// A create on behalf of a patch or an update needs the create
	// permission too, checked where kube does: before validating
	// admission.
	if err := authorizeCreate(ctx); err != nil {
		return nil, err
	}
	if err := s.admit(ctx, admission.Create, m.GetName(), m.GetNamespace(), obj, nil, opts.DryRun, createOptions(opts.DryRun), true); err != nil {
		return nil, err
	}
	if opts.DryRun {
		s.setTypeMeta(obj)
		return obj, nil
	}
	data, err := s.encode(obj)
	if err != nil {
		return nil, toAPIError(err, s.info.GroupResource(), m.GetName())
	}
	tr := trace.From(ctx)
	tr.Mark(trace.StorageWrite)
	kv, err := s.storage.Create(ctx, s.key(m.GetNamespace(), m.GetName()), data, s.writeOpts...)
	// A generated name may collide; kube (RetryGenerateName) tries new
	// names a few times before reporting AlreadyExists.
	for attempt := 0; generated && errors.Is(err, storage.ErrAlreadyExists) && attempt < 7; attempt++ {
		m.SetName(generateName(m.GetGenerateName()))
		if data, err = s.encode(obj); err == nil {
			kv, err = s.storage.Create(ctx, s.key(m.GetNamespace(), m.GetName()), data, s.writeOpts...)
		}
	}
	tr.Mark(trace.StorageWritten)
	if err != nil {
		return nil, toAPIError(err, s.info.GroupResource(), m.GetName())
	}
	s.noteWritten(kv)
	// What was stored is obj itself: answer it rather than decode it back.
	m.SetResourceVersion(strconv.FormatInt(kv.Revision, 10))
	return obj, nil
}

// setNamespace reconciles the object's namespace with the request's.
func (s *Store) setNamespace(m metav1.Object, namespace string) error {
	if !s.info.Namespaced {
		m.SetNamespace("")
		return nil
	}
	if m.GetNamespace() != "" && m.GetNamespace() != namespace {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	m.SetNamespace(namespace)
	return nil
}

// prepareForCreate fills the system metadata kube fills (rest.BeforeCreate)
// and lets the strategy default the rest.
func (s *Store) prepareForCreate(ctx context.Context, obj runtime.Object) {
	m := accessor(obj)
	m.SetUID(uuid.NewUUID())
	m.SetCreationTimestamp(s.now())
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetSelfLink("")
	if _, ok := s.strategy.(GenerationStrategy); ok {
		m.SetGeneration(1)
	} else {
		m.SetGeneration(0)
	}
	s.strategy.PrepareForCreate(ctx, obj)
}

func (s *Store) validateCreate(ctx context.Context, obj runtime.Object) field.ErrorList {
	errs := apivalidation.ValidateObjectMetaAccessor(accessor(obj), s.info.Namespaced, s.nameValidator(), field.NewPath("metadata"))
	return append(errs, s.strategy.Validate(ctx, obj)...)
}

func (s *Store) nameValidator() apivalidation.ValidateNameFunc {
	if nv, ok := s.strategy.(NameValidationStrategy); ok {
		return nv.ValidateName
	}
	return apivalidation.NameIsDNSSubdomain
}

// generateName appends five random characters to base, as kube's
// SimpleNameGenerator does, keeping the result within 63 characters.
func generateName(base string) string {
	const maxGeneratedNameLength = 63 - 5
	if len(base) > maxGeneratedNameLength {
		base = base[:maxGeneratedNameLength]
	}
	return fmt.Sprintf("%s%s", base, utilrand.String(5))
}
