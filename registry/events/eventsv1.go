package events

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry"
)

// V1Strategy is the strategy of events.k8s.io/v1 Events: the core/v1
// events seen through the events.k8s.io group, as kube-apiserver serves
// one event storage under both. Objects are stored as core/v1 Events (the
// same keys and revisions as the core/v1 Store's), converted on every read
// and write (registry.StorageVersionConverter). Writes through this group
// get kube's stricter events.k8s.io validation.
type V1Strategy struct {
	registry.Base
	core *Strategy
}

var (
	_ registry.Strategy                = (*V1Strategy)(nil)
	_ registry.TTLStrategy             = (*V1Strategy)(nil)
	_ registry.StorageVersionConverter = (*V1Strategy)(nil)
	_ registry.TableConvertor          = (*V1Strategy)(nil)
)

// NewV1Strategy returns the events.k8s.io/v1 strategy over the events of
// core (whose TTL it shares: kube has one --event-ttl for both groups).
func NewV1Strategy(core *Strategy) *V1Strategy {
	// kube's discovery shows core's resource in its own group, with the
	// same short name (kubectl warns that "ev" is ambiguous, and picks
	// core's).
	info := core.Info()
	info.Group = eventsv1.GroupName
	return &V1Strategy{
		Base: registry.Base{
			Resource:      info,
			NewObject:     func() runtime.Object { return &eventsv1.Event{} },
			NewListObject: func() runtime.Object { return &eventsv1.EventList{} },
			// Nothing to prepare (no status, no defaults; ValidateUpdate
			// refuses what may not change); PUT creates a missing event,
			// as for core/v1 events (one storage).
			CreateOnUpdate: true,
		},
		core: core,
	}
}

// TTL is the core events' TTL: a write through either group starts it
// again.
func (s *V1Strategy) TTL() time.Duration { return s.core.TTL() }

