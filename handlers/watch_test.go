package handlers

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/registry"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// flushCounter is a ResponseRecorder that counts its flushes.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *flushCounter) Flush() { f.flushes++; f.ResponseRecorder.Flush() }

func watchedConfigMap(name, rv string) *v1.ConfigMap {
	cm := testConfigMap(name, map[string]string{"k": rv})
	cm.ResourceVersion = rv
	cm.SetGroupVersionKind(v1.SchemeGroupVersion.WithKind("ConfigMap"))
	return cm
}

// bookmark is the bookmark ending a watch-list's initial events, with the
// registry's blueprint annotation (a JSON list) for the handler to
// re-encode.
func bookmark(rv string) *v1.ConfigMap {
	return &v1.ConfigMap{
		TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv, Annotations: map[string]string{
			metav1.InitialEventsAnnotationKey:              "true",
			metav1.InitialEventsListBlueprintAnnotationKey: "registry's",
		}},
	}
}

func testEvents() []registry.WatchEvent {
	return []registry.WatchEvent{
		{Type: watch.Added, Object: watchedConfigMap("a", "1")},
		{Type: watch.Bookmark, Object: bookmark("1")},
		{Type: watch.Modified, Object: watchedConfigMap("a", "2")},
		{Type: watch.Deleted, Object: watchedConfigMap("a", "3")},
		{Type: watch.Error, Object: &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Code: 410, Reason: metav1.StatusReasonExpired, Message: "The resourceVersion for the provided watch is too old."}},
	}
}

// serveWatch serves a watch of target with the events of testEvents.
func serveWatch(t *testing.T, st *fakeStore, method, target, accept string) *flushCounter {
	t.Helper()
	if st.events == nil {
		st.events = testEvents()
	}
	r := httptest.NewRequest(method, target, nil)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	ri, ok := parseRequestInfo(r.URL.Path)
	if !ok {
		t.Fatalf("%s is no resource path", target)
	}
	w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	(&API{}).serveResource(w, r, ri, st, nil)
	return w
}

// jsonEvents splits a JSON watch stream into its events, one a line.
func jsonEvents(t *testing.T, body []byte) []metav1.WatchEvent {
	t.Helper()
	var out []metav1.WatchEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var ev metav1.WatchEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	if !bytes.HasSuffix(body, []byte("\n")) {
		t.Errorf("the stream does not end with a newline: %q", body)
	}
	return out
}

func wantBlueprint(t *testing.T, annotations map[string]string, want string) {
	t.Helper()
	got, err := base64.StdEncoding.DecodeString(annotations[metav1.InitialEventsListBlueprintAnnotationKey])
	if err != nil || string(got) != want {
		t.Errorf("blueprint %q (%v), want %q", got, err, want)
	}
	if annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("annotations %v", annotations)
	}
}

func TestWatchJSON(t *testing.T) {
	st := newFakeStore()
	w := serveWatch(t, st, "GET", cmPath+"?watch=true&labelSelector=a%3Db&resourceVersion=1&allowWatchBookmarks=true", "")
	wantCode(t, w.ResponseRecorder, http.StatusOK, "application/json")
	if cc := w.Header().Get("Cache-Control"); cc != "no-cache, private" {
		t.Errorf("Cache-Control %q", cc)
	}
	o := st.watchOpts
	if !o.Watch || o.LabelSelector.String() != "a=b" || o.ResourceVersion != "1" || !o.AllowWatchBookmarks || st.namespace != "ns" {
		t.Errorf("watch options %+v in %q", o, st.namespace)
	}
	events := jsonEvents(t, w.Body.Bytes())
	wantTypes := []string{"ADDED", "BOOKMARK", "MODIFIED", "DELETED", "ERROR"}
	if len(events) != len(wantTypes) {
		t.Fatalf("%d events, want %d: %s", len(events), len(wantTypes), w.Body)
	}
	for i, ev := range events {
		if ev.Type != wantTypes[i] {
			t.Errorf("event %d is %s, want %s", i, ev.Type, wantTypes[i])
		}
	}
	var cm v1.ConfigMap
	if err := json.Unmarshal(events[2].Object.Raw, &cm); err != nil || cm.Name != "a" || cm.ResourceVersion != "2" || cm.Kind != "ConfigMap" {
		t.Errorf("MODIFIED object %s (%v)", events[2].Object.Raw, err)
	}
	// The registry's blueprint is already the JSON a JSON client decodes.
	var mark v1.ConfigMap
	if err := json.Unmarshal(events[1].Object.Raw, &mark); err != nil || mark.Annotations[metav1.InitialEventsListBlueprintAnnotationKey] != "registry's" {
		t.Errorf("BOOKMARK %s (%v)", events[1].Object.Raw, err)
	}
	var status metav1.Status
	if err := json.Unmarshal(events[4].Object.Raw, &status); err != nil || status.Code != 410 || status.Reason != metav1.StatusReasonExpired {
		t.Errorf("ERROR object %s (%v)", events[4].Object.Raw, err)
	}
	// Every event is counted, none from a cached encoding; the watch is
	// stopped.
	if len(st.watch.sent) != 5 || st.watch.sent[0] != "ADDED cached=false protobuf=false sized=true" || !st.watch.stopped {
		t.Errorf("sent %q, stopped %v", st.watch.sent, st.watch.stopped)
	}
	// Flushed once for the headers and once when no event was ready: a
	// burst leaves in one write.
	if w.flushes != 2 {
		t.Errorf("%d flushes, want 2", w.flushes)
	}
}

