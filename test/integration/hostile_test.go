package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// hostileMemoryCap bounds what one hostile request may allocate in this
// process (server and test client together): generous for a request of a
// few MiB, far below what a doubling patch or a deep-nesting parser blow-up
// would take.
const (
	hostileAllocCap  = 1 << 30   // bytes allocated while the request ran
	hostileRetainCap = 128 << 20 // live heap growth once it is over
	hostileDeadline  = 10 * time.Second
)

// hostileCase is one request and what kube-apiserver v1.32 answers it.
type hostileCase struct {
	name        string
	method      string
	path        string // below /api/v1/namespaces/<ns>
	contentType string
	headers     []string // more name, value pairs
	// watchPath sends it below kube's deprecated /api/v1/watch/namespaces/<ns>.
	watchPath bool
	body      []byte
	// code is kube's status code; 0 means any 4xx (kube's code not
	// pinned down).
	code int
}

// TestHostileInputs sends malformed, oversized and adversarial requests
// (bodies, patches, selectors, names, query parameters) to the shared
// server. Each gets a 4xx (kube's code where known), none takes more than
// a few seconds or allocates gigabytes or keeps memory, the server answers
// the next request, and the objects created at the start (a sentinel, and
// the target of the patches) are unchanged.
func TestHostileInputs(t *testing.T) {
	ns := newNamespace(t)
	podJSON := func(name string) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`, name))
	}
	for _, name := range []string{"sentinel", "target"} {
		if resp := doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods", podJSON(name)); resp.Code != 201 {
			t.Fatalf("create %s: %d %s", name, resp.Code, resp.Body)
		}
	}
	snapshot := func() map[string]string {
		out := map[string]string{}
		for _, name := range []string{"sentinel", "target"} {
			resp := doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods/"+name, nil)
			if resp.Code != 200 {
				t.Fatalf("get %s: %d %s", name, resp.Code, resp.Body)
			}
			out[name] = string(resp.Body)
		}
		return out
	}
	before := snapshot()

	nested := func(depth int, open, close, inner string) string {
		return strings.Repeat(open, depth) + inner + strings.Repeat(close, depth)
	}
	withExtra := func(extra string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nested"},"spec":{"containers":[{"name":"c","image":"busybox"}]},"extra":` + extra + `}`)
	}
	jsonPatch := func(ops ...string) []byte { return []byte("[" + strings.Join(ops, ",") + "]") }
	manyOps := make([]string, 10001)
	for i := range manyOps {
		manyOps[i] = `{"op":"test","path":"/metadata/name","value":"target"}`
	}
	doubling := []string{`{"op":"add","path":"/metadata/annotations","value":{}}`, `{"op":"add","path":"/metadata/labels","value":{"zz":"x"}}`,
		`{"op":"add","path":"/spec/tolerations","value":[{"key":"k","operator":"Exists"}]}`}
	for range 40 {
		doubling = append(doubling, `{"op":"copy","from":"/spec/tolerations","path":"/spec/tolerations/-"}`)
	}
	copyArray := []string{`{"op":"add","path":"/metadata/annotations","value":{"zz":"x"}}`}
	for range 40 {
		copyArray = append(copyArray, `{"op":"copy","from":"/metadata/annotations","path":"/metadata/annotations/zz"}`)
	}
	// The issue's probe: an array doubled by 40 copies (2^40 elements).
	issueDoubling := []string{`{"op":"add","path":"/zz","value":[1]}`}
	for range 40 {
		issueDoubling = append(issueDoubling, `{"op":"copy","from":"/zz","path":"/zz/-"}`)
	}
	// A YAML alias bomb: nine levels of nine aliases each.
	var bomb strings.Builder
	bomb.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\na0: &a0 [\"lol\"]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&bomb, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 9), ","))
	}
	invalidUTF8 := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad` + "\xff\xfe" + `"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
	hugeAnnotation := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"huge","annotations":{"a":"` + strings.Repeat("x", 2<<20) + `"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
	tooLarge := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"toolarge","annotations":{"a":"` + strings.Repeat("x", 4<<20) + `"}}}`)
	longValue := strings.Repeat("v", 100000)

	const (
		mergePatch = "application/merge-patch+json"
		smPatch    = "application/strategic-merge-patch+json"
		jPatch     = "application/json-patch+json"
	)
	cases := []hostileCase{
		// Bodies.
		{name: "nested arrays", method: "POST", path: "/pods", body: withExtra(nested(100000, "[", "]", "1")), code: 400},
		{name: "nested objects", method: "POST", path: "/pods", body: withExtra(nested(100000, `{"a":`, "}", "1")), code: 400},
		{name: "huge annotation", method: "POST", path: "/pods", body: hugeAnnotation, code: 422},
		{name: "body over 3MiB", method: "POST", path: "/pods", body: tooLarge, code: 413},
		{name: "invalid UTF-8 name", method: "POST", path: "/pods", body: invalidUTF8, code: 422},
		{name: "wrong kind", method: "POST", path: "/pods", body: []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`), code: 400},
		{name: "wrong type of field", method: "POST", path: "/pods", body: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":["x"]}}`), code: 400},
		{name: "duplicate keys strict", method: "POST", path: "/pods?fieldValidation=Strict", body: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"dup","name":"dup2"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`), code: 400},
		{name: "not an object", method: "POST", path: "/pods", body: []byte(`[1,2,3]`), code: 400},
		{name: "null", method: "POST", path: "/pods", body: []byte(`null`)},
		{name: "truncated", method: "POST", path: "/pods", body: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"`), code: 400},
		{name: "number overflow", method: "POST", path: "/pods", body: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"terminationGracePeriodSeconds":1e400,"containers":[{"name":"c","image":"busybox"}]}}`), code: 400},
		{name: "YAML alias bomb", method: "POST", path: "/pods", contentType: "application/yaml", body: []byte(bomb.String()), code: 400},
		{name: "protobuf garbage", method: "POST", path: "/pods", contentType: "application/vnd.kubernetes.protobuf", body: []byte("k8s\x00\xff\xff\xff\xff\xff\xff"), code: 400},
		{name: "update of the sentinel with another name", method: "PUT", path: "/pods/sentinel", body: podJSON("other"), code: 400},

		// Patches of the target.
		{name: "json patch nested value", method: "PATCH", path: "/pods/target", contentType: jPatch, body: jsonPatch(`{"op":"add","path":"/metadata/annotations","value":` + nested(100000, "[", "]", "1") + `}`), code: 400},
		{name: "merge patch nested", method: "PATCH", path: "/pods/target", contentType: mergePatch, body: []byte(`{"metadata":{"annotations":` + nested(100000, `{"a":`, "}", `"x"`) + `}}`), code: 400},
		{name: "strategic patch nested", method: "PATCH", path: "/pods/target", contentType: smPatch, body: []byte(`{"metadata":{"labels":` + nested(100000, `{"a":`, "}", `"x"`) + `}}`), code: 400},
		{name: "json patch test without value", method: "PATCH", path: "/pods/target", contentType: jPatch, body: jsonPatch(`{"op":"test","path":"/metadata/name"}`)},
		{name: "json patch unknown op", method: "PATCH", path: "/pods/target", contentType: jPatch, body: jsonPatch(`{"op":"frobnicate","path":"/metadata/name"}`)},
		{name: "json patch not a list", method: "PATCH", path: "/pods/target", contentType: jPatch, body: []byte(`{"op":"add"}`), code: 400},
		{name: "merge patch name as list", method: "PATCH", path: "/pods/target", contentType: mergePatch, body: []byte(`{"spec":{"containers":[{"name":[]}]}}`)},
		// kube's strategic merge patch panics on it (500); corekube: 422.
		{name: "strategic patch name as list", method: "PATCH", path: "/pods/target", contentType: smPatch, body: []byte(`{"spec":{"containers":[{"name":[]}]}}`), code: 422},
		{name: "strategic patch bad directive", method: "PATCH", path: "/pods/target", contentType: smPatch, body: []byte(`{"spec":{"containers":[{"$patch":"explode","name":"c"}]}}`)},
		{name: "json patch 10001 operations", method: "PATCH", path: "/pods/target", contentType: jPatch, body: jsonPatch(manyOps...), code: 413},
		{name: "json patch copy doubling a list", method: "PATCH", path: "/pods/target", contentType: jPatch, body: jsonPatch(doubling...), code: 422},
		{name: "json patch copy doubling an array (the issue's)", method: "PATCH", path: "/pods/target", contentType: jPatch, body: jsonPatch(issueDoubling...), code: 422},
		{name: "json patch copy nesting a map", method: "PATCH", path: "/pods/target", contentType: jPatch, body: jsonPatch(copyArray...)},
		{name: "json patch of the name", method: "PATCH", path: "/pods/target", contentType: jPatch, body: jsonPatch(`{"op":"replace","path":"/metadata/name","value":"other"}`), code: 400},
		{name: "patch of unknown type", method: "PATCH", path: "/pods/target", contentType: "application/x-frob", body: []byte(`{}`), code: 415},

		// Selectors.
		{name: "label selector garbage", method: "GET", path: "/pods?labelSelector=" + url.QueryEscape("a=b=c!!(("), code: 400},
		{name: "label selector long value", method: "GET", path: "/pods?labelSelector=" + url.QueryEscape("a="+longValue), code: 400},
		{name: "label selector many parentheses", method: "GET", path: "/pods?labelSelector=" + url.QueryEscape(strings.Repeat("(", 50000)), code: 400},
		{name: "field selector garbage", method: "GET", path: "/pods?fieldSelector=" + url.QueryEscape("metadata.name"), code: 400},
		{name: "field selector unknown field", method: "GET", path: "/pods?fieldSelector=" + url.QueryEscape("spec.frob=x"), code: 400},
		{name: "field selector long", method: "GET", path: "/pods?fieldSelector=" + url.QueryEscape(strings.Repeat("metadata.name=x,", 20000)+"x"), code: 400},
		{name: "watch with bad selector", method: "GET", path: "/pods?watch=true&labelSelector=" + url.QueryEscape("!!"), code: 400},

		// Names.
		{name: "name with escaped slash", method: "GET", path: "/pods/a%2Fb", code: 404},
		{name: "name dot dot", method: "GET", path: "/pods/..", code: 400},
		{name: "name with percent", method: "GET", path: "/pods/a%25b", code: 400},
		{name: "delete named dot", method: "DELETE", path: "/pods/.", code: 400},
		{name: "patch named dot dot", method: "PATCH", path: "/pods/..", contentType: mergePatch, body: []byte(`{}`), code: 400},
		{name: "name too long", method: "GET", path: "/pods/" + strings.Repeat("a", 300), code: 404},
		{name: "unicode name", method: "GET", path: "/pods/" + url.PathEscape("p\u00e9d"), code: 404},
		{name: "create with long name", method: "POST", path: "/pods", body: podJSON(strings.Repeat("a", 300)), code: 422},
		{name: "create with unicode name", method: "POST", path: "/pods", body: podJSON("p\u00e9d\u2603"), code: 422},
		{name: "create named dot dot", method: "POST", path: "/pods", body: podJSON(".."), code: 422},
		{name: "delete with a slash name", method: "DELETE", path: "/pods/sentinel%2Fx", code: 404},

		// Query parameters.
		{name: "limit not a number", method: "GET", path: "/pods?limit=abc", code: 400},
		{name: "continue garbage", method: "GET", path: "/pods?limit=1&continue=" + url.QueryEscape("!!not base64!!"), code: 400},
		{name: "continue base64 garbage", method: "GET", path: "/pods?limit=1&continue=" + url.QueryEscape("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTF9"), code: 400},
		{name: "resourceVersion garbage", method: "GET", path: "/pods?resourceVersion=abc", code: 400},
		{name: "resourceVersion out of range", method: "GET", path: "/pods?resourceVersion=99999999999999999999999", code: 400},
		{name: "resourceVersion exact garbage", method: "GET", path: "/pods?resourceVersionMatch=Exact&resourceVersion=abc", code: 400},
		{name: "resourceVersionMatch unknown", method: "GET", path: "/pods?resourceVersionMatch=Bogus&resourceVersion=1", code: 422},
		{name: "timeoutSeconds garbage", method: "GET", path: "/pods?watch=true&timeoutSeconds=abc", code: 400},
		{name: "dryRun unknown", method: "POST", path: "/pods?dryRun=Sometimes", body: podJSON("dry"), code: 422},
		{name: "gracePeriodSeconds garbage", method: "DELETE", path: "/pods/sentinel?gracePeriodSeconds=abc", code: 400},
		{name: "propagationPolicy unknown", method: "DELETE", path: "/pods/sentinel?propagationPolicy=Sideways", code: 422},

		// Wrong answers kube does not give (issue 18).
		{name: "merge patch duplicate field strict", method: "PATCH", path: "/pods/target?fieldValidation=Strict", contentType: mergePatch, body: []byte(`{"metadata":{"labels":{"a":"1","a":"2"}}}`), code: 422},
		{name: "strategic patch duplicate field strict", method: "PATCH", path: "/pods/target?fieldValidation=Strict", contentType: smPatch, body: []byte(`{"metadata":{"labels":{"a":"1","a":"2"}}}`), code: 422},
		{name: "json patch duplicate field strict", method: "PATCH", path: "/pods/target?fieldValidation=Strict", contentType: jPatch, body: jsonPatch(`{"op":"add","op":"add","path":"/metadata/labels/x","value":"1"}`), code: 422},
		{name: "body typed */*", method: "POST", path: "/pods", contentType: "*/*", body: podJSON("star"), code: 415},
		{name: "update typed */*", method: "PUT", path: "/pods/target", contentType: "*/*", body: podJSON("target"), code: 415},
		{name: "get at a resourceVersion far ahead", method: "GET", path: "/pods/sentinel?resourceVersion=999999999999", code: 504},
		{name: "get at a resourceVersion garbage", method: "GET", path: "/pods/sentinel?resourceVersion=abc", code: 400},
		{name: "exec of an unbound pod", method: "POST", path: "/pods/target/exec?command=sh", code: 400},
		{name: "portforward of an unbound pod", method: "GET", path: "/pods/target/portforward?ports=80", code: 400},
		{name: "attach of a missing pod", method: "POST", path: "/pods/nope/attach", code: 404},
		{name: "deprecated watch path of a subresource", method: "GET", path: "/pods/target/status", watchPath: true, code: 404},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			start := time.Now()
			var headers []string
			if tc.contentType != "" {
				headers = []string{"Content-Type", tc.contentType}
			}
			headers = append(headers, tc.headers...)
			path := "/api/v1/namespaces/" + ns + tc.path
			if tc.watchPath {
				path = "/api/v1/watch/namespaces/" + ns + tc.path
			}
			resp := doRaw(t, tc.method, path, tc.body, headers...)
			took := time.Since(start)
			runtime.ReadMemStats(&m1)
			allocated := m1.TotalAlloc - m0.TotalAlloc
			runtime.GC()
			runtime.ReadMemStats(&m1)
			retained := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
			msg := resp.Body
			if len(msg) > 300 {
				msg = append(msg[:300:300], "..."...)
			}
			t.Logf("%d in %v, %d MiB allocated, %d MiB retained: %s", resp.Code, took.Round(time.Millisecond), allocated>>20, retained>>20, bytes.TrimSpace(msg))
			switch {
			case tc.code != 0 && resp.Code != tc.code:
				t.Errorf("status %d, want %d", resp.Code, tc.code)
			case tc.code == 0 && (resp.Code < 400 || resp.Code >= 500):
				t.Errorf("status %d, want a 4xx", resp.Code)
			}
			if resp.Code >= 400 && resp.Header.Get("Content-Type") == "application/json" {
				var st struct {
					Kind string
					Code int
				}
				if err := json.Unmarshal(resp.Body, &st); err != nil || st.Kind != "Status" || st.Code != resp.Code {
					t.Errorf("not a Status of code %d: %v %s", resp.Code, err, msg)
				}
			}
			if took > hostileDeadline {
				t.Errorf("took %v", took)
			}
			if allocated > hostileAllocCap {
				t.Errorf("%d MiB allocated", allocated>>20)
			}
			if retained > hostileRetainCap {
				t.Errorf("%d MiB retained", retained>>20)
			}
			if got := doRaw(t, "GET", "/readyz", nil); got.Code != 200 {
				t.Fatalf("server not ready after the request: %d %s", got.Code, got.Body)
			}
		})
	}
	// Not an error in kube: a negative limit is no limit (200, every pod).
	if resp := doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods?limit=-1", nil); resp.Code != 200 || !strings.Contains(string(resp.Body), `"sentinel"`) {
		t.Errorf("limit=-1: %d %s", resp.Code, resp.Body)
	}
	after := snapshot()
	for name, b := range before {
		if after[name] != b {
			t.Errorf("pod %s changed:\n before %s\n after  %s", name, b, after[name])
		}
	}
}

// TestHostileSlowBody: a body trickled a byte at a time is cut off at the
// request's deadline with kube's 504, and the server goes on answering.
func TestHostileSlowBody(t *testing.T) {
	ns := newNamespace(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		// Owned by this test: ends when the pipe is closed (the
		// server gave up on the body, or the test returns).
		body := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"slow"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
		for _, b := range body {
			if _, err := pw.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(200 * time.Millisecond) // the trickle itself, not synchronisation
		}
	}()
	req, err := http.NewRequest("POST", srv.URL()+"/api/v1/namespaces/"+ns+"/pods?timeout=1s", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	// HTTP/1.1, where net/http would read the rest of a small body
	// before answering.
	resp, err := http1Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pw.CloseWithError(errors.New("test over"))
	took := time.Since(start)
	t.Logf("%d after %v: %s", resp.StatusCode, took.Round(time.Millisecond), bytes.TrimSpace(data))
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("status %d, want 504", resp.StatusCode)
	}
	if took > hostileDeadline {
		t.Errorf("answered after %v", took)
	}
	if got := doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods/slow", nil); got.Code != 404 {
		t.Errorf("the slow pod: %d, want 404", got.Code)
	}
}

// TestHostileDeleteSlashName: DELETE of pods/%2F (or pods/) is routed as
// deletecollection, as in kube, so a user allowed to delete pods but not
// to deletecollection them is refused, and nothing is deleted.
func TestHostileDeleteSlashName(t *testing.T) {
	ns := newNamespace(t)
	if resp := doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods", []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"keep"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)); resp.Code != 201 {
		t.Fatalf("create: %d %s", resp.Code, resp.Body)
	}
	role := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"deleter"},"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get","delete"]}]}`
	binding := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"deleter"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"deleter"},"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"mallory"}]}`
	for path, body := range map[string]string{"roles": role, "rolebindings": binding} {
		if resp := doRaw(t, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/"+path, []byte(body)); resp.Code != 201 {
			t.Fatalf("create %s: %d %s", path, resp.Code, resp.Body)
		}
	}
	as := []string{"Impersonate-User", "mallory"}
	// RBAC reads a watch-fed cache: wait until mallory may delete.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := doRaw(t, "DELETE", "/api/v1/namespaces/"+ns+"/pods/nope", nil, as...)
		if resp.Code == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mallory's delete: %d %s", resp.Code, resp.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, path := range []string{"/pods/%2F", "/pods/", "/pods//"} {
		resp := doRaw(t, "DELETE", "/api/v1/namespaces/"+ns+path, nil, as...)
		if resp.Code != 403 || !strings.Contains(string(resp.Body), `cannot deletecollection resource \"pods\"`) {
			t.Errorf("DELETE %s as mallory: %d %s, want 403 for deletecollection", path, resp.Code, resp.Body)
		}
	}
	if resp := doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods/keep", nil); resp.Code != 200 {
		t.Errorf("the pod after the refused deletes: %d %s", resp.Code, resp.Body)
	}
}

