package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/informertest"
	"github.com/corekube/corekube/test/testserver"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// The tests of this file speak protobuf to the server, as
// kube-controller-manager and kube-scheduler do (client-go with
// ContentType application/vnd.kubernetes.protobuf), and check the bytes
// against kube's encoding: the magic k8s\x00, then a runtime.Unknown
// envelope (typeMeta, raw, empty contentEncoding and contentType); watch
// streams as length-prefixed WatchEvent frames.

const protobufType = "application/vnd.kubernetes.protobuf"

// contentTypes records the Content-Type of every answer a client got.
type contentTypes struct {
	mu   sync.Mutex
	seen map[string]int // "METHOD path-suffix content-type" -> count
}

// record wraps cfg's transport (after any wrapper it already has) to
// record the answers' Content-Types.
func (c *contentTypes) record(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	prev := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if resp != nil {
				c.mu.Lock()
				if c.seen == nil {
					c.seen = map[string]int{}
				}
				c.seen[resp.Header.Get("Content-Type")]++
				c.mu.Unlock()
			}
			return resp, err
		})
	}
	return cfg
}

// onlyProtobuf fails the test unless every answer was protobuf (a watch:
// its stream form) and there was at least one.
func (c *contentTypes) onlyProtobuf(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for ct, n := range c.seen {
		total += n
		if ct != protobufType && ct != protobufType+";stream=watch" {
			t.Errorf("%d answers in %q, want only protobuf: %v", n, ct, c.seen)
		}
	}
	if total == 0 {
		t.Error("no answers recorded")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// protobufConfig is cfg for a client speaking protobuf as kube's
// controllers do.
func protobufConfig(base *rest.Config) *rest.Config {
	c := rest.CopyConfig(base)
	c.ContentType = protobufType
	c.AcceptContentTypes = protobufType + ",application/json"
	return c
}

// protobufClient returns a protobuf clientset and the record of its
// answers' Content-Types.
func protobufClient(t *testing.T) (kubernetes.Interface, *contentTypes) {
	t.Helper()
	ct := &contentTypes{}
	client, err := kubernetes.NewForConfig(ct.record(protobufConfig(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	return client, ct
}

// sameObject fails unless got (through protobuf) and want (through JSON)
// are the same object.
func sameObject(t *testing.T, what string, got, want runtime.Object) {
	t.Helper()
	// client-go's typed clients clear the kind of what they decode from
	// protobuf (the envelope carries it); compare the rest.
	got, want = got.DeepCopyObject(), want.DeepCopyObject()
	got.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	want.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("%s through protobuf differs from JSON:\n got %+v\nwant %+v", what, got, want)
	}
}

// TestProtobufCRUD: create, get, update, patch, list (label selector) and
// delete of pods, nodes, leases and PodDisruptionBudgets through a
// protobuf client; every answer is protobuf and holds what a JSON client
// reads.
func TestProtobufCRUD(t *testing.T) {
	ctx := t.Context()
	pb, ct := protobufClient(t)
	ns := newNamespace(t)
	label := map[string]string{"suite": uniqueName(t, "l")}
	selector := metav1.ListOptions{LabelSelector: "suite=" + label["suite"]}
	merge := []byte(`{"metadata":{"annotations":{"patched":"yes"}}}`)

	t.Run("pods", func(t *testing.T) {
		pods := pb.CoreV1().Pods(ns)
		created, err := pods.Create(ctx, newPod("p1", label), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.UID == "" || created.ResourceVersion == "" || created.Spec.RestartPolicy != v1.RestartPolicyAlways {
			t.Errorf("created pod not defaulted by the server: %+v", created)
		}
		got, err := pods.Get(ctx, "p1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		viaJSON, err := cs.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameObject(t, "pod", got, viaJSON)
		got.Labels["updated"] = "yes"
		updated, err := pods.Update(ctx, got, metav1.UpdateOptions{})
		if err != nil || updated.Labels["updated"] != "yes" || updated.ResourceVersion == got.ResourceVersion {
			t.Fatalf("update: %v %+v", err, updated)
		}
		patched, err := pods.Patch(ctx, "p1", types.MergePatchType, merge, metav1.PatchOptions{})
		if err != nil || patched.Annotations["patched"] != "yes" {
			t.Fatalf("patch: %v %+v", err, patched)
		}
		status := updated.DeepCopy()
		status.ResourceVersion = ""
		status.Status.Phase = v1.PodRunning
		if st, err := pods.UpdateStatus(ctx, status, metav1.UpdateOptions{}); err != nil || st.Status.Phase != v1.PodRunning {
			t.Fatalf("update status: %v %+v", err, st)
		}
		if _, err := pods.Create(ctx, newPod("p2", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		list, err := pods.List(ctx, selector)
		if err != nil {
			t.Fatal(err)
		}
		checkNames(t, "selected pods", names(t, list), "p1")
		listJSON, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.LabelSelector, ResourceVersion: list.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if err != nil {
			t.Fatal(err)
		}
		sameObject(t, "pod list", list, listJSON)
		if err := pods.Delete(ctx, "p2", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
			t.Fatal(err)
		}
		if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, selector); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("nodes", func(t *testing.T) {
		nodes := pb.CoreV1().Nodes()
		name := uniqueName(t, "n")
		if _, err := nodes.Create(ctx, newNode(name, label), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		got, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Spec.Taints = []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}}
		if _, err := nodes.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := nodes.Patch(ctx, name, types.StrategicMergePatchType, merge, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		list, err := nodes.List(ctx, selector)
		if err != nil {
			t.Fatal(err)
		}
		checkNames(t, "selected nodes", names(t, list), name)
		if len(list.Items) == 1 && (len(list.Items[0].Spec.Taints) != 1 || list.Items[0].Annotations["patched"] != "yes") {
			t.Errorf("listed node %+v", list.Items[0])
		}
		if err := nodes.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("leases", func(t *testing.T) {
		leases := pb.CoordinationV1().Leases(ns)
		if _, err := leases.Create(ctx, newLease("l1", label), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := leases.Get(ctx, "l1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
		got.Spec.RenewTime = &now
		renewed, err := leases.Update(ctx, got, metav1.UpdateOptions{})
		if err != nil || renewed.Spec.RenewTime == nil || !renewed.Spec.RenewTime.Equal(&now) {
			t.Fatalf("renew: %v %+v", err, renewed)
		}
		viaJSON, err := cs.CoordinationV1().Leases(ns).Get(ctx, "l1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameObject(t, "lease", renewed, viaJSON)
		list, err := leases.List(ctx, selector)
		if err != nil {
			t.Fatal(err)
		}
		checkNames(t, "leases", names(t, list), "l1")
		if err := leases.Delete(ctx, "l1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("priorityclasses", func(t *testing.T) {
		pcs := pb.SchedulingV1().PriorityClasses()
		name := uniqueName(t, "pc")
		created, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: label}, Value: 12}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.PreemptionPolicy == nil || *created.PreemptionPolicy != v1.PreemptLowerPriority {
			t.Errorf("created class not defaulted: %+v", created)
		}
		list, err := pcs.List(ctx, selector)
		if err != nil {
			t.Fatal(err)
		}
		checkNames(t, "priorityclasses", names(t, list), name)
		if err := pcs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("poddisruptionbudgets", func(t *testing.T) {
		pdbs := pb.PolicyV1().PodDisruptionBudgets(ns)
		created, err := pdbs.Create(ctx, newPDB("b1", label), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Spec.MinAvailable == nil || *created.Spec.MinAvailable != intstr.FromInt32(1) || created.Generation != 1 {
			t.Errorf("created budget %+v", created)
		}
		created.Status.DisruptionsAllowed = 1
		created.Status.ObservedGeneration = created.Generation
		if _, err := pdbs.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		list, err := pdbs.List(ctx, selector)
		if err != nil {
			t.Fatal(err)
		}
		checkNames(t, "budgets", names(t, list), "b1")
		viaJSON, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "b1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 {
			sameObject(t, "budget", &list.Items[0], viaJSON)
		}
		if err := pdbs.Delete(ctx, "b1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	ct.onlyProtobuf(t)
}

// TestProtobufListPagination: limit and continue through a protobuf
// client walk the list in pages whose ListMeta (continue,
// remainingItemCount, resourceVersion) survives the encoding, with label
// and field selectors.
func TestProtobufListPagination(t *testing.T) {
	ctx := t.Context()
	pb, ct := protobufClient(t)
	ns := newNamespace(t)
	var want []string
	for i := range 7 {
		name := fmt.Sprintf("p%d", i)
		labels := map[string]string{"app": "other"}
		if i%2 == 0 {
			labels["app"] = "web"
			want = append(want, name)
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod(name, labels), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	opts := metav1.ListOptions{LabelSelector: "app=web", Limit: 3}
	pages := 0
	for {
		page, err := pb.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		got = append(got, names(t, page)...)
		if page.Continue == "" {
			if page.RemainingItemCount != nil {
				t.Errorf("last page has remainingItemCount %d", *page.RemainingItemCount)
			}
			break
		}
		// As kube: no remainingItemCount under a selector (unknown).
		if page.RemainingItemCount != nil || page.ResourceVersion == "" {
			t.Errorf("page %d: ListMeta %+v", pages, page.ListMeta)
		}
		opts.Continue = page.Continue
	}
	checkNames(t, "paged pods", got, want...)
	if pages != 2 {
		t.Errorf("%d pages, want 2", pages)
	}
	// Without a selector the first page counts what remains.
	first, err := pb.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Items) != 5 || first.Continue == "" || first.RemainingItemCount == nil || *first.RemainingItemCount != 2 {
		t.Errorf("first page of 5: %d items, ListMeta %+v", len(first.Items), first.ListMeta)
	}
	one, err := pb.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=p3"})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "field-selected pods", names(t, one), "p3")
	none, err := pb.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=none"})
	if err != nil || len(none.Items) != 0 || none.ResourceVersion == "" {
		t.Errorf("empty list: %v %+v", err, none)
	}
	ct.onlyProtobuf(t)
}

// TestProtobufStatusErrors: errors reach a protobuf client as protobuf
// Status objects, as kube sends them, with the fields a JSON client reads.
func TestProtobufStatusErrors(t *testing.T) {
	ctx := t.Context()
	pb, ct := protobufClient(t)
	ns := newNamespace(t)
	sameStatus := func(t *testing.T, what string, got, want error, code int32) {
		t.Helper()
		var gs, ws apierrors.APIStatus
		if !apierrors.IsNotFound(got) && code == 404 || !asStatus(got, &gs) || !asStatus(want, &ws) {
			t.Fatalf("%s: got %v, want a %d Status error (JSON: %v)", what, got, code, want)
		}
		g, w := gs.Status(), ws.Status()
		if g.Code != code || !apiequality.Semantic.DeepEqual(g, w) {
			t.Errorf("%s through protobuf:\n got %+v\nwant %+v", what, g, w)
		}
	}

	_, err := pb.CoreV1().Pods(ns).Get(ctx, "missing", metav1.GetOptions{})
	_, errJSON := cs.CoreV1().Pods(ns).Get(ctx, "missing", metav1.GetOptions{})
	sameStatus(t, "404", err, errJSON, 404)

	if _, err := pb.CoreV1().Pods(ns).Create(ctx, newPod("dup", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = pb.CoreV1().Pods(ns).Create(ctx, newPod("dup", nil), metav1.CreateOptions{})
	_, errJSON = cs.CoreV1().Pods(ns).Create(ctx, newPod("dup", nil), metav1.CreateOptions{})
	sameStatus(t, "409", err, errJSON, 409)

	invalid := newPod("bad", nil)
	invalid.Spec.Containers[0].Image = ""
	_, err = pb.CoreV1().Pods(ns).Create(ctx, invalid, metav1.CreateOptions{})
	_, errJSON = cs.CoreV1().Pods(ns).Create(ctx, invalid, metav1.CreateOptions{})
	sameStatus(t, "422", err, errJSON, 422)
	ct.onlyProtobuf(t)

	// The bytes: a Status in the envelope, kind Status of v1.
	r := doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods/missing", nil, "Accept", protobufType)
	st := &metav1.Status{}
	checkEnvelope(t, r, schema.GroupVersionKind{Version: "v1", Kind: "Status"}, st)
	if r.Code != 404 || st.Code != 404 || st.Reason != metav1.StatusReasonNotFound || st.Message != `pods "missing" not found` {
		t.Errorf("404 as protobuf: %d %+v", r.Code, st)
	}
}

func asStatus(err error, into *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*into = s
	}
	return ok
}

// checkEnvelope checks that r is kube's protobuf encoding of an object of
// kind and decodes it into into.
func checkEnvelope(t *testing.T, r rawResponse, kind schema.GroupVersionKind, into runtime.Object) {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != protobufType {
		t.Fatalf("Content-Type %q, want %q (status %d, body %q)", ct, protobufType, r.Code, r.Body)
	}
	unk := decodeEnvelope(t, r.Body)
	if unk.APIVersion != kind.GroupVersion().String() || unk.Kind != kind.Kind || unk.ContentType != "" || unk.ContentEncoding != "" {
		t.Errorf("envelope %q %q %q %q, want %s", unk.APIVersion, unk.Kind, unk.ContentType, unk.ContentEncoding, kind)
	}
	if err := into.(interface{ Unmarshal([]byte) error }).Unmarshal(unk.Raw); err != nil {
		t.Fatalf("raw is not a %s: %v", kind.Kind, err)
	}
}

// decodeEnvelope reads the magic and the runtime.Unknown of a protobuf
// encoded object.
func decodeEnvelope(t *testing.T, data []byte) runtime.Unknown {
	t.Helper()
	if !bytes.HasPrefix(data, []byte("k8s\x00")) {
		t.Fatalf("no protobuf magic: %q", data[:min(len(data), 16)])
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(data[4:]); err != nil {
		t.Fatalf("not a runtime.Unknown: %v", err)
	}
	return unk
}

// TestProtobufRawEncoding checks the bytes of GET, LIST, create and delete
// answers and of a watch stream against kube's encoding.
func TestProtobufRawEncoding(t *testing.T) {
	ns := newNamespace(t)
	podsPath := "/api/v1/namespaces/" + ns + "/pods"
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	body, err := runtime.Encode(codec, &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "raw", Labels: map[string]string{"a": "b"}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	created := doRaw(t, "POST", podsPath, body, "Content-Type", protobufType, "Accept", protobufType)
	pod := &v1.Pod{}
	checkEnvelope(t, created, v1.SchemeGroupVersion.WithKind("Pod"), pod)
	if created.Code != 201 || pod.Name != "raw" || pod.Namespace != ns || pod.UID == "" {
		t.Errorf("create: %d %+v", created.Code, pod.ObjectMeta)
	}

	// GET: the same pod as the JSON answer; the raw bytes are the pod's
	// own encoding, what kube's serializer writes for it.
	got := doRaw(t, "GET", podsPath+"/raw", nil, "Accept", protobufType)
	fromPB := &v1.Pod{}
	checkEnvelope(t, got, v1.SchemeGroupVersion.WithKind("Pod"), fromPB)
	fromJSON, err := cs.CoreV1().Pods(ns).Get(t.Context(), "raw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameObject(t, "raw GET", fromPB, fromJSON)
	// (client-go cleared the kind it decoded; kube's encoder sets it.)
	fromJSON.SetGroupVersionKind(v1.SchemeGroupVersion.WithKind("Pod"))
	want, err := runtime.Encode(codec, fromJSON)
	if err != nil {
		t.Fatal(err)
	}
	if fromJSON.ResourceVersion == fromPB.ResourceVersion && !bytes.Equal(got.Body, want) {
		t.Errorf("GET bytes differ from kube's serializer:\n got %q\nwant %q", got.Body, want)
	}
	if got.Header.Get("Cache-Control") != "no-cache, private" || got.Header.Get("Content-Length") != fmt.Sprint(len(got.Body)) {
		t.Errorf("headers %v", got.Header)
	}

	list := doRaw(t, "GET", podsPath, nil, "Accept", protobufType+", application/json")
	podList := &v1.PodList{}
	checkEnvelope(t, list, v1.SchemeGroupVersion.WithKind("PodList"), podList)
	if len(podList.Items) != 1 || podList.ResourceVersion == "" || podList.Items[0].Name != "raw" {
		t.Errorf("list: %+v", podList)
	}
	// The list is assembled from the watch cache's per-object encodings:
	// the bytes are still kube's serializer's for the same list.
	jsonList, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{ResourceVersion: podList.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	jsonList.SetGroupVersionKind(v1.SchemeGroupVersion.WithKind("PodList"))
	if want, err := runtime.Encode(codec, jsonList); err != nil {
		t.Fatal(err)
	} else if jsonList.ResourceVersion == podList.ResourceVersion && !bytes.Equal(list.Body, want) {
		t.Errorf("LIST bytes differ from kube's serializer:\n got %q\nwant %q", list.Body, want)
	}

	// Tables have no protobuf encoding: kube passes the entry over (406
	// when it is the only one, the error in JSON); PartialObjectMetadata
	// has one.
	table := doRaw(t, "GET", podsPath, nil, "Accept", protobufType+";as=Table;v=v1;g=meta.k8s.io")
	if table.Code != 406 || table.Header.Get("Content-Type") != "application/json" ||
		statusMap(t, table.Body)["message"] != "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf" {
		t.Errorf("Table as protobuf: %d %s %s", table.Code, table.Header.Get("Content-Type"), table.Body)
	}
	table = doRaw(t, "GET", podsPath, nil, "Accept", protobufType+";as=Table;v=v1;g=meta.k8s.io, application/json;as=Table;v=v1;g=meta.k8s.io")
	if table.Code != 200 || table.Header.Get("Content-Type") != "application/json" || !bytes.Contains(table.Body, []byte(`"kind":"Table"`)) {
		t.Errorf("Table falling back to JSON: %d %s %.200s", table.Code, table.Header.Get("Content-Type"), table.Body)
	}
	partial := doRaw(t, "GET", podsPath, nil, "Accept", protobufType+";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json")
	pom := &metav1.PartialObjectMetadataList{}
	checkEnvelope(t, partial, metav1.SchemeGroupVersion.WithKind("PartialObjectMetadataList"), pom)
	if len(pom.Items) != 1 || pom.Items[0].Name != "raw" || pom.Items[0].Labels["a"] != "b" {
		t.Errorf("PartialObjectMetadataList: %+v", pom)
	}

	// A watch: frames of WatchEvents whose objects are enveloped pods.
	watch := openWatch(t, podsPath+"?watch=1&resourceVersion="+fromJSON.ResourceVersion, protobufType)
	defer watch.Body.Close()
	if ct := watch.Header.Get("Content-Type"); ct != protobufType+";stream=watch" {
		t.Fatalf("watch Content-Type %q", ct)
	}
	if _, err := cs.CoreV1().Pods(ns).Patch(t.Context(), "raw", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := readWatchFrame(t, watch.Body)
	watched := &v1.Pod{}
	unk := decodeEnvelope(t, ev.Object.Raw)
	if err := watched.Unmarshal(unk.Raw); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "MODIFIED" || unk.Kind != "Pod" || unk.APIVersion != "v1" || watched.Labels["x"] != "y" {
		t.Errorf("watch event %s %s/%s %+v", ev.Type, unk.APIVersion, unk.Kind, watched.ObjectMeta)
	}
	// The event's object is the cached encoding in kube's envelope: the
	// bytes kube's serializer writes for the pod.
	patched, err := cs.CoreV1().Pods(ns).Get(t.Context(), "raw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patched.SetGroupVersionKind(v1.SchemeGroupVersion.WithKind("Pod"))
	if want, err := runtime.Encode(codec, patched); err != nil {
		t.Fatal(err)
	} else if patched.ResourceVersion == watched.ResourceVersion && !bytes.Equal(ev.Object.Raw, want) {
		t.Errorf("watch event object bytes differ from kube's serializer:\n got %q\nwant %q", ev.Object.Raw, want)
	}

	// DELETE answers the deleted pod (graceful: still there, with a
	// deletionTimestamp).
	deleted := doRaw(t, "DELETE", podsPath+"/raw", nil, "Accept", protobufType)
	gone := &v1.Pod{}
	checkEnvelope(t, deleted, v1.SchemeGroupVersion.WithKind("Pod"), gone)
	if deleted.Code != 200 || gone.Name != "raw" || gone.DeletionTimestamp == nil {
		t.Errorf("delete: %d %+v", deleted.Code, gone.ObjectMeta)
	}
	ev = readWatchFrame(t, watch.Body)
	if ev.Type != "MODIFIED" {
		t.Errorf("watch event after the graceful delete: %s", ev.Type)
	}
}

// openWatch starts a raw watch request.
func openWatch(t *testing.T, path, accept string) *http.Response {
	t.Helper()
	return openWatchAt(t, srv.URL(), path, accept)
}

// openWatchAt starts a raw watch request to the server at base.
func openWatchAt(t *testing.T, base, path, accept string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := testserver.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("watch %s: %d %s", path, resp.StatusCode, data)
	}
	return resp
}

// readWatchFrame reads one frame of a protobuf watch stream: a 4-byte
// big-endian length, then a WatchEvent without envelope.
func readWatchFrame(t *testing.T, r io.Reader) metav1.WatchEvent {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		t.Fatalf("read frame length: %v", err)
	}
	data := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, data); err != nil {
		t.Fatalf("read frame: %v", err)
	}
	var ev metav1.WatchEvent
	if err := ev.Unmarshal(data); err != nil {
		t.Fatalf("frame is not a WatchEvent: %v", err)
	}
	return ev
}

// TestProtobufWatchExpired: a watch from a resourceVersion older than the
// watch cache's window answers one ERROR event whose object is a protobuf
// Status (410). The server has a window of two events, so the first of
// four creates has left it; on the shared server, whose pod cache may have
// started at revision 1, resourceVersion=1 could still be in the window.
func TestProtobufWatchExpired(t *testing.T) {
	small := testserver.StartWith(t, t.TempDir(), func(c *server.Config) { c.WatchCacheSize = 2; c.Logger = testserver.Logger() })
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "expiry"}}
	if _, err := small.Client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := small.Client.CoreV1().Pods("expiry")
	var first string
	for _, name := range []string{"p0", "p1", "p2", "p3"} {
		pod, err := pods.Create(t.Context(), newPod(name, nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = pod.ResourceVersion
		}
	}
	// A consistent list proves the cache has seen the writes.
	if _, err := pods.List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	watch := openWatchAt(t, small.URL(), "/api/v1/namespaces/expiry/pods?watch=1&resourceVersion="+first, protobufType)
	defer watch.Body.Close()
	ev := readWatchFrame(t, watch.Body)
	unk := decodeEnvelope(t, ev.Object.Raw)
	if ev.Type != "ERROR" || unk.Kind != "Status" {
		t.Fatalf("first event %s of a %s/%s", ev.Type, unk.APIVersion, unk.Kind)
	}
	st := &metav1.Status{}
	if err := st.Unmarshal(unk.Raw); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "ERROR" || unk.Kind != "Status" || unk.APIVersion != "v1" || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
		t.Errorf("event %s %s/%s %+v", ev.Type, unk.APIVersion, unk.Kind, st)
	}
}

// TestProtobufInformers: SharedInformerFactory pod informers of a protobuf
// client (LIST then WATCH, both protobuf) converge on the server's pods
// through concurrent churn.
func TestProtobufInformers(t *testing.T) {
	ns := newNamespace(t)
	for i := range 10 {
		if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), informertest.NewPod(fmt.Sprintf("p%d", i), i%2 == 0), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The recorder counts the informers' requests; ct, wrapping it,
	// their answers' encodings.
	ct, rec := &contentTypes{}, &informertest.Recorder{}
	client, err := kubernetes.NewForConfig(ct.record(rec.Config(protobufConfig(cfg))))
	if err != nil {
		t.Fatal(err)
	}
	all := informertest.Start(t, client, ns, "")
	selected := informertest.Start(t, client, ns, informertest.Selector)
	for _, inf := range []*informertest.PodInformer{all, selected} {
		inf.WaitConverged(t, cs, 15*time.Second)
	}
	churn(t, cs, ns, informertest.ChurnOptions{Workers: 8, Ops: 200, Names: 30, Seed: uint64(time.Now().UnixNano())})
	for _, inf := range []*informertest.PodInformer{all, selected} {
		took := inf.WaitConverged(t, cs, 15*time.Second)
		t.Logf("informer %s converged %v after the last write; handlers ran %+v", inf, took.Round(time.Millisecond), inf.Counts())
		inf.CheckMonotonic(t)
	}
	if lists := rec.Lists("/pods"); lists != 2 {
		t.Errorf("%d LISTs, want 2 (no relist)", lists)
	}
	ct.onlyProtobuf(t)
}

// TestProtobufMetadataClient: client-go's metadata client (what metadata
// informers use) asks for PartialObjectMetadata[List] in protobuf first;
// it gets protobuf, list and watch.
func TestProtobufMetadataClient(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("m1", map[string]string{"k": "v"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ct := &contentTypes{}
	client, err := metadata.NewForConfig(ct.record(cfg))
	if err != nil {
		t.Fatal(err)
	}
	pods := client.Resource(v1.SchemeGroupVersion.WithResource("pods")).Namespace(ns)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "m1" || list.Items[0].Labels["k"] != "v" || list.ResourceVersion == "" {
		t.Fatalf("metadata list %+v", list)
	}
	one, err := pods.Get(ctx, "m1", metav1.GetOptions{})
	if err != nil || one.UID == "" || one.Labels["k"] != "v" {
		t.Fatalf("metadata get: %v %+v", err, one)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "m1", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	// A deletion with grace 0 is MODIFIED (deletionTimestamp), then
	// DELETED, as in kube.
	timeout := time.After(10 * time.Second)
	for deleted := false; !deleted; {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok || p.Name != "m1" || (ev.Type != "MODIFIED" && ev.Type != "DELETED") {
				t.Fatalf("metadata watch event %s %#v", ev.Type, ev.Object)
			}
			deleted = ev.Type == "DELETED"
		case <-timeout:
			t.Fatal("no DELETED event")
		}
	}
	ct.onlyProtobuf(t)
}

// TestProtobufRequestWithJSONAnswer: the Accept header alone decides the
// answer's encoding, whatever the body's: a protobuf create answered in
// JSON, a JSON create answered in protobuf.
func TestProtobufRequestWithJSONAnswer(t *testing.T) {
	ns := newNamespace(t)
	path := "/api/v1/namespaces/" + ns + "/pods"
	body, err := runtime.Encode(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := doRaw(t, "POST", path, body, "Content-Type", protobufType, "Accept", "application/json")
	if r.Code != 201 || r.Header.Get("Content-Type") != "application/json" || !strings.HasPrefix(string(r.Body), `{"kind":"Pod"`) {
		t.Errorf("protobuf in, JSON out: %d %s %.100s", r.Code, r.Header.Get("Content-Type"), r.Body)
	}
	r = doRaw(t, "POST", path, mustJSON(t, newPod("b", nil)), "Accept", protobufType)
	checkEnvelope(t, r, v1.SchemeGroupVersion.WithKind("Pod"), &v1.Pod{})
	lease := doRaw(t, "POST", "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases", mustJSON(t, newLease("l", nil)), "Accept", protobufType)
	checkEnvelope(t, lease, coordinationv1.SchemeGroupVersion.WithKind("Lease"), &coordinationv1.Lease{})
	pdb := doRaw(t, "POST", "/apis/policy/v1/namespaces/"+ns+"/poddisruptionbudgets", mustJSON(t, newPDB("b", nil)), "Accept", protobufType)
	checkEnvelope(t, pdb, policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), &policyv1.PodDisruptionBudget{})
	// A budget's delete answers a success Status (only some of kube's
	// stores, pods among them, return the deleted object).
	del := doRaw(t, "DELETE", "/apis/policy/v1/namespaces/"+ns+"/poddisruptionbudgets/b", nil, "Accept", protobufType)
	st := &metav1.Status{}
	checkEnvelope(t, del, schema.GroupVersionKind{Version: "v1", Kind: "Status"}, st)
	if del.Code != 200 || st.Status != metav1.StatusSuccess || st.Details == nil || st.Details.Name != "b" || st.Details.Kind != "poddisruptionbudgets" {
		t.Errorf("delete: %d %+v", del.Code, st)
	}
}
