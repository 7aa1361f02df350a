package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// newStyleEvent is an event as client-go's events.k8s.io recorder writes it.
func newStyleEvent(ns, name string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: ns},
		EventTime:           metav1.NewMicroTime(time.Now().Truncate(time.Microsecond)),
		ReportingController: "default-scheduler",
		ReportingInstance:   "default-scheduler-node-1",
		Action:              "Binding",
		Reason:              "Scheduled",
		Regarding:           v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-0", UID: "uid-web-0", APIVersion: "v1"},
		Related:             &v1.ObjectReference{Kind: "Node", Name: "node-1"},
		Note:                "Successfully assigned web-0 to node-1",
		Type:                v1.EventTypeNormal,
	}
}

// TestEventsV1 checks that events.k8s.io/v1 serves the core/v1 events: an
// event written through one group is read, listed, watched and updated
// through the other, with kube's field mapping, validation, field
// selectors and Table.
func TestEventsV1(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	events, core := cs.EventsV1().Events(ns), cs.CoreV1().Events(ns)

	t.Run("written as events.k8s.io, read as core", func(t *testing.T) {
		in := newStyleEvent(ns, "new-style")
		in.Series = &eventsv1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))}
		created, err := events.Create(ctx, in, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := core.Get(ctx, "new-style", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != created.ResourceVersion || got.UID != created.UID {
			t.Errorf("core rv/uid %s/%s, events.k8s.io %s/%s", got.ResourceVersion, got.UID, created.ResourceVersion, created.UID)
		}
		if got.InvolvedObject != in.Regarding || got.Message != in.Note || got.ReportingController != in.ReportingController ||
			got.ReportingInstance != in.ReportingInstance || got.Action != in.Action || got.Reason != in.Reason || got.Type != in.Type ||
			!got.EventTime.Equal(&in.EventTime) || got.Related == nil || *got.Related != *in.Related ||
			got.Series == nil || got.Series.Count != 3 || got.Count != 0 || got.Source != (v1.EventSource{}) {
			t.Errorf("core view %+v", got)
		}
		// And back: the events.k8s.io read equals what the create answered.
		again, err := events.Get(ctx, "new-style", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if again.Note != in.Note || again.Regarding != in.Regarding || again.Series.Count != 3 || again.APIVersion != "" && again.APIVersion != "events.k8s.io/v1" {
			t.Errorf("events.k8s.io view %+v", again)
		}
	})

	t.Run("written as core, read as events.k8s.io", func(t *testing.T) {
		first := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
		last := metav1.NewTime(time.Now().Truncate(time.Second))
		in := &v1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "old-style", Namespace: ns},
			InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-1", FieldPath: "spec.containers{web}"},
			Reason:         "BackOff", Message: "Back-off restarting", Type: v1.EventTypeWarning,
			Source:         v1.EventSource{Component: "kubelet", Host: "node-2"},
			FirstTimestamp: first, LastTimestamp: last, Count: 5,
		}
		created, err := core.Create(ctx, in, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := events.Get(ctx, "old-style", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != created.ResourceVersion || got.Regarding != in.InvolvedObject || got.Note != in.Message ||
			got.DeprecatedSource != in.Source || !got.DeprecatedFirstTimestamp.Equal(&first) || !got.DeprecatedLastTimestamp.Equal(&last) ||
			got.DeprecatedCount != 5 || got.Reason != "BackOff" || got.Type != v1.EventTypeWarning || !got.EventTime.IsZero() {
			t.Errorf("events.k8s.io view %+v", got)
		}
	})

	t.Run("validation", func(t *testing.T) {
		bad := newStyleEvent(ns, "bad")
		bad.EventTime = metav1.MicroTime{}
		bad.Type = "Custom"
		bad.DeprecatedCount = 2
		bad.DeprecatedSource = v1.EventSource{Component: "x"}
		bad.Series = &eventsv1.EventSeries{Count: 1}
		_, err := events.Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Fatalf("got %v, want Invalid", err)
		}
		for _, want := range []string{"eventTime: Required value", `type: Invalid value: "": has invalid value: Custom`,
			`count: Invalid value: "": needs to be unset`, `source: Invalid value: "": needs to be unset`,
			`series.count: Invalid value: "": should be at least 2`, "series.lastObservedTime: Required value"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q lacks %q", err.Error(), want)
			}
		}
		// The same through core/v1 is a legacy event: accepted.
		legacy := &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "legacy-custom", Namespace: ns},
			InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "a"}, Type: "Custom", Count: 2}
		if _, err := core.Create(ctx, legacy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// events.k8s.io updates may only change the series.
		ev, err := events.Create(ctx, newStyleEvent(ns, "immutable"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev.Note = "changed"
		ev.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Now())}
		_, err = events.Update(ctx, ev, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "message: Invalid value") || !strings.Contains(err.Error(), "field is immutable") {
			t.Fatalf("got %v, want message immutable", err)
		}
		ev.Note = newStyleEvent(ns, "").Note
		updated, err := events.Update(ctx, ev, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c, err := core.Get(ctx, "immutable", metav1.GetOptions{}); err != nil || c.Series == nil || c.Series.Count != 2 || c.ResourceVersion != updated.ResourceVersion {
			t.Errorf("core after update %+v %v", c, err)
		}
	})

	t.Run("patch through events.k8s.io", func(t *testing.T) {
		if _, err := events.Create(ctx, newStyleEvent(ns, "patched"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
		patch := `{"series":{"count":2,"lastObservedTime":"` + now + `"}}`
		got, err := events.Patch(ctx, "patched", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Series == nil || got.Series.Count != 2 || got.Note != newStyleEvent(ns, "").Note {
			t.Errorf("patched %+v", got)
		}
	})

	t.Run("field selectors", func(t *testing.T) {
		list, err := events.List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=web-0,reason=Scheduled"})
		if err != nil {
			t.Fatal(err)
		}
		names := eventNames(list.Items)
		if !names["new-style"] || names["old-style"] || names["legacy-custom"] {
			t.Errorf("regarding.name=web-0 selected %v", names)
		}
		list, err = events.List(ctx, metav1.ListOptions{FieldSelector: "reportingController=default-scheduler,type=Normal"})
		if err != nil {
			t.Fatal(err)
		}
		if names := eventNames(list.Items); !names["new-style"] || names["old-style"] {
			t.Errorf("reportingController selected %v", names)
		}
		// core's labels are not events.k8s.io's.
		_, err = events.List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web-0"})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "field label not supported: involvedObject.name") {
			t.Errorf("involvedObject.name on events.k8s.io: %v", err)
		}
		_, err = core.List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=web-0"})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "field label not supported: regarding.name") {
			t.Errorf("regarding.name on core: %v", err)
		}
	})

	t.Run("watch across groups", func(t *testing.T) {
		list, err := events.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		w, err := events.Watch(wctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "regarding.name=watched"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		in := &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "watched", Namespace: ns},
			InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "watched"}, Reason: "Pulled", Message: "pulled", Count: 1}
		created, err := core.Create(ctx, in, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			got, isEvent := ev.Object.(*eventsv1.Event)
			if ev.Type != watch.Added || !isEvent || got.Note != "pulled" || got.DeprecatedCount != 1 || got.ResourceVersion != created.ResourceVersion {
				t.Errorf("watch event %s %+v", ev.Type, ev.Object)
			}
		case <-wctx.Done():
			t.Fatal("no watch event")
		}
		if err := core.Delete(ctx, "watched", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			if got, ok := ev.Object.(*eventsv1.Event); ev.Type != watch.Deleted || !ok || got.Name != "watched" {
				t.Errorf("watch event %s %+v", ev.Type, ev.Object)
			}
		case <-wctx.Done():
			t.Fatal("no DELETED event")
		}
	})

	t.Run("protobuf", func(t *testing.T) {
		pcfg := rest.CopyConfig(cfg)
		pcfg.ContentType = "application/vnd.kubernetes.protobuf"
		pcs, err := kubernetes.NewForConfig(pcfg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pcs.EventsV1().Events(ns).Get(ctx, "old-style", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Note != "Back-off restarting" || got.DeprecatedCount != 5 {
			t.Errorf("protobuf get %+v", got)
		}
		list, err := pcs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=old-style"})
		if err != nil || len(list.Items) != 1 || list.Items[0].Note != "Back-off restarting" {
			t.Errorf("protobuf list %+v %v", list, err)
		}
	})

	t.Run("table", func(t *testing.T) {
		body := getRaw(t, "/apis/events.k8s.io/v1/namespaces/"+ns+"/events?fieldSelector=metadata.name%3Dold-style",
			"application/json;as=Table;v=v1;g=meta.k8s.io")
		var table metav1.Table
		if err := json.Unmarshal(body, &table); err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, c := range table.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		if got := strings.Join(cols, ","); got != "Last Seen,Type,Reason,Object,Subobject,Source,Message,First Seen,Count,Name" {
			t.Errorf("columns %s", got)
		}
		if len(table.Rows) != 1 {
			t.Fatalf("rows %+v", table.Rows)
		}
		cells := table.Rows[0].Cells
		if cells[1] != "Warning" || cells[2] != "BackOff" || cells[3] != "pod/web-1" || cells[5] != "kubelet, node-2" || cells[8] != float64(5) || cells[9] != "old-style" {
			t.Errorf("cells %v", cells)
		}
	})

	t.Run("discovery", func(t *testing.T) {
		var groups metav1.APIGroupList
		if err := json.Unmarshal(getRaw(t, "/apis", "application/json"), &groups); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, g := range groups.Groups {
			if g.Name == "events.k8s.io" {
				found = len(g.Versions) == 1 && g.Versions[0].GroupVersion == "events.k8s.io/v1" && g.PreferredVersion.Version == "v1"
			}
		}
		if !found {
			t.Errorf("/apis has no events.k8s.io/v1: %+v", groups.Groups)
		}
		var group metav1.APIGroup
		if err := json.Unmarshal(getRaw(t, "/apis/events.k8s.io", "application/json"), &group); err != nil || group.Name != "events.k8s.io" {
			t.Errorf("/apis/events.k8s.io: %+v %v", group, err)
		}
		var resources metav1.APIResourceList
		if err := json.Unmarshal(getRaw(t, "/apis/events.k8s.io/v1", "application/json"), &resources); err != nil {
			t.Fatal(err)
		}
		if len(resources.APIResources) != 1 {
			t.Fatalf("resources %+v", resources.APIResources)
		}
		r := resources.APIResources[0]
		if r.Name != "events" || r.Kind != "Event" || !r.Namespaced || r.SingularName != "event" || !slices.Equal(r.ShortNames, []string{"ev"}) ||
			!slices.Equal(r.Verbs, []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}) {
			t.Errorf("events.k8s.io/v1 events %+v", r)
		}
		// kubectl's resource mapping (and k9s's) find the group.
		_, list, err := cs.Discovery().ServerGroupsAndResources()
		if err != nil {
			t.Fatal(err)
		}
		mapped := false
		for _, l := range list {
			if l.GroupVersion == "events.k8s.io/v1" {
				mapped = len(l.APIResources) == 1 && l.APIResources[0].Name == "events"
			}
		}
		if !mapped {
			t.Error("aggregated discovery lacks events.k8s.io/v1 events")
		}
	})

	t.Run("openapi", func(t *testing.T) {
		var v3 struct {
			Paths      map[string]json.RawMessage `json:"paths"`
			Components struct {
				Schemas map[string]json.RawMessage `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(getRaw(t, "/openapi/v3/apis/events.k8s.io/v1", "application/json"), &v3); err != nil {
			t.Fatal(err)
		}
		if _, ok := v3.Paths["/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}"]; !ok {
			t.Errorf("v3 paths %v", len(v3.Paths))
		}
		if s := v3.Components.Schemas["io.k8s.api.events.v1.Event"]; !strings.Contains(string(s), "regarding") || !strings.Contains(string(s), `"group":"events.k8s.io"`) {
			t.Errorf("v3 Event schema %s", s)
		}
		var v2 struct {
			Definitions map[string]json.RawMessage `json:"definitions"`
		}
		if err := json.Unmarshal(getRaw(t, "/openapi/v2", "application/json"), &v2); err != nil {
			t.Fatal(err)
		}
		if s := v2.Definitions["io.k8s.api.events.v1.Event"]; !strings.Contains(string(s), "deprecatedCount") {
			t.Errorf("v2 Event definition %s", s)
		}
	})

	t.Run("all namespaces GET", func(t *testing.T) {
		var list eventsv1.EventList
		if err := json.Unmarshal(getRaw(t, "/apis/events.k8s.io/v1/events", "application/json"), &list); err != nil {
			t.Fatal(err)
		}
		if list.Kind != "EventList" || list.APIVersion != "events.k8s.io/v1" || len(list.Items) == 0 {
			t.Errorf("list %s %s, %d items", list.Kind, list.APIVersion, len(list.Items))
		}
	})
}

func eventNames(items []eventsv1.Event) map[string]bool {
	out := map[string]bool{}
	for _, ev := range items {
		out[ev.Name] = true
	}
	return out
}

// getRaw GETs path from the shared server with the given Accept header.
func getRaw(t *testing.T, path, accept string) []byte {
	t.Helper()
	resp := doRaw(t, http.MethodGet, path, nil, "Accept", accept)
	if resp.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.Code, resp.Body)
	}
	return resp.Body
}

// TestEventsV1Apply: server-side apply through either group of an event
// whose fields another manager owns through the other group.
func TestEventsV1Apply(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	body := `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"applied","namespace":"` + ns + `"},` +
		`"eventTime":"` + now + `","reportingController":"c","reportingInstance":"i","action":"A","reason":"R","type":"Normal",` +
		`"regarding":{"kind":"Pod","namespace":"` + ns + `","name":"p"},"note":"first"}`
	force := true
	got, err := cs.EventsV1().Events(ns).Patch(ctx, "applied", types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "m1", Force: &force})
	if err != nil {
		t.Fatal(err)
	}
	if got.Note != "first" || len(got.ManagedFields) != 1 || got.ManagedFields[0].APIVersion != "events.k8s.io/v1" {
		t.Errorf("applied %+v", got)
	}
	coreBody := `{"apiVersion":"v1","kind":"Event","metadata":{"name":"applied","namespace":"` + ns + `","labels":{"x":"y"}}}`
	ev, err := cs.CoreV1().Events(ns).Patch(ctx, "applied", types.ApplyPatchType, []byte(coreBody), metav1.PatchOptions{FieldManager: "m2"})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Labels["x"] != "y" || ev.Message != "first" {
		t.Errorf("core apply %+v", ev)
	}
}
