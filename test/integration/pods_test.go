package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// TestPodDefaults compares a created pod with the one kube created from
// the same request (201-create-pod.json): defaults, the tolerations
// DefaultTolerationSeconds adds, and what ServiceAccount admission adds
// (serviceAccountName, the kube-api-access volume and its mounts), the
// volume's random suffix set aside. The JSON keys of the spec and of the
// container come in kube's order.
func TestPodDefaults(t *testing.T) {
	ns := newNamespace(t)
	waitDefaultServiceAccount(t, ns)
	r := doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods", []byte(goldPodBody))
	if r.Code != 201 {
		t.Fatalf("%d %s", r.Code, r.Body)
	}
	if m := apiAccessName.FindAll(r.Body, -1); len(m) != 2 || string(m[0]) != string(m[1]) {
		t.Errorf("want one kube-api-access-xxxxx volume and its mount, got %q in %s", m, r.Body)
	}
	gotBody, wantBody := normalizeAPIAccess(r.Body), normalizeAPIAccess(goldenBody(t, "201-create-pod"))
	var got, want map[string]any
	if err := json.Unmarshal(gotBody, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(wantBody, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got["spec"], want["spec"]) {
		t.Errorf("spec\n got  %s\n want %s", mustJSON(t, got["spec"]), mustJSON(t, want["spec"]))
	}
	for _, path := range [][]string{{"spec"}, {"spec", "containers", "0"}, {"spec", "volumes", "0"}, {"spec", "volumes", "0", "projected"}} {
		if g, w := jsonKeys(t, gotBody, path...), jsonKeys(t, wantBody, path...); !reflect.DeepEqual(g, w) {
			t.Errorf("keys of %v in the order\n %v, want\n %v", path, g, w)
		}
	}
	if !reflect.DeepEqual(got["status"], want["status"]) {
		t.Errorf("status\n got  %s\n want %s", mustJSON(t, got["status"]), mustJSON(t, want["status"]))
	}
	if got["kind"] != "Pod" || got["apiVersion"] != "v1" {
		t.Errorf("kind %v apiVersion %v", got["kind"], got["apiVersion"])
	}
	gm, wm := got["metadata"].(map[string]any), want["metadata"].(map[string]any)
	for _, k := range []string{"name", "labels"} {
		if !reflect.DeepEqual(gm[k], wm[k]) {
			t.Errorf("metadata.%s %v, want %v", k, gm[k], wm[k])
		}
	}
	for _, k := range []string{"uid", "resourceVersion", "creationTimestamp"} {
		if gm[k] == nil || gm[k] == "" {
			t.Errorf("metadata.%s missing", k)
		}
	}
	if _, ok := gm["generation"]; ok {
		t.Errorf("pods have no metadata.generation in kube 1.32, got %v", gm["generation"])
	}

	t.Run("imagePullPolicy and qosClass", func(t *testing.T) {
		pod := newPod("pulls", nil)
		pod.Spec.Containers = []v1.Container{
			{Name: "latest", Image: "busybox:latest"},
			{Name: "tagged", Image: "busybox:1.36"},
			{Name: "digest", Image: "busybox@sha256:" + fmt.Sprintf("%064d", 0)},
			{Name: "explicit", Image: "busybox", ImagePullPolicy: v1.PullNever},
		}
		out, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []v1.PullPolicy{v1.PullAlways, v1.PullIfNotPresent, v1.PullIfNotPresent, v1.PullNever}
		for i, c := range out.Spec.Containers {
			if c.ImagePullPolicy != want[i] {
				t.Errorf("%s: imagePullPolicy %s, want %s", c.Name, c.ImagePullPolicy, want[i])
			}
		}
		rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")}
		g := newPod("guaranteed", nil)
		g.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl, Limits: rl}
		b := newPod("burstable", nil)
		b.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}
		for p, qos := range map[*v1.Pod]v1.PodQOSClass{g: v1.PodQOSGuaranteed, b: v1.PodQOSBurstable} {
			out, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if out.Status.QOSClass != qos {
				t.Errorf("%s: qosClass %s, want %s", p.Name, out.Status.QOSClass, qos)
			}
		}
	})

	t.Run("status on create is the server's", func(t *testing.T) {
		pod := newPod("statusy", nil)
		pod.Status.Phase = v1.PodRunning
		pod.Status.PodIP = "10.1.1.1"
		out, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status.Phase != v1.PodPending || out.Status.PodIP != "" {
			t.Errorf("status %+v, want phase Pending and nothing else", out.Status)
		}
	})
}

