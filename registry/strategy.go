package registry

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ResourceInfo names a resource the way discovery and the URL space see it.
type ResourceInfo struct {
	Group      string // "" for core
	Version    string // "v1"
	Resource   string // plural, lower case: "pods"
	Singular   string // "pod"
	Kind       string // "Pod"
	ListKind   string // "PodList"
	Namespaced bool
	ShortNames []string
	Categories []string
	// CustomFieldSelectors is true for resources that kube gives a field
	// label conversion (pods, nodes, namespaces, events): an unknown field
	// selector is then "field label not supported: X"; otherwise kube answers
	// "\"X\" is not a known field selector: only \"metadata.name\", ...".
	CustomFieldSelectors bool
	// Verbs overrides the default verbs (all eight) for resources that
	// serve fewer (namespaces have no deletecollection).
	Verbs []string
}

// DefaultVerbs are the verbs a resource serves unless its Info says less.
var DefaultVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// AllVerbs returns the verbs the resource serves.
func (r ResourceInfo) AllVerbs() []string {
	if r.Verbs != nil {
		return r.Verbs
	}
	return DefaultVerbs
}

// HasVerb reports whether the resource serves verb.
func (r ResourceInfo) HasVerb(verb string) bool {
	for _, v := range r.AllVerbs() {
		if v == verb {
			return true
		}
	}
	return false
}

// GroupVersion returns the resource's group/version.
func (r ResourceInfo) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: r.Group, Version: r.Version}
}

// GroupResource returns the resource's group/resource, as used in errors.
func (r ResourceInfo) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Group, Resource: r.Resource}
}

// APIVersion returns "v1" or "group/v1".
func (r ResourceInfo) APIVersion() string { return r.GroupVersion().String() }

// Strategy is everything the generic Store needs to know about one resource
// that is not common to all objects: its type, defaulting, validation and
// the attributes selectors match on. Common metadata handling (names, uid,
// timestamps, resourceVersion, generation, labels/annotations validation,
// finalizers, ownerReferences) is done by the Store, never here.
type Strategy interface {
	Info() ResourceInfo
	// New returns an empty object of the resource's type (e.g. &v1.Pod{}).
	New() runtime.Object
	// NewList returns an empty list (e.g. &v1.PodList{}).
	NewList() runtime.Object

	// PrepareForCreate clears what a client may not set on create (status
	// for resources with a status subresource) and applies defaults.
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	// Validate validates a new object. ObjectMeta is already validated by
	// the Store; validate spec (and anything else type-specific) here.
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList

	// PrepareForUpdate copies from old what an update of the main resource
	// may not change (status, for resources with a status subresource) and
	// applies defaults to obj.
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	// ValidateUpdate validates obj as a replacement for old (immutability).
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
	// AllowCreateOnUpdate says whether PUT to a missing name creates it.
	AllowCreateOnUpdate() bool

	// GetAttrs returns the labels and the selectable fields of obj. The key
	// set of the fields returned is exactly the set of field selector labels
	// the resource supports (metadata.name, metadata.namespace for
	// namespaced resources, plus resource-specific ones).
	GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error)
}

// Defaulter is implemented by strategies whose type has kube's scheme
// defaults (pods, namespaces, nodes, bindings, webhook configurations).
// kube applies them when it decodes a request, so that admission (plugins
// and webhooks) and the field manager see defaulted objects: the Store
// applies them to every object it is given, before admission; the
// strategy's PrepareForCreate/PrepareForUpdate apply them again after a
// mutating plugin or webhook changed the object, as kube defaults a
// webhook's patched object.
type Defaulter interface {
	Default(obj runtime.Object)
}

// AttrsDecoder is implemented by strategies that decode, of a stored
// object, only what GetAttrs reads (pods: the watch cache decodes every
// pod write for its labels and fields, and most of a pod is neither).
type AttrsDecoder interface {
	DecodeForAttrs(data []byte) (runtime.Object, error)
}

