package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The tests of this file check the managedFields every write records
// (kube's field manager, operation Update for everything but apply), the
// fieldManager parameter's validation, and that every read path carries
// them.

// referencePod is the pod of kube's 201-create-pod capture.
const referencePod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"gp1","labels":{"app":"gold"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`

// TestManagedFieldsReferenceCreate creates the pod of kube's capture as
// its client did (User-Agent reference-client/1.0) and compares the
// managedFields: the scheme's defaults are the creator's, what admission
// added (the service account volume, the tolerations) nobody's.
func TestManagedFieldsReferenceCreate(t *testing.T) {
	ns := newNamespace(t)
	var kube v1.Pod
	if err := json.Unmarshal(goldenBody(t, "201-create-pod"), &kube); err != nil {
		t.Fatal(err)
	}
	var pod v1.Pod
	decodeInto(t, doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods", []byte(referencePod), "User-Agent", "reference-client/1.0"), http.StatusCreated, &pod)
	if len(pod.ManagedFields) != 1 || len(kube.ManagedFields) != 1 {
		t.Fatalf("managedFields %s, kube's %s", managersOf(pod.ManagedFields), managersOf(kube.ManagedFields))
	}
	got, want := pod.ManagedFields[0], kube.ManagedFields[0]
	// The field manager stamps the entry just before the creation
	// timestamp is set: the same second, or the one before.
	if got.Time == nil || got.Time.After(pod.CreationTimestamp.Time) || pod.CreationTimestamp.Sub(got.Time.Time) > time.Second {
		t.Errorf("time %v, want the creation time %v", got.Time, pod.CreationTimestamp)
	}
	got.Time, want.Time = nil, nil
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("managedFields entry\n got  %+v %s\n want %+v %s", got, got.FieldsV1.Raw, want, want.FieldsV1.Raw)
	}
	if !bytes.Equal(got.FieldsV1.Raw, want.FieldsV1.Raw) {
		t.Errorf("fieldsV1 bytes\n got  %s\n want %s", got.FieldsV1.Raw, want.FieldsV1.Raw)
	}
	if len(pod.Spec.Tolerations) == 0 {
		t.Errorf("no tolerations: admission did not run")
	}

	// kube's next capture: a PUT of the pod as read, with a new label.
	pod.Labels["v"] = "1"
	var put v1.Pod
	decodeInto(t, doRaw(t, "PUT", "/api/v1/namespaces/"+ns+"/pods/gp1", mustJSON(t, &pod), "User-Agent", "reference-client/1.0"), http.StatusOK, &put)
	checkReferenceEntries(t, "200-put-pod-current-resourceVersion", put.ManagedFields)

	// A dry-run create records the same as a create.
	var dry v1.Pod
	decodeInto(t, doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods?dryRun=All",
		[]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"dry"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`),
		"User-Agent", "reference-client/1.0"), http.StatusCreated, &dry)
	checkReferenceEntries(t, "201-create-pod-dry-run", dry.ManagedFields)

	// A node: its scheme defaults (spec.podCIDRs from spec.podCIDR) are
	// the creator's.
	name := uniqueName(t, "node")
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(t.Context(), name, metav1.DeleteOptions{}) })
	var node v1.Node
	decodeInto(t, doRaw(t, "POST", "/api/v1/nodes",
		[]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"`+name+`","labels":{"kubernetes.io/hostname":"node-1"}},"spec":{"podCIDR":"10.244.0.0/24"}}`),
		"User-Agent", "reference-client/1.0"), http.StatusCreated, &node)
	checkReferenceEntries(t, "201-create-node", node.ManagedFields)
}

// TestManagedFieldsYAML: a pod created as kube's capture did reads back
// as YAML with kube's managedFields block (yaml-get-pod), time aside.
func TestManagedFieldsYAML(t *testing.T) {
	ns := newNamespace(t)
	body := strings.ReplaceAll(referencePod, `"gp1"`, `"gk1"`)
	if r := doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods", []byte(body), "User-Agent", "reference-client/1.0"); r.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Code, r.Body)
	}
	r := doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods/gk1", nil, "Accept", "application/yaml")
	if r.Code != http.StatusOK {
		t.Fatalf("GET: %d %s", r.Code, r.Body)
	}
	block := func(doc []byte) string {
		text := string(doc)
		start := strings.Index(text, "  managedFields:\n")
		end := strings.Index(text, "  name: gk1\n")
		if start < 0 || end < start {
			t.Fatalf("no managedFields block in\n%s", doc)
		}
		return timeRE.ReplaceAllString(text[start:end], `time: "TIME"`)
	}
	if got, want := block(r.Body), block(goldenBody(t, "yaml-get-pod")); got != want {
		t.Errorf("managedFields as YAML\n got\n%s\n want\n%s", got, want)
	}
}

var timeRE = regexp.MustCompile(`time: "[^"]*"`)

