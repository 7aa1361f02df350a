package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/pki"
	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeKubelet is a node agent's kubelet-style API over HTTPS (a
// self-signed certificate, as a kubelet's by default): it records what it
// is asked and answers with serve.
type fakeKubelet struct {
	*httptest.Server
	requests chan *http.Request
}

func startFakeKubelet(t *testing.T, serve http.HandlerFunc) *fakeKubelet {
	t.Helper()
	k := &fakeKubelet{requests: make(chan *http.Request, 16)}
	k.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.requests <- r.Clone(r.Context())
		serve(w, r)
	}))
	// The API server's client certificate is recorded, not verified.
	k.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	k.StartTLS()
	t.Cleanup(k.Close)
	return k
}

// request returns the request the fake kubelet received.
func (k *fakeKubelet) request(t *testing.T) *http.Request {
	t.Helper()
	select {
	case r := <-k.requests:
		return r
	default:
		t.Fatal("the node agent was not asked")
		return nil
	}
}

// logNode registers a Node whose agent is at endpoint (an https URL: its
// InternalIP address and kubelet port) when it is not "", with status,
// and returns its name.
func logNode(t *testing.T, endpoint string, status v1.NodeStatus) string {
	t.Helper()
	node := newNode(uniqueName(t, "n"), nil)
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(u.Port())
		status.Addresses = append(status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: u.Hostname()})
		status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	}
	// Nodes keep their status on create: the node is complete from its
	// first version, whichever one the server's cache holds.
	node.Status = status
	if _, err := cs.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(t.Context(), node.Name, metav1.DeleteOptions{}) })
	return node.Name
}

// logPod creates pod name on node (unbound when "") with containers, the
// first one given by init: an init container.
func logPod(t *testing.T, ns, name, node string, init []string, containers ...string) {
	t.Helper()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{NodeName: node}}
	for _, c := range init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: c, Image: "busybox"})
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c, Image: "busybox"})
	}
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func logPath(ns, pod, query string) string {
	p := "/api/v1/namespaces/" + ns + "/pods/" + pod + "/log"
	if query != "" {
		p += "?" + query
	}
	return p
}

// TestPodLogProxiesToAgent: the options reach the agent's /containerLogs
// exactly as kube-apiserver sends them to a kubelet (only those set, times
// in RFC 3339), and its answer comes back as text/plain.
func TestPodLogProxiesToAgent(t *testing.T) {
	ns := newNamespace(t)
	kubelet := startFakeKubelet(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream") // replaced, as kube does
		fmt.Fprint(w, "line 1\nline 2\n")
	})
	logPod(t, ns, "p", logNode(t, kubelet.URL, v1.NodeStatus{}), []string{"init"}, "only")

	for _, tc := range []struct{ query, path, agentQuery string }{
		// One container: the default, even with an init container.
		{"", "/containerLogs/" + ns + "/p/only", ""},
		{"container=init&follow=false&previous=true&timestamps=1&tailLines=0&limitBytes=100&sinceSeconds=10&pretty=true&unknown=x",
			"/containerLogs/" + ns + "/p/init", "limitBytes=100&previous=true&sinceSeconds=10&tailLines=0&timestamps=true"},
		{"sinceTime=2024-01-02T03:04:05Z", "/containerLogs/" + ns + "/p/only", "sinceTime=2024-01-02T03%3A04%3A05Z"},
	} {
		resp := doRaw(t, "GET", logPath(ns, "p", tc.query), nil)
		if resp.Code != http.StatusOK || string(resp.Body) != "line 1\nline 2\n" {
			t.Errorf("%q: %d %q", tc.query, resp.Code, resp.Body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain" {
			t.Errorf("%q: Content-Type %q, want text/plain", tc.query, ct)
		}
		r := kubelet.request(t)
		if r.Method != http.MethodGet || r.URL.Path != tc.path || r.URL.RawQuery != tc.agentQuery {
			t.Errorf("%q: agent got %s %s?%s, want GET %s?%s", tc.query, r.Method, r.URL.Path, r.URL.RawQuery, tc.path, tc.agentQuery)
		}
	}

	// client-go, as kubectl logs uses it.
	stream, err := cs.CoreV1().Pods(ns).GetLogs("p", &v1.PodLogOptions{TailLines: ptr(int64(1)), Timestamps: true}).Stream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	body, err := io.ReadAll(stream)
	if err != nil || string(body) != "line 1\nline 2\n" {
		t.Errorf("client-go read %q, %v", body, err)
	}
	if r := kubelet.request(t); r.URL.RawQuery != "tailLines=1&timestamps=true" {
		t.Errorf("client-go: agent got ?%s", r.URL.RawQuery)
	}
}

