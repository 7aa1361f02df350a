package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/registry"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// This file holds the in-test storage the unit tests of rest.go, patch.go
// and watch.go serve: configmaps in a map, recording the options each verb
// was given, failing with err when it is set.

var configMapsResource = schema.GroupResource{Resource: "configmaps"}

// fakeStrategy is the strategy of the in-test configmaps: only NewList (a
// watch-list's blueprint) is called; no printer, so Tables are kube's
// default one.
type fakeStrategy struct{ registry.Strategy }

func (fakeStrategy) NewList() runtime.Object { return &v1.ConfigMapList{} }

// printingStrategy prints a Data column.
type printingStrategy struct{ fakeStrategy }

func (printingStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{{Name: "Name", Type: "string"}, {Name: "Data", Type: "integer"}}
}

func (printingStrategy) TableRow(obj runtime.Object, _ time.Time) (metav1.TableRow, error) {
	cm := obj.(*v1.ConfigMap)
	return metav1.TableRow{Cells: []any{cm.Name, int64(len(cm.Data))}}, nil
}

type fakeStore struct {
	mu       sync.Mutex
	info     registry.ResourceInfo
	strategy registry.Strategy
	objects  map[string]*v1.ConfigMap // by namespace/name
	rev      int
	// err, when set, is every verb's answer.
	err error
	// returnDeleted is ReturnsDeletedObject; pendingDelete makes Delete
	// answer a deletion that waits for finalizers.
	returnDeleted, pendingDelete bool
	// uidErr is CheckPatchedUID's answer.
	uidErr error
	// events are what a watch sends, in order; the watch then ends.
	events []registry.WatchEvent

	// What the verbs were given.
	getOpts  *metav1.GetOptions
	listOpts *metainternalversion.ListOptions
	listVia  string // "json", "protobuf" or the ObjectFor view
	// itemBatches counts the page's ItemsFor calls.
	itemBatches int
	createOpts  *registry.CreateOptions
	updateOpts  *registry.UpdateOptions
	applyOpts   *registry.ApplyOptions
	applyPatch  *unstructured.Unstructured
	deleteOpts  *metav1.DeleteOptions
	collOpts    *metainternalversion.ListOptions
	watchOpts   *metainternalversion.ListOptions
	watch       *fakeWatch
	// watchTimeout is what was left of the watch's context.
	watchTimeout time.Duration
	namespace    string
	writtenName  string
}

func newFakeStore(objs ...*v1.ConfigMap) *fakeStore {
	s := &fakeStore{
		info: registry.ResourceInfo{Version: "v1", Resource: "configmaps", Singular: "configmap",
			Kind: "ConfigMap", ListKind: "ConfigMapList", Namespaced: true},
		strategy: fakeStrategy{},
		objects:  map[string]*v1.ConfigMap{},
	}
	for _, o := range objs {
		s.put(o.DeepCopy())
	}
	return s
}

func testConfigMap(name string, data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))},
		Data: data,
	}
}

func (s *fakeStore) put(cm *v1.ConfigMap) *v1.ConfigMap {
	s.rev++
	cm.ResourceVersion = fmt.Sprint(s.rev)
	s.objects[cm.Namespace+"/"+cm.Name] = cm
	return cm.DeepCopy()
}

func (s *fakeStore) Info() registry.ResourceInfo { return s.info }
func (s *fakeStore) New() runtime.Object         { return &v1.ConfigMap{} }
func (s *fakeStore) Strategy() registry.Strategy { return s.strategy }

func (s *fakeStore) Get(_ context.Context, namespace, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.getOpts, s.namespace = opts, namespace
	if s.err != nil {
		return nil, s.err
	}
	cm, ok := s.objects[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(configMapsResource, name)
	}
	return cm.DeepCopy(), nil
}

// fakePage records which encoding of the page the handler asked for.
type fakePage struct {
	s    *fakeStore
	list *v1.ConfigMapList
}

func (p fakePage) WriteJSON(w io.Writer, start func()) (bool, error) {
	p.s.listVia = "json"
	data, err := json.Marshal(p.list)
	if err != nil {
		return false, err
	}
	start()
	_, err = w.Write(data)
	return true, err
}

func (p fakePage) ProtobufChunks() (net.Buffers, error) {
	p.s.listVia = "protobuf"
	data, err := appendProtobuf(nil, p.list, v1.SchemeGroupVersion.WithKind("ConfigMapList"))
	return net.Buffers{data}, err
}