// checkReferenceEntries compares entries, times aside, with the
// managedFields of kube's answer golden.
func checkReferenceEntries(t *testing.T, golden string, entries []metav1.ManagedFieldsEntry) {
	t.Helper()
	var kube metav1.PartialObjectMetadata
	if err := json.Unmarshal(goldenBody(t, golden), &kube); err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(kube.ManagedFields) {
		t.Fatalf("%s: managedFields %s, kube's %s", golden, managersOf(entries), managersOf(kube.ManagedFields))
	}
	for i := range entries {
		got, want := entries[i], kube.ManagedFields[i]
		if got.Time == nil {
			t.Errorf("%s: entry %d has no time", golden, i)
		}
		got.Time, want.Time = nil, nil
		if !apiequality.Semantic.DeepEqual(got, want) || !bytes.Equal(got.FieldsV1.Raw, want.FieldsV1.Raw) {
			t.Errorf("%s: entry %d\n got  %+v %s\n want %+v %s", golden, i, got, got.FieldsV1.Raw, want, want.FieldsV1.Raw)
		}
	}
}

// TestManagedFieldsEveryWrite: create, update and the three patch types
// record their manager with operation Update: the fieldManager parameter,
// else the User-Agent's product, else "unknown".
func TestManagedFieldsEveryWrite(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	create := func(t *testing.T, name, query string, headers ...string) v1.Pod {
		t.Helper()
		var pod v1.Pod
		body := mustJSON(t, newPod(name, map[string]string{"app": "web"}))
		decodeInto(t, doRaw(t, "POST", pods+query, body, headers...), http.StatusCreated, &pod)
		return pod
	}
	for _, tc := range []struct {
		name, query, userAgent, manager string
	}{
		{"fieldManager", "?fieldManager=creator", "kubectl/v1.32.0 (linux/amd64) kubernetes/abcdef", "creator"},
		{"kubectl", "", "kubectl/v1.32.0 (linux/amd64) kubernetes/abcdef", "kubectl"},
		{"no slash", "", "my controller", "my controller"},
		{"non-printable", "", "a\tb/1.0", "ab"},
		{"empty", "", "", "unknown"},
		{"client-go", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniqueName(t, "p")
			var pod v1.Pod
			if tc.name == "client-go" {
				// client-go's default User-Agent starts with the binary's
				// name (integration.test).
				out, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod(name, map[string]string{"app": "web"}), metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				pod = *out
				tc.manager, _, _ = strings.Cut(rest.DefaultKubernetesUserAgent(), "/")
			} else {
				pod = create(t, name, tc.query, "User-Agent", tc.userAgent)
			}
			if len(pod.ManagedFields) != 1 {
				t.Fatalf("managedFields %s, want one entry", managersOf(pod.ManagedFields))
			}
			e := mustEntry(t, pod.ManagedFields, tc.manager, metav1.ManagedFieldsOperationUpdate, "", "v1")
			if e.Time == nil || !owns(t, e, labelApp...) || !owns(t, e, "f:spec", "f:restartPolicy") || owns(t, e, "f:spec", "f:tolerations") {
				t.Errorf("%s's entry: time %v fields %s", tc.manager, e.Time, e.FieldsV1.Raw)
			}
		})
	}

	// Each kind of write adds its manager's entry with what it changed.
	pod := create(t, "writes", "?fieldManager=creator")
	pod.Labels["put"] = "1"
	var out v1.Pod
	decodeInto(t, doRaw(t, "PUT", pods+"/writes?fieldManager=putter", mustJSON(t, &pod)), http.StatusOK, &out)
	for _, p := range []struct{ manager, contentType, patch, label string }{
		{"json-patcher", "application/json-patch+json", `[{"op":"add","path":"/metadata/labels/json","value":"1"}]`, "json"},
		{"merge-patcher", "application/merge-patch+json", `{"metadata":{"labels":{"merge":"1"}}}`, "merge"},
		{"smp-patcher", "application/strategic-merge-patch+json", `{"metadata":{"labels":{"smp":"1"}}}`, "smp"},
	} {
		decodeInto(t, doRaw(t, "PATCH", pods+"/writes?fieldManager="+p.manager, []byte(p.patch), "Content-Type", p.contentType), http.StatusOK, &out)
		e := mustEntry(t, out.ManagedFields, p.manager, metav1.ManagedFieldsOperationUpdate, "", "v1")
		if string(e.FieldsV1.Raw) != `{"f:metadata":{"f:labels":{"f:`+p.label+`":{}}}}` {
			t.Errorf("%s's fields %s", p.manager, e.FieldsV1.Raw)
		}
	}
	// kube's field manager orders the entries by operation, time (in
	// seconds) and name.
	want := []string{"creator/Update/", "json-patcher/Update/", "merge-patcher/Update/", "putter/Update/", "smp-patcher/Update/"}
	if got := sorted(managersOf(out.ManagedFields)...); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("managers %v, want %v", got, want)
	}
	if e := mustEntry(t, out.ManagedFields, "putter", metav1.ManagedFieldsOperationUpdate, "", "v1"); string(e.FieldsV1.Raw) != `{"f:metadata":{"f:labels":{"f:put":{}}}}` {
		t.Errorf("putter's fields %s", e.FieldsV1.Raw)
	}

	// A status write is tracked apart, with its subresource.
	out.Status.Message = "hello"
	decodeInto(t, doRaw(t, "PUT", pods+"/writes/status?fieldManager=kubelet", mustJSON(t, &out)), http.StatusOK, &out)
	e := mustEntry(t, out.ManagedFields, "kubelet", metav1.ManagedFieldsOperationUpdate, "status", "v1")
	if string(e.FieldsV1.Raw) != `{"f:status":{"f:message":{}}}` {
		t.Errorf("kubelet's status fields %s", e.FieldsV1.Raw)
	}
	// A write by a manager that already has an entry adds to it.
	decodeInto(t, doRaw(t, "PATCH", pods+"/writes?fieldManager=putter", []byte(`{"metadata":{"labels":{"put2":"1"}}}`), "Content-Type", "application/merge-patch+json"), http.StatusOK, &out)
	e = mustEntry(t, out.ManagedFields, "putter", metav1.ManagedFieldsOperationUpdate, "", "v1")
	if string(e.FieldsV1.Raw) != `{"f:metadata":{"f:labels":{"f:put":{},"f:put2":{}}}}` || len(out.ManagedFields) != 6 {
		t.Errorf("putter's fields %s, managers %s", e.FieldsV1.Raw, managersOf(out.ManagedFields))
	}
}