func TestPodUpdates(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	pod, err := pods.Create(t.Context(), newPod("mut", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// What kube lets change: images, activeDeadlineSeconds, added
	// tolerations.
	pod.Spec.Containers[0].Image = "busybox:1.36"
	pod.Spec.ActiveDeadlineSeconds = ptr(int64(600))
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, v1.Toleration{Key: "k", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})
	pod, err = pods.Update(t.Context(), pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("allowed spec update: %v", err)
	}
	if pod.Spec.Containers[0].Image != "busybox:1.36" || pod.Spec.ActiveDeadlineSeconds == nil ||
		len(pod.Spec.Tolerations) != 3 || pod.Spec.Tolerations[2].Key != "k" { // after the two DefaultTolerationSeconds adds
		t.Errorf("allowed update not stored: %+v", pod.Spec)
	}

	// What it does not: 422 Forbidden at spec.
	for what, mut := range map[string]func(*v1.Pod){
		"restartPolicy":        func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
		"container name":       func(p *v1.Pod) { p.Spec.Containers[0].Name = "other" },
		"extra container":      func(p *v1.Pod) { p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "two", Image: "x"}) },
		"nodeName":             func(p *v1.Pod) { p.Spec.NodeName = "sneaky" },
		"removed toleration":   func(p *v1.Pod) { p.Spec.Tolerations = nil },
		"longer deadline":      func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(6000)) },
		"terminationGrace -> ": func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(1)) },
	} {
		p := pod.DeepCopy()
		mut(p)
		_, err := pods.Update(t.Context(), p, metav1.UpdateOptions{})
		st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
		if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field[:4] != "spec" {
			t.Errorf("%s: causes %+v, want one at spec", what, st.Details)
		}
	}
	got, err := pods.Get(t.Context(), "mut", metav1.GetOptions{})
	if err != nil || got.ResourceVersion != pod.ResourceVersion {
		t.Errorf("refused updates changed the pod: %v", err)
	}

	// The main resource ignores status changes.
	p := got.DeepCopy()
	p.Status.Phase = v1.PodRunning
	p.Labels = map[string]string{"changed": "yes"}
	out, err := pods.Update(t.Context(), p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.Phase != v1.PodPending || out.Labels["changed"] != "yes" {
		t.Errorf("update through the main resource: phase %s labels %v, want Pending and the label", out.Status.Phase, out.Labels)
	}
	out, err = pods.Patch(t.Context(), "mut", types.MergePatchType, []byte(`{"status":{"phase":"Failed"}}`), metav1.PatchOptions{})
	if err != nil || out.Status.Phase != v1.PodPending {
		t.Errorf("status patch through the main resource: %v, phase %s", err, out.Status.Phase)
	}
}

