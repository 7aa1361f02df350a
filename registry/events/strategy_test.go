package events

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/corekube/corekube/registry/internal/strategytest"
)

var ctx = context.Background()

// legacy is a classic core/v1 event (no eventTime).
func legacy(ns, involvedNS string) *v1.Event {
	return &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web-0.17a", Namespace: ns},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Name: "web-0", Namespace: involvedNS},
		Reason:         "Scheduled",
		Type:           v1.EventTypeNormal,
	}
}

// modern is an event written the events.k8s.io way (eventTime set).
func modern(tweak func(*v1.Event)) *v1.Event {
	ev := legacy("default", "default")
	ev.EventTime = metav1.NewMicroTime(time.Now())
	ev.ReportingController = "kubernetes.io/kubelet"
	ev.ReportingInstance = "node-1"
	ev.Action = "Started"
	if tweak != nil {
		tweak(ev)
	}
	return ev
}

const (
	invalid  = "FieldValueInvalid"
	required = "FieldValueRequired"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		ev   *v1.Event
		want []string
	}{
		{"legacy same namespace", legacy("gold", "gold"), nil},
		{"legacy cluster object in default", legacy("default", ""), nil},
		{"legacy cluster object in empty", legacy("", ""), []string{invalid + " namespace"}},
		{"legacy cluster object elsewhere", legacy("gold", ""), []string{invalid + " involvedObject.namespace"}},
		{"legacy mismatch", legacy("gold", "silver"), []string{invalid + " involvedObject.namespace"}},
		{"legacy no reason or type", func() *v1.Event { e := legacy("a", "a"); e.Reason, e.Type = "", "Custom"; return e }(), nil},
		{"legacy bad namespace", legacy("Bad_NS", "Bad_NS"), []string{invalid + " namespace"}},
		{"modern", modern(nil), nil},
		{"modern kube-system cluster object", modern(func(e *v1.Event) { e.Namespace, e.InvolvedObject.Namespace = "kube-system", "" }), nil},
		{"modern cluster object elsewhere", modern(func(e *v1.Event) { e.Namespace, e.InvolvedObject.Namespace = "gold", "" }),
			[]string{invalid + " involvedObject.namespace"}},
		{"modern namespace mismatch allowed", modern(func(e *v1.Event) { e.InvolvedObject.Namespace = "other" }), nil},
		{"modern missing reporting fields", modern(func(e *v1.Event) { e.ReportingController, e.ReportingInstance, e.Action, e.Reason = "", "", "", "" }),
			[]string{required + " reportingComponent", invalid + " reportingComponent", invalid + " reportingComponent",
				required + " reportingInstance", required + " action", required + " reason"}},
		{"modern bad controller", modern(func(e *v1.Event) { e.ReportingController = "bad controller" }), []string{invalid + " reportingComponent"}},
		{"modern too long", modern(func(e *v1.Event) {
			e.ReportingInstance = strings.Repeat("i", 129)
			e.Action = strings.Repeat("a", 129)
			e.Reason = strings.Repeat("r", 129)
			e.Message = strings.Repeat("m", 1025)
		}), []string{invalid + " reportingInstance", invalid + " action", invalid + " reason", invalid + " message"}},
		{"modern at limits", modern(func(e *v1.Event) {
			e.ReportingInstance = strings.Repeat("i", 128)
			e.Action = strings.Repeat("a", 128)
			e.Reason = strings.Repeat("r", 128)
			e.Message = strings.Repeat("m", 1024)
		}), nil},
	}
	s := NewStrategy()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == nil {
				tc.want = []string{}
			}
			if got := strategytest.ErrKeys(s.Validate(ctx, tc.ev)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("create: got %v, want %v", got, tc.want)
			}
			if got := strategytest.ErrKeys(s.ValidateUpdate(ctx, tc.ev, legacy("x", "y"))); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("update: got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidateMessages(t *testing.T) {
	s := NewStrategy()
	errs := s.Validate(ctx, legacy("gold", "silver"))
	if want := `involvedObject.namespace: Invalid value: "silver": does not match event.namespace`; errs[0].Error() != want {
		t.Errorf("got %q", errs[0].Error())
	}
	errs = s.Validate(ctx, modern(func(e *v1.Event) { e.Action = strings.Repeat("a", 129) }))
	if want := `action: Invalid value: "": can have at most 128 characters`; errs[0].Error() != want {
		t.Errorf("got %q", errs[0].Error())
	}
}

