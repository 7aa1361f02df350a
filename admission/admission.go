// Package admission is corekube's admission chain: mutating plugins run in
// order, then validating plugins, on every write the registry performs
// (including dry runs). Built-in plugins live beside the chain; webhooks
// plug in through the same interfaces.
package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Operation is the kind of write being admitted.
type Operation string

// Operations, named as in admission.k8s.io.
const (
	Create  Operation = "CREATE"
	Update  Operation = "UPDATE"
	Delete  Operation = "DELETE"
	Connect Operation = "CONNECT"
)

// Attributes describe one write.
type Attributes struct {
	Operation   Operation
	Kind        schema.GroupVersionKind
	Resource    schema.GroupVersionResource
	Subresource string
	Namespace   string
	Name        string
	// Object is the object after the write (nil for Delete); mutating
	// plugins may change it in place.
	Object runtime.Object
	// OldObject is the object before the write (nil for Create).
	OldObject runtime.Object
	DryRun    bool
	// Options are the request's options: *metav1.CreateOptions,
	// *metav1.UpdateOptions (also for patches, as kube) or
	// *metav1.DeleteOptions; webhooks send them on.
	Options runtime.Object
}

// Mutator may change the object being written.
type Mutator interface {
	Admit(ctx context.Context, a *Attributes) error
}

// Validator accepts or refuses a write without changing it.
type Validator interface {
	Validate(ctx context.Context, a *Attributes) error
}

// Chain holds mutators and validators, each run in order; the first error
// stops it. The zero Chain admits everything.
type Chain struct {
	Mutators   []Mutator
	Validators []Validator
}

// Mutate runs the mutating plugins; the registry calls it before defaulting
// and validation, as kube does.
func (c *Chain) Mutate(ctx context.Context, a *Attributes) error {
	if c == nil {
		return nil
	}
	for _, m := range c.Mutators {
		if err := m.Admit(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// Admit runs the mutating plugins, then the validating ones: the whole
// chain, for a request that has no validation of its own between them
// (the create of a subresource that acts, of a create-only resource).
func (c *Chain) Admit(ctx context.Context, a *Attributes) error {
	if err := c.Mutate(ctx, a); err != nil {
		return err
	}
	return c.Validate(ctx, a)
}

// Validate runs the validating plugins; the registry calls it after its own
// validation, right before the write.
func (c *Chain) Validate(ctx context.Context, a *Attributes) error {
	if c == nil {
		return nil
	}
	for _, v := range c.Validators {
		if err := v.Validate(ctx, a); err != nil {
			return err
		}
	}
	return nil
}
