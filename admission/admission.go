// Package admission is corekube's admission chain: mutating plugins run in
// order, then validating plugins, on every write the registry performs
// (including dry runs). Built-in plugins live beside the chain; webhooks
// plug in through the same interfaces.
package admission

import (
	"context"
	"time"

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
//
// The plugins NewChain built carry their names and the operations kube's
// plugin of that name handles (a plugin is not called for the others);
// with Instrument, each step and each named plugin is timed into kube's
// apiserver_admission_step_* and apiserver_admission_controller_*
// metrics. Plugins appended to Mutators or Validators afterwards run
// unnamed: they count in their step only.
type Chain struct {
	Mutators   []Mutator
	Validators []Validator

	// mutating and validating describe Mutators[i] and Validators[i],
	// for the first len of each.
	mutating, validating []*pluginInfo
	metrics              *Metrics
}

// pluginInfo is what the chain knows of one plugin it built.
type pluginInfo struct {
	// labels is the plugin's name, the controller metric's first label.
	labels []string
	// skips are the operations (by opIndex) kube's plugin does not handle.
	skips [4]bool
	cells outcomeCells
}

func (p *pluginInfo) skip(op Operation) bool {
	i := opIndex(op)
	return i >= 0 && p.skips[i]
}

// Instrument makes the chain record kube's step and controller metrics in
// m (nil: none). Call it once, before the chain admits anything.
func (c *Chain) Instrument(m *Metrics) { c.metrics = m }

// Mutate runs the mutating plugins; the registry calls it before defaulting
// and validation, as kube does.
func (c *Chain) Mutate(ctx context.Context, a *Attributes) error {
	if c == nil {
		return nil
	}
	return runStep(ctx, c.metrics, StepAdmit, a, c.Mutators, c.mutating, Mutator.Admit)
}

// runStep calls the plugins of one step in order until one refuses,
// skipping those that do not handle a's operation (infos[i] describes
// plugins[i], when NewChain built it), and with metrics on times each
// plugin and the whole step. Monotonic clock readings only (monotonic):
// each plugin's end is the next one's start.
func runStep[P any](ctx context.Context, m *Metrics, step string, a *Attributes, plugins []P, infos []*pluginInfo,
	call func(P, context.Context, *Attributes) error) error {
	var start, last time.Duration
	if m != nil {
		start = monotonic()
		last = start
	}
	var err error
	for i, plugin := range plugins {
		var p *pluginInfo
		if i < len(infos) {
			p = infos[i]
		}
		if p != nil && p.skip(a.Operation) {
			continue
		}
		err = call(plugin, ctx, a)
		if m != nil {
			now := monotonic()
			if p != nil {
				p.cells.observe(m.controller, nil, p.labels, step, a.Operation, err != nil, now-last)
			}
			last = now
		}
		if err != nil {
			break
		}
	}
	if m != nil {
		m.steps.observe(m.step, m.stepSummary, nil, step, a.Operation, err != nil, last-start)
	}
	return err
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
	return runStep(ctx, c.metrics, StepValidate, a, c.Validators, c.validating, Validator.Validate)
}