// TestPodConnectSubresources: pods/exec, attach and portforward answer as
// kube's do up to the kubelet (discovery lists them; 400 "Upgrade request
// required" without an upgrade), and an upgrade is refused with why.
func TestPodConnectSubresources(t *testing.T) {
	ns := newNamespace(t)
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bound"},"spec":{"nodeName":"connect-node","containers":[{"name":"a","image":"busybox"},{"name":"b","image":"busybox"}]}}`
	if resp := doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods", []byte(pod)); resp.Code != 201 {
		t.Fatalf("create: %d %s", resp.Code, resp.Body)
	}
	upgrade := []string{"Connection", "Upgrade", "Upgrade", "SPDY/3.1"}
	for _, tc := range []struct {
		method, path string
		headers      []string
		code         int
		message      string
	}{
		{"POST", "/exec?command=ls&container=a", nil, 400, "Upgrade request required"},
		{"GET", "/exec?command=ls&container=b", nil, 400, "Upgrade request required"},
		{"POST", "/exec?command=ls", nil, 400, "a container name must be specified for pod bound, choose one of: [a b]"},
		{"POST", "/exec?command=ls&container=zz", nil, 400, "container zz is not valid for pod bound"},
		{"POST", "/attach?container=a", nil, 400, "Upgrade request required"},
		{"POST", "/portforward?ports=80", nil, 400, "Upgrade request required"},
		{"PUT", "/exec", nil, 405, ""},
		{"POST", "/exec?command=ls&container=a", upgrade, 400, "corekube's node agents simulate containers and run no processes"},
	} {
		var resp rawResponse
		if tc.headers == nil {
			resp = doRaw(t, tc.method, "/api/v1/namespaces/"+ns+"/pods/bound"+tc.path, nil)
		} else {
			// An upgrade is HTTP/1.1's (Go's HTTP/2 client refuses it).
			req, err := http.NewRequest(tc.method, srv.URL()+"/api/v1/namespaces/"+ns+"/pods/bound"+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			r, err := http1Client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Code = r.StatusCode
			resp.Body, _ = io.ReadAll(r.Body)
			r.Body.Close()
		}
		var st metav1.Status
		_ = json.Unmarshal(resp.Body, &st)
		if resp.Code != tc.code || !strings.Contains(st.Message, tc.message) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, resp.Code, st.Message, tc.code, tc.message)
		}
	}
	resp := doRaw(t, "GET", "/api/v1", nil)
	var list metav1.APIResourceList
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pods/exec": "PodExecOptions", "pods/attach": "PodAttachOptions", "pods/portforward": "PodPortForwardOptions"}
	for _, r := range list.APIResources {
		if kind, ok := want[r.Name]; ok {
			if r.Kind != kind || strings.Join(r.Verbs, ",") != "create,get" {
				t.Errorf("discovery %s: %s %v", r.Name, r.Kind, r.Verbs)
			}
			delete(want, r.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("discovery lacks %v", want)
	}
}

// TestDeprecatedWatchPaths: kube's /watch/ paths are watches, of a
// collection or of one object.
func TestDeprecatedWatchPaths(t *testing.T) {
	ns := newNamespace(t)
	for _, name := range []string{"one", "two"} {
		if resp := doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods", []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"`+name+`"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)); resp.Code != 201 {
			t.Fatalf("create: %d %s", resp.Code, resp.Body)
		}
	}
	// timeoutSeconds ends the watch after its initial events.
	for path, want := range map[string]string{
		"/api/v1/watch/namespaces/" + ns + "/pods?timeoutSeconds=1":     "one,two",
		"/api/v1/watch/namespaces/" + ns + "/pods/two?timeoutSeconds=1": "two",
		"/api/v1/watch/namespaces/" + ns + "?timeoutSeconds=1":          ns,
	} {
		resp := doRaw(t, "GET", path, nil)
		var names []string
		dec := json.NewDecoder(bytes.NewReader(resp.Body))
		for {
			var ev struct {
				Type   string
				Object metav1.PartialObjectMetadata
			}
			if err := dec.Decode(&ev); err != nil {
				break
			}
			if ev.Type != "ADDED" {
				t.Errorf("%s: event %s", path, ev.Type)
			}
			names = append(names, ev.Object.Name)
		}
		if resp.Code != 200 || strings.Join(names, ",") != want {
			t.Errorf("GET %s: %d %v, want 200 and %s", path, resp.Code, names, want)
		}
	}
	if resp := doRaw(t, "GET", "/api/v1/watch/namespaces/"+ns+"/pods/two?fieldSelector=metadata.name%3Done", nil); resp.Code != 400 {
		t.Errorf("a watch of one pod selecting another: %d %s", resp.Code, resp.Body)
	}
	if resp := doRaw(t, "POST", "/api/v1/watch/namespaces/"+ns+"/pods", []byte(`{}`)); resp.Code != 405 {
		t.Errorf("POST to a watch path: %d", resp.Code)
	}
}

// http1Client is the admin's client over HTTP/1.1 only.
func http1Client(t *testing.T) *http.Client {
	t.Helper()
	cfg, err := rest.TLSConfigFor(testserver.ClientConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NextProtos = []string{"http/1.1"}
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}