func (p fakePage) Len() int                  { return len(p.list.Items) }
func (p fakePage) ListMeta() metav1.ListMeta { return p.list.ListMeta }

func (p fakePage) ItemsFor(view registry.ItemView, lo, hi int) ([]runtime.Object, error) {
	p.s.listVia = map[registry.ItemView]string{registry.FullItems: "full", registry.TableItems: "table", registry.MetadataItems: "metadata"}[view]
	p.s.itemBatches++
	items := make([]runtime.Object, 0, hi-lo)
	for i := range p.list.Items[lo:hi] {
		items = append(items, p.list.Items[lo+i].DeepCopy())
	}
	return items, nil
}

func (p fakePage) ObjectFor(view registry.ItemView) (runtime.Object, error) {
	p.s.listVia = map[registry.ItemView]string{registry.FullItems: "full", registry.TableItems: "table", registry.MetadataItems: "metadata"}[view]
	return p.list.DeepCopy(), nil
}

func (s *fakeStore) ListPage(_ context.Context, namespace string, opts *metainternalversion.ListOptions) (listPage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listOpts, s.namespace = opts, namespace
	if s.err != nil {
		return nil, s.err
	}
	list := &v1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(s.rev)}}
	list.SetGroupVersionKind(v1.SchemeGroupVersion.WithKind("ConfigMapList"))
	for _, key := range sortedKeys(s.objects) {
		list.Items = append(list.Items, *s.objects[key].DeepCopy())
	}
	return fakePage{s: s, list: list}, nil
}

func (s *fakeStore) Create(_ context.Context, namespace string, obj runtime.Object, opts registry.CreateOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createOpts, s.namespace = &opts, namespace
	if s.err != nil {
		return nil, s.err
	}
	cm := obj.(*v1.ConfigMap)
	cm.Namespace = namespace
	if _, ok := s.objects[namespace+"/"+cm.Name]; ok {
		return nil, apierrors.NewAlreadyExists(configMapsResource, cm.Name)
	}
	if opts.DryRun {
		return cm, nil
	}
	return s.put(cm.DeepCopy()), nil
}

func (s *fakeStore) Update(ctx context.Context, namespace, name string, transform registry.TransformFunc, opts registry.UpdateOptions) (runtime.Object, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updateOpts, s.namespace = &opts, namespace
	if s.err != nil {
		return nil, false, s.err
	}
	var current runtime.Object
	cur, exists := s.objects[namespace+"/"+name]
	if exists {
		current = cur.DeepCopy()
	}
	out, err := transform(ctx, current)
	if err != nil {
		return nil, false, err
	}
	cm := out.(*v1.ConfigMap)
	cm.Namespace = namespace
	s.writtenName = cm.Name
	if opts.DryRun {
		return cm, !exists, nil
	}
	return s.put(cm.DeepCopy()), !exists, nil
}

func (s *fakeStore) CheckPatchedUID(_, _ runtime.Object) error { return s.uidErr }

func (s *fakeStore) Apply(_ context.Context, namespace, name string, patch *unstructured.Unstructured, opts registry.ApplyOptions) (runtime.Object, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyOpts, s.applyPatch, s.namespace = &opts, patch, namespace
	if s.err != nil {
		return nil, false, s.err
	}
	if opts.FailAfterMerge != nil {
		return nil, false, opts.FailAfterMerge
	}
	cm := &v1.ConfigMap{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(patch.Object, cm); err != nil {
		return nil, false, apierrors.NewBadRequest(err.Error())
	}
	cm.Name, cm.Namespace = name, namespace
	_, exists := s.objects[namespace+"/"+name]
	return s.put(cm), !exists, nil
}

func (s *fakeStore) Delete(_ context.Context, namespace, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleteOpts, s.namespace = opts, namespace
	if s.err != nil {
		return nil, false, s.err
	}
	cm, ok := s.objects[namespace+"/"+name]
	if !ok {
		return nil, false, apierrors.NewNotFound(configMapsResource, name)
	}
	if s.pendingDelete {
		now := metav1.NewTime(time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC))
		cm.DeletionTimestamp = &now
		return cm.DeepCopy(), false, nil
	}
	delete(s.objects, namespace+"/"+name)
	return cm, true, nil
}

func (s *fakeStore) ReturnsDeletedObject() bool { return s.returnDeleted }