// TestManagedFieldsFieldManagerValidation: the fieldManager parameter is
// validated as kube's ValidateXxxOptions: a 422 on the options kind.
func TestManagedFieldsFieldManagerValidation(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod("v", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("m", 129)
	tooLong := "fieldManager: Too long: may not be more than 128 bytes"
	podJSON := string(mustJSON(t, newPod("v", nil)))
	for _, tc := range []struct {
		name, method, path, contentType, body, kind, message string
		causes                                               []metav1.StatusCause
	}{
		{"create too long", "POST", pods + "?fieldManager=" + long, "application/json", podJSON, "CreateOptions", tooLong,
			[]metav1.StatusCause{{Type: metav1.CauseTypeTooLong, Message: "Too long: may not be more than 128 bytes", Field: "fieldManager"}}},
		{"update too long", "PUT", pods + "/v?fieldManager=" + long, "application/json", podJSON, "UpdateOptions", tooLong,
			[]metav1.StatusCause{{Type: metav1.CauseTypeTooLong, Message: "Too long: may not be more than 128 bytes", Field: "fieldManager"}}},
		{"patch too long", "PATCH", pods + "/v?fieldManager=" + long, "application/merge-patch+json", `{}`, "PatchOptions", tooLong,
			[]metav1.StatusCause{{Type: metav1.CauseTypeTooLong, Message: "Too long: may not be more than 128 bytes", Field: "fieldManager"}}},
		{"apply too long", "PATCH", pods + "/v?fieldManager=" + long, applyPatchType, `{}`, "PatchOptions", tooLong,
			[]metav1.StatusCause{{Type: metav1.CauseTypeTooLong, Message: "Too long: may not be more than 128 bytes", Field: "fieldManager"}}},
		{"apply without fieldManager", "PATCH", pods + "/v", applyPatchType, `{}`, "PatchOptions",
			"fieldManager: Required value: is required for apply patch",
			[]metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value: is required for apply patch", Field: "fieldManager"}}},
		{"force on a merge patch", "PATCH", pods + "/v?force=true", "application/merge-patch+json", `{}`, "PatchOptions",
			"force: Forbidden: may not be specified for non-apply patch",
			[]metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Message: "Forbidden: may not be specified for non-apply patch", Field: "force"}}},
		{"force=false on a strategic patch", "PATCH", pods + "/v?force=false", "application/strategic-merge-patch+json", `{}`, "PatchOptions",
			"force: Forbidden: may not be specified for non-apply patch",
			[]metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Message: "Forbidden: may not be specified for non-apply patch", Field: "force"}}},
		{"fieldValidation on a create", "POST", pods + "?fieldValidation=Loud", "application/json", podJSON, "CreateOptions",
			`fieldValidation: Unsupported value: "Loud": supported values: "", "Ignore", "Strict", "Warn"`,
			[]metav1.StatusCause{{Type: metav1.CauseTypeFieldValueNotSupported, Message: `Unsupported value: "Loud": supported values: "", "Ignore", "Strict", "Warn"`, Field: "fieldValidation"}}},
		{"fieldValidation on an apply", "PATCH", pods + "/v?fieldManager=m&fieldValidation=strict", applyPatchType, `{}`, "PatchOptions",
			`fieldValidation: Unsupported value: "strict": supported values: "", "Ignore", "Strict", "Warn"`,
			[]metav1.StatusCause{{Type: metav1.CauseTypeFieldValueNotSupported, Message: `Unsupported value: "strict": supported values: "", "Ignore", "Strict", "Warn"`, Field: "fieldValidation"}}},
		{"fieldManager and fieldValidation on an update", "PUT", pods + "/v?fieldManager=" + long + "&fieldValidation=Loud", "application/json", podJSON, "UpdateOptions",
			`[` + tooLong + `, fieldValidation: Unsupported value: "Loud": supported values: "", "Ignore", "Strict", "Warn"]`,
			[]metav1.StatusCause{
				{Type: metav1.CauseTypeTooLong, Message: "Too long: may not be more than 128 bytes", Field: "fieldManager"},
				{Type: metav1.CauseTypeFieldValueNotSupported, Message: `Unsupported value: "Loud": supported values: "", "Ignore", "Strict", "Warn"`, Field: "fieldValidation"},
			}},
		{"non-printable", "POST", pods + "?fieldManager=" + url.QueryEscape("a\x01b\nc"), "application/json", podJSON, "CreateOptions",
			`[fieldManager: Invalid value: "a\x01b\nc": invalid character U+0001 (at position 1), fieldManager: Invalid value: "a\x01b\nc": invalid character U+000A (at position 3)]`,
			[]metav1.StatusCause{
				{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "a\x01b\nc": invalid character U+0001 (at position 1)`, Field: "fieldManager"},
				{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "a\x01b\nc": invalid character U+000A (at position 3)`, Field: "fieldManager"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := doRaw(t, tc.method, tc.path, []byte(tc.body), "Content-Type", tc.contentType)
			var st metav1.Status
			decodeInto(t, r, http.StatusUnprocessableEntity, &st)
			want := metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status:   metav1.StatusFailure,
				Message:  tc.kind + `.meta.k8s.io "" is invalid: ` + tc.message,
				Reason:   metav1.StatusReasonInvalid,
				Details:  &metav1.StatusDetails{Group: "meta.k8s.io", Kind: tc.kind, Causes: tc.causes},
				Code:     http.StatusUnprocessableEntity,
			}
			if !apiequality.Semantic.DeepEqual(st, want) {
				t.Errorf("\n got  %+v %+v\n want %+v %+v", st, st.Details, want, want.Details)
			}
		})
	}
	// Creates that store nothing validate it too (kube's createHandler).
	for _, c := range []struct{ path, body string }{
		{"/api/v1/namespaces/" + ns + "/pods/v/binding", `{"apiVersion":"v1","kind":"Binding","metadata":{"name":"v"},"target":{"kind":"Node","name":"n1"}}`},
		{"/api/v1/namespaces/" + ns + "/pods/v/eviction", string(evictionBody(ns, "v"))},
		{"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"get","resource":"pods"}}}`},
	} {
		r := doRaw(t, "POST", c.path+"?fieldManager="+long, []byte(c.body))
		if st := statusMap(t, r.Body); r.Code != http.StatusUnprocessableEntity || st["message"] != `CreateOptions.meta.k8s.io "" is invalid: `+tooLong {
			t.Errorf("POST %s: %d %s", c.path, r.Code, r.Body)
		}
	}
	if _, err := cs.CoreV1().Pods(ns).Get(t.Context(), "v", metav1.GetOptions{}); err != nil {
		t.Errorf("the pod after the refused eviction: %v", err)
	}
	// 128 bytes is fine.
	out, err := cs.CoreV1().Pods(ns).Patch(t.Context(), "v", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{FieldManager: long[:128]})
	if err != nil {
		t.Fatal(err)
	}
	mustEntry(t, out.ManagedFields, long[:128], metav1.ManagedFieldsOperationUpdate, "", "v1")
}