func TestPodStatus(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	pod, err := pods.Create(t.Context(), newPod("st", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// /status ignores spec changes and stores the status.
	p := pod.DeepCopy()
	p.Spec.Containers[0].Image = "nginx"
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	p.Status.Phase = v1.PodRunning
	p.Status.HostIP = "192.168.0.10"
	out, err := pods.UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.Phase != v1.PodRunning || out.Status.HostIP != "192.168.0.10" {
		t.Errorf("status not stored: %+v", out.Status)
	}
	if out.Spec.Containers[0].Image != "busybox" || out.Spec.RestartPolicy != v1.RestartPolicyAlways {
		t.Errorf("/status changed the spec: %+v", out.Spec)
	}
	if out.Status.QOSClass != v1.PodQOSBurstable && out.Status.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("qosClass lost: %q", out.Status.QOSClass)
	}
	// Patch through /status.
	out, err = pods.Patch(t.Context(), "st", types.MergePatchType, []byte(`{"status":{"message":"hello"},"spec":{"activeDeadlineSeconds":5}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.Message != "hello" || out.Spec.ActiveDeadlineSeconds != nil {
		t.Errorf("status patch: message %q activeDeadlineSeconds %v", out.Status.Message, out.Spec.ActiveDeadlineSeconds)
	}
	// GET /status is the pod.
	raw, err := cs.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").Name("st").SubResource("status").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var viaStatus v1.Pod
	if err := json.Unmarshal(raw, &viaStatus); err != nil || viaStatus.Name != "st" || viaStatus.Status.Message != "hello" {
		t.Errorf("GET /status: %v %s", err, raw)
	}
	// Stale resourceVersion on /status is a Conflict too.
	_, err = pods.UpdateStatus(t.Context(), pod, metav1.UpdateOptions{})
	checkStatusErr(t, err, 409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on pods "st": the object has been modified; please apply your changes to the latest version and try again`)
	// dryRun on /status stores nothing.
	cur, _ := pods.Get(t.Context(), "st", metav1.GetOptions{})
	cur.Status.Message = "dry"
	if _, err := pods.UpdateStatus(t.Context(), cur, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if again, _ := pods.Get(t.Context(), "st", metav1.GetOptions{}); again.Status.Message != "hello" {
		t.Errorf("dry-run status update stored %q", again.Status.Message)
	}
}

func TestPodBinding(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	if _, err := pods.Create(t.Context(), newPod("b", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := func(pod, node string, opts metav1.CreateOptions) error {
		return pods.Bind(t.Context(), &v1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod},
			Target:     v1.ObjectReference{Kind: "Node", Name: node},
		}, opts)
	}
	if err := bind("b", "node-1", metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("dry-run bind: %v", err)
	}
	if p, _ := pods.Get(t.Context(), "b", metav1.GetOptions{}); p.Spec.NodeName != "" {
		t.Fatalf("dry-run bind stored nodeName %q", p.Spec.NodeName)
	}
	r := doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods/b/binding",
		[]byte(`{"apiVersion":"v1","kind":"Binding","metadata":{"name":"b"},"target":{"kind":"Node","name":"node-1"}}`))
	if r.Code != 201 {
		t.Fatalf("bind: %d %s", r.Code, r.Body)
	}
	st := statusMap(t, r.Body)
	if st["kind"] != "Status" || st["status"] != "Success" {
		t.Errorf("bind answered %s", r.Body)
	}
	p, err := pods.Get(t.Context(), "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "node-1" {
		t.Errorf("nodeName %q after binding", p.Spec.NodeName)
	}
	scheduled := false
	for _, c := range p.Status.Conditions {
		scheduled = scheduled || (c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue)
	}
	if !scheduled {
		t.Errorf("no PodScheduled=True condition: %+v", p.Status.Conditions)
	}

	err = bind("b", "node-2", metav1.CreateOptions{})
	checkStatusErr(t, err, 409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on pods/binding "b": pod b is already assigned to node "node-1"`)
	err = bind("missing", "node-1", metav1.CreateOptions{})
	checkStatusErr(t, err, 404, metav1.StatusReasonNotFound, `pods "missing" not found`)
	if p2, _ := pods.Get(t.Context(), "b", metav1.GetOptions{}); p2.Spec.NodeName != "node-1" {
		t.Errorf("refused bind changed nodeName to %q", p2.Spec.NodeName)
	}
	// Binding is the only way to set nodeName after create.
	p.Spec.NodeName = "node-3"
	_, err = pods.Update(t.Context(), p, metav1.UpdateOptions{})
	checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
	// A pod created with a nodeName is bound from the start.
	direct := newPod("direct", nil)
	direct.Spec.NodeName = "node-9"
	out, err := pods.Create(t.Context(), direct, metav1.CreateOptions{})
	if err != nil || out.Spec.NodeName != "node-9" {
		t.Errorf("create with nodeName: %v %q", err, out.Spec.NodeName)
	}
	err = bind("direct", "node-1", metav1.CreateOptions{})
	checkStatusErr(t, err, 409, metav1.StatusReasonConflict, "")
}

func TestPodGracefulDeletion(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	bound := func(name string, mut func(*v1.Pod)) *v1.Pod {
		p := newPod(name, nil)
		p.Spec.NodeName = "node-1"
		if mut != nil {
			mut(p)
		}
		out, err := pods.Create(t.Context(), p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	terminating := func(t *testing.T, name string, grace int64) *v1.Pod {
		t.Helper()
		p, err := pods.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s is gone: %v", name, err)
		}
		if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != grace {
			t.Fatalf("%s: deletionTimestamp %v deletionGracePeriodSeconds %v, want set and %d", name, p.DeletionTimestamp, p.DeletionGracePeriodSeconds, grace)
		}
		return p
	}

	t.Run("bound pod stays", func(t *testing.T) {
		before := time.Now()
		bound("g1", nil)
		if err := pods.Delete(t.Context(), "g1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		p := terminating(t, "g1", 30)
		// deletionTimestamp is when the grace period ends.
		if d := p.DeletionTimestamp.Sub(before); d < 28*time.Second || d > 35*time.Second {
			t.Errorf("deletionTimestamp %v is %v after the delete, want about 30s", p.DeletionTimestamp, d)
		}
		// A longer period does not extend it; a shorter one shortens it.
		if err := pods.Delete(t.Context(), "g1", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(60))}); err != nil {
			t.Fatal(err)
		}
		terminating(t, "g1", 30)
		if err := pods.Delete(t.Context(), "g1", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(10))}); err != nil {
			t.Fatal(err)
		}
		p2 := terminating(t, "g1", 10)
		if !p2.DeletionTimestamp.Before(p.DeletionTimestamp) {
			t.Errorf("shortened deletionTimestamp %v not before %v", p2.DeletionTimestamp, p.DeletionTimestamp)
		}
		// Creating it again while it terminates is AlreadyExists.
		_, err := pods.Create(t.Context(), newPod("g1", nil), metav1.CreateOptions{})
		checkStatusErr(t, err, 409, metav1.StatusReasonAlreadyExists, `pods "g1" already exists`)
		// gracePeriodSeconds=0 removes it.
		if err := pods.Delete(t.Context(), "g1", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Get(t.Context(), "g1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after gracePeriodSeconds=0: %v, want NotFound", err)
		}
	})

	t.Run("pod's own grace period", func(t *testing.T) {
		bound("g2", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(7)) })
		if err := pods.Delete(t.Context(), "g2", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		terminating(t, "g2", 7)
	})

	t.Run("unbound pod goes at once", func(t *testing.T) {
		created, err := pods.Create(t.Context(), newPod("g3", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := pods.Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=g3", ResourceVersion: created.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if err := pods.Delete(t.Context(), "g3", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(30))}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Get(t.Context(), "g3", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("unbound pod after delete: %v, want NotFound", err)
		}
		// kube emits MODIFIED (deletionTimestamp set) before DELETED even
		// for unscheduled pods.
		evs := collectEvents(t, w, func(ev watch.Event) bool { return ev.Type == watch.Deleted })
		if len(evs) != 2 || evs[0].Type != watch.Modified || evs[0].Object.(*v1.Pod).DeletionTimestamp == nil {
			t.Errorf("events %s, want MODIFIED (with deletionTimestamp) DELETED", eventTypes(evs))
		}
	})

	t.Run("finished pod goes at once", func(t *testing.T) {
		p := bound("g4", nil)
		p.Status.Phase = v1.PodSucceeded
		if _, err := pods.UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := pods.Delete(t.Context(), "g4", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Get(t.Context(), "g4", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("succeeded pod after delete: %v, want NotFound", err)
		}
	})

	t.Run("deletecollection is graceful too", func(t *testing.T) {
		bound("g5", func(p *v1.Pod) { p.Labels = map[string]string{"dc": "1"} })
		if _, err := pods.Create(t.Context(), newPod("g6", map[string]string{"dc": "1"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := pods.DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "dc=1"}); err != nil {
			t.Fatal(err)
		}
		terminating(t, "g5", 30)
		if _, err := pods.Get(t.Context(), "g6", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("unbound g6: %v, want NotFound", err)
		}
	})

	t.Run("dry run", func(t *testing.T) {
		bound("g7", nil)
		if err := pods.Delete(t.Context(), "g7", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		if p, err := pods.Get(t.Context(), "g7", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
			t.Errorf("dry-run graceful delete marked the pod: %v", err)
		}
	})
}

// apiAccessName matches the name ServiceAccount admission gives the token
// volume: kube-api-access- and 5 random characters.
var apiAccessName = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}\b`)

// normalizeAPIAccess sets the random suffix of the token volume aside, as
// uids and resourceVersions are.
func normalizeAPIAccess(body []byte) []byte {
	return apiAccessName.ReplaceAll(body, []byte("kube-api-access-xxxxx"))
}

// jsonKeys returns the keys of the object at path in doc (object keys and
// array indexes), in the order they are written.
func jsonKeys(t testing.TB, doc []byte, path ...string) []string {
	t.Helper()
	raw := json.RawMessage(doc)
	for _, p := range path {
		if i, err := strconv.Atoi(p); err == nil {
			var arr []json.RawMessage
			if err := json.Unmarshal(raw, &arr); err != nil || i >= len(arr) {
				t.Fatalf("%v: no element %d: %v", path, i, err)
			}
			raw = arr[i]
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj[p] == nil {
			t.Fatalf("%v: no key %s: %v", path, p, err)
		}
		raw = obj[p]
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%v is not an object: %s", path, raw)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}
