// Package events is the registry strategy of core/v1 Events as
// kube-apiserver v1.32 serves them (pkg/registry/core/event and the
// legacy, core/v1 branch of ValidateEventCreate/ValidateEventUpdate in
// pkg/apis/core/validation/events.go). Events are never defaulted; PUT may
// create them. They expire TTL after their last write (--event-ttl). The
// stricter events.k8s.io/v1 rules are not applied here.
package events

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
)

// Length limits of kube's event validation.
const (
	ReportingInstanceLengthLimit = 128
	ActionLengthLimit            = 128
	ReasonLengthLimit            = 128
	NoteLengthLimit              = 1024
)

// DefaultTTL is how long an event is kept after its last write unless
// configured otherwise: kube-apiserver's --event-ttl default.
const DefaultTTL = time.Hour

// Strategy is the strategy of the events resource.
type Strategy struct {
	registry.Base
	ttl time.Duration
}

var (
	_ registry.Strategy    = (*Strategy)(nil)
	_ registry.TTLStrategy = (*Strategy)(nil)
)

// Option configures the events strategy.
type Option func(*Strategy)

// WithTTL sets how long an event is kept after its last write; zero or
// less keeps events forever.
func WithTTL(ttl time.Duration) Option {
	return func(s *Strategy) { s.ttl = ttl }
}

// NewStrategy returns the events strategy; events expire after DefaultTTL
// unless an option says otherwise.
func NewStrategy(opts ...Option) *Strategy {
	s := &Strategy{Base: registry.Base{
		// Info describes events as kube's discovery does.
		Resource: registry.ResourceInfo{
			Version:              "v1",
			Resource:             "events",
			Singular:             "event",
			Kind:                 "Event",
			ListKind:             "EventList",
			Namespaced:           true,
			ShortNames:           []string{"ev"},
			CustomFieldSelectors: true,
		},
		NewObject:     func() runtime.Object { return &v1.Event{} },
		NewListObject: func() runtime.Object { return &v1.EventList{} },
		// AllowCreateOnUpdate is true: PUT creates a missing event.
		CreateOnUpdate: true,
	}, ttl: DefaultTTL}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// TTL is how long an event is kept after its last write. Every event has
// the same, as with kube's TTLFunc for events, and an update (a recorder
// bumping count) starts it again.
func (s *Strategy) TTL() time.Duration { return s.ttl }

// Validate validates a new event.
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateEvent(obj.(*v1.Event))
}

// ValidateUpdate validates the new event only: through core/v1 nothing of an
// event is immutable.
func (*Strategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validateEvent(obj.(*v1.Event))
}

// GetAttrs returns the event's labels and its selectable fields. "source"
// falls back to reportingComponent for events written by events.k8s.io
// clients, as in kube.
func (*Strategy) GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	ev, ok := obj.(*v1.Event)
	if !ok {
		return nil, nil, fmt.Errorf("not an event")
	}
	source := ev.Source.Component
	if source == "" {
		source = ev.ReportingController
	}
	return labels.Set(ev.Labels), fields.Set{
		"metadata.name":                  ev.Name,
		"metadata.namespace":             ev.Namespace,
		"involvedObject.kind":            ev.InvolvedObject.Kind,
		"involvedObject.namespace":       ev.InvolvedObject.Namespace,
		"involvedObject.name":            ev.InvolvedObject.Name,
		"involvedObject.uid":             string(ev.InvolvedObject.UID),
		"involvedObject.apiVersion":      ev.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": ev.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       ev.InvolvedObject.FieldPath,
		"reason":                         ev.Reason,
		"reportingComponent":             ev.ReportingController,
		"source":                         source,
		"type":                           ev.Type,
	}, nil
}

// validateEvent is kube's legacyValidateEvent for core/v1 requests. Events
// without eventTime (the classic core/v1 form) only need their namespace to
// agree with involvedObject.namespace; events with eventTime (the
// events.k8s.io form) also need reporting controller/instance, action and
// reason.
func validateEvent(ev *v1.Event) field.ErrorList {
	var allErrs field.ErrorList
	nsMismatch := func() *field.Error {
		return field.Invalid(field.NewPath("involvedObject", "namespace"), ev.InvolvedObject.Namespace, "does not match event.namespace")
	}
	if ev.EventTime.IsZero() {
		if ev.InvolvedObject.Namespace == "" {
			// Cluster-scoped objects: their events live in "" or, for old
			// clients, in "default".
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				allErrs = append(allErrs, nsMismatch())
			}
		} else if ev.Namespace != ev.InvolvedObject.Namespace {
			allErrs = append(allErrs, nsMismatch())
		}
	} else {
		if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
			allErrs = append(allErrs, nsMismatch())
		}
		// core/v1 names reportingController "reportingComponent".
		controllerPath := field.NewPath("reportingComponent")
		if ev.ReportingController == "" {
			allErrs = append(allErrs, field.Required(controllerPath, ""))
		}
		for _, msg := range validation.IsQualifiedName(ev.ReportingController) {
			allErrs = append(allErrs, field.Invalid(controllerPath, ev.ReportingController, msg))
		}
		allErrs = append(allErrs, requiredWithLimit(ev.ReportingInstance, "reportingInstance", ReportingInstanceLengthLimit)...)
		allErrs = append(allErrs, requiredWithLimit(ev.Action, "action", ActionLengthLimit)...)
		allErrs = append(allErrs, requiredWithLimit(ev.Reason, "reason", ReasonLengthLimit)...)
		if len(ev.Message) > NoteLengthLimit {
			allErrs = append(allErrs, tooLong("message", NoteLengthLimit))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(ev.Namespace) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("namespace"), ev.Namespace, msg))
	}
	return allErrs
}

func requiredWithLimit(value, name string, limit int) field.ErrorList {
	var errs field.ErrorList
	if value == "" {
		errs = append(errs, field.Required(field.NewPath(name), ""))
	}
	if len(value) > limit {
		errs = append(errs, tooLong(name, limit))
	}
	return errs
}

// tooLong is kube's length error: an Invalid with an empty value.
func tooLong(name string, limit int) *field.Error {
	return field.Invalid(field.NewPath(name), "", fmt.Sprintf("can have at most %v characters", limit))
}
