package bench

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// The kubemark benchmark's API stand-in, checked against a fake corekube
// (an HTTPS server that records what reaches it): each of its APIs
// answered in protobuf, as the hollow kubelet asks, and in JSON; the rest
// passed through, watches streamed.

// fakeUpstream is the corekube behind the stand-in: it answers pod LISTs,
// streams one event to a pod WATCH, and 404s anything else, recording
// each request's method and URI.
type fakeUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	u := &fakeUpstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Method+" "+r.URL.RequestURI())
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/namespaces/ns1/pods" && r.URL.Query().Get("watch") == "true":
			w.WriteHeader(http.StatusOK)
			fmt.Fprintln(w, `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p1","namespace":"ns1","resourceVersion":"8"}}}`)
			w.(http.Flusher).Flush()
			// Held open: the event must reach the client before the end.
			<-r.Context().Done()
		case r.URL.Path == "/api/v1/namespaces/ns1/pods":
			fmt.Fprintln(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"p1","namespace":"ns1"}}]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"upstream: %s"}`+"\n", r.URL.Path)
		}
	}))
	u.EnableHTTP2 = true
	u.StartTLS()
	t.Cleanup(u.Close)
	return u
}

func (u *fakeUpstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...)
}

// newTestStandIn starts a stand-in in front of a fake upstream.
func newTestStandIn(t *testing.T) (*apiStandIn, *fakeUpstream, []byte) {
	t.Helper()
	up := newFakeUpstream(t)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw})
	si, err := newAPIStandIn(&rest.Config{Host: up.URL, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { si.Close() })
	return si, up, caPEM
}

// standInClient is a client of the stand-in through the kubeconfig it
// writes for the hollow nodes, speaking contentType.
func standInClient(t *testing.T, si *apiStandIn, contentType string) (kubernetes.Interface, *rest.Config) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := si.writeKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	rc.ContentType = contentType
	if contentType == jsonMediaType {
		rc.AcceptContentTypes = jsonMediaType
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return client, rc
}

func TestKubemarkStandInAnswersItsAPIs(t *testing.T) {
	si, up, caPEM := newTestStandIn(t)
	for _, ct := range []string{protobufMediaType, jsonMediaType} {
		t.Run(ct, func(t *testing.T) {
			client, _ := standInClient(t, si, ct)
			ctx := t.Context()

			// services: the kubelet's informer's LIST, and a selector on
			// a field services do not have refused as the API server does.
			svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{FieldSelector: "spec.clusterIP!=None"})
			if err != nil || len(svcs.Items) != 0 || svcs.ResourceVersion == "" {
				t.Fatalf("services: %v, %+v; want an empty list with a resourceVersion", err, svcs)
			}
			if _, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nope=x"}); !apierrors.IsBadRequest(err) {
				t.Errorf("services with fieldSelector spec.nope: %v, want BadRequest", err)
			}
			if _, err := client.CoreV1().Services("ns1").Get(ctx, "kubernetes", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get a service: %v, want NotFound", err)
			}

			// runtimeclasses and csidrivers: empty lists.
			rcs, err := client.NodeV1().RuntimeClasses().List(ctx, metav1.ListOptions{})
			if err != nil || len(rcs.Items) != 0 {
				t.Errorf("runtimeclasses: %v, %+v", err, rcs)
			}
			drivers, err := client.StorageV1().CSIDrivers().List(ctx, metav1.ListOptions{})
			if err != nil || len(drivers.Items) != 0 {
				t.Errorf("csidrivers: %v, %+v", err, drivers)
			}

			// kube-root-ca.crt: by name, and as the kubelet's watch-based
			// manager lists it.
			cm, err := client.CoreV1().ConfigMaps("ns1").Get(ctx, rootCAConfigMap, metav1.GetOptions{})
			if err != nil || cm.Data["ca.crt"] != string(caPEM) || cm.Namespace != "ns1" {
				t.Fatalf("get kube-root-ca.crt: %v, %+v; want corekube's CA", err, cm)
			}
			cms, err := client.CoreV1().ConfigMaps("ns2").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + rootCAConfigMap})
			if err != nil || len(cms.Items) != 1 || cms.Items[0].Namespace != "ns2" || cms.Items[0].Data["ca.crt"] != string(caPEM) {
				t.Fatalf("list kube-root-ca.crt: %v, %+v", err, cms)
			}
		})
	}
	for _, r := range up.requests() {
		if !strings.Contains(r, "/pods") {
			t.Errorf("%s reached corekube: the stand-in should have answered it", r)
		}
	}
	counts, _ := si.answeredCounts()
	// 3 service calls, 1 of each of the two empty APIs and 2 of the
	// ConfigMap, twice over.
	want := map[string]int{"services": 6, "runtimeclasses": 2, "csidrivers": 2, "configmaps/" + rootCAConfigMap: 4}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("answered %s %d times, want %d (all: %v)", k, counts[k], n, counts)
		}
	}
}

func TestKubemarkStandInCSINodes(t *testing.T) {
	si, up, _ := newTestStandIn(t)
	for i, ct := range []string{protobufMediaType, jsonMediaType} {
		t.Run(ct, func(t *testing.T) {
			client, _ := standInClient(t, si, ct)
			ctx := t.Context()
			csinodes := client.StorageV1().CSINodes()
			name := fmt.Sprintf("hollow-node-%d", i)
			// The kubelet's CSI plugin: GET (not there yet), create,
			// update with what it read.
			if _, err := csinodes.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("get before create: %v, want NotFound", err)
			}
			node := &storagev1.CSINode{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}},
			}
			created, err := csinodes.Create(ctx, node, metav1.CreateOptions{})
			if err != nil || created.ResourceVersion == "" || created.UID == "" || created.Name != name {
				t.Fatalf("create: %v, %+v", err, created)
			}
			if _, err := csinodes.Create(ctx, node, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
				t.Errorf("second create: %v, want AlreadyExists", err)
			}
			got, err := csinodes.Get(ctx, name, metav1.GetOptions{})
			if err != nil || got.ResourceVersion != created.ResourceVersion || got.UID != created.UID {
				t.Fatalf("get: %v, %+v; want what was created, %+v", err, got, created)
			}
			got.Annotations = map[string]string{"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"}
			got.Spec.Drivers = append(got.Spec.Drivers, storagev1.CSINodeDriver{Name: "ebs.csi.aws.com", NodeID: name, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](25)}})
			updated, err := csinodes.Update(ctx, got, metav1.UpdateOptions{})
			if err != nil || updated.ResourceVersion == got.ResourceVersion || updated.UID != created.UID {
				t.Fatalf("update: %v, %+v", err, updated)
			}
			// A stale resourceVersion conflicts.
			if _, err := csinodes.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				t.Errorf("update from a stale read: %v, want Conflict", err)
			}
			again, err := csinodes.Get(ctx, name, metav1.GetOptions{})
			if err != nil || again.Annotations["storage.alpha.kubernetes.io/migrated-plugins"] == "" ||
				len(again.Spec.Drivers) != 1 || *again.Spec.Drivers[0].Allocatable.Count != 25 {
				t.Fatalf("get after update: %v, %+v", err, again)
			}
			list, err := csinodes.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
			if err != nil || len(list.Items) != 1 || list.Items[0].Name != name {
				t.Errorf("list by name: %v, %+v", err, list)
			}
		})
	}
	if r := up.requests(); len(r) != 0 {
		t.Errorf("csinode requests reached corekube: %v", r)
	}
}

// TestKubemarkStandInEncodings checks the wire: protobuf (the k8s\x00
// envelope) when the client prefers it, JSON otherwise, and a watch that
// stays open without an event until its timeoutSeconds.
func TestKubemarkStandInEncodings(t *testing.T) {
	si, _, _ := newTestStandIn(t)
	_, rc := standInClient(t, si, jsonMediaType)
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, accept string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, si.URL()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp, body
	}
	for _, tc := range []struct{ accept, contentType, prefix string }{
		{"application/vnd.kubernetes.protobuf, */*", protobufMediaType, "k8s\x00"},
		{"application/json, */*", jsonMediaType, "{"},
		{"*/*", jsonMediaType, "{"},
	} {
		resp, body := get("/apis/node.k8s.io/v1/runtimeclasses", tc.accept)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.contentType || !bytes.HasPrefix(body, []byte(tc.prefix)) {
			t.Errorf("Accept %q: %d %s %q, want 200 %s", tc.accept, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.contentType)
		}
	}
	// An error is a Status in the client's encoding too.
	resp, body := get("/apis/storage.k8s.io/v1/csinodes/none", "application/vnd.kubernetes.protobuf, */*")
	if resp.StatusCode != http.StatusNotFound || !bytes.HasPrefix(body, []byte("k8s\x00")) {
		t.Errorf("csinode none: %d %q, want a protobuf Status 404", resp.StatusCode, body)
	}

	// Idle watches: open, nothing sent, closed at timeoutSeconds.
	for _, tc := range []struct{ path, accept, contentType string }{
		{"/api/v1/services?fieldSelector=spec.clusterIP%21%3DNone&watch=true&timeoutSeconds=1", "application/vnd.kubernetes.protobuf, */*", protobufMediaType + ";stream=watch"},
		{"/api/v1/namespaces/ns1/configmaps?fieldSelector=metadata.name%3Dkube-root-ca.crt&watch=1&timeoutSeconds=1", "application/json", jsonMediaType},
		{"/apis/storage.k8s.io/v1/csidrivers?watch=true&timeoutSeconds=1", "application/json", jsonMediaType},
	} {
		start := time.Now()
		resp, body := get(tc.path, tc.accept)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.contentType || len(body) != 0 {
			t.Errorf("watch %s: %d %s %q, want 200 %s and no event", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.contentType)
		}
		if d := time.Since(start); d < time.Second {
			t.Errorf("watch %s ended after %v, before its timeoutSeconds", tc.path, d)
		}
	}
}

// TestKubemarkStandInProxies checks that what is not the stand-in's goes to
// corekube as sent, answers included, a watch's events as they come.
func TestKubemarkStandInProxies(t *testing.T) {
	si, up, _ := newTestStandIn(t)
	client, _ := standInClient(t, si, protobufMediaType)
	ctx := t.Context()
	pods, err := client.CoreV1().Pods("ns1").List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
	if err != nil || len(pods.Items) != 1 || pods.ResourceVersion != "7" {
		t.Fatalf("pods through the stand-in: %v, %+v", err, pods)
	}
	// Another ConfigMap than kube-root-ca.crt is corekube's (a 404 here).
	if _, err := client.CoreV1().ConfigMaps("ns1").Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "upstream") {
		t.Errorf("configmap other: %v, want corekube's NotFound", err)
	}
	if _, err := client.CoreV1().ConfigMaps("ns1").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=other"}); !apierrors.IsNotFound(err) {
		t.Errorf("configmaps named other: %v, want corekube's NotFound", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w, err := client.CoreV1().Pods("ns1").Watch(wctx, metav1.ListOptions{ResourceVersion: "7"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Errorf("watch event %v %+v, want ADDED p1", ev.Type, ev.Object)
		}
	case <-wctx.Done():
		t.Fatal("the upstream watch's event did not come through while the watch was open")
	}
	w.Stop()

	want := []string{"GET /api/v1/namespaces/ns1/pods?labelSelector=app%3Dx", "GET /api/v1/namespaces/ns1/configmaps/other",
		"GET /api/v1/namespaces/ns1/configmaps?fieldSelector=metadata.name%3Dother"}
	got := up.requests()
	for _, r := range want {
		found := false
		for _, g := range got {
			found = found || g == r
		}
		if !found {
			t.Errorf("%s did not reach corekube as sent; it saw %v", r, got)
		}
	}
	if _, proxied := si.answeredCounts(); proxied != 4 {
		t.Errorf("proxied %d requests, want 4", proxied)
	}
}