func TestWatchProtobuf(t *testing.T) {
	st := newFakeStore()
	w := serveWatch(t, st, "GET", cmPath+"?watch=1", "application/vnd.kubernetes.protobuf, application/json")
	wantCode(t, w.ResponseRecorder, http.StatusOK, "application/vnd.kubernetes.protobuf;stream=watch")
	dec := streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(ioNopCloser{bytes.NewReader(w.Body.Bytes())}), protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme))
	objects := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	var types []string
	for {
		var ev metav1.WatchEvent
		if _, _, err := dec.Decode(nil, &ev); err != nil {
			break
		}
		types = append(types, ev.Type)
		obj, _, err := objects.Decode(ev.Object.Raw, nil, nil)
		if err != nil {
			t.Fatalf("%s object: %v", ev.Type, err)
		}
		switch o := obj.(type) {
		case *v1.ConfigMap:
			if ev.Type == "BOOKMARK" {
				// A protobuf client decodes the blueprint with its
				// stream's decoder: it is a protobuf ConfigMapList.
				data, err := base64.StdEncoding.DecodeString(o.Annotations[metav1.InitialEventsListBlueprintAnnotationKey])
				if err != nil {
					t.Fatal(err)
				}
				if list, _, err := objects.Decode(data, nil, nil); err != nil {
					t.Errorf("blueprint: %v", err)
				} else if _, ok := list.(*v1.ConfigMapList); !ok {
					t.Errorf("blueprint is a %T", list)
				}
			} else if o.Name != "a" {
				t.Errorf("%s %+v", ev.Type, o)
			}
		case *metav1.Status:
			if ev.Type != "ERROR" || o.Code != 410 {
				t.Errorf("%s %+v", ev.Type, o)
			}
		default:
			t.Errorf("%s carries a %T", ev.Type, obj)
		}
	}
	if strings.Join(types, ",") != "ADDED,BOOKMARK,MODIFIED,DELETED,ERROR" {
		t.Errorf("events %v", types)
	}
	if len(st.watch.sent) != 5 || st.watch.sent[0] != "ADDED cached=false protobuf=true sized=true" {
		t.Errorf("sent %q", st.watch.sent)
	}
}

func TestWatchTable(t *testing.T) {
	st := newFakeStore()
	st.events = testEvents()[2:4] // MODIFIED, DELETED
	w := serveWatch(t, st, "GET", cmPath+"?watch=true", tableJSON)
	wantCode(t, w.ResponseRecorder, http.StatusOK, "application/json")
	events := jsonEvents(t, w.Body.Bytes())
	if len(events) != 2 {
		t.Fatalf("events %s", w.Body)
	}
	for i, ev := range events {
		var table metav1.Table
		if err := json.Unmarshal(ev.Object.Raw, &table); err != nil || table.Kind != "Table" || len(table.Rows) != 1 || table.Rows[0].Cells[0] != "a" {
			t.Errorf("event %d: %s (%v)", i, ev.Object.Raw, err)
		}
		// As kube: only the first event's Table has the columns.
		if (len(table.ColumnDefinitions) > 0) != (i == 0) {
			t.Errorf("event %d has %d columns", i, len(table.ColumnDefinitions))
		}
	}
}

func TestWatchMetadata(t *testing.T) {
	st := newFakeStore()
	st.events = testEvents()[:2] // ADDED, BOOKMARK
	w := serveWatch(t, st, "GET", cmPath+"?watch=true", metaJSON)
	wantCode(t, w.ResponseRecorder, http.StatusOK, "application/json")
	events := jsonEvents(t, w.Body.Bytes())
	if len(events) != 2 {
		t.Fatalf("events %s", w.Body)
	}
	var p metav1.PartialObjectMetadata
	if err := json.Unmarshal(events[0].Object.Raw, &p); err != nil || p.Kind != "PartialObjectMetadata" || p.Name != "a" || strings.Contains(string(events[0].Object.Raw), `"data"`) {
		t.Errorf("ADDED %s (%v)", events[0].Object.Raw, err)
	}
	var mark metav1.PartialObjectMetadata
	if err := json.Unmarshal(events[1].Object.Raw, &mark); err != nil || mark.Kind != "PartialObjectMetadata" {
		t.Fatalf("BOOKMARK %s (%v)", events[1].Object.Raw, err)
	}
	wantBlueprint(t, mark.Annotations, `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{},"items":null}`+"\n")
	// The event's own object keeps the registry's annotation.
	if got := testEvents()[1].Object.(*v1.ConfigMap).Annotations[metav1.InitialEventsListBlueprintAnnotationKey]; got != "registry's" {
		t.Errorf("the registry's bookmark was changed: %q", got)
	}
}