func TestUpdateMayChangeAnything(t *testing.T) {
	old := legacy("gold", "gold")
	ev := legacy("gold", "gold")
	ev.Reason, ev.Message, ev.Count, ev.Type = "Other", "changed", 7, v1.EventTypeWarning
	ev.InvolvedObject.Name = "web-1"
	s := NewStrategy()
	s.PrepareForUpdate(ctx, ev, old)
	if errs := s.ValidateUpdate(ctx, ev, old); len(errs) != 0 {
		t.Errorf("unexpected %v", errs)
	}
	if ev.Reason != "Other" || ev.Count != 7 {
		t.Error("PrepareForUpdate must not touch the event")
	}
}

func TestGetAttrs(t *testing.T) {
	s := NewStrategy()
	ev := legacy("gold", "gold")
	ev.Labels = map[string]string{"a": "b"}
	ev.InvolvedObject.UID = "uid-1"
	ev.InvolvedObject.APIVersion = "v1"
	ev.InvolvedObject.ResourceVersion = "42"
	ev.InvolvedObject.FieldPath = "spec.containers{c}"
	ev.Source.Component = "kubelet"
	ev.ReportingController = "kubernetes.io/kubelet"
	l, f, err := s.GetAttrs(ev)
	if err != nil || l["a"] != "b" {
		t.Fatalf("labels %v err %v", l, err)
	}
	want := fields.Set{
		"metadata.name":                  "web-0.17a",
		"metadata.namespace":             "gold",
		"involvedObject.kind":            "Pod",
		"involvedObject.namespace":       "gold",
		"involvedObject.name":            "web-0",
		"involvedObject.uid":             "uid-1",
		"involvedObject.apiVersion":      "v1",
		"involvedObject.resourceVersion": "42",
		"involvedObject.fieldPath":       "spec.containers{c}",
		"reason":                         "Scheduled",
		"reportingComponent":             "kubernetes.io/kubelet",
		"source":                         "kubelet",
		"type":                           "Normal",
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("fields\n got %v\nwant %v", f, want)
	}
	ev.Source.Component = ""
	if _, f, _ := s.GetAttrs(ev); f["source"] != "kubernetes.io/kubelet" {
		t.Errorf("source fallback %q", f["source"])
	}
	if _, _, err := s.GetAttrs(&v1.Pod{}); err == nil {
		t.Error("expected error")
	}
}

func TestInfo(t *testing.T) {
	s := NewStrategy()
	info := s.Info()
	if info.APIVersion() != "v1" || info.Resource != "events" || info.Singular != "event" || info.Kind != "Event" ||
		info.ListKind != "EventList" || !info.Namespaced || !reflect.DeepEqual(info.ShortNames, []string{"ev"}) ||
		info.Categories != nil || !info.CustomFieldSelectors || !s.AllowCreateOnUpdate() {
		t.Errorf("info %+v", info)
	}
	if _, ok := s.New().(*v1.Event); !ok {
		t.Error("New")
	}
	if _, ok := s.NewList().(*v1.EventList); !ok {
		t.Error("NewList")
	}
	ev := legacy("a", "a")
	before := ev.DeepCopy()
	s.PrepareForCreate(ctx, ev)
	if !reflect.DeepEqual(ev, before) {
		t.Error("PrepareForCreate changed the event")
	}
}

func TestTTL(t *testing.T) {
	if got := NewStrategy().TTL(); got != DefaultTTL {
		t.Errorf("default TTL = %v, want %v", got, DefaultTTL)
	}
	if got := NewStrategy(WithTTL(5 * time.Minute)).TTL(); got != 5*time.Minute {
		t.Errorf("TTL = %v, want 5m", got)
	}
}
