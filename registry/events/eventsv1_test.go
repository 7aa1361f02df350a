package events

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/corekube/corekube/registry/internal/strategytest"
)

// fullCore sets every field of a core/v1 Event.
func fullCore() *v1.Event {
	t0 := time.Date(2026, 11, 26, 17, 0, 0, 0, time.UTC)
	return &v1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0.1", Namespace: "gold", UID: "uid-1", Labels: map[string]string{"a": "b"},
			CreationTimestamp: metav1.NewTime(t0)},
		InvolvedObject:      v1.ObjectReference{Kind: "Pod", Namespace: "gold", Name: "web-0", UID: "pod-uid", APIVersion: "v1", ResourceVersion: "7", FieldPath: "spec.containers{c}"},
		Reason:              "Started",
		Message:             "Started container c",
		Source:              v1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp:      metav1.NewTime(t0),
		LastTimestamp:       metav1.NewTime(t0.Add(time.Minute)),
		Count:               4,
		Type:                v1.EventTypeWarning,
		EventTime:           metav1.NewMicroTime(t0.Add(time.Microsecond)),
		Series:              &v1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(t0.Add(2 * time.Minute))},
		Action:              "Starting",
		Related:             &v1.ObjectReference{Kind: "Node", Name: "node-1"},
		ReportingController: "kubernetes.io/kubelet",
		ReportingInstance:   "node-1",
	}
}

// TestConversion maps every field both ways, as kube's conversion does,
// and round-trips without loss.
func TestConversion(t *testing.T) {
	core := fullCore()
	ev := FromCore(core)
	want := &eventsv1.Event{
		ObjectMeta:               core.ObjectMeta,
		EventTime:                core.EventTime,
		Series:                   &eventsv1.EventSeries{Count: 3, LastObservedTime: core.Series.LastObservedTime},
		ReportingController:      "kubernetes.io/kubelet",
		ReportingInstance:        "node-1",
		Action:                   "Starting",
		Reason:                   "Started",
		Regarding:                core.InvolvedObject,
		Related:                  &v1.ObjectReference{Kind: "Node", Name: "node-1"},
		Note:                     "Started container c",
		Type:                     v1.EventTypeWarning,
		DeprecatedSource:         v1.EventSource{Component: "kubelet", Host: "node-1"},
		DeprecatedFirstTimestamp: core.FirstTimestamp,
		DeprecatedLastTimestamp:  core.LastTimestamp,
		DeprecatedCount:          4,
	}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("FromCore\n got %+v\nwant %+v", ev, want)
	}
	if back := ToCore(ev); !reflect.DeepEqual(back, core) {
		t.Errorf("ToCore(FromCore)\n got %+v\nwant %+v", back, core)
	}
	// Every field of both types is set above: a field added to either
	// type must be mapped here too.
	for _, obj := range []any{core, ev} {
		v := reflect.ValueOf(obj).Elem()
		for i := range v.NumField() {
			if name := v.Type().Field(i).Name; name != "TypeMeta" && v.Field(i).IsZero() {
				t.Errorf("%T.%s is not set by the test", obj, name)
			}
		}
	}
	// Pointers are not shared: changing the result leaves the input.
	ev.Series.Count = 9
	ev.Related.Name = "other"
	if core.Series.Count != 3 || core.Related.Name != "node-1" {
		t.Error("FromCore shares series or related")
	}
	empty := FromCore(&v1.Event{})
	if empty.Series != nil || empty.Related != nil || !reflect.DeepEqual(ToCore(empty), &v1.Event{}) {
		t.Errorf("empty event %+v", empty)
	}
}

// TestStorageEncoding converts the stored JSON both ways.
func TestStorageEncoding(t *testing.T) {
	s := NewV1Strategy(NewStrategy())
	core := fullCore()
	core.APIVersion, core.Kind = "v1", "Event"
	stored, err := json.Marshal(core)
	if err != nil {
		t.Fatal(err)
	}
	served, err := s.FromStorage(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(served), `{"kind":"Event","apiVersion":"events.k8s.io/v1",`) || !strings.Contains(string(served), `"note":"Started container c"`) {
		t.Errorf("served %s", served)
	}
	back, err := s.ToStorage(served)
	if err != nil {
		t.Fatal(err)
	}
	if string(back) != string(stored) {
		t.Errorf("round trip\n got %s\nwant %s", back, stored)
	}
	if _, err := s.FromStorage([]byte("{")); err == nil {
		t.Error("FromStorage of bad JSON: no error")
	}
	if _, err := s.ToStorage([]byte("[")); err == nil {
		t.Error("ToStorage of bad JSON: no error")
	}
}

func newV1(tweak func(*eventsv1.Event)) *eventsv1.Event {
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "e", Namespace: "gold"},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "default-scheduler",
		ReportingInstance:   "default-scheduler-node-1",
		Action:              "Binding",
		Reason:              "Scheduled",
		Regarding:           v1.ObjectReference{Kind: "Pod", Namespace: "gold", Name: "web-0"},
		Type:                v1.EventTypeNormal,
	}
	if tweak != nil {
		tweak(ev)
	}
	return ev
}

