package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The tests in this file replay the requests recorded against a real
// kube-apiserver v1.32.13 (testdata/kube-1.32, from
// shared/reference/kube-apiserver-1.32) byte for byte and compare the
// Status answers field by field. The recording used namespace "gold".

var goldOnce sync.Once

// goldNamespace makes sure namespace "gold" exists.
func goldNamespace(t *testing.T) {
	t.Helper()
	goldOnce.Do(func() {
		_, err := cs.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gold"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create namespace gold: %v", err)
		}
	})
}

const goldPodBody = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"gp1","labels":{"app":"gold"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`

func TestGoldenErrors(t *testing.T) {
	goldNamespace(t)
	// gp1 is created, conflicts, and is deleted as in the recording.
	created := doRaw(t, http.MethodPost, "/api/v1/namespaces/gold/pods", []byte(goldPodBody))
	if created.Code != http.StatusCreated {
		t.Fatalf("create gp1: %d %s", created.Code, created.Body)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods("gold").Delete(context.Background(), "gp1", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
	})

	cases := []struct {
		golden string
		method string
		path   string
		body   string
	}{
		{"400-create-pod-malformed-json", "POST", "/api/v1/namespaces/gold/pods", `{"apiVersion":"v1","kind":"Pod",`},
		{"400-create-pod-name-mismatch-url-vs-body", "PUT", "/api/v1/namespaces/gold/pods/gp1",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"other"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`},
		{"409-create-duplicate-pod-AlreadyExists", "POST", "/api/v1/namespaces/gold/pods", goldPodBody},
		{"400-list-malformed-fieldSelector", "GET", "/api/v1/namespaces/gold/pods?fieldSelector=a%3D%3D%3Db", ""},
		{"400-list-malformed-labelSelector", "GET", "/api/v1/namespaces/gold/pods?labelSelector=a%20in%20(b", ""},
		{"400-list-unsupported-fieldSelector-spec.foo", "GET", "/api/v1/namespaces/gold/pods?fieldSelector=spec.foo%3Dbar", ""},
		{"400-watch-unsupported-fieldSelector-spec.foo", "GET", "/api/v1/namespaces/gold/pods?watch=1&fieldSelector=spec.foo%3Dbar", ""},
		{"404-create-pod-in-missing-namespace", "POST", "/api/v1/namespaces/no-such-ns/pods",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`},
		{"404-get-missing-pod", "GET", "/api/v1/namespaces/gold/pods/does-not-exist", ""},
		{"404-get-pod-in-missing-namespace", "GET", "/api/v1/namespaces/no-such-ns/pods/x", ""},
		{"404-unknown-resource", "GET", "/api/v1/namespaces/gold/foos", ""},
		{"405-delete-on-discovery-path", "DELETE", "/api/v1", ""},
		{"422-create-pod-invalid-name-Bad_Name", "POST", "/api/v1/namespaces/gold/pods",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`},
		{"422-create-pod-no-containers", "POST", "/api/v1/namespaces/gold/pods",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nocontainers"},"spec":{"containers":[]}}`},
		{"422-create-pod-no-spec-containers-field", "POST", "/api/v1/namespaces/gold/pods",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nocontainers2"},"spec":{}}`},
		{"422-list-resourceVersionMatch-without-resourceVersion", "GET", "/api/v1/namespaces/gold/pods?resourceVersionMatch=Exact", ""},
		{"422-list-sendInitialEvents-without-watch", "GET", "/api/v1/namespaces/gold/pods?sendInitialEvents=true&resourceVersionMatch=NotOlderThan", ""},
		{"422-watch-sendInitialEvents-without-resourceVersionMatch", "GET",
			"/api/v1/namespaces/gold/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&timeoutSeconds=2", ""},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			checkGolden(t, doRaw(t, c.method, c.path, body), c.golden)
		})
	}

	t.Run("409-put-pod-stale-resourceVersion-Conflict", func(t *testing.T) {
		pod, err := cs.CoreV1().Pods("gold").Get(t.Context(), "gp1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stale := pod.DeepCopy()
		pod.Labels["v"] = "1"
		if _, err := cs.CoreV1().Pods("gold").Update(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		stale.Labels["v"] = "2"
		checkGolden(t, doRaw(t, "PUT", "/api/v1/namespaces/gold/pods/gp1", mustJSON(t, stale)), "409-put-pod-stale-resourceVersion-Conflict")
	})

	t.Run("404-delete-missing-pod", func(t *testing.T) {
		del := doRaw(t, "DELETE", "/api/v1/namespaces/gold/pods/gp1", nil)
		if del.Code != http.StatusOK {
			t.Fatalf("delete gp1: %d %s", del.Code, del.Body)
		}
		checkGolden(t, doRaw(t, "DELETE", "/api/v1/namespaces/gold/pods/gp1", nil), "404-delete-missing-pod")
	})
}

// TestGoldenSuccessCodes checks the status codes and shapes of successful
// writes against the recording: 201 on create (also dry run, which has a
// uid and creationTimestamp but no resourceVersion), 200 on PUT, 201 on a
// PUT that creates.
func TestGoldenSuccessCodes(t *testing.T) {
	ns := newNamespace(t)
	base := "/api/v1/namespaces/" + ns + "/pods"

	dry := doRaw(t, "POST", base+"?dryRun=All",
		[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"dry"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`))
	if dry.Code != http.StatusCreated {
		t.Fatalf("dry-run create: %d %s", dry.Code, dry.Body)
	}
	var pod v1.Pod
	if err := json.Unmarshal(dry.Body, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Kind != "Pod" || pod.APIVersion != "v1" || pod.UID == "" || pod.CreationTimestamp.IsZero() || pod.ResourceVersion != "" ||
		pod.Namespace != ns || pod.Status.Phase != v1.PodPending || pod.Spec.RestartPolicy != v1.RestartPolicyAlways {
		t.Errorf("dry-run create answered %s", dry.Body)
	}
	if r := doRaw(t, "GET", base+"/dry", nil); r.Code != http.StatusNotFound {
		t.Errorf("GET after a dry-run create: %d", r.Code)
	}

	created := doRaw(t, "POST", base, []byte(goldPodBody))
	if created.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Code, created.Body)
	}
	if err := json.Unmarshal(created.Body, &pod); err != nil {
		t.Fatal(err)
	}
	pod.Labels["v"] = "1"
	put := doRaw(t, "PUT", base+"/gp1", mustJSON(t, &pod))
	var updated v1.Pod
	if err := json.Unmarshal(put.Body, &updated); err != nil || put.Code != http.StatusOK || updated.Labels["v"] != "1" ||
		updated.ResourceVersion == pod.ResourceVersion || updated.Kind != "Pod" {
		t.Errorf("PUT with the current resourceVersion: %d %s", put.Code, put.Body)
	}

	leasePath := "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/fresh"
	leaseBody := []byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"fresh"},"spec":{"holderIdentity":"h"}}`)
	if r := doRaw(t, "PUT", leasePath, leaseBody); r.Code != http.StatusCreated {
		t.Errorf("PUT creating a lease: %d %s", r.Code, r.Body)
	}
	if r := doRaw(t, "PUT", leasePath, leaseBody); r.Code != http.StatusOK {
		t.Errorf("PUT updating a lease: %d %s", r.Code, r.Body)
	}
}
