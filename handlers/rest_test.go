package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corekube/corekube/registry"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const (
	cmPath    = "/api/v1/namespaces/ns/configmaps"
	tableJSON = "application/json;as=Table;g=meta.k8s.io;v=v1"
	metaJSON  = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	metaList  = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
)

func TestGet(t *testing.T) {
	for _, c := range []struct {
		name  string
		call  call
		err   error
		check func(t *testing.T, st *fakeStore, w *httptest.ResponseRecorder)
	}{
		{name: "json", call: call{method: "GET", target: cmPath + "/a"}, check: func(t *testing.T, st *fakeStore, w *httptest.ResponseRecorder) {
			wantCode(t, w, http.StatusOK, "application/json")
			if cm := decodeConfigMap(t, w); cm.Name != "a" || cm.Data["k"] != "v" {
				t.Errorf("got %+v", cm)
			}
			if st.namespace != "ns" || st.getOpts.ResourceVersion != "" {
				t.Errorf("namespace %q, options %+v", st.namespace, st.getOpts)
			}
		}},
		{name: "resourceVersion passed", call: call{method: "GET", target: cmPath + "/a?resourceVersion=7"}, check: func(t *testing.T, st *fakeStore, w *httptest.ResponseRecorder) {
			wantCode(t, w, http.StatusOK, "application/json")
			if st.getOpts.ResourceVersion != "7" {
				t.Errorf("options %+v", st.getOpts)
			}
		}},
		{name: "yaml", call: call{method: "GET", target: cmPath + "/a", header: map[string]string{"Accept": "application/yaml"}}, check: func(t *testing.T, _ *fakeStore, w *httptest.ResponseRecorder) {
			wantCode(t, w, http.StatusOK, "application/yaml")
			cm := &v1.ConfigMap{}
			if err := yaml.UnmarshalStrict(w.Body.Bytes(), cm); err != nil || cm.Name != "a" {
				t.Errorf("%v: %s", err, w.Body)
			}
		}},
		{name: "pretty", call: call{method: "GET", target: cmPath + "/a?pretty=true"}, check: func(t *testing.T, _ *fakeStore, w *httptest.ResponseRecorder) {
			wantCode(t, w, http.StatusOK, "application/json")
			if !strings.Contains(w.Body.String(), "\n  \"metadata\": {\n") {
				t.Errorf("not indented: %s", w.Body)
			}
		}},
		{name: "protobuf", call: call{method: "GET", target: cmPath + "/a", header: map[string]string{"Accept": "application/vnd.kubernetes.protobuf"}}, check: func(t *testing.T, _ *fakeStore, w *httptest.ResponseRecorder) {
			wantCode(t, w, http.StatusOK, "application/vnd.kubernetes.protobuf")
			obj, _, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(w.Body.Bytes(), nil, nil)
			if cm, ok := obj.(*v1.ConfigMap); err != nil || !ok || cm.Name != "a" {
				t.Errorf("%v: %#v", err, obj)
			}
		}},
		{name: "table", call: call{method: "GET", target: cmPath + "/a", header: map[string]string{"Accept": tableJSON}}, check: func(t *testing.T, _ *fakeStore, w *httptest.ResponseRecorder) {
			wantCode(t, w, http.StatusOK, "application/json")
			table := &metav1.Table{}
			if err := json.Unmarshal(w.Body.Bytes(), table); err != nil {
				t.Fatal(err)
			}
			if table.Kind != "Table" || len(table.ColumnDefinitions) != 2 || len(table.Rows) != 1 || table.Rows[0].Cells[0] != "a" || table.Rows[0].Cells[1] != "2026-11-26T12:00:00Z" {
				t.Errorf("table %s", w.Body)
			}
			if !strings.Contains(string(table.Rows[0].Object.Raw), `"kind":"PartialObjectMetadata"`) {
				t.Errorf("row object %s", table.Rows[0].Object.Raw)
			}
		}},
		{name: "table with bad includeObject", call: call{method: "GET", target: cmPath + "/a?includeObject=Bogus", header: map[string]string{"Accept": tableJSON}}, check: func(t *testing.T, _ *fakeStore, w *httptest.ResponseRecorder) {
			wantStatus(t, w, http.StatusBadRequest, metav1.StatusReasonBadRequest, `Unable to convert to Table as requested: includeObject: Invalid value: "Bogus": must be 'Metadata', 'Object', 'None', or empty`)
		}},
		{name: "partial metadata", call: call{method: "GET", target: cmPath + "/a", header: map[string]string{"Accept": metaJSON}}, check: func(t *testing.T, _ *fakeStore, w *httptest.ResponseRecorder) {
			wantCode(t, w, http.StatusOK, "application/json")
			p := &metav1.PartialObjectMetadata{}
			if err := json.Unmarshal(w.Body.Bytes(), p); err != nil || p.Kind != "PartialObjectMetadata" || p.APIVersion != "meta.k8s.io/v1" || p.Name != "a" || strings.Contains(w.Body.String(), `"data"`) {
				t.Errorf("%v: %s", err, w.Body)
			}
		}},
		{name: "not acceptable", call: call{method: "GET", target: cmPath + "/a", header: map[string]string{"Accept": "text/html"}}, check: func(t *testing.T, st *fakeStore, w *httptest.ResponseRecorder) {
			wantStatus(t, w, http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf")
			if st.getOpts != nil {
				t.Error("the store was read for an unacceptable request")
			}
		}},
		{name: "not found", call: call{method: "GET", target: cmPath + "/missing"}, check: func(t *testing.T, _ *fakeStore, w *httptest.ResponseRecorder) {
			st := wantStatus(t, w, http.StatusNotFound, metav1.StatusReasonNotFound, `configmaps "missing" not found`)
			if st.Details == nil || st.Details.Name != "missing" || st.Details.Kind != "configmaps" {
				t.Errorf("details %+v", st.Details)
			}
		}},
		{name: "not found in protobuf", call: call{method: "GET", target: cmPath + "/missing", header: map[string]string{"Accept": "application/vnd.kubernetes.protobuf"}}, check: func(t *testing.T, _ *fakeStore, w *httptest.ResponseRecorder) {
			wantCode(t, w, http.StatusNotFound, "application/vnd.kubernetes.protobuf")
			obj, _, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(w.Body.Bytes(), nil, nil)
			if st, ok := obj.(*metav1.Status); err != nil || !ok || st.Reason != metav1.StatusReasonNotFound {
				t.Errorf("%v: %#v", err, obj)
			}
		}},
		{name: "storage error", call: call{method: "GET", target: cmPath + "/a"}, err: apierrors.NewTimeoutError("Too large resource version: 9, current: 5", 1), check: func(t *testing.T, _ *fakeStore, w *httptest.ResponseRecorder) {
			wantStatus(t, w, http.StatusGatewayTimeout, metav1.StatusReasonTimeout, "Too large resource version: 9, current: 5")
			if w.Header().Get("Retry-After") != "1" {
				t.Errorf("Retry-After %q", w.Header().Get("Retry-After"))
			}
		}},
		{name: "internal error", call: call{method: "GET", target: cmPath + "/a"}, err: errPlain("etcd went away"), check: func(t *testing.T, _ *fakeStore, w *httptest.ResponseRecorder) {
			wantStatus(t, w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "Internal error occurred: etcd went away")
		}},
		{name: "invalid name", call: call{method: "GET", target: cmPath + "/a%25b"}, check: func(t *testing.T, st *fakeStore, w *httptest.ResponseRecorder) {
			wantStatus(t, w, http.StatusBadRequest, metav1.StatusReasonBadRequest, `Name parameter invalid: "a%b": may not contain '%'`)
			if st.getOpts != nil {
				t.Error("the store was read for an invalid name")
			}
		}},
		{name: "namespaced object without namespace", call: call{method: "GET", target: "/api/v1/configmaps/a"}, check: func(t *testing.T, _ *fakeStore, w *httptest.ResponseRecorder) {
			wantStatus(t, w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
		}},
		{name: "unknown subresource", call: call{method: "GET", target: cmPath + "/a/status"}, check: func(t *testing.T, _ *fakeStore, w *httptest.ResponseRecorder) {
			wantStatus(t, w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFakeStore(testConfigMap("a", map[string]string{"k": "v"}))
			st.err = c.err
			c.check(t, st, serve(t, st, c.call))
		})
	}
}

func TestList(t *testing.T) {
	for _, c := range []struct {
		name, query, accept string
		// via is how the handler read the page; contentType and kind
		// what it answered.
		via, contentType, kind string
	}{
		{name: "json from the cached encodings", via: "json", contentType: "application/json", kind: "ConfigMapList"},
		{name: "protobuf from the cached encodings", accept: "application/vnd.kubernetes.protobuf", via: "protobuf", contentType: "application/vnd.kubernetes.protobuf"},
		{name: "pretty json", query: "pretty=1", via: "full", contentType: "application/json", kind: "ConfigMapList"},
		{name: "yaml", accept: "application/yaml", via: "full", contentType: "application/yaml"},
		{name: "table", accept: tableJSON, via: "table", contentType: "application/json", kind: "Table"},
		{name: "table with objects", query: "includeObject=Object", accept: tableJSON, via: "full", contentType: "application/json", kind: "Table"},
		{name: "metadata", accept: metaList, via: "metadata", contentType: "application/json", kind: "PartialObjectMetadataList"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFakeStore(testConfigMap("b", nil), testConfigMap("a", nil))
			target := cmPath + "?labelSelector=app%3Dx&limit=5&" + c.query
			w := serve(t, st, call{method: "GET", target: target, header: map[string]string{"Accept": c.accept}})
			wantCode(t, w, http.StatusOK, c.contentType)
			if st.listVia != c.via {
				t.Errorf("page read as %q, want %q", st.listVia, c.via)
			}
			if st.listOpts.LabelSelector.String() != "app=x" || st.listOpts.Limit != 5 || st.listOpts.Watch {
				t.Errorf("list options %+v", st.listOpts)
			}
			if c.kind != "" {
				var got struct {
					Kind  string
					Items []json.RawMessage
					Rows  []json.RawMessage
				}
				if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Kind != c.kind || len(got.Items)+len(got.Rows) != 2 {
					t.Errorf("%v: %s", err, w.Body)
				}
			}
		})
	}
	t.Run("printer", func(t *testing.T) {
		st := newFakeStore(testConfigMap("a", map[string]string{"x": "1", "y": "2"}))
		st.strategy = printingStrategy{}
		w := serve(t, st, call{method: "GET", target: cmPath, header: map[string]string{"Accept": tableJSON}})
		wantCode(t, w, http.StatusOK, "application/json")
		table := &metav1.Table{}
		if err := json.Unmarshal(w.Body.Bytes(), table); err != nil || len(table.Rows) != 1 || table.Rows[0].Cells[1] != float64(2) || table.ColumnDefinitions[1].Name != "Data" {
			t.Errorf("%v: %s", err, w.Body)
		}
	})
	for _, c := range []struct{ name, query, msg string }{
		{"bad label selector", "labelSelector=a%3D%3D%3Db", "unable to parse requirement"},
		{"bad limit", "limit=x", "strconv.ParseInt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFakeStore()
			w := serve(t, st, call{method: "GET", target: cmPath + "?" + c.query})
			wantStatus(t, w, http.StatusBadRequest, metav1.StatusReasonBadRequest, c.msg)
			if st.listOpts != nil {
				t.Error("listed with invalid options")
			}
		})
	}
	t.Run("storage error", func(t *testing.T) {
		st := newFakeStore()
		st.err = apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result.")
		wantStatus(t, serve(t, st, call{method: "GET", target: cmPath + "?continue=x"}), http.StatusGone, metav1.StatusReasonExpired, "The provided continue parameter is too old")
	})
}

func TestCreate(t *testing.T) {
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}`
	for _, c := range []struct {
		name, query, body, contentType string
		userAgent                      string
		err                            error
		code                           int
		reason                         metav1.StatusReason
		msg                            string
		opts                           *registry.CreateOptions
		warning                        string
	}{
		{name: "created", body: body, code: 201, opts: &registry.CreateOptions{FieldManager: "unknown"}},
		{name: "dry run and field manager", query: "dryRun=All&fieldManager=me", body: body, code: 201, opts: &registry.CreateOptions{DryRun: true, FieldManager: "me"}},
		{name: "manager from the user agent", body: body, userAgent: "kubectl/v1.32.0 (linux/amd64)", code: 201, opts: &registry.CreateOptions{FieldManager: "kubectl"}},
		{name: "yaml body", body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n", contentType: "application/yaml", code: 201, opts: &registry.CreateOptions{FieldManager: "unknown"}},
		{name: "bad dry run", query: "dryRun=Bad", body: body, code: 422, reason: metav1.StatusReasonInvalid,
			msg: `CreateOptions.meta.k8s.io "" is invalid: dryRun[0]: Unsupported value: "Bad": supported values: "All"`},
		{name: "bad field validation", query: "fieldValidation=Bogus", body: body, code: 422, reason: metav1.StatusReasonInvalid, msg: "fieldValidation"},
		{name: "strict unknown field", query: "fieldValidation=Strict", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"bogus":1}`, code: 400, reason: metav1.StatusReasonBadRequest,
			msg: `ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "bogus"`},
		{name: "warned unknown field", query: "fieldValidation=Warn", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"bogus":1}`, code: 201,
			opts: &registry.CreateOptions{FieldManager: "unknown"}, warning: `299 - "unknown field \"bogus\""`},
		{name: "wrong kind", body: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"c"}}`, code: 400, reason: metav1.StatusReasonBadRequest, msg: "Secret"},
		{name: "unsupported body", body: body, contentType: "text/plain", code: 415, reason: metav1.StatusReasonUnsupportedMediaType, msg: "text/plain"},
		{name: "already exists", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, code: 409, reason: metav1.StatusReasonAlreadyExists, msg: `configmaps "a" already exists`},
		{name: "forbidden by admission", body: body, err: apierrors.NewForbidden(configMapsResource, "c", errPlain("denied")), code: 403, reason: metav1.StatusReasonForbidden, msg: `configmaps "c" is forbidden: denied`},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFakeStore(testConfigMap("a", nil))
			st.err = c.err
			header := map[string]string{"User-Agent": c.userAgent}
			if c.contentType != "" {
				header["Content-Type"] = c.contentType
			}
			w := serve(t, st, call{method: "POST", target: cmPath + "?" + c.query, body: c.body, header: header})
			if c.code >= 400 {
				wantStatus(t, w, c.code, c.reason, c.msg)
				if c.err == nil && c.reason != metav1.StatusReasonAlreadyExists && st.createOpts != nil {
					t.Error("created despite the request's error")
				}
				return
			}
			wantCode(t, w, c.code, "application/json")
			if cm := decodeConfigMap(t, w); cm.Name != "c" || cm.Namespace != "ns" {
				t.Errorf("created %+v", cm)
			}
			if *st.createOpts != *c.opts {
				t.Errorf("options %+v, want %+v", st.createOpts, c.opts)
			}
			if got := w.Header().Get("Warning"); got != c.warning {
				t.Errorf("Warning %q, want %q", got, c.warning)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	for _, c := range []struct {
		name, target, body string
		err                error
		code               int
		reason             metav1.StatusReason
		msg                string
		opts               *registry.UpdateOptions
	}{
		{name: "replaced", target: cmPath + "/a?fieldManager=me", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"new"}}`, code: 200, opts: &registry.UpdateOptions{FieldManager: "me"}},
		{name: "created", target: cmPath + "/n?dryRun=All", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n"},"data":{"k":"new"}}`, code: 201, opts: &registry.UpdateOptions{DryRun: true, FieldManager: "unknown"}},
		{name: "name mismatch", target: cmPath + "/a", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}`, code: 400, reason: metav1.StatusReasonBadRequest,
			msg: "the name of the object (b) does not match the name on the URL (a)"},
		{name: "namespace mismatch", target: cmPath + "/a", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"other"}}`, code: 400, reason: metav1.StatusReasonBadRequest,
			msg: "the namespace of the provided object does not match the namespace sent on the request"},
		{name: "bad options", target: cmPath + "/a?dryRun=x", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, code: 422, reason: metav1.StatusReasonInvalid, msg: `UpdateOptions.meta.k8s.io "" is invalid`},
		{name: "conflict", target: cmPath + "/a", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"0"}}`,
			err: apierrors.NewConflict(configMapsResource, "a", errPlain("the object has been modified; please apply your changes to the latest version and try again")), code: 409, reason: metav1.StatusReasonConflict,
			msg: `Operation cannot be fulfilled on configmaps "a": the object has been modified`},
		{name: "collection", target: cmPath, body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, code: 405, reason: metav1.StatusReasonMethodNotAllowed, msg: "the server does not allow this method on the requested resource"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFakeStore(testConfigMap("a", map[string]string{"k": "v"}))
			st.err = c.err
			w := serve(t, st, call{method: "PUT", target: c.target, body: c.body})
			if c.code >= 400 {
				wantStatus(t, w, c.code, c.reason, c.msg)
				if c.err == nil && st.updateOpts != nil {
					t.Error("updated despite the request's error")
				}
				return
			}
			wantCode(t, w, c.code, "application/json")
			if cm := decodeConfigMap(t, w); cm.Data["k"] != "new" {
				t.Errorf("answered %+v", cm)
			}
			if *st.updateOpts != *c.opts {
				t.Errorf("options %+v, want %+v", st.updateOpts, c.opts)
			}
		})
	}
}

func TestStatusSubresource(t *testing.T) {
	for _, c := range []struct {
		method     string
		updateOnly bool
		code       int
	}{
		{"GET", false, 200}, {"PUT", false, 200}, {"PATCH", false, 200}, {"DELETE", false, 405},
		{"GET", true, 405}, {"PUT", true, 200}, {"PATCH", true, 405},
	} {
		t.Run(c.method, func(t *testing.T) {
			st := newFakeStore(testConfigMap("a", nil))
			body := ""
			ct := ""
			switch c.method {
			case "PUT":
				body, ct = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, "application/json"
			case "PATCH":
				body, ct = `{"data":{"k":"v"}}`, "application/merge-patch+json"
			}
			r := newRequest(c.method, cmPath+"/a/status", body, ct)
			ri, _ := parseRequestInfo(r.URL.Path)
			w := newRecorder()
			(&request{w: w, r: r, info: ri, store: st}).serveStoreSubresource(c.updateOnly)
			if w.Code != c.code {
				t.Errorf("code %d, want %d: %s", w.Code, c.code, w.Body)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	five := int64(5)
	background := metav1.DeletePropagationBackground
	for _, c := range []struct {
		name, target, body string
		returnDeleted      bool
		pending            bool
		code               int
		reason             metav1.StatusReason
		msg                string
		want               string // the answer's kind
		opts               *metav1.DeleteOptions
	}{
		{name: "status", target: cmPath + "/a", code: 200, want: "Status", opts: &metav1.DeleteOptions{}},
		{name: "deleted object", target: cmPath + "/a", returnDeleted: true, code: 200, want: "ConfigMap", opts: &metav1.DeleteOptions{}},
		{name: "pending finalizers", target: cmPath + "/a", pending: true, code: 200, want: "ConfigMap", opts: &metav1.DeleteOptions{}},
		{name: "query options", target: cmPath + "/a?gracePeriodSeconds=5&propagationPolicy=Background&dryRun=All", code: 200, want: "Status",
			opts: &metav1.DeleteOptions{GracePeriodSeconds: &five, PropagationPolicy: &background, DryRun: []string{"All"}}},
		{name: "body options", target: cmPath + "/a?gracePeriodSeconds=9", body: `{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":5,"propagationPolicy":"Background"}`, code: 200, want: "Status",
			opts: &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "v1"}, GracePeriodSeconds: &five, PropagationPolicy: &background}},
		{name: "bad grace period", target: cmPath + "/a?gracePeriodSeconds=x", code: 400, reason: metav1.StatusReasonBadRequest, msg: `invalid gracePeriodSeconds "x"`},
		{name: "bad orphanDependents", target: cmPath + "/a?orphanDependents=maybe", code: 400, reason: metav1.StatusReasonBadRequest, msg: `invalid orphanDependents "maybe"`},
		{name: "not found", target: cmPath + "/b", code: 404, reason: metav1.StatusReasonNotFound, msg: `configmaps "b" not found`},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFakeStore(testConfigMap("a", nil))
			st.returnDeleted, st.pendingDelete = c.returnDeleted, c.pending
			w := serve(t, st, call{method: "DELETE", target: c.target, body: c.body})
			if c.code >= 400 {
				wantStatus(t, w, c.code, c.reason, c.msg)
				return
			}
			wantCode(t, w, c.code, "application/json")
			if c.want == "Status" {
				// kube's Status of a completed delete has no code.
				got := &metav1.Status{}
				if err := json.Unmarshal(w.Body.Bytes(), got); err != nil || got.Kind != "Status" || got.Status != metav1.StatusSuccess || got.Code != 0 {
					t.Errorf("%v: %s", err, w.Body)
				}
				want := &metav1.StatusDetails{Name: "a", Kind: "configmaps", UID: "uid-a"}
				if got.Details == nil || got.Details.Name != want.Name || got.Details.Kind != want.Kind || got.Details.UID != want.UID || got.Details.Group != want.Group {
					t.Errorf("details %+v, want %+v", got.Details, want)
				}
			} else if cm := decodeConfigMap(t, w); cm.Kind != "" && cm.Kind != c.want || cm.Name != "a" {
				t.Errorf("answered %s", w.Body)
			} else if c.pending && cm.DeletionTimestamp == nil {
				t.Errorf("answered %s", w.Body)
			}
			gotOpts, _ := json.Marshal(st.deleteOpts)
			wantOpts, _ := json.Marshal(c.opts)
			if !bytes.Equal(gotOpts, wantOpts) {
				t.Errorf("options %s, want %s", gotOpts, wantOpts)
			}
		})
	}
}