// Validate is kube's ValidateEventCreate for an events.k8s.io/v1 request:
// the core rules, then eventTime required, type Normal or Warning, the
// deprecated fields unset and a series of at least two. As in kube, it
// validates the event in its core form, so errors name core's fields.
func (*V1Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	ev := ToCore(obj.(*eventsv1.Event))
	allErrs := validateEvent(ev)
	allErrs = append(allErrs, validateSeries(ev)...)
	if ev.EventTime.IsZero() {
		allErrs = append(allErrs, field.Required(field.NewPath("eventTime"), ""))
	}
	if ev.Type != v1.EventTypeNormal && ev.Type != v1.EventTypeWarning {
		allErrs = append(allErrs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
	}
	mustBeUnset := func(name string, set bool) {
		if set {
			allErrs = append(allErrs, field.Invalid(field.NewPath(name), "", "needs to be unset"))
		}
	}
	mustBeUnset("firstTimestamp", !ev.FirstTimestamp.IsZero())
	mustBeUnset("lastTimestamp", !ev.LastTimestamp.IsZero())
	mustBeUnset("count", ev.Count != 0)
	mustBeUnset("source", ev.Source.Component != "" || ev.Source.Host != "")
	return allErrs
}

// ValidateUpdate is kube's ValidateEventUpdate for an events.k8s.io/v1
// request: the core rules, a changed series validated, and everything
// but the series (and metadata) immutable.
func (*V1Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	ev, prev := ToCore(obj.(*eventsv1.Event)), ToCore(old.(*eventsv1.Event))
	allErrs := validateEvent(ev)
	if !reflect.DeepEqual(ev.Series, prev.Series) {
		allErrs = append(allErrs, validateSeries(ev)...)
	}
	immutable := func(name string, newValue, oldValue any) {
		allErrs = append(allErrs, apivalidation.ValidateImmutableField(newValue, oldValue, field.NewPath(name))...)
	}
	immutable("involvedObject", ev.InvolvedObject, prev.InvolvedObject)
	immutable("reason", ev.Reason, prev.Reason)
	immutable("message", ev.Message, prev.Message)
	immutable("source", ev.Source, prev.Source)
	immutable("firstTimestamp", ev.FirstTimestamp, prev.FirstTimestamp)
	immutable("lastTimestamp", ev.LastTimestamp, prev.LastTimestamp)
	immutable("count", ev.Count, prev.Count)
	// kube checks the reason twice, and so reports it twice.
	immutable("reason", ev.Reason, prev.Reason)
	immutable("type", ev.Type, prev.Type)
	immutable("eventTime", ev.EventTime, prev.EventTime)
	immutable("action", ev.Action, prev.Action)
	immutable("related", ev.Related, prev.Related)
	immutable("reportingController", ev.ReportingController, prev.ReportingController)
	immutable("reportingInstance", ev.ReportingInstance, prev.ReportingInstance)
	return allErrs
}

// validateSeries is kube's check of an events.k8s.io series.
func validateSeries(ev *v1.Event) field.ErrorList {
	var allErrs field.ErrorList
	if ev.Series == nil {
		return nil
	}
	if ev.Series.Count < 2 {
		allErrs = append(allErrs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
	}
	if ev.Series.LastObservedTime.IsZero() {
		allErrs = append(allErrs, field.Required(field.NewPath("series.lastObservedTime"), ""))
	}
	return allErrs
}

// GetAttrs returns the labels and the field selector labels of
// events.k8s.io/v1 (kube's field label conversion for the group): the
// regarding object's fields, reason, reportingController and type.
func (*V1Strategy) GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	ev, ok := obj.(*eventsv1.Event)
	if !ok {
		return nil, nil, fmt.Errorf("not an events.k8s.io/v1 event")
	}
	return labels.Set(ev.Labels), fields.Set{
		"metadata.name":             ev.Name,
		"metadata.namespace":        ev.Namespace,
		"regarding.kind":            ev.Regarding.Kind,
		"regarding.namespace":       ev.Regarding.Namespace,
		"regarding.name":            ev.Regarding.Name,
		"regarding.uid":             string(ev.Regarding.UID),
		"regarding.apiVersion":      ev.Regarding.APIVersion,
		"regarding.resourceVersion": ev.Regarding.ResourceVersion,
		"regarding.fieldPath":       ev.Regarding.FieldPath,
		"reason":                    ev.Reason,
		"reportingController":       ev.ReportingController,
		"type":                      ev.Type,
	}, nil
}

// TableColumns are the core events' columns: kube prints both groups'
// events with one printer.
func (s *V1Strategy) TableColumns() []metav1.TableColumnDefinition { return s.core.TableColumns() }

// TableRow prints the event as its core form prints.
func (s *V1Strategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	ev, ok := obj.(*eventsv1.Event)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected an events.k8s.io/v1 Event, got %T", obj)
	}
	return s.core.TableRow(ToCore(ev), now)
}

// ToStorage converts an events.k8s.io/v1 Event's JSON into the core/v1
// Event's that is stored.
func (*V1Strategy) ToStorage(served []byte) ([]byte, error) {
	var ev eventsv1.Event
	if err := json.Unmarshal(served, &ev); err != nil {
		return nil, err
	}
	core := ToCore(&ev)
	core.APIVersion, core.Kind = "v1", "Event"
	return registry.MarshalJSON(core)
}

// FromStorage converts a stored core/v1 Event into the events.k8s.io/v1
// Event's JSON.
func (*V1Strategy) FromStorage(stored []byte) ([]byte, error) {
	var ev v1.Event
	if err := json.Unmarshal(stored, &ev); err != nil {
		return nil, err
	}
	out := FromCore(&ev)
	out.APIVersion, out.Kind = eventsv1.SchemeGroupVersion.String(), "Event"
	return registry.MarshalJSON(out)
}

// ToCore converts an events.k8s.io/v1 Event to core/v1 as kube does:
// regarding is involvedObject, note the message, the deprecated fields
// the core ones of the same name; the rest keeps its name. The result
// shares nothing mutable with in but its slices of metadata.
func ToCore(in *eventsv1.Event) *v1.Event {
	out := &v1.Event{
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &v1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	if in.Related != nil {
		related := *in.Related
		out.Related = &related
	}
	return out
}

// FromCore is the reverse of ToCore.
func FromCore(in *v1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	if in.Related != nil {
		related := *in.Related
		out.Related = &related
	}
	return out
}

// NewStored returns an empty core/v1 Event, the stored version.
func (*V1Strategy) NewStored() runtime.Object { return &v1.Event{} }