// StatusStrategy is the update strategy of a /status subresource: it keeps
// everything of old except the status (PrepareForUpdate) and validates the
// status.
type StatusStrategy interface {
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// GracefulDeleteStrategy is implemented by resources whose delete can be
// graceful (pods). CheckGracefulDelete decides, from the object and the
// options, whether deletion is graceful; when it returns true it has set
// options.GracePeriodSeconds to the period to use (0 means immediate).
type GracefulDeleteStrategy interface {
	CheckGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool
}

// GenerationStrategy is implemented by resources whose metadata.generation
// tracks spec changes. SpecChanged reports whether obj's spec differs from
// old's; the Store then bumps generation.
type GenerationStrategy interface {
	SpecChanged(obj, old runtime.Object) bool
}

// NameValidationStrategy is implemented by resources whose names follow a
// rule other than a DNS-1123 subdomain (namespaces: a DNS-1123 label). It
// has the shape of apimachinery's ValidateNameFunc.
type NameValidationStrategy interface {
	ValidateName(name string, prefix bool) []string
}

// DeleteStrategy is implemented by resources whose delete first moves the
// object into a terminating state that something else finishes (namespaces:
// phase Terminating until the namespace controller empties it and removes
// the "kubernetes" spec finalizer). PrepareForDelete updates obj in place
// and returns true if the object must stay stored for now.
type DeleteStrategy interface {
	PrepareForDelete(ctx context.Context, obj runtime.Object) (pending bool)
}

// DeleteGuard is implemented by resources some of whose objects a DELETE
// may not remove (the built-in PriorityClasses: kube's REST overrides
// Delete to refuse them). CheckDelete runs after the delete options are
// validated and mutating admission ran, before the object is read; its
// error is the answer. A deletecollection does not ask, as in kube, whose
// collection delete goes round the override.
type DeleteGuard interface {
	CheckDelete(ctx context.Context, namespace, name string) error
}

// TableConvertor is implemented by strategies that print their objects as
// kube's server-side printers do: the meta.k8s.io Table that kubectl get
// shows. Resources without it get kube's default table (Name, Created At).
type TableConvertor interface {
	// TableColumns returns the column definitions in order; columns that
	// only `kubectl get -o wide` shows have Priority 1.
	TableColumns() []metav1.TableColumnDefinition
	// TableRow returns the row of one object: one cell per column (string,
	// int64 or bool) and, where kube sets them, row conditions. Ages count
	// to now. The caller fills in the row's object.
	TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error)
}

// TableDecoder is implemented by TableConvertors that can decode an object
// for printing faster than a full decode (pods: ~4× faster, most of a
// pod being what no column shows). A Table LIST served from the watch
// cache decodes its items with it, unless the Table includes whole
// objects.
type TableDecoder interface {
	// DecodeForTable decodes data, the object's JSON as json.Marshal writes
	// it (resourceVersion included), into a new object holding the whole
	// ObjectMeta and at least what TableRow reads; the rest may be left
	// empty.
	DecodeForTable(data []byte) (runtime.Object, error)
}

// TTLStrategy is implemented by resources whose objects expire (events:
// kube-apiserver's --event-ttl). It is kube's generic Store TTLFunc as the
// events registry uses it: one TTL for every object, applied on create and
// again on every update, so an object expires TTL after its last write (or
// a little later, see storage.WriteOptions.TTL). Expiry is a delete by the
// storage: watchers see DELETED with the last state. A TTL of zero means
// objects never expire.
type TTLStrategy interface {
	TTL() time.Duration
}

// WatchIndexStrategy is implemented by resources whose watchers usually
// select one value of a field (pods: spec.nodeName, one watch per node
// agent): the watch cache indexes its watchers by that field.
type WatchIndexStrategy interface {
	WatchIndexField() string
}

// ClusterScopedAttrs is GetAttrs for a cluster-scoped resource whose only
// selectable field is metadata.name (kube's DefaultClusterScopedAttr).
func ClusterScopedAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	return labels.Set(m.GetLabels()), fields.Set{"metadata.name": m.GetName()}, nil
}
