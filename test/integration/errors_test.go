package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestNotFoundErrors covers the 404s through client-go.
func TestNotFoundErrors(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)

	_, err := pods.Get(t.Context(), "missing", metav1.GetOptions{})
	st := checkStatusErr(t, err, 404, metav1.StatusReasonNotFound, `pods "missing" not found`)
	if st.Details == nil || st.Details.Name != "missing" || st.Details.Kind != "pods" {
		t.Errorf("details %+v", st.Details)
	}

	// Creating in a namespace that does not exist names the namespace.
	_, err = cs.CoreV1().Pods("no-such-namespace").Create(t.Context(), newPod("x", nil), metav1.CreateOptions{})
	st = checkStatusErr(t, err, 404, metav1.StatusReasonNotFound, `namespaces "no-such-namespace" not found`)
	if st.Details == nil || st.Details.Name != "no-such-namespace" || st.Details.Kind != "namespaces" {
		t.Errorf("details %+v", st.Details)
	}
	_, err = cs.CoordinationV1().Leases("no-such-namespace").Create(t.Context(), newLease("l", nil), metav1.CreateOptions{})
	checkStatusErr(t, err, 404, metav1.StatusReasonNotFound, `namespaces "no-such-namespace" not found`)

	_, err = cs.CoordinationV1().Leases(ns).Get(t.Context(), "missing", metav1.GetOptions{})
	checkStatusErr(t, err, 404, metav1.StatusReasonNotFound, `leases.coordination.k8s.io "missing" not found`)
	err = cs.PolicyV1().PodDisruptionBudgets(ns).Delete(t.Context(), "missing", metav1.DeleteOptions{})
	checkStatusErr(t, err, 404, metav1.StatusReasonNotFound, `poddisruptionbudgets.policy "missing" not found`)
	_, err = cs.CoreV1().Nodes().Get(t.Context(), "missing-node", metav1.GetOptions{})
	checkStatusErr(t, err, 404, metav1.StatusReasonNotFound, `nodes "missing-node" not found`)
	_, err = cs.CoreV1().Pods(ns).UpdateStatus(t.Context(), newPod("missing", nil), metav1.UpdateOptions{})
	checkStatusErr(t, err, 404, metav1.StatusReasonNotFound, `pods "missing" not found`)

	// Unknown resources, groups, versions and subresources.
	for _, path := range []string{
		"/api/v1/namespaces/" + ns + "/foos",
		"/api/v1/foos",
		"/apis/nope.example.com/v1/things",
		"/apis/policy/v2/namespaces/" + ns + "/poddisruptionbudgets",
		"/api/v1/namespaces/" + ns + "/pods/x/nosuchsub",
		"/api/v1/namespaces/" + ns + "/nodes",
	} {
		r := doRaw(t, "GET", path, nil)
		if r.Code != 404 {
			t.Errorf("GET %s: %d, want 404", path, r.Code)
			continue
		}
		st := statusMap(t, r.Body)
		if st["reason"] != "NotFound" || st["message"] != "the server could not find the requested resource" {
			t.Errorf("GET %s: %s", path, r.Body)
		}
	}
	_, err = cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces", ns, "foos").DoRaw(t.Context())
	checkStatusErr(t, err, 404, metav1.StatusReasonNotFound, "the server could not find the requested resource")

	// Listing in a namespace that does not exist is an empty list, as in
	// kube, with "items":[] rather than null.
	r := doRaw(t, "GET", "/api/v1/namespaces/no-such-namespace/pods", nil)
	if r.Code != 200 || !strings.Contains(string(r.Body), `"items":[]`) {
		t.Errorf("list in a missing namespace: %d %s", r.Code, r.Body)
	}
}

