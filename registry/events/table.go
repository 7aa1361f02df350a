package events

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

var _ registry.TableConvertor = (*Strategy)(nil)

// TableColumns are kube's event columns: LAST SEEN TYPE REASON OBJECT
// MESSAGE, and wide SUBOBJECT SOURCE FIRST SEEN COUNT NAME.
func (*Strategy) TableColumns() []metav1.TableColumnDefinition {
	doc := v1.Event{}.SwaggerDoc()
	name := registry.NameColumn()
	name.Priority = 1
	return []metav1.TableColumnDefinition{
		registry.StringColumn("Last Seen", doc["lastTimestamp"]),
		registry.StringColumn("Type", doc["type"]),
		registry.StringColumn("Reason", doc["reason"]),
		registry.StringColumn("Object", doc["involvedObject"]),
		registry.WideColumn("Subobject", v1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
		registry.WideColumn("Source", doc["source"]),
		registry.StringColumn("Message", doc["message"]),
		registry.WideColumn("First Seen", doc["firstTimestamp"]),
		registry.WideColumn("Count", doc["count"]),
		name,
	}
}

// TableRow prints an event as kube's printEvent does: times fall back from
// lastTimestamp to firstTimestamp to eventTime, a series gives the last
// observed time and the count, and a singleton counts 1.
func (*Strategy) TableRow(obj runtime.Object, now time.Time) (metav1.TableRow, error) {
	ev, ok := obj.(*v1.Event)
	if !ok {
		return metav1.TableRow{}, fmt.Errorf("expected an Event, got %T", obj)
	}
	first := registry.TableAge(ev.FirstTimestamp, now)
	if ev.FirstTimestamp.IsZero() {
		first = registry.TableMicroAge(ev.EventTime, now)
	}
	last := registry.TableAge(ev.LastTimestamp, now)
	if ev.LastTimestamp.IsZero() {
		last = first
	}
	count := ev.Count
	if ev.Series != nil {
		last = registry.TableMicroAge(ev.Series.LastObservedTime, now)
		count = ev.Series.Count
	} else if count == 0 {
		count = 1
	}
	target := strings.ToLower(ev.InvolvedObject.Kind)
	if ev.InvolvedObject.Name != "" {
		target += "/" + ev.InvolvedObject.Name
	}
	return metav1.TableRow{Cells: []any{
		last, ev.Type, ev.Reason, target, ev.InvolvedObject.FieldPath,
		eventSource(ev), strings.TrimSpace(ev.Message), first, int64(count), ev.Name,
	}}, nil
}

// eventSource is "component, host", falling back to the reporting
// controller and instance; ", host" is left out when there is none.
func eventSource(ev *v1.Event) string {
	component := firstNonEmpty(ev.Source.Component, ev.ReportingController)
	instance := firstNonEmpty(ev.Source.Host, ev.ReportingInstance)
	if instance == "" {
		return component
	}
	return component + ", " + instance
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
