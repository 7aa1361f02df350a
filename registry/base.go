package registry

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// Base is the part of a Strategy that most resources write alike. A
// per-resource strategy embeds it, built by its constructor, and writes
// only what differs (kube's strategies embed their ObjectTyper and
// NameGenerator the same way): Info, New and NewList from the fields,
// PrepareForCreate and PrepareForUpdate that change nothing (a resource
// without status or defaults), AllowCreateOnUpdate from CreateOnUpdate,
// and GetAttrs with only the metadata fields every resource can select on.
type Base struct {
	// Resource is what Info returns.
	Resource ResourceInfo
	// NewObject and NewListObject return an empty object and list of the
	// resource's type.
	NewObject     func() runtime.Object
	NewListObject func() runtime.Object
	// CreateOnUpdate is AllowCreateOnUpdate's answer: whether a PUT to a
	// missing name creates it.
	CreateOnUpdate bool

	// objType is NewObject's type, found on the first GetAttrs.
	objType atomic.Pointer[reflect.Type]
}

// Info describes the resource.
func (b *Base) Info() ResourceInfo { return b.Resource }

// New returns an empty object.
func (b *Base) New() runtime.Object { return b.NewObject() }

// NewList returns an empty list.
func (b *Base) NewList() runtime.Object { return b.NewListObject() }

// PrepareForCreate changes nothing: no status to clear, no defaults.
func (*Base) PrepareForCreate(context.Context, runtime.Object) {}

// PrepareForUpdate changes nothing: no status to keep, no defaults.
func (*Base) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

// AllowCreateOnUpdate reports CreateOnUpdate.
func (b *Base) AllowCreateOnUpdate() bool { return b.CreateOnUpdate }

// GetAttrs returns the object's labels and metadata.name, plus
// metadata.namespace for a namespaced resource (kube's
// DefaultNamespaceScopedAttr and DefaultClusterScopedAttr). An object of
// another type than New's is an error, as the strategies' own type checks.
func (b *Base) GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	t := b.objType.Load()
	if t == nil {
		nt := reflect.TypeOf(b.NewObject())
		t = &nt
		b.objType.Store(t)
	}
	if reflect.TypeOf(obj) != *t {
		return nil, nil, fmt.Errorf("not a %s: %T", b.Resource.Kind, obj)
	}
	if !b.Resource.Namespaced {
		return ClusterScopedAttrs(obj)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	return labels.Set(m.GetLabels()), fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}, nil
}