// TestManagedFieldsClientSent: what a client sends in managedFields.
func TestManagedFieldsClientSent(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	ctx := t.Context()

	t.Run("empty list stops tracking", func(t *testing.T) {
		// kube: a non-nil empty list resets managedFields; the field
		// manager then tracks nothing (it never starts tracking an
		// existing object whose managedFields are empty), so the object
		// keeps none, through later writes too (kube's
		// TestClearManagedFieldsWithUpdateEmptyList).
		if _, err := pods.Apply(ctx, applyPod("clear", ns, map[string]string{"app": "web"}), metav1.ApplyOptions{FieldManager: "applier"}); err != nil {
			t.Fatal(err)
		}
		path := "/api/v1/namespaces/" + ns + "/pods/clear"
		var pod v1.Pod
		decodeInto(t, doRaw(t, "GET", path, nil), http.StatusOK, &pod)
		raw := map[string]any{}
		if err := json.Unmarshal(mustJSON(t, &pod), &raw); err != nil {
			t.Fatal(err)
		}
		md := raw["metadata"].(map[string]any)
		md["managedFields"] = []any{}
		md["labels"].(map[string]any)["more"] = "1"
		var cleared v1.Pod
		decodeInto(t, doRaw(t, "PUT", path+"?fieldManager=clearer", mustJSON(t, raw)), http.StatusOK, &cleared)
		if cleared.ManagedFields != nil || cleared.Labels["more"] != "1" {
			t.Errorf("after the PUT with managedFields []: managedFields %s labels %v", managersOf(cleared.ManagedFields), cleared.Labels)
		}
		out, err := pods.Patch(ctx, "clear", types.MergePatchType, []byte(`{"metadata":{"labels":{"again":"1"}}}`), metav1.PatchOptions{FieldManager: "later"})
		if err != nil || out.ManagedFields != nil {
			t.Errorf("a later patch: %v, managedFields %s", err, managersOf(out.ManagedFields))
		}
		// An apply starts tracking again.
		out, err = pods.Apply(ctx, podLabelsApply("clear", ns, map[string]string{"app": "web"}), metav1.ApplyOptions{FieldManager: "applier"})
		if err != nil {
			t.Fatal(err)
		}
		mustEntry(t, out.ManagedFields, "applier", metav1.ManagedFieldsOperationApply, "", "v1")
	})

	t.Run("a list of one empty entry", func(t *testing.T) {
		// kube's documented way to strip managedFields with a patch.
		if _, err := pods.Create(ctx, newPod("strip", map[string]string{"app": "web"}), metav1.CreateOptions{FieldManager: "creator"}); err != nil {
			t.Fatal(err)
		}
		out, err := pods.Patch(ctx, "strip", types.JSONPatchType, []byte(`[{"op":"replace","path":"/metadata/managedFields","value":[{}]}]`), metav1.PatchOptions{FieldManager: "stripper"})
		if err != nil || out.ManagedFields != nil {
			t.Errorf("after stripping: %v, managedFields %s", err, managersOf(out.ManagedFields))
		}
	})

	t.Run("invalid entries are ignored", func(t *testing.T) {
		created, err := pods.Create(ctx, newPod("invalid", map[string]string{"app": "web"}), metav1.CreateOptions{FieldManager: "creator"})
		if err != nil {
			t.Fatal(err)
		}
		// An unknown operation does not decode: the live managedFields
		// stay, and the writer is added to them.
		out, err := pods.Patch(ctx, "invalid", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"x":"1"},"managedFields":[{"manager":"evil","operation":"Bogus","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]}}`),
			metav1.PatchOptions{FieldManager: "patcher"})
		if err != nil {
			t.Fatal(err)
		}
		if got := managersOf(out.ManagedFields); strings.Join(got, " ") != "creator/Update/ patcher/Update/" {
			t.Errorf("managers %v, want creator's and patcher's", got)
		}
		if !apiequality.Semantic.DeepEqual(out.ManagedFields[0], created.ManagedFields[0]) {
			t.Errorf("creator's entry changed:\n %+v\n %+v", out.ManagedFields[0], created.ManagedFields[0])
		}
		// An unsupported fieldsType, on create: the field manager starts
		// from nothing.
		bad := newPod("invalid2", nil)
		bad.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "evil", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV2"}}
		out, err = pods.Create(ctx, bad, metav1.CreateOptions{FieldManager: "creator"})
		if err != nil {
			t.Fatal(err)
		}
		if got := managersOf(out.ManagedFields); strings.Join(got, " ") != "creator/Update/" {
			t.Errorf("managers %v, want creator's only", got)
		}
	})

	t.Run("valid entries are taken", func(t *testing.T) {
		if _, err := pods.Create(ctx, newPod("valid", map[string]string{"app": "web"}), metav1.CreateOptions{FieldManager: "creator"}); err != nil {
			t.Fatal(err)
		}
		out, err := pods.Patch(ctx, "valid", types.MergePatchType,
			[]byte(`{"metadata":{"managedFields":[{"manager":"someone","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:app":{}}}}}]}}`),
			metav1.PatchOptions{FieldManager: "patcher"})
		if err != nil {
			t.Fatal(err)
		}
		// The patch changed nothing else: patcher owns nothing, has no
		// entry.
		if got := managersOf(out.ManagedFields); strings.Join(got, " ") != "someone/Apply/" {
			t.Errorf("managers %v, want someone's only", got)
		}
		_, err = pods.Apply(ctx, podLabelsApply("valid", ns, map[string]string{"app": "other"}), metav1.ApplyOptions{FieldManager: "x"})
		checkStatusErr(t, err, http.StatusConflict, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "someone": .metadata.labels.app`)
	})

	t.Run("a status write ignores them", func(t *testing.T) {
		// kube's field manager of a subresource takes the live
		// managedFields, whatever the request says.
		created, err := pods.Create(ctx, newPod("status", map[string]string{"app": "web"}), metav1.CreateOptions{FieldManager: "creator"})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Message = "hi"
		raw := map[string]any{}
		if err := json.Unmarshal(mustJSON(t, created), &raw); err != nil {
			t.Fatal(err)
		}
		raw["metadata"].(map[string]any)["managedFields"] = []any{}
		var out v1.Pod
		decodeInto(t, doRaw(t, "PUT", "/api/v1/namespaces/"+ns+"/pods/status/status?fieldManager=kubelet", mustJSON(t, raw)), http.StatusOK, &out)
		if got := sorted(managersOf(out.ManagedFields)...); strings.Join(got, " ") != "creator/Update/ kubelet/Update/status" {
			t.Errorf("managers %v, want creator's and kubelet's", got)
		}
	})

	t.Run("at most 10 update managers", func(t *testing.T) {
		if _, err := pods.Create(ctx, newPod("cap", map[string]string{"app": "web"}), metav1.CreateOptions{FieldManager: "mgr-00"}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Apply(ctx, podLabelsApply("cap", ns, map[string]string{"applied": "1"}), metav1.ApplyOptions{FieldManager: "applier"}); err != nil {
			t.Fatal(err)
		}
		var out *v1.Pod
		for i := 1; i <= 10; i++ {
			var err error
			out, err = pods.Patch(ctx, "cap", types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{"l%02d":"1"}}}`, i)),
				metav1.PatchOptions{FieldManager: fmt.Sprintf("mgr-%02d", i)})
			if err != nil {
				t.Fatal(err)
			}
		}
		// 11 update managers: the two oldest (mgr-00, mgr-01) are merged
		// into ancient-changes; apply entries do not count.
		updates := 0
		for _, e := range out.ManagedFields {
			if e.Operation == metav1.ManagedFieldsOperationUpdate {
				updates++
			}
		}
		if updates != 10 || managedEntry(out.ManagedFields, "mgr-00", metav1.ManagedFieldsOperationUpdate, "") != nil ||
			managedEntry(out.ManagedFields, "mgr-01", metav1.ManagedFieldsOperationUpdate, "") != nil {
			t.Fatalf("managers %v, want 10 update entries without mgr-00 and mgr-01", managersOf(out.ManagedFields))
		}
		ancient := mustEntry(t, out.ManagedFields, "ancient-changes", metav1.ManagedFieldsOperationUpdate, "", "v1")
		if !owns(t, ancient, labelApp...) || !owns(t, ancient, labelPath("l01")...) || !owns(t, ancient, "f:spec", "f:containers") || owns(t, ancient, labelPath("l02")...) {
			t.Errorf("ancient-changes' fields %s", ancient.FieldsV1.Raw)
		}
		mustEntry(t, out.ManagedFields, "applier", metav1.ManagedFieldsOperationApply, "", "v1")
		mustEntry(t, out.ManagedFields, "mgr-10", metav1.ManagedFieldsOperationUpdate, "", "v1")
	})
}