// TestMethodNotAllowed: verbs a path does not serve are 405.
func TestMethodNotAllowed(t *testing.T) {
	ns := newNamespace(t)
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod("p", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	body := mustJSON(t, newPod("p", nil))
	for _, c := range []struct{ method, path string }{
		{"PUT", "/api/v1/namespaces/" + ns + "/pods"},
		{"PATCH", "/api/v1/namespaces/" + ns + "/pods"},
		{"POST", "/api/v1/namespaces/" + ns + "/pods/p"},
		{"GET", "/api/v1/namespaces/" + ns + "/pods/p/binding"},
		{"DELETE", "/api/v1/namespaces/" + ns + "/pods/p/status"},
		{"POST", "/api/v1/namespaces/" + ns + "/pods/p/status"},
		{"DELETE", "/api/v1"},
		{"POST", "/apis/policy/v1"},
	} {
		r := doRaw(t, c.method, c.path, body, "Content-Type", "application/merge-patch+json")
		if c.method != "PATCH" {
			r = doRaw(t, c.method, c.path, body)
		}
		st := statusMap(t, r.Body)
		if r.Code != 405 || st["reason"] != "MethodNotAllowed" || st["message"] != "the server does not allow this method on the requested resource" {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.Code, r.Body)
		}
	}
	if p, err := cs.CoreV1().Pods(ns).Get(t.Context(), "p", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("405s touched the pod: %v", err)
	}
}

// TestInvalidErrors covers 422 Invalid answers and their causes.
func TestInvalidErrors(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)

	t.Run("bad name", func(t *testing.T) {
		_, err := pods.Create(t.Context(), newPod("Bad_Name", nil), metav1.CreateOptions{})
		st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"metadata.name": metav1.CauseTypeFieldValueInvalid})
		if !strings.HasPrefix(st.Message, `Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain`) {
			t.Errorf("message %q", st.Message)
		}
		if st.Details.Name != "Bad_Name" || st.Details.Kind != "Pod" {
			t.Errorf("details %+v", st.Details)
		}
		_, err = cs.CoreV1().Namespaces().Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}}, metav1.CreateOptions{})
		st = checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"metadata.name": metav1.CauseTypeFieldValueInvalid})
		// Neither a name nor a generateName.
		_, err = pods.Create(t.Context(), newPod("", nil), metav1.CreateOptions{})
		st = checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"metadata.name": metav1.CauseTypeFieldValueRequired})
	})

	t.Run("no containers", func(t *testing.T) {
		pod := newPod("nocontainers", nil)
		pod.Spec.Containers = nil
		_, err := pods.Create(t.Context(), pod, metav1.CreateOptions{})
		st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, `Pod "nocontainers" is invalid: spec.containers: Required value`)
		checkCauses(t, st, map[string]metav1.CauseType{"spec.containers": metav1.CauseTypeFieldValueRequired})
	})

	t.Run("invalid labels", func(t *testing.T) {
		pod := newPod("badlabel", map[string]string{"bad key": "v"})
		_, err := pods.Create(t.Context(), pod, metav1.CreateOptions{})
		st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"metadata.labels": metav1.CauseTypeFieldValueInvalid})

		pod = newPod("longlabel", map[string]string{"k": strings.Repeat("v", 64)})
		_, err = pods.Create(t.Context(), pod, metav1.CreateOptions{})
		st = checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"metadata.labels": metav1.CauseTypeFieldValueInvalid})
		if !strings.Contains(st.Message, "must be no more than 63 characters") {
			t.Errorf("message %q", st.Message)
		}

		pod = newPod("bigannotations", nil)
		pod.Annotations = map[string]string{"a": strings.Repeat("x", 256*1024)}
		_, err = pods.Create(t.Context(), pod, metav1.CreateOptions{})
		st = checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"metadata.annotations": metav1.CauseTypeTooLong})

		// The same rules hold on update.
		ok, err := pods.Create(t.Context(), newPod("goodlabel", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ok.Labels = map[string]string{"-bad": "v"}
		_, err = pods.Update(t.Context(), ok, metav1.UpdateOptions{})
		st = checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"metadata.labels": metav1.CauseTypeFieldValueInvalid})
	})

	t.Run("pod spec update forbidden", func(t *testing.T) {
		pod, err := pods.Create(t.Context(), newPod("immutable", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.RestartPolicy = v1.RestartPolicyNever
		_, err = pods.Update(t.Context(), pod, metav1.UpdateOptions{})
		st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"spec": metav1.CauseTypeForbidden})
		if !strings.HasPrefix(st.Message, `Pod "immutable" is invalid: spec: Forbidden: pod updates may not change fields other than `) {
			t.Errorf("message %q", st.Message)
		}
		// The same through a patch.
		_, err = pods.Patch(t.Context(), "immutable", types.StrategicMergePatchType, []byte(`{"spec":{"dnsPolicy":"Default"}}`), metav1.PatchOptions{})
		st = checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"spec": metav1.CauseTypeForbidden})
	})

	t.Run("pdb minAvailable and maxUnavailable", func(t *testing.T) {
		pdb := newPDB("both", nil)
		max := intstr.FromInt32(1)
		pdb.Spec.MaxUnavailable = &max
		_, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), pdb, metav1.CreateOptions{})
		st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"spec": metav1.CauseTypeFieldValueInvalid})
		if !strings.HasPrefix(st.Message, `PodDisruptionBudget.policy "both" is invalid: spec: Invalid value: `) ||
			!strings.HasSuffix(st.Message, "minAvailable and maxUnavailable cannot be both set") {
			t.Errorf("message %q", st.Message)
		}
		if st.Details.Group != "policy" || st.Details.Kind != "PodDisruptionBudget" {
			t.Errorf("details %+v", st.Details)
		}

		pdb = newPDB("pct", nil)
		pct := intstr.FromString("150%")
		pdb.Spec.MinAvailable = &pct
		_, err = cs.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), pdb, metav1.CreateOptions{})
		st = checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"spec.minAvailable": metav1.CauseTypeFieldValueInvalid})
	})

	t.Run("other resources", func(t *testing.T) {
		lease := newLease("l", nil)
		lease.Spec.LeaseDurationSeconds = ptr(int32(0))
		_, err := cs.CoordinationV1().Leases(ns).Create(t.Context(), lease, metav1.CreateOptions{})
		st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"spec.leaseDurationSeconds": metav1.CauseTypeFieldValueInvalid})

		ev := newEvent(ns, "e", nil)
		ev.InvolvedObject.Namespace = "elsewhere"
		_, err = cs.CoreV1().Events(ns).Create(t.Context(), ev, metav1.CreateOptions{})
		st = checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		checkCauses(t, st, map[string]metav1.CauseType{"involvedObject.namespace": metav1.CauseTypeFieldValueInvalid})

		node := newNode(uniqueName(t, "n"), nil)
		node.Spec.Taints = []v1.Taint{{Key: "k", Effect: "Sometimes"}}
		_, err = cs.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
		st = checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		// kube reports node taints under metadata.taints (its quirk).
		checkCauses(t, st, map[string]metav1.CauseType{"metadata.taints[0].effect": metav1.CauseTypeFieldValueNotSupported})
	})

	t.Run("invalid dryRun", func(t *testing.T) {
		r := doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods?dryRun=Bogus", mustJSON(t, newPod("dry", nil)))
		if r.Code != 422 {
			t.Fatalf("dryRun=Bogus: %d %s", r.Code, r.Body)
		}
		st := statusMap(t, r.Body)
		if st["message"] != `CreateOptions.meta.k8s.io "" is invalid: dryRun[0]: Unsupported value: "Bogus": supported values: "All"` {
			t.Errorf("message %v", st["message"])
		}
		if _, err := pods.Get(t.Context(), "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a refused dry run stored the pod: %v", err)
		}
	})
}