// TestPodLogFollowStreams: with follow=true each line reaches the client
// as the agent writes it, and the agent's request ends when the client
// goes away.
func TestPodLogFollowStreams(t *testing.T) {
	ns := newNamespace(t)
	next := make(chan struct{})
	agentDone := make(chan struct{})
	kubelet := startFakeKubelet(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(agentDone)
		rc := http.NewResponseController(w)
		fmt.Fprint(w, "line 1\n")
		_ = rc.Flush()
		select {
		case <-next: // the client has line 1
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "line 2\n")
		_ = rc.Flush()
		<-r.Context().Done() // a followed log ends when its client goes
	})
	logPod(t, ns, "p", logNode(t, kubelet.URL, v1.NodeStatus{}), nil, "c")

	// The deadline only bounds a failure: a line that is never flushed
	// would block the read below for good.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := cs.CoreV1().Pods(ns).GetLogs("p", &v1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(stream)
	// Line 2 is not written until line 1 is read: reading it proves that
	// the server flushed it.
	if line, err := lines.ReadString('\n'); err != nil || line != "line 1\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(next)
	if line, err := lines.ReadString('\n'); err != nil || line != "line 2\n" {
		t.Fatalf("second line %q, %v", line, err)
	}
	if r := kubelet.request(t); r.URL.RawQuery != "follow=true" {
		t.Errorf("agent got ?%s", r.URL.RawQuery)
	}
	stream.Close()
	select {
	case <-agentDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent's request did not end after the client went away")
	}
}

// TestPodLogErrors: every way a log request fails, with kube v1.32's
// Status (code, reason, message).
func TestPodLogErrors(t *testing.T) {
	ns := newNamespace(t)
	kubelet := startFakeKubelet(t, func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("limitBytes")) // the test picks the agent's answer
		http.Error(w, fmt.Sprintf("agent says %d", code), code)
	})
	node := logNode(t, kubelet.URL, v1.NodeStatus{})
	logPod(t, ns, "many", node, []string{"init1"}, "a", "b")
	logPod(t, ns, "unbound", "", nil, "c")
	logPod(t, ns, "lost", "no-such-node-"+ns, nil, "c")
	logPod(t, ns, "noaddr", logNode(t, "", v1.NodeStatus{}), nil, "c")
	gone := httptest.NewTLSServer(http.NotFoundHandler())
	gone.Close()
	logPod(t, ns, "unreachable", logNode(t, gone.URL, v1.NodeStatus{}), nil, "c")

	for _, tc := range []struct {
		name, pod, query string
		code             int
		reason           metav1.StatusReason
		message          string // a prefix
	}{
		{"agent 400", "many", "container=a&limitBytes=400", 400, metav1.StatusReasonBadRequest, "agent says 400\n"},
		{"agent 404", "many", "container=a&limitBytes=404", 404, metav1.StatusReasonNotFound, "the server could not find the requested resource ( pods/log many)"},
		{"agent 500", "many", "container=a&limitBytes=500", 500, metav1.StatusReasonInternalError, "Internal error occurred: agent says 500\n"},
		{"agent 503", "many", "container=a&limitBytes=503", 503, metav1.StatusReasonServiceUnavailable, "the server is currently unable to handle the request ( pods/log many)"},
		{"no container", "many", "", 400, metav1.StatusReasonBadRequest, "a container name must be specified for pod many, choose one of: [init1 a b]"},
		{"unknown container", "many", "container=x", 400, metav1.StatusReasonBadRequest, "container x is not valid for pod many"},
		{"malformed", "many", "tailLines=ten", 400, metav1.StatusReasonBadRequest, `strconv.ParseInt: parsing "ten": invalid syntax`},
		{"invalid", "many", "tailLines=-1&limitBytes=0", 422, metav1.StatusReasonInvalid,
			`PodLogOptions "many" is invalid: [tailLines: Invalid value: -1: must be greater than or equal to 0, limitBytes: Invalid value: 0: must be greater than 0]`},
		{"since twice", "many", "sinceSeconds=1&sinceTime=2024-01-02T03:04:05Z", 422, metav1.StatusReasonInvalid,
			"PodLogOptions \"many\" is invalid: []: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"},
		// Options are validated before the pod is read, as in kube.
		{"invalid, no pod", "nope", "sinceSeconds=0", 422, metav1.StatusReasonInvalid, `PodLogOptions "nope" is invalid: sinceSeconds: Invalid value: 0: must be greater than 0`},
		{"no pod", "nope", "", 404, metav1.StatusReasonNotFound, `pods "nope" not found`},
		{"no node", "lost", "", 404, metav1.StatusReasonNotFound, `nodes "no-such-node-` + ns + `" not found`},
		// kube answers these as plain errors: 500 without a reason.
		{"no address", "noaddr", "", 500, "", "no preferred addresses found; known addresses: []"},
		{"unreachable", "unreachable", "", 500, "", `Get "` + gone.URL + "/containerLogs/" + ns + `/unreachable/c": dial tcp`},
	} {
		resp := doRaw(t, "GET", logPath(ns, tc.pod, tc.query), nil)
		var st metav1.Status
		if err := json.Unmarshal(resp.Body, &st); err != nil {
			t.Errorf("%s: %d %q is not a Status", tc.name, resp.Code, resp.Body)
			continue
		}
		if resp.Code != tc.code || st.Code != int32(tc.code) || st.Reason != tc.reason || st.Kind != "Status" || !strings.HasPrefix(st.Message, tc.message) {
			t.Errorf("%s: %d %s %q\nwant %d %s %q", tc.name, resp.Code, st.Reason, st.Message, tc.code, tc.reason, tc.message)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, ct)
		}
		if tc.code == 422 && (st.Details == nil || st.Details.Kind != "PodLogOptions" || st.Details.Name != tc.pod || len(st.Details.Causes) == 0) {
			t.Errorf("%s: details %+v", tc.name, st.Details)
		}
	}

	// A pod not bound to a node has no log yet: kube's empty answer.
	resp := doRaw(t, "GET", logPath(ns, "unbound", ""), nil)
	if resp.Code != http.StatusNoContent || len(resp.Body) != 0 {
		t.Errorf("unbound pod: %d %q, want 204 and no body", resp.Code, resp.Body)
	}
	stream, err := cs.CoreV1().Pods(ns).GetLogs("unbound", &v1.PodLogOptions{}).Stream(t.Context())
	if err != nil {
		t.Fatalf("client-go, unbound pod: %v", err)
	}
	if body, err := io.ReadAll(stream); err != nil || len(body) != 0 {
		t.Errorf("client-go, unbound pod: %q, %v", body, err)
	}
	stream.Close()

	// GET only; what the client does not accept is refused first.
	if resp := doRaw(t, "POST", logPath(ns, "many", ""), []byte("{}")); resp.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d %s", resp.Code, resp.Body)
	}
	if resp := doRaw(t, "GET", logPath(ns, "nope", ""), nil, "Accept", "text/html"); resp.Code != http.StatusNotAcceptable {
		t.Errorf("Accept text/html: %d %s", resp.Code, resp.Body)
	}
}

