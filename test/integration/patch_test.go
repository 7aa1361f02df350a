package integration

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// twoContainers is a pod whose containers a strategic merge patch merges
// by name.
func twoContainers(name string) *v1.Pod {
	p := newPod(name, map[string]string{"keep": "me"})
	p.Spec.Containers = []v1.Container{
		{Name: "app", Image: "busybox:1.35", Env: []v1.EnvVar{{Name: "A", Value: "1"}}},
		{Name: "sidecar", Image: "nginx:1.24"},
	}
	p.Spec.Tolerations = []v1.Toleration{{Key: "a", Operator: v1.TolerationOpExists}}
	return p
}

func TestStrategicMergePatch(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	if _, err := pods.Create(t.Context(), twoContainers("smp"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Containers merge by name: only sidecar's image changes; app and its
	// env stay.
	out, err := pods.Patch(t.Context(), "smp", types.StrategicMergePatchType,
		[]byte(`{"spec":{"containers":[{"name":"sidecar","image":"nginx:1.25"}]}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Spec.Containers) != 2 || out.Spec.Containers[0].Name != "app" || out.Spec.Containers[0].Image != "busybox:1.35" ||
		len(out.Spec.Containers[0].Env) != 1 || out.Spec.Containers[1].Image != "nginx:1.25" {
		t.Errorf("containers after strategic merge: %+v", out.Spec.Containers)
	}

	// Env merges by name inside a container.
	out, err = pods.Patch(t.Context(), "smp", types.StrategicMergePatchType,
		[]byte(`{"metadata":{"labels":{"added":"1"}},"spec":{"containers":[{"name":"app","image":"busybox:1.36"}]}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.Containers[0].Image != "busybox:1.36" || out.Labels["keep"] != "me" || out.Labels["added"] != "1" {
		t.Errorf("after second patch: image %s labels %v", out.Spec.Containers[0].Image, out.Labels)
	}

	// Tolerations are an atomic list for strategic merge: a patch replaces
	// it, so adding one means sending the old ones too (kube allows only
	// additions; DefaultTolerationSeconds admission appends its two again).
	out, err = pods.Patch(t.Context(), "smp", types.StrategicMergePatchType,
		[]byte(`{"spec":{"tolerations":[{"key":"a","operator":"Exists"},{"key":"b","operator":"Exists"}]}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("adding a toleration: %v", err)
	}
	if len(out.Spec.Tolerations) != 4 || out.Spec.Tolerations[0].Key != "a" || out.Spec.Tolerations[1].Key != "b" {
		t.Errorf("tolerations %+v", out.Spec.Tolerations)
	}
	_, err = pods.Patch(t.Context(), "smp", types.StrategicMergePatchType,
		[]byte(`{"spec":{"tolerations":[{"key":"c","operator":"Exists"}]}}`), metav1.PatchOptions{})
	st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
	checkCauses(t, st, map[string]metav1.CauseType{"spec.tolerations": metav1.CauseTypeForbidden})

	// Labels removed with null; $patch directives work.
	out, err = pods.Patch(t.Context(), "smp", types.StrategicMergePatchType,
		[]byte(`{"metadata":{"labels":{"added":null}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Labels["added"]; ok || out.Labels["keep"] != "me" {
		t.Errorf("labels after null: %v", out.Labels)
	}
	out, err = pods.Patch(t.Context(), "smp", types.StrategicMergePatchType,
		[]byte(`{"metadata":{"labels":{"$patch":"replace","only":"this"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Labels) != 1 || out.Labels["only"] != "this" {
		t.Errorf("labels after $patch replace: %v", out.Labels)
	}

	// Deleting a container by name is a spec change kube forbids: 422.
	_, err = pods.Patch(t.Context(), "smp", types.StrategicMergePatchType,
		[]byte(`{"spec":{"containers":[{"name":"sidecar","$patch":"delete"}]}}`), metav1.PatchOptions{})
	st = checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, `Pod "smp" is invalid: spec.containers: Forbidden: pod updates may not add or remove containers`)
	checkCauses(t, st, map[string]metav1.CauseType{"spec.containers": metav1.CauseTypeForbidden})
}

func TestMergePatchReplacesLists(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	// Without the token volume ServiceAccount admission mounts in every
	// container: the full list below restates the containers as created.
	mp := twoContainers("mp")
	mp.Spec.AutomountServiceAccountToken = ptr(false)
	if _, err := pods.Create(t.Context(), mp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A JSON merge patch replaces the whole containers list: dropping
	// "app" is a forbidden spec change, where the same body as a strategic
	// merge patch was fine.
	body := []byte(`{"spec":{"containers":[{"name":"sidecar","image":"nginx:1.25"}]}}`)
	_, err := pods.Patch(t.Context(), "mp", types.MergePatchType, body, metav1.PatchOptions{})
	st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, `Pod "mp" is invalid: spec.containers: Forbidden: pod updates may not add or remove containers`)
	checkCauses(t, st, map[string]metav1.CauseType{"spec.containers": metav1.CauseTypeForbidden})
	// The same list with both containers and a new image is fine.
	if _, err := pods.Patch(t.Context(), "mp", types.MergePatchType,
		[]byte(`{"spec":{"containers":[{"name":"app","image":"busybox:1.35","env":[{"name":"A","value":"1"}]},{"name":"sidecar","image":"nginx:1.25"}]}}`),
		metav1.PatchOptions{}); err != nil {
		t.Errorf("merge patch with the full list: %v", err)
	}

	// Merge patch of maps merges; null deletes.
	out, err := pods.Patch(t.Context(), "mp", types.MergePatchType, []byte(`{"metadata":{"labels":{"keep":null,"new":"1"},"annotations":{"a":"b"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Labels["keep"]; ok || out.Labels["new"] != "1" || out.Annotations["a"] != "b" {
		t.Errorf("labels %v annotations %v", out.Labels, out.Annotations)
	}
}

func TestJSONPatch(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	if _, err := pods.Create(t.Context(), twoContainers("jp"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := pods.Patch(t.Context(), "jp", types.JSONPatchType, []byte(`[
		{"op":"test","path":"/spec/containers/1/name","value":"sidecar"},
		{"op":"replace","path":"/spec/containers/1/image","value":"nginx:1.26"},
		{"op":"add","path":"/metadata/annotations","value":{"x":"1"}},
		{"op":"copy","from":"/metadata/annotations/x","path":"/metadata/labels/copied"},
		{"op":"remove","path":"/metadata/labels/keep"}
	]`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.Containers[1].Image != "nginx:1.26" || out.Annotations["x"] != "1" || out.Labels["copied"] != "1" {
		t.Errorf("after JSON patch: image %s annotations %v labels %v", out.Spec.Containers[1].Image, out.Annotations, out.Labels)
	}
	if _, ok := out.Labels["keep"]; ok {
		t.Error("removed label still there")
	}

	// A failing test op applies nothing.
	before := out
	_, err = pods.Patch(t.Context(), "jp", types.JSONPatchType, []byte(`[
		{"op":"add","path":"/metadata/labels/partial","value":"1"},
		{"op":"test","path":"/spec/containers/1/name","value":"nope"}
	]`), metav1.PatchOptions{})
	if err == nil {
		t.Fatal("a failing JSON patch test op succeeded")
	}
	// kube's generic 422 (NewGenericServerResponse): no word of the op.
	checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request")
	got, err := pods.Get(t.Context(), "jp", metav1.GetOptions{})
	if err != nil || got.ResourceVersion != before.ResourceVersion || got.Labels["partial"] != "" {
		t.Errorf("failed patch changed the pod: %v", err)
	}
	// A patch that makes the object invalid is 422 at the field.
	_, err = pods.Patch(t.Context(), "jp", types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/labels/bad key","value":"1"}]`), metav1.PatchOptions{})
	st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
	checkCauses(t, st, map[string]metav1.CauseType{"metadata.labels": metav1.CauseTypeFieldValueInvalid})
}

// TestJSONPatchLimits: kube-apiserver's bounds on a JSON patch's work.
// More than 10,000 operations is a 413; "copy" operations that add more
// than 3 MiB between them are a 422 (a 40-op patch doubling an array would
// otherwise grow to gigabytes); neither changes the pod.
func TestJSONPatchLimits(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	pod, err := pods.Create(t.Context(), twoContainers("limits"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ops := func(n int, op string) []byte {
		var b strings.Builder
		b.WriteString(`[{"op":"add","path":"/metadata/annotations","value":{"zz":"x"}}`)
		for range n - 1 {
			b.WriteString("," + op)
		}
		b.WriteString("]")
		return []byte(b.String())
	}
	// 10,000 operations are allowed (an annotation added, then tests).
	pod, err = pods.Patch(t.Context(), "limits", types.JSONPatchType,
		ops(10000, `{"op":"test","path":"/metadata/name","value":"limits"}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("10,000 operations: %v", err)
	}
	_, err = pods.Patch(t.Context(), "limits", types.JSONPatchType,
		ops(10001, `{"op":"test","path":"/metadata/name","value":"limits"}`), metav1.PatchOptions{})
	checkStatusErr(t, err, 413, metav1.StatusReasonRequestEntityTooLarge,
		"Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001")

	// Each copy doubles the annotations: 13 of them add 8 MiB. (Without the
	// limit the patched pod would fail validation instead, with a cause on
	// metadata.annotations; 30 copies would ask for a terabyte.)
	doubling := `[{"op":"add","path":"/metadata/annotations","value":{"zz":"` + strings.Repeat("x", 1024) + `"}},` +
		`{"op":"add","path":"/metadata/labels/l","value":"v"}`
	for i := range 13 {
		doubling += fmt.Sprintf(`,{"op":"copy","from":"/metadata/annotations","path":"/metadata/annotations/d%d"}`, i)
	}
	doubling += "]"
	_, err = pods.Patch(t.Context(), "limits", types.JSONPatchType, []byte(doubling), metav1.PatchOptions{})
	// kube's generic 422, which keeps the library's words out.
	st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request")
	if st.Details != nil && len(st.Details.Causes) > 0 {
		t.Errorf("copy limit: refused by validation, not by the limit: %+v", st.Details.Causes)
	}
	got, err := pods.Get(t.Context(), "limits", metav1.GetOptions{})
	if err != nil || got.Labels["l"] != "" || len(got.Annotations) != 1 {
		t.Errorf("refused patches changed the pod: %v, labels %v, %d annotations", err, got.Labels, len(got.Annotations))
	}
	if got.ResourceVersion != pod.ResourceVersion {
		t.Errorf("resourceVersion %s after refused patches, was %s", got.ResourceVersion, pod.ResourceVersion)
	}
}