func TestDeleteCollection(t *testing.T) {
	st := newFakeStore(testConfigMap("a", nil), testConfigMap("b", nil))
	w := serve(t, st, call{method: "DELETE", target: cmPath + "?labelSelector=x%3Dy&gracePeriodSeconds=0"})
	wantCode(t, w, http.StatusOK, "application/json")
	list := &v1.ConfigMapList{}
	if err := json.Unmarshal(w.Body.Bytes(), list); err != nil || len(list.Items) != 2 {
		t.Errorf("%v: %s", err, w.Body)
	}
	if st.collOpts.LabelSelector.String() != "x=y" || st.deleteOpts.GracePeriodSeconds == nil || *st.deleteOpts.GracePeriodSeconds != 0 {
		t.Errorf("options %+v %+v", st.collOpts, st.deleteOpts)
	}

	st = newFakeStore()
	st.info.Verbs = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	wantStatus(t, serve(t, st, call{method: "DELETE", target: cmPath}), http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "the server does not allow this method")
	if st.collOpts != nil {
		t.Error("deleted a collection without the deletecollection verb")
	}
}

func TestMethodNotAllowed(t *testing.T) {
	for _, c := range []call{
		{method: "POST", target: cmPath + "/a", body: "{}"},
		{method: "PATCH", target: cmPath, body: "{}"},
		{method: "OPTIONS", target: cmPath},
	} {
		t.Run(c.method, func(t *testing.T) {
			wantStatus(t, serve(t, newFakeStore(), c), http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "the server does not allow this method on the requested resource")
		})
	}
}