// TestRequestBodyErrors covers 400, 413 and 415 through raw HTTP.
func TestRequestBodyErrors(t *testing.T) {
	ns := newNamespace(t)
	base := "/api/v1/namespaces/" + ns + "/pods"

	t.Run("413 over 3 MiB", func(t *testing.T) {
		pod := newPod("huge", nil)
		pod.Annotations = map[string]string{"big": strings.Repeat("x", 3*1024*1024)}
		r := doRaw(t, "POST", base, mustJSON(t, pod))
		if r.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%d %s", r.Code, r.Body)
		}
		st := statusMap(t, r.Body)
		if st["reason"] != "RequestEntityTooLarge" || st["message"] != "Request entity too large: limit is 3145728" {
			t.Errorf("body %s", r.Body)
		}
		if _, err := cs.CoreV1().Pods(ns).Get(t.Context(), "huge", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("huge pod stored: %v", err)
		}
		// Just below the limit is read (and then refused by validation,
		// the annotations being over 256 KiB).
		pod.Annotations["big"] = strings.Repeat("x", 3*1024*1024-1024)
		r = doRaw(t, "POST", base, mustJSON(t, pod))
		if r.Code != 422 {
			t.Errorf("body under the limit: %d %.200s", r.Code, r.Body)
		}
	})

	t.Run("415 content types", func(t *testing.T) {
		body := mustJSON(t, newPod("ct", nil))
		for _, ct := range []string{"text/plain", "application/xml", "application/cbor", "not a media type"} {
			r := doRaw(t, "POST", base, body, "Content-Type", ct)
			if r.Code != http.StatusUnsupportedMediaType {
				t.Errorf("Content-Type %q: %d %s", ct, r.Code, r.Body)
				continue
			}
			st := statusMap(t, r.Body)
			if st["reason"] != "UnsupportedMediaType" || !strings.HasPrefix(st["message"].(string), "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml") {
				t.Errorf("Content-Type %q: %s", ct, r.Body)
			}
		}
		// YAML is accepted.
		r := doRaw(t, "POST", base, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: yaml\nspec:\n  containers:\n  - name: c\n    image: busybox\n"), "Content-Type", "application/yaml")
		if r.Code != http.StatusCreated {
			t.Errorf("YAML create: %d %s", r.Code, r.Body)
		}
	})

	t.Run("415 patch types", func(t *testing.T) {
		if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod("patchme", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := doRaw(t, "PATCH", base+"/patchme", []byte(`{"metadata":{"labels":{"a":"b"}}}`), "Content-Type", "application/json")
		if r.Code != http.StatusUnsupportedMediaType || statusMap(t, r.Body)["reason"] != "UnsupportedMediaType" {
			t.Errorf("PATCH application/json: %d %s", r.Code, r.Body)
		}
		// kube 1.32 serves apply-patch+cbor only behind a feature gate
		// that is off by default: the message lists the four it takes.
		r = doRaw(t, "PATCH", base+"/patchme", []byte{0xa0}, "Content-Type", "application/apply-patch+cbor")
		if r.Code != http.StatusUnsupportedMediaType {
			t.Fatalf("cbor apply patch: %d %s", r.Code, r.Body)
		}
		if st := statusMap(t, r.Body); st["message"] != "the body of the request was in an unknown format - accepted media types include: "+
			"application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml" {
			t.Errorf("cbor apply patch: %s", r.Body)
		}
		pod, err := cs.CoreV1().Pods(ns).Get(t.Context(), "patchme", metav1.GetOptions{})
		if err != nil || pod.Labels["a"] != "" {
			t.Errorf("refused patches changed the pod: %v %v", err, pod.Labels)
		}
	})

	t.Run("400 malformed JSON", func(t *testing.T) {
		r := doRaw(t, "POST", base, []byte(`{"apiVersion":"v1","kind":"Pod",`))
		st := statusMap(t, r.Body)
		if r.Code != 400 || st["reason"] != "BadRequest" ||
			!strings.HasPrefix(st["message"].(string), "the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: unexpected end of JSON input") {
			t.Errorf("%d %s", r.Code, r.Body)
		}
	})

	t.Run("400 strict field validation", func(t *testing.T) {
		body := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"strict"},"spec":{"foo":1,"containers":[{"name":"c","image":"busybox"}]}}`)
		r := doRaw(t, "POST", base+"?fieldValidation=Strict", body)
		if r.Code != 400 || statusMap(t, r.Body)["message"] != `Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.foo"` {
			t.Errorf("Strict: %d %s", r.Code, r.Body)
		}
		r = doRaw(t, "POST", base, body)
		if r.Code != 201 || !strings.Contains(r.Header.Get("Warning"), `unknown field \"spec.foo\"`) {
			t.Errorf("default (Warn): %d, Warning %q", r.Code, r.Header.Get("Warning"))
		}
		// kube's patch handler answers 422 on the field "patch" (applyPatchToObject).
		r = doRaw(t, "PATCH", base+"/strict?fieldValidation=Strict", []byte(`{"spec":{"bar":1}}`), "Content-Type", "application/strategic-merge-patch+json")
		if st := statusMap(t, r.Body); r.Code != 422 || st["reason"] != "Invalid" ||
			st["message"] != ` "" is invalid: patch: Invalid value: "map[spec:map[bar:1]]": strict decoding error: unknown field "spec.bar"` {
			t.Errorf("PATCH Strict: %d %s", r.Code, r.Body)
		}
	})
}