func TestWatchTimeout(t *testing.T) {
	for _, c := range []struct {
		query    string
		min, max time.Duration
	}{
		{"timeoutSeconds=5", 4 * time.Second, 5 * time.Second},
		{"timeoutSeconds=0", minWatchTimeout - time.Minute, 2 * minWatchTimeout},
		{"", minWatchTimeout - time.Minute, 2 * minWatchTimeout},
	} {
		t.Run(c.query, func(t *testing.T) {
			st := newFakeStore()
			st.events = []registry.WatchEvent{}
			serveWatch(t, st, "GET", cmPath+"?watch=true&"+c.query, "")
			if st.watchTimeout <= c.min || st.watchTimeout > c.max {
				t.Errorf("watch context ends in %v, want in (%v, %v]", st.watchTimeout, c.min, c.max)
			}
		})
	}
}

func TestWatchErrors(t *testing.T) {
	for _, c := range []struct {
		name, method, target, accept string
		verbs                        []string
		err                          error
		code                         int
		reason                       metav1.StatusReason
		msg                          string
	}{
		{name: "too old", target: cmPath + "?watch=true&resourceVersion=1", err: apierrors.NewResourceExpired("too old resource version: 1 (5)"),
			code: 410, reason: metav1.StatusReasonExpired, msg: "too old resource version: 1 (5)"},
		{name: "bad selector", target: cmPath + "?watch=true&fieldSelector=a%3D%3D%3Db", code: 400, reason: metav1.StatusReasonBadRequest, msg: "invalid field selector"},
		{name: "watch path with another name", target: "/api/v1/watch/namespaces/ns/configmaps/a?fieldSelector=metadata.name%3Db", code: 400, reason: metav1.StatusReasonBadRequest,
			msg: "fieldSelector metadata.name doesn't match requested name"},
		{name: "watch path not GET", method: "DELETE", target: "/api/v1/watch/namespaces/ns/configmaps", code: 405, reason: metav1.StatusReasonMethodNotAllowed,
			msg: "the server does not allow this method on the requested resource"},
		{name: "watch path without the verb", target: "/api/v1/watch/namespaces/ns/configmaps", verbs: []string{"get", "list"}, code: 404, reason: metav1.StatusReasonNotFound,
			msg: "the server could not find the requested resource"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFakeStore()
			st.err, st.info.Verbs = c.err, c.verbs
			method := c.method
			if method == "" {
				method = "GET"
			}
			w := serveWatch(t, st, method, c.target, c.accept)
			wantStatus(t, w.ResponseRecorder, c.code, c.reason, c.msg)
			if st.watch != nil && !st.watch.stopped {
				t.Error("the watch was not stopped")
			}
		})
	}
}

func TestWatchPath(t *testing.T) {
	for _, c := range []struct{ target, selector string }{
		{"/api/v1/watch/namespaces/ns/configmaps/a", "metadata.name=a"},
		{"/api/v1/watch/namespaces/ns/configmaps/a?fieldSelector=metadata.name%3Da", "metadata.name=a"},
		{"/api/v1/watch/namespaces/ns/configmaps?fieldSelector=metadata.name%3Db", "metadata.name=b"},
		{"/api/v1/watch/configmaps", ""},
	} {
		t.Run(c.target, func(t *testing.T) {
			st := newFakeStore()
			w := serveWatch(t, st, "GET", c.target, "")
			wantCode(t, w.ResponseRecorder, http.StatusOK, "application/json")
			if o := st.watchOpts; !o.Watch || o.FieldSelector == nil && c.selector != "" || o.FieldSelector != nil && o.FieldSelector.String() != c.selector {
				t.Errorf("options %+v, want fieldSelector %q", o, c.selector)
			}
			if len(jsonEvents(t, w.Body.Bytes())) != 5 {
				t.Errorf("events %s", w.Body)
			}
		})
	}
}

// TestWatchYAML: a watch has no YAML stream (406), but the error is
// answered in the YAML the Accept header asks for.
func TestWatchYAML(t *testing.T) {
	st := newFakeStore()
	w := serveWatch(t, st, "GET", cmPath+"?watch=true", "application/yaml")
	wantCode(t, w.ResponseRecorder, http.StatusNotAcceptable, "application/yaml")
	status := &metav1.Status{}
	if err := yaml.Unmarshal(w.Body.Bytes(), status); err != nil || status.Reason != metav1.StatusReasonNotAcceptable ||
		status.Message != "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch" {
		t.Errorf("%v: %s", err, w.Body)
	}
	if !st.watch.stopped {
		t.Error("the watch was not stopped")
	}
}