// TestPodLogNodeAddress: the agent is reached at the node's preferred
// address (Hostname, InternalDNS, InternalIP, ...) and its kubelet port,
// over HTTPS, with the API server's kubelet client certificate; the
// kubelet-endpoint annotation earlier agents set, which anyone who may
// patch a Node could point anywhere, is not followed.
func TestPodLogNodeAddress(t *testing.T) {
	ns := newNamespace(t)
	kubelet := startFakeKubelet(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello\n") })
	elsewhere := startFakeKubelet(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "proxied elsewhere\n") })
	u, err := url.Parse(kubelet.URL)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	portNum, _ := strconv.Atoi(port)
	var status v1.NodeStatus
	status.Addresses = []v1.NodeAddress{{Type: v1.NodeExternalIP, Address: "192.0.2.1"}, {Type: v1.NodeInternalIP, Address: host}}
	status.DaemonEndpoints.KubeletEndpoint.Port = int32(portNum)
	node := logNode(t, "", status)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"node.corekube.io/kubelet-endpoint":%q}}}`, elsewhere.URL)
	if _, err := cs.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	logPod(t, ns, "p", node, nil, "c")
	resp := doRaw(t, "GET", logPath(ns, "p", ""), nil)
	if resp.Code != http.StatusOK || string(resp.Body) != "hello\n" {
		t.Errorf("%d %q, want the agent's answer", resp.Code, resp.Body)
	}
	r := kubelet.request(t)
	if r.URL.Path != "/containerLogs/"+ns+"/p/c" {
		t.Errorf("agent got %s", r.URL.Path)
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != server.KubeletClientUser {
		t.Errorf("the API server presented no kubelet client certificate: %+v", r.TLS)
	}
	select {
	case r := <-elsewhere.requests:
		t.Errorf("the annotation was followed: %s", r.URL)
	default:
	}
}

// TestPodLogOpenAPI: the served documents describe GET pods/{name}/log as
// kube's do: PodLogOptions as query parameters, a string answered as
// text/plain first.
func TestPodLogOpenAPI(t *testing.T) {
	resp := doRaw(t, "GET", "/openapi/v3/api/v1", nil)
	var v3 struct {
		Paths map[string]struct {
			Parameters []struct{ Name string } `json:"parameters"`
			Get        *struct {
				OperationID string `json:"operationId"`
				Responses   map[string]struct {
					Content map[string]struct {
						Schema struct{ Type string } `json:"schema"`
					} `json:"content"`
				} `json:"responses"`
			} `json:"get"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(resp.Body, &v3); err != nil || resp.Code != http.StatusOK {
		t.Fatalf("GET /openapi/v3/api/v1: %d %v", resp.Code, err)
	}
	item, ok := v3.Paths["/api/v1/namespaces/{namespace}/pods/{name}/log"]
	if !ok || item.Get == nil || item.Get.OperationID != "readCoreV1NamespacedPodLog" {
		t.Fatalf("log path: %+v", item)
	}
	params := map[string]bool{}
	for _, p := range item.Parameters {
		params[p.Name] = true
	}
	for _, name := range []string{"container", "follow", "previous", "timestamps", "sinceSeconds", "tailLines", "limitBytes", "insecureSkipTLSVerifyBackend", "pretty"} {
		if !params[name] {
			t.Errorf("no query parameter %s", name)
		}
	}
	if c := item.Get.Responses["200"].Content["text/plain"]; c.Schema.Type != "string" {
		t.Errorf("200 text/plain: %+v", item.Get.Responses["200"])
	}

	var v2 struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	resp = doRaw(t, "GET", "/openapi/v2", nil, "Accept", "application/json")
	if err := json.Unmarshal(resp.Body, &v2); err != nil || resp.Code != http.StatusOK {
		t.Fatalf("GET /openapi/v2: %d %v", resp.Code, err)
	}
	var get struct {
		Produces []string `json:"produces"`
	}
	if err := json.Unmarshal(v2.Paths["/api/v1/namespaces/{namespace}/pods/{name}/log"]["get"], &get); err != nil || len(get.Produces) == 0 || get.Produces[0] != "text/plain" {
		t.Errorf("v2 produces %v (%v)", get.Produces, err)
	}
}