func TestV1Validate(t *testing.T) {
	tests := []struct {
		name string
		ev   *eventsv1.Event
		want []string
	}{
		{"valid", newV1(nil), nil},
		{"valid series", newV1(func(e *eventsv1.Event) {
			e.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Now())}
		}), nil},
		{"no eventTime", newV1(func(e *eventsv1.Event) { e.EventTime = metav1.MicroTime{} }), []string{required + " eventTime"}},
		{"bad type", newV1(func(e *eventsv1.Event) { e.Type = "" }), []string{invalid + " type"}},
		{"deprecated fields set", newV1(func(e *eventsv1.Event) {
			e.DeprecatedFirstTimestamp = metav1.Now()
			e.DeprecatedLastTimestamp = metav1.Now()
			e.DeprecatedCount = 1
			e.DeprecatedSource.Host = "h"
		}), []string{invalid + " firstTimestamp", invalid + " lastTimestamp", invalid + " count", invalid + " source"}},
		{"short series", newV1(func(e *eventsv1.Event) { e.Series = &eventsv1.EventSeries{Count: 1} }),
			[]string{invalid + " series.count", required + " series.lastObservedTime"}},
		{"core rules too", newV1(func(e *eventsv1.Event) { e.ReportingInstance, e.Action = "", "" }),
			[]string{required + " reportingInstance", required + " action"}},
		{"cluster object in kube-system", newV1(func(e *eventsv1.Event) { e.Namespace, e.Regarding.Namespace = "kube-system", "" }), nil},
		{"cluster object elsewhere", newV1(func(e *eventsv1.Event) { e.Regarding.Namespace = "" }), []string{invalid + " involvedObject.namespace"}},
	}
	s := NewV1Strategy(NewStrategy())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == nil {
				tc.want = []string{}
			}
			if got := strategytest.ErrKeys(s.Validate(ctx, tc.ev)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	errs := s.Validate(ctx, newV1(func(e *eventsv1.Event) { e.Type = "Custom" }))
	if len(errs) != 1 || errs[0].Error() != `type: Invalid value: "": has invalid value: Custom` {
		t.Errorf("type message %v", errs)
	}
}

func TestV1ValidateUpdate(t *testing.T) {
	s := NewV1Strategy(NewStrategy())
	old := newV1(nil)
	series := newV1(func(e *eventsv1.Event) {
		e.EventTime = old.EventTime
		e.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Now())}
		e.Labels = map[string]string{"metadata": "may change"}
	})
	if errs := s.ValidateUpdate(ctx, series, old); len(errs) != 0 {
		t.Errorf("series update: %v", errs)
	}
	changed := newV1(func(e *eventsv1.Event) {
		e.Note = "n"
		e.Regarding.Name = "other"
		e.Reason = "Other"
		e.Type = v1.EventTypeWarning
		e.Action = "Other"
		e.Related = &v1.ObjectReference{Name: "r"}
		e.ReportingController = "other"
		e.ReportingInstance = "other"
		e.EventTime = metav1.NewMicroTime(old.EventTime.Add(time.Second))
		e.Series = &eventsv1.EventSeries{Count: 1}
	})
	want := []string{invalid + " series.count", required + " series.lastObservedTime",
		invalid + " involvedObject", invalid + " reason", invalid + " message", invalid + " reason", invalid + " type",
		invalid + " eventTime", invalid + " action", invalid + " related", invalid + " reportingController", invalid + " reportingInstance"}
	if got := strategytest.ErrKeys(s.ValidateUpdate(ctx, changed, old)); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestV1GetAttrsAndInfo(t *testing.T) {
	s := NewV1Strategy(NewStrategy(WithTTL(time.Minute)))
	ev := FromCore(fullCore())
	l, f, err := s.GetAttrs(ev)
	if err != nil || l["a"] != "b" {
		t.Fatalf("labels %v err %v", l, err)
	}
	want := fields.Set{
		"metadata.name":             "web-0.1",
		"metadata.namespace":        "gold",
		"regarding.kind":            "Pod",
		"regarding.namespace":       "gold",
		"regarding.name":            "web-0",
		"regarding.uid":             "pod-uid",
		"regarding.apiVersion":      "v1",
		"regarding.resourceVersion": "7",
		"regarding.fieldPath":       "spec.containers{c}",
		"reason":                    "Started",
		"reportingController":       "kubernetes.io/kubelet",
		"type":                      "Warning",
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("fields\n got %v\nwant %v", f, want)
	}
	if _, _, err := s.GetAttrs(&v1.Event{}); err == nil {
		t.Error("core event: no error")
	}
	info := s.Info()
	if info.APIVersion() != "events.k8s.io/v1" || info.Resource != "events" || info.Kind != "Event" || info.ListKind != "EventList" ||
		!info.Namespaced || !reflect.DeepEqual(info.ShortNames, []string{"ev"}) || !info.CustomFieldSelectors || s.TTL() != time.Minute || !s.AllowCreateOnUpdate() {
		t.Errorf("info %+v ttl %v", info, s.TTL())
	}
	if _, ok := s.New().(*eventsv1.Event); !ok {
		t.Error("New")
	}
	if _, ok := s.NewList().(*eventsv1.EventList); !ok {
		t.Error("NewList")
	}
}

// TestV1Table prints as the core event does.
func TestV1Table(t *testing.T) {
	core := NewStrategy()
	s := NewV1Strategy(core)
	now := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	if !reflect.DeepEqual(s.TableColumns(), core.TableColumns()) {
		t.Error("columns differ from core's")
	}
	ev := fullCore()
	got, err := s.TableRow(FromCore(ev), now)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := core.TableRow(ev, now)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("row %v, core %v", got.Cells, want.Cells)
	}
	if _, err := s.TableRow(ev, now); err == nil {
		t.Error("core event: no error")
	}
}
