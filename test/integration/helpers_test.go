package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/corekube/corekube/test/testserver"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// rawResponse is an HTTP answer read in full.
type rawResponse struct {
	Code   int
	Header http.Header
	Body   []byte
}

// doRaw sends one request to the shared server. headers are name, value
// pairs. A body of nil sends none.
func doRaw(t testing.TB, method, path string, body []byte, headers ...string) rawResponse {
	t.Helper()
	return doRawURL(t, srv.URL(), method, path, body, headers...)
}

func doRawURL(t testing.TB, base, method, path string, body []byte, headers ...string) rawResponse {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	// Not curl: kube pretty-prints for curl, the goldens were not.
	req.Header.Set("User-Agent", "corekube-integration-test")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	// A request with credentials of its own goes without the admin's
	// client certificate, which would authenticate it first.
	client := testserver.HTTPClient()
	if req.Header.Get("Authorization") != "" {
		client = testserver.AnonymousHTTPClient()
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return rawResponse{Code: resp.StatusCode, Header: resp.Header, Body: data}
}

// mustJSON marshals v.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// statusFields are the fields of a Status body compared with kube's.
var statusFields = []string{"kind", "apiVersion", "status", "message", "reason", "details", "code"}

// statusMap decodes a Status body to a generic map, keeping only the
// compared fields; details.uid is dropped (it varies).
func statusMap(t testing.TB, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	out := map[string]any{}
	for _, k := range statusFields {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	if d, ok := out["details"].(map[string]any); ok {
		delete(d, "uid")
	}
	return out
}

// goldenBody returns the body kube-apiserver v1.32.13 answered for name
// (testdata/kube-1.32/NAME.json, copied from shared/reference).
func goldenBody(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "kube-1.32", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkGolden compares the Status in got with kube's answer for golden,
// field by field (kind, apiVersion, status, message, reason, details,
// code), and the HTTP status code.
func checkGolden(t testing.TB, got rawResponse, golden string) {
	t.Helper()
	want := statusMap(t, goldenBody(t, golden))
	if code := int(want["code"].(float64)); got.Code != code {
		t.Errorf("%s: HTTP status %d, want %d; body %s", golden, got.Code, code, got.Body)
	}
	if ct := got.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json", golden, ct)
	}
	have := statusMap(t, got.Body)
	for _, k := range statusFields {
		w, wok := want[k]
		h, hok := have[k]
		if wok != hok || !reflect.DeepEqual(w, h) {
			t.Errorf("%s: Status.%s = %s, want %s", golden, k, jsonString(h, hok), jsonString(w, wok))
		}
	}
}

func jsonString(v any, present bool) string {
	if !present {
		return "<absent>"
	}
	data, _ := json.Marshal(v)
	return string(data)
}

// checkStatusErr checks that err is a Status error from the server with
// code and reason and, when message is not empty, exactly that message.
func checkStatusErr(t testing.TB, err error, code int32, reason metav1.StatusReason, message string) *metav1.Status {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %d %s %q", code, reason, message)
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a Status error", err, err)
	}
	st := se.Status()
	if st.Code != code || st.Reason != reason {
		t.Errorf("got %d %s (%q), want %d %s", st.Code, st.Reason, st.Message, code, reason)
	}
	if st.Status != metav1.StatusFailure {
		t.Errorf("status %q, want Failure", st.Status)
	}
	if message != "" && st.Message != message {
		t.Errorf("message\n got  %q\n want %q", st.Message, message)
	}
	return &st
}

// checkCauses checks that st's details list a cause of type reason at each
// field (and nothing at other fields).
func checkCauses(t testing.TB, st *metav1.Status, want map[string]metav1.CauseType) {
	t.Helper()
	if st.Details == nil {
		t.Fatalf("Status has no details: %+v", st)
	}
	got := map[string]metav1.CauseType{}
	for _, c := range st.Details.Causes {
		got[c.Field] = c.Type
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("causes %v, want %v (all: %+v)", got, want, st.Details.Causes)
	}
}

// names returns the sorted names of a list's items.
func names(t testing.TB, list runtime.Object) []string {
	t.Helper()
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		m, err := meta.Accessor(item)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.GetName())
	}
	sort.Strings(out)
	return out
}

func sorted(s ...string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out
}

func checkNames(t testing.TB, what string, got []string, want ...string) {
	t.Helper()
	w := sorted(want...)
	if got == nil {
		got = []string{}
	}
	if !reflect.DeepEqual(got, w) {
		t.Errorf("%s: got %v, want %v", what, got, w)
	}
}

// newPod is the smallest valid pod.
func newPod(name string, labels map[string]string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func newNode(name string, labels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func newEvent(ns, name string, labels map[string]string) *v1.Event {
	return &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "some-pod", APIVersion: "v1"},
		Reason:         "Testing",
		Message:        "an event",
		Type:           v1.EventTypeNormal,
		Source:         v1.EventSource{Component: "integration-test"},
	}
}

func newLease(name string, labels map[string]string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("holder"), LeaseDurationSeconds: ptr(int32(40))},
	}
}

func newPDB(name string, labels map[string]string) *policyv1.PodDisruptionBudget {
	min := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &min,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