// TestPodLogKubeletCertificateAuthority: with --kubelet-certificate-authority
// the API server verifies the kubelet's serving certificate, as kube: a
// kubelet whose certificate that CA signed is read, one with another
// certificate is refused (500, the TLS error) unless the request says
// insecureSkipTLSVerifyBackend=true.
func TestPodLogKubeletCertificateAuthority(t *testing.T) {
	ca, err := pki.NewCA("kubelet-ca")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "kubelet-ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	s := testserver.StartWith(t, t.TempDir(), func(c *server.Config) { c.KubeletCertificateAuthority = caFile })
	ctx := t.Context()

	// One kubelet with a certificate of the CA, one self-signed.
	pair, err := ca.Serving(pki.ServingRequest{CommonName: "kubelet", Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pair.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	trusted := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "trusted\n") }))
	trusted.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	trusted.StartTLS()
	t.Cleanup(trusted.Close)
	selfSigned := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "self-signed\n") }))
	t.Cleanup(selfSigned.Close)

	for _, k := range []struct{ name, url string }{{"trusted", trusted.URL}, {"self-signed", selfSigned.URL}} {
		u, err := url.Parse(k.url)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(u.Port())
		node := newNode(k.name, nil)
		node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: u.Hostname()}}
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
		if _, err := s.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: k.name}, Spec: v1.PodSpec{NodeName: k.name, Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := s.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(pod, query string) rawResponse {
		return doRawURL(t, s.URL(), "GET", logPath("default", pod, query), nil)
	}
	if resp := get("trusted", ""); resp.Code != http.StatusOK || string(resp.Body) != "trusted\n" {
		t.Errorf("kubelet with a certificate of the CA: %d %q", resp.Code, resp.Body)
	}
	if resp := get("self-signed", ""); resp.Code != http.StatusInternalServerError || !strings.Contains(string(resp.Body), "certificate") {
		t.Errorf("self-signed kubelet: %d %q, want 500 with the TLS error", resp.Code, resp.Body)
	}
	if resp := get("self-signed", "insecureSkipTLSVerifyBackend=true"); resp.Code != http.StatusOK || string(resp.Body) != "self-signed\n" {
		t.Errorf("self-signed kubelet, insecureSkipTLSVerifyBackend: %d %q", resp.Code, resp.Body)
	}
}