// TestMalformedInput sends garbage of every kind: every answer is a 4xx
// Status, the server keeps serving, and the stored object is unchanged.
func TestMalformedInput(t *testing.T) {
	ns := newNamespace(t)
	pod, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod("victim", map[string]string{"a": "1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	coll := "/api/v1/namespaces/" + ns + "/pods"
	obj := coll + "/victim"
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	cases := []struct {
		method, path, ct, body string
	}{
		{"POST", coll, "application/json", ``},
		{"POST", coll, "application/json", `null`},
		{"POST", coll, "application/json", `[]`},
		{"POST", coll, "application/json", `"pod"`},
		{"POST", coll, "application/json", `42`},
		{"POST", coll, "application/json", `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"}}`},
		{"POST", coll, "application/json", `{"kind":"Pod","apiVersion":"v2","metadata":{"name":"n"}}`},
		{"POST", coll, "application/json", `{"kind":"Pod","apiVersion":"v1","metadata":"n"}`},
		{"POST", coll, "application/json", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"n","labels":[1]}}`},
		{"POST", coll, "application/json", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"n"},"spec":{"containers":"x"}}`},
		{"POST", coll, "application/json", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"n","namespace":"other"},"spec":{"containers":[{"name":"c","image":"i"}]}}`},
		{"POST", coll, "application/json", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"n","resourceVersion":"5"},"spec":{"containers":[{"name":"c","image":"i"}]}}`},
		{"POST", coll, "application/json", deep},
		{"POST", coll, "application/json", "\xff\xfe\x00garbage"},
		{"POST", coll, "application/yaml", "a: [unclosed"},
		{"POST", coll + "?fieldValidation=Sometimes", "application/json", `{}`},
		{"PUT", obj, "application/json", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"victim","namespace":"other"}}`},
		{"PUT", obj, "application/json", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"victim","resourceVersion":"abc"},"spec":{}}`},
		{"PUT", obj, "application/json", `{`},
		{"PUT", obj, "application/json", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"victim","labels":{"a":"2"}},"spec":{"containers":[]}}`},
		{"PATCH", obj, "application/json-patch+json", `{"op":"add"}`},
		{"PATCH", obj, "application/json-patch+json", `[{"op":"explode","path":"/x"}]`},
		{"PATCH", obj, "application/json-patch+json", `[{"op":"remove","path":"/no/such/path"}]`},
		{"PATCH", obj, "application/json-patch+json", `[{"op":"replace","path":"/metadata","value":7}]`},
		{"PATCH", obj, "application/json-patch+json", `[{"op":"test","path":"/metadata/name","value":"other"}]`},
		{"PATCH", obj, "application/merge-patch+json", `{"metadata":`},
		{"PATCH", obj, "application/merge-patch+json", `{"metadata":{"name":"renamed"}}`},
		{"PATCH", obj, "application/merge-patch+json", `{"metadata":{"uid":"not-the-uid"}}`},
		{"PATCH", obj, "application/merge-patch+json", `{"spec":{"containers":null}}`},
		{"PATCH", obj, "application/merge-patch+json", `{"kind":"Node"}`},
		{"PATCH", obj, "application/strategic-merge-patch+json", `[1,2]`},
		{"PATCH", obj, "application/strategic-merge-patch+json", `{"spec":{"containers":[{"$patch":"explode"}]}}`},
		{"PATCH", obj, "application/strategic-merge-patch+json", `{"metadata":{"labels":{"$patch":"bogus"}}}`},
		{"PATCH", obj, "application/strategic-merge-patch+json", `{"spec":{"containers":"oops"}}`},
		{"DELETE", obj, "application/json", `{"gracePeriodSeconds":"soon"}`},
		{"DELETE", obj, "application/json", `{"propagationPolicy":"Sideways"}`},
		{"DELETE", obj, "application/json", `{"preconditions":{"uid":"someone-else"}}`},
		{"DELETE", obj + "?gracePeriodSeconds=abc", "", ``},
		{"DELETE", obj, "application/json", `{"dryRun":["Maybe"]}`},
		{"GET", coll + "?limit=abc", "", ``},
		{"GET", coll + "?resourceVersion=abc", "", ``},
		{"GET", coll + "?continue=!!!", "", ``},
		{"GET", coll + "?continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiIuLi8uLi9ub2RlcyJ9", "", ``},
		{"GET", coll + "?labelSelector=" + strings.Repeat("(", 100), "", ``},
		{"GET", coll + "?fieldSelector=metadata.name%3D%3D%3D", "", ``},
		{"GET", coll + "?watch=true&resourceVersion=abc", "", ``},
		{"GET", coll + "?timeoutSeconds=abc", "", ``},
		{"POST", obj + "/binding", "application/json", `{"kind":"Binding","apiVersion":"v1","target":{"kind":"Pod","name":""}}`},
		{"POST", obj + "/binding", "application/json", `{]`},
	}
	for _, c := range cases {
		var body []byte
		if c.body != "" || c.method == "POST" {
			body = []byte(c.body)
		}
		var headers []string
		if c.ct != "" {
			headers = []string{"Content-Type", c.ct}
		}
		r := doRaw(t, c.method, c.path, body, headers...)
		label := fmt.Sprintf("%s %.80s [%s] %.60q", c.method, c.path, c.ct, c.body)
		if r.Code < 400 || r.Code >= 500 {
			t.Errorf("%s: %d, want a 4xx; body %.300s", label, r.Code, r.Body)
			continue
		}
		var st metav1.Status
		if err := json.Unmarshal(r.Body, &st); err != nil || st.Kind != "Status" || st.Status != metav1.StatusFailure || int(st.Code) != r.Code {
			t.Errorf("%s: answer is not a Status: %.300s", label, r.Body)
		}
	}
	got, err := cs.CoreV1().Pods(ns).Get(t.Context(), "victim", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("victim is gone: %v", err)
	}
	if got.ResourceVersion != pod.ResourceVersion || got.Labels["a"] != "1" || got.DeletionTimestamp != nil {
		t.Errorf("malformed requests changed the stored pod: rv %s (was %s), labels %v", got.ResourceVersion, pod.ResourceVersion, got.Labels)
	}
	list, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "pods after malformed requests", names(t, list), "victim")
	if r := doRaw(t, "GET", "/readyz", nil); r.Code != 200 {
		t.Errorf("readyz after malformed requests: %d %s", r.Code, r.Body)
	}
}

// TestConflicts covers 409s besides the stale update (crud_test.go): the
// optimistic concurrency of concurrent writers.
func TestConflicts(t *testing.T) {
	ns := newNamespace(t)
	leases := cs.CoordinationV1().Leases(ns)
	lease, err := leases.Create(t.Context(), newLease("contended", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Many writers update from the same resourceVersion: exactly one wins.
	const writers = 8
	errs := make(chan error, writers)
	for i := 0; i < writers; i++ {
		go func(i int) {
			l := lease.DeepCopy()
			l.Spec.HolderIdentity = ptr(fmt.Sprintf("writer-%d", i))
			_, err := leases.Update(t.Context(), l, metav1.UpdateOptions{})
			errs <- err
		}(i)
	}
	wins := 0
	for i := 0; i < writers; i++ {
		err := <-errs
		switch {
		case err == nil:
			wins++
		case !apierrors.IsConflict(err):
			t.Errorf("concurrent update: %v, want success or Conflict", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d concurrent updates from one resourceVersion succeeded, want exactly 1", wins)
	}

	// Concurrent patches carry no resourceVersion: all apply, none is lost.
	done := make(chan error, writers)
	for i := 0; i < writers; i++ {
		go func(i int) {
			_, err := leases.Patch(t.Context(), "contended", types.MergePatchType,
				[]byte(fmt.Sprintf(`{"metadata":{"labels":{"w%d":"x"}}}`, i)), metav1.PatchOptions{})
			done <- err
		}(i)
	}
	for i := 0; i < writers; i++ {
		if err := <-done; err != nil {
			t.Errorf("concurrent patch: %v", err)
		}
	}
	got, err := leases.Get(t.Context(), "contended", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Labels) != writers {
		t.Errorf("labels after %d concurrent patches: %v", writers, got.Labels)
	}
}