// podLabelsApply is a pod's applied configuration of labels only.
func podLabelsApply(name, ns string, labels map[string]string) *corev1ac.PodApplyConfiguration {
	return corev1ac.Pod(name, ns).WithLabels(labels)
}

// TestManagedFieldsReadPaths: GET, LIST (from the watch cache, JSON and
// protobuf), WATCH, PartialObjectMetadata and Tables all carry the
// managedFields the write recorded.
func TestManagedFieldsReadPaths(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	pbCfg := rest.CopyConfig(cfg)
	pbCfg.ContentType = protobufType
	pb, err := kubernetes.NewForConfig(pbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).Apply(ctx, applyPod("r", ns, map[string]string{"app": "web"}), metav1.ApplyOptions{FieldManager: "applier"}); err != nil {
		t.Fatal(err)
	}
	created, err := cs.CoreV1().Pods(ns).Patch(ctx, "r", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"front"}}}`), metav1.PatchOptions{FieldManager: "patcher"})
	if err != nil {
		t.Fatal(err)
	}
	want := created.ManagedFields
	if len(want) != 2 {
		t.Fatalf("managedFields %s", managersOf(want))
	}
	check := func(t *testing.T, what string, got []metav1.ManagedFieldsEntry) {
		t.Helper()
		if !apiequality.Semantic.DeepEqual(got, want) {
			t.Errorf("%s: managedFields\n got  %v\n want %v", what, got, want)
		}
	}
	path := "/api/v1/namespaces/" + ns + "/pods"

	t.Run("GET", func(t *testing.T) {
		var pod v1.Pod
		decodeInto(t, doRaw(t, "GET", path+"/r", nil), http.StatusOK, &pod)
		check(t, "JSON", pod.ManagedFields)
		out, err := pb.CoreV1().Pods(ns).Get(ctx, "r", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, "protobuf", out.ManagedFields)
		out, err = pb.CoreV1().Pods(ns).Get(ctx, "r", metav1.GetOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		check(t, "protobuf, resourceVersion=0", out.ManagedFields)
	})

	t.Run("LIST", func(t *testing.T) {
		for _, query := range []string{"", "?resourceVersion=0", "?limit=1", "?labelSelector=app%3Dweb"} {
			var list v1.PodList
			decodeInto(t, doRaw(t, "GET", path+query, nil), http.StatusOK, &list)
			if len(list.Items) != 1 {
				t.Fatalf("list%s: %d items", query, len(list.Items))
			}
			check(t, "JSON list"+query, list.Items[0].ManagedFields)
		}
		for _, opts := range []metav1.ListOptions{{}, {ResourceVersion: "0"}, {Limit: 1}, {LabelSelector: "app=web"}} {
			list, err := pb.CoreV1().Pods(ns).List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 1 {
				t.Fatalf("protobuf list %+v: %d items", opts, len(list.Items))
			}
			check(t, fmt.Sprintf("protobuf list %+v", opts), list.Items[0].ManagedFields)
		}
	})

	t.Run("WATCH", func(t *testing.T) {
		for _, client := range []struct {
			name string
			cs   kubernetes.Interface
		}{{"JSON", cs}, {"protobuf", pb}} {
			w, err := client.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				t.Fatal(err)
			}
			ev := nextEvent(t, w)
			w.Stop()
			if ev.Type != watch.Added {
				t.Fatalf("%s: first event %s", client.name, ev.Type)
			}
			check(t, client.name+" initial ADDED", ev.Object.(*v1.Pod).ManagedFields)
		}
		// A live MODIFIED event carries the new entry.
		w, err := pb.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "r", types.MergePatchType, []byte(`{"metadata":{"labels":{"watched":"1"}}}`), metav1.PatchOptions{FieldManager: "watcher"}); err != nil {
			t.Fatal(err)
		}
		ev := nextEvent(t, w)
		pod := ev.Object.(*v1.Pod)
		if ev.Type != watch.Modified || len(pod.ManagedFields) != 3 || pod.ManagedFields[2].Manager != "watcher" {
			t.Errorf("event %s with managedFields %s", ev.Type, managersOf(pod.ManagedFields))
		}
		want = pod.ManagedFields
	})

	t.Run("protobuf apply", func(t *testing.T) {
		// An apply from a protobuf client: the patch is YAML, the answer
		// protobuf.
		out, err := pb.CoreV1().Pods(ns).Apply(ctx, corev1ac.Pod("r", ns).WithLabels(map[string]string{"pb": "1"}), metav1.ApplyOptions{FieldManager: "pb-applier"})
		if err != nil {
			t.Fatal(err)
		}
		e := mustEntry(t, out.ManagedFields, "pb-applier", metav1.ManagedFieldsOperationApply, "", "v1")
		if string(e.FieldsV1.Raw) != `{"f:metadata":{"f:labels":{"f:pb":{}}}}` || len(out.ManagedFields) != 4 {
			t.Errorf("pb-applier's fields %s, managers %s", e.FieldsV1.Raw, managersOf(out.ManagedFields))
		}
		want = out.ManagedFields
	})

	t.Run("PartialObjectMetadata", func(t *testing.T) {
		var m metav1.PartialObjectMetadata
		decodeInto(t, doRaw(t, "GET", path+"/r", nil, "Accept", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"), http.StatusOK, &m)
		check(t, "PartialObjectMetadata", m.ManagedFields)
		var list metav1.PartialObjectMetadataList
		decodeInto(t, doRaw(t, "GET", path, nil, "Accept", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"), http.StatusOK, &list)
		if len(list.Items) != 1 {
			t.Fatalf("%d items", len(list.Items))
		}
		check(t, "PartialObjectMetadataList", list.Items[0].ManagedFields)
	})

	t.Run("Table", func(t *testing.T) {
		for _, include := range []string{"Object", "Metadata"} {
			for _, p := range []string{path, path + "/r"} {
				var table struct {
					Rows []struct {
						Object struct {
							Kind     string            `json:"kind"`
							Metadata metav1.ObjectMeta `json:"metadata"`
						} `json:"object"`
					} `json:"rows"`
				}
				decodeInto(t, doRaw(t, "GET", p+"?includeObject="+include, nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"), http.StatusOK, &table)
				if len(table.Rows) != 1 {
					t.Fatalf("%s includeObject=%s: %d rows", p, include, len(table.Rows))
				}
				check(t, p+" includeObject="+include+" ("+table.Rows[0].Object.Kind+")", table.Rows[0].Object.Metadata.ManagedFields)
			}
		}
	})
}

// TestManagedFieldsEvictionBudget: an eviction takes its disruption from
// the budget as kube-apiserver's loopback client does (UpdateStatus): the
// fields it changes are recorded for "kube-apiserver" on the status
// subresource, as in kube's capture (evict-B4).
func TestManagedFieldsEvictionBudget(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	golden := func(name, manager string) metav1.ManagedFieldsEntry {
		t.Helper()
		var pdb policyv1.PodDisruptionBudget
		if err := json.Unmarshal(goldenBody(t, name), &pdb); err != nil {
			t.Fatal(err)
		}
		for _, e := range pdb.ManagedFields {
			if e.Manager == manager {
				e.Time = nil
				return e
			}
		}
		t.Fatalf("%s has no entry of %s", name, manager)
		return metav1.ManagedFieldsEntry{}
	}
	checkEntry := func(t *testing.T, entries []metav1.ManagedFieldsEntry, want metav1.ManagedFieldsEntry) {
		t.Helper()
		e := managedEntry(entries, want.Manager, want.Operation, want.Subresource)
		if e == nil {
			t.Fatalf("no entry of %s in %s", want.Manager, managersOf(entries))
		}
		got := *e
		got.Time = nil
		if !apiequality.Semantic.DeepEqual(got, want) {
			t.Errorf("entry of %s\n got  %+v %s\n want %+v %s", want.Manager, got, got.FieldsV1.Raw, want, want.FieldsV1.Raw)
		}
	}

	createRunningPods(t, cs, ns, true, "web-0", "web-1", "web-2")
	pdbPath := "/apis/policy/v1/namespaces/" + ns + "/poddisruptionbudgets"
	var pdb policyv1.PodDisruptionBudget
	decodeInto(t, doRaw(t, "POST", pdbPath, []byte(`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"web-pdb"},"spec":{"minAvailable":2,"selector":{"matchLabels":{"app":"web"}}}}`),
		"User-Agent", "reference-client/1.0"), http.StatusCreated, &pdb)
	checkEntry(t, pdb.ManagedFields, golden("evict-A0-201-create-pdb", "reference-client"))

	// The disruption controller's status (as kube's capture's, written
	// long enough ago that the eviction's condition change moves its
	// transition time).
	pdb.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3,
		Conditions: []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, ObservedGeneration: 1,
			LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour)), Reason: policyv1.SufficientPodsReason}},
	}
	observed, err := cs.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, &pdb, metav1.UpdateOptions{FieldManager: "mini-kcm"})
	if err != nil {
		t.Fatal(err)
	}
	checkEntry(t, observed.ManagedFields, golden("evict-B0-200-get-pdb-observed", "mini-kcm"))

	if r := doRaw(t, "POST", evictionPath(ns, "web-0"), evictionBody(ns, "web-0")); r.Code != http.StatusCreated {
		t.Fatalf("eviction: %d %s", r.Code, r.Body)
	}
	after, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web-pdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Status.DisruptionsAllowed != 0 || len(after.Status.DisruptedPods) != 1 {
		t.Fatalf("budget after the eviction: %+v", after.Status)
	}
	checkEntry(t, after.ManagedFields, golden("evict-B4-200-get-pdb-after-failed-precondition", "kube-apiserver"))
	if got := sorted(managersOf(after.ManagedFields)...); strings.Join(got, " ") != "kube-apiserver/Update/status mini-kcm/Update/status reference-client/Update/" {
		t.Errorf("managers %v", got)
	}
}

// TestManagedFieldsSchemeDefaults: the defaults kube's scheme applies
// when it decodes a request are the writer's (the field manager runs
// after decoding), unlike what strategies and admission add later.
func TestManagedFieldsSchemeDefaults(t *testing.T) {
	t.Run("Namespace", func(t *testing.T) {
		// SetDefaults_Namespace's label is the creator's (kube:
		// f:kubernetes.io/metadata.name under the creator, as
		// kubectl get ns -o yaml --show-managed-fields shows); the
		// strategy's finalizer and the status are nobody's.
		name := uniqueName(t, "ns")
		t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(t.Context(), name, metav1.DeleteOptions{}) })
		var ns v1.Namespace
		decodeInto(t, doRaw(t, "POST", "/api/v1/namespaces", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+name+`"}}`),
			"User-Agent", "kubectl-create/v1.32.0 (linux/amd64) kubernetes/abcdef"), http.StatusCreated, &ns)
		e := mustEntry(t, ns.ManagedFields, "kubectl-create", metav1.ManagedFieldsOperationUpdate, "", "v1")
		if got := string(e.FieldsV1.Raw); got != `{"f:metadata":{"f:labels":{".":{},"f:kubernetes.io/metadata.name":{}}}}` {
			t.Errorf("kubectl-create's fields %s", got)
		}
		if len(ns.Spec.Finalizers) != 1 || ns.Status.Phase != v1.NamespaceActive {
			t.Errorf("namespace %+v %+v", ns.Spec, ns.Status)
		}
	})
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		t.Run(kind, func(t *testing.T) {
			name := uniqueName(t, "wh")
			path := "/apis/admissionregistration.k8s.io/v1/" + strings.ToLower(kind) + "s"
			t.Cleanup(func() { doRaw(t, "DELETE", path+"/"+name, nil) })
			// No rules: the webhook is never called.
			body := `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"` + kind + `","metadata":{"name":"` + name + `"},"webhooks":[{"name":"x.example.com",` +
				`"clientConfig":{"url":"https://127.0.0.1:1/hook"},"sideEffects":"None","admissionReviewVersions":["v1"]}]}`
			var obj metav1.PartialObjectMetadata
			decodeInto(t, doRaw(t, "POST", path+"?fieldManager=creator", []byte(body)), http.StatusCreated, &obj)
			e := mustEntry(t, obj.ManagedFields, "creator", metav1.ManagedFieldsOperationUpdate, "", "admissionregistration.k8s.io/v1")
			hook := []string{"f:webhooks", `k:{"name":"x.example.com"}`}
			defaults := []string{"f:failurePolicy", "f:matchPolicy", "f:namespaceSelector", "f:objectSelector", "f:timeoutSeconds"}
			if kind == "MutatingWebhookConfiguration" {
				defaults = append(defaults, "f:reinvocationPolicy")
			}
			for _, f := range defaults {
				if !owns(t, e, append(hook, f)...) {
					t.Errorf("creator does not own the defaulted %s: %s", f, e.FieldsV1.Raw)
				}
			}
			// A re-apply of the same configuration by its applier changes
			// nothing.
			decodeInto(t, applyRaw(t, path+"/"+name+"?fieldManager=creator", body), http.StatusOK, &obj)
			rv := obj.ResourceVersion
			decodeInto(t, applyRaw(t, path+"/"+name+"?fieldManager=creator", body), http.StatusOK, &obj)
			if obj.ResourceVersion != rv {
				t.Errorf("re-apply changed the resourceVersion %s to %s", rv, obj.ResourceVersion)
			}
		})
	}
}