func (s *fakeStore) DeleteCollection(_ context.Context, namespace string, listOpts *metainternalversion.ListOptions, opts *metav1.DeleteOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.collOpts, s.deleteOpts, s.namespace = listOpts, opts, namespace
	if s.err != nil {
		return nil, s.err
	}
	list := &v1.ConfigMapList{}
	list.SetGroupVersionKind(v1.SchemeGroupVersion.WithKind("ConfigMapList"))
	for _, key := range sortedKeys(s.objects) {
		list.Items = append(list.Items, *s.objects[key])
		delete(s.objects, key)
	}
	return list, nil
}

// fakeWatch sends the store's events, then ends.
type fakeWatch struct {
	mu      sync.Mutex
	events  []registry.WatchEvent
	sent    []string // type/size/protobuf of each Sent
	stopped bool
}

func (w *fakeWatch) Next() (registry.WatchEvent, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.events) == 0 || w.stopped {
		return registry.WatchEvent{}, false
	}
	ev := w.events[0]
	w.events = w.events[1:]
	return ev, true
}

func (w *fakeWatch) Ready() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.events) > 0
}

func (w *fakeWatch) Sent(ev registry.WatchEvent, size int, cached, protobuf bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = append(w.sent, fmt.Sprintf("%s cached=%v protobuf=%v sized=%v", ev.Type, cached, protobuf, size > 0))
}

func (w *fakeWatch) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
}

func (s *fakeStore) Watch(ctx context.Context, namespace string, opts *metainternalversion.ListOptions) (watchStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchOpts, s.namespace = opts, namespace
	if deadline, ok := ctx.Deadline(); ok {
		s.watchTimeout = time.Until(deadline)
	}
	if s.err != nil {
		return nil, s.err
	}
	s.watch = &fakeWatch{events: s.events}
	return s.watch, nil
}

func sortedKeys(m map[string]*v1.ConfigMap) []string { return slices.Sorted(maps.Keys(m)) }

var _ restResource = (*fakeStore)(nil)

// call is one request to serve against a fakeStore.
type call struct {
	method, target, body string
	header               map[string]string
}

// serve serves c as the API does a request to the store's resource (no
// subresources), and returns the recorded response.
func serve(t *testing.T, st *fakeStore, c call) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
	if c.body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		r.Header.Set(k, v)
	}
	ri, ok := parseRequestInfo(r.URL.Path)
	if !ok {
		t.Fatalf("%s is no resource path", r.URL.Path)
	}
	w := httptest.NewRecorder()
	(&API{}).serveResource(w, r, ri, st, nil)
	return w
}

// wantStatus checks that w answers a kube Status with code, reason and a
// message containing msg.
func wantStatus(t *testing.T, w *httptest.ResponseRecorder, code int, reason metav1.StatusReason, msg string) *metav1.Status {
	t.Helper()
	if w.Code != code {
		t.Fatalf("code %d, want %d: %s", w.Code, code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	st := &metav1.Status{}
	if err := json.Unmarshal(w.Body.Bytes(), st); err != nil {
		t.Fatalf("not a Status: %v: %s", err, w.Body)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Code != int32(code) || st.Reason != reason || !strings.Contains(st.Message, msg) {
		t.Errorf("Status %+v, want code %d reason %q message containing %q", st, code, reason, msg)
	}
	wantFailure := metav1.StatusFailure
	if code < http.StatusBadRequest {
		wantFailure = metav1.StatusSuccess
	}
	if st.Status != wantFailure {
		t.Errorf("status %q, want %q", st.Status, wantFailure)
	}
	return st
}

// decodeConfigMap decodes a JSON ConfigMap answer.
func decodeConfigMap(t *testing.T, w *httptest.ResponseRecorder) *v1.ConfigMap {
	t.Helper()
	cm := &v1.ConfigMap{}
	if err := json.Unmarshal(w.Body.Bytes(), cm); err != nil {
		t.Fatalf("not a ConfigMap: %v: %s", err, w.Body)
	}
	return cm
}

// wantCode checks w's code and Content-Type.
func wantCode(t *testing.T, w *httptest.ResponseRecorder, code int, contentType string) {
	t.Helper()
	if w.Code != code {
		t.Fatalf("code %d, want %d: %s", w.Code, code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != contentType {
		t.Errorf("Content-Type %q, want %q", ct, contentType)
	}
}

// errPlain is an error that is no Status: the handlers answer it as a 500.
type errPlain string

func (e errPlain) Error() string { return string(e) }

func newRequest(method, target, body, contentType string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return r
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func schemaGroupKind(kind string) schema.GroupKind { return schema.GroupKind{Kind: kind} }
