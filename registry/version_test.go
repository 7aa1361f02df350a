package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/events"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// TestSecondVersion checks a Store serving another version of a resource
// (events.k8s.io/v1 over core/v1 events) through the converting storage:
// values are stored in the stored version, every verb converts, and a
// no-op write writes nothing.
func TestSecondVersion(t *testing.T) {
	ctx := t.Context()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := newTestStorage(t)
	coreStrategy := events.NewStrategy(events.WithTTL(0))
	core := registry.NewStore(st, coreStrategy, registry.Options{Logger: quiet})
	v1Store := registry.NewStore(st, events.NewV1Strategy(coreStrategy), registry.Options{Logger: quiet})

	in := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "e1", Namespace: "gold"},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "c", ReportingInstance: "i", Action: "A", Reason: "R", Type: v1.EventTypeNormal,
		Regarding: v1.ObjectReference{Kind: "Pod", Namespace: "gold", Name: "p"}, Note: "hello",
	}
	out, err := v1Store.Create(ctx, "gold", in, registry.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := out.(*eventsv1.Event)
	if created.Note != "hello" || created.UID == "" || created.APIVersion != "events.k8s.io/v1" {
		t.Errorf("created %+v", created)
	}

	// Stored as a core/v1 Event.
	kv, err := st.Get(ctx, "/events/gold/e1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(kv.Value, []byte("k8s\x00")) {
		t.Errorf("stored value is not in kube's protobuf encoding: %q", kv.Value)
	}
	storedJSON, err := registry.StoredJSON(kv.Value)
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]any
	if err := json.Unmarshal(storedJSON, &stored); err != nil {
		t.Fatal(err)
	}
	if stored["apiVersion"] != "v1" || stored["message"] != "hello" || stored["involvedObject"] == nil || stored["note"] != nil {
		t.Errorf("stored %s", storedJSON)
	}
	got, err := core.Get(ctx, "gold", "e1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev := got.(*v1.Event); ev.Message != "hello" || ev.ResourceVersion != created.ResourceVersion {
		t.Errorf("core get %+v", ev)
	}

	// A no-op update writes nothing.
	same := func(_ context.Context, cur runtime.Object) (runtime.Object, error) { return cur.DeepCopyObject(), nil }
	out, _, err = v1Store.Update(ctx, "gold", "e1", same, registry.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv := out.(*eventsv1.Event).ResourceVersion; rv != created.ResourceVersion {
		t.Errorf("no-op update moved the resourceVersion %s -> %s", created.ResourceVersion, rv)
	}
	// A real one is seen through core.
	addSeries := func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
		ev := cur.DeepCopyObject().(*eventsv1.Event)
		ev.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Now())}
		return ev, nil
	}
	out, _, err = v1Store.Update(ctx, "gold", "e1", addSeries, registry.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := core.Get(ctx, "gold", "e1", nil); got.(*v1.Event).Series == nil || got.(*v1.Event).ResourceVersion != out.(*eventsv1.Event).ResourceVersion {
		t.Errorf("core after update %+v", got)
	}

	// A LIST from etcd (exact revision) selects on the served version's
	// fields.
	list, err := v1Store.List(ctx, "gold", &metainternalversion.ListOptions{
		FieldSelector:        fields.OneTermEqualSelector("regarding.name", "p"),
		ResourceVersion:      out.(*eventsv1.Event).ResourceVersion,
		ResourceVersionMatch: metav1.ResourceVersionMatchExact,
	})
	if err != nil {
		t.Fatal(err)
	}
	if items := list.(*eventsv1.EventList).Items; len(items) != 1 || items[0].Note != "hello" {
		t.Errorf("list %+v", items)
	}

	// Delete with a precondition, read in the served version.
	uid := types.UID(created.UID)
	out, _, err = v1Store.Delete(ctx, "gold", "e1", &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.Get(ctx, "gold", "e1", nil); err == nil {
		t.Error("deleted event still there")
	}
}
