package rawproto

import (
	"bytes"
	"math/rand"
	"reflect"
	"strconv"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// rvObject is a kube object whose resourceVersion the tests set.
type rvObject interface {
	runtime.Object
	metav1.Object
	marshaler
}

// rvs are resourceVersions of every length etcd's revisions take (1 to
// 19 digits).
func rvs() []string {
	var out []string
	for n := 1; n <= 19; n++ {
		out = append(out, strings.Repeat("9", n), "1"+strings.Repeat("0", n-1))
	}
	return out
}

// checkSetRV: SetResourceVersion of obj's message (as stored: whatever
// resourceVersion obj has) is gogo's Marshal of obj with rv, byte for
// byte, appended to what dst held.
func checkSetRV(t *testing.T, obj rvObject, rv string) {
	t.Helper()
	obj = obj.DeepCopyObject().(rvObject)
	msg, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	obj.SetResourceVersion(rv)
	want, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := SetResourceVersion([]byte("prefix"), msg, rv)
	if err != nil {
		t.Fatalf("%T with resourceVersion %q: %v", obj, rv, err)
	}
	if string(got[:len("prefix")]) != "prefix" || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("%T with resourceVersion %q:\n got %x\nwant %x", obj, rv, got[len("prefix"):], want)
	}
}

// TestSetResourceVersion: the kinds the cache holds most, stored without
// a resourceVersion (gogo writes the empty field) or with one, get every
// length of revision.
func TestSetResourceVersion(t *testing.T) {
	var big corev1.Pod
	if err := big.Unmarshal(benchPodMessage(t)); err != nil {
		t.Fatal(err)
	}
	now := metav1.Unix(1764200000, 0)
	objects := []rvObject{
		&big,
		&corev1.Pod{},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"kubernetes.io/hostname": "node-1"}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now}}}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: new("node-1"), RenewTime: &metav1.MicroTime{Time: now.Time}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", CreationTimestamp: now}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e.1", Namespace: "ns"}, Reason: "Scheduled", Count: 3,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "a"}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb", Namespace: "ns", Generation: 4},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: new(intstr.FromInt32(1))}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ns", UID: "u"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}, Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}}}},
	}
	for _, obj := range objects {
		for _, stored := range []string{"", "42", "12345678901234567890"} {
			obj := obj.DeepCopyObject().(rvObject)
			obj.SetResourceVersion(stored)
			for _, rv := range rvs() {
				checkSetRV(t, obj, rv)
			}
		}
	}
}

// TestSetResourceVersionFuzzed: random objects of every cached type.
func TestSetResourceVersionFuzzed(t *testing.T) {
	f := newFuzzer(7)
	r := rand.New(rand.NewSource(7))
	for _, proto := range transcodedTypes {
		typ := reflect.TypeOf(proto).Elem()
		for range 40 {
			obj := reflect.New(typ).Interface().(rvObject)
			f.Fuzz(obj)
			checkSetRV(t, obj, strconv.FormatInt(r.Int63n(1<<uint(r.Intn(63))+1), 10))
		}
	}
}

// TestSetResourceVersionLengthBoundaries: metadata whose length varint
// takes a byte more once the resourceVersion is in (127 -> 128, 16383 ->
// 16384 bytes), and the same across the message's other boundaries.
func TestSetResourceVersionLengthBoundaries(t *testing.T) {
	for _, boundary := range []int{128, 16384} {
		crossed := 0
		for n := boundary - 80; n < boundary; n++ {
			obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("x", n)}}
			before := metaSize(t, obj)
			if before < boundary-30 || before >= boundary {
				continue
			}
			for _, rv := range []string{"7", "123456789", "1234567890123456789"} {
				with := obj.DeepCopy()
				with.ResourceVersion = rv
				if metaSize(t, with) >= boundary {
					crossed++
				}
				checkSetRV(t, obj, rv)
			}
		}
		if crossed == 0 {
			t.Errorf("no case crossed %d bytes", boundary)
		}
	}
}

// metaSize is the size of obj's marshalled ObjectMeta.
func metaSize(t *testing.T, obj *corev1.Pod) int {
	t.Helper()
	m, err := obj.ObjectMeta.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestSetResourceVersionInserts: a metadata without field 6 (gogo always
// writes it; other writers may not) gets it where gogo puts it: before
// the first field numbered above 6, or last.
func TestSetResourceVersionInserts(t *testing.T) {
	name, uid := pbBytes(1, []byte("a")), pbBytes(5, []byte("u"))
	generation, labels := pbVarint(7, 3), pbBytes(11, cat(pbBytes(1, []byte("k")), pbBytes(2, []byte("v"))))
	rv := pbBytes(6, []byte("99"))
	spec := pbBytes(2, pbBytes(1, []byte("v")))
	cases := []struct{ meta, want []byte }{
		{cat(), cat(rv)},
		{cat(name), cat(name, rv)},
		{cat(name, uid), cat(name, uid, rv)},
		{cat(name, generation), cat(name, rv, generation)},
		{cat(generation, labels), cat(rv, generation, labels)},
		{cat(name, uid, labels), cat(name, uid, rv, labels)},
		{cat(name, pbBytes(6, []byte("1")), labels), cat(name, rv, labels)},
		{cat(name, pbBytes(6, nil)), cat(name, rv)},
	}
	for _, c := range cases {
		for _, rest := range [][]byte{nil, spec} {
			got, err := SetResourceVersion(nil, cat(pbBytes(1, c.meta), rest), "99")
			if want := cat(pbBytes(1, c.want), rest); err != nil || !bytes.Equal(got, want) {
				t.Errorf("metadata %x: got %x, %v; want %x", c.meta, got, err, want)
			}
		}
	}
	// Metadata need not come first (gogo writes it first).
	got, err := SetResourceVersion(nil, cat(spec, pbBytes(1, name)), "99")
	if want := cat(spec, pbBytes(1, cat(name, rv))); err != nil || !bytes.Equal(got, want) {
		t.Errorf("metadata after spec: got %x, %v; want %x", got, err, want)
	}
}

// TestSetResourceVersionRefuses: what is not a message gogo wrote for a
// kube object is an error, and dst comes back as it was.
func TestSetResourceVersionRefuses(t *testing.T) {
	name := pbBytes(1, []byte("a"))
	cases := map[string][]byte{
		"empty":                     nil,
		"no metadata":               pbBytes(2, []byte("spec")),
		"metadata twice":            cat(pbBytes(1, name), pbBytes(1, name)),
		"metadata a varint":         pbVarint(1, 3),
		"resourceVersion twice":     pbBytes(1, cat(pbBytes(6, []byte("1")), pbBytes(6, []byte("2")))),
		"resourceVersion a varint":  pbBytes(1, pbVarint(6, 1)),
		"truncated metadata":        cat(pbKey(1, wireBytes), []byte{10}, name),
		"truncated metadata field":  pbBytes(1, cat(pbKey(1, wireBytes), []byte{5, 'a'})),
		"group in metadata":         pbBytes(1, pbKey(3, 3)),
		"group outside":             cat(pbBytes(1, name), pbKey(3, 4)),
		"field number 0":            cat(pbKey(0, wireBytes), []byte{0}, pbBytes(1, name)),
		"bad varint":                cat(pbBytes(1, name), pbKey(2, wireVarint), bytes.Repeat([]byte{0xff}, 10)),
		"truncated varint":          cat(pbBytes(1, name), pbKey(2, wireVarint), []byte{0x80}),
		"truncated fixed64":         cat(pbBytes(1, name), pbKey(2, wireFixed64), []byte{1, 2, 3}),
		"truncated fixed32":         cat(pbBytes(1, name), pbKey(2, wireFixed32), []byte{1}),
		"JSON":                      []byte(`{"metadata":{}}`),
		"length beyond the message": cat(pbKey(1, wireBytes), []byte{0xff, 0xff, 0xff, 0xff, 0x0f}),
	}
	for what, msg := range cases {
		dst := []byte("dst")
		got, err := SetResourceVersion(dst, msg, "5")
		if err == nil {
			t.Errorf("%s: no error (got %x)", what, got)
		}
		if string(got) != "dst" {
			t.Errorf("%s: dst became %q", what, got)
		}
	}
	// Every prefix of a pod that cuts its metadata.
	msg := benchPodMessage(t)
	_, _, end, err := metadataField(msg)
	if err != nil {
		t.Fatal(err)
	}
	for cut := range end {
		if _, err := SetResourceVersion(nil, msg[:cut], "5"); err == nil {
			t.Fatalf("pod cut at %d of %d (metadata ends at %d): no error", cut, len(msg), end)
		}
	}
}

// TestSetResourceVersionMutated: random damage to real messages never
// panics, and what is accepted comes out with the resourceVersion in its
// one metadata field and everything outside metadata as it was.
func TestSetResourceVersionMutated(t *testing.T) {
	var msgs [][]byte
	f := newFuzzer(11)
	for _, proto := range transcodedTypes[:8] {
		obj := reflect.New(reflect.TypeOf(proto).Elem()).Interface().(rvObject)
		f.Fuzz(obj)
		msg, err := obj.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, msg)
	}
	msgs = append(msgs, benchPodMessage(t))
	r := rand.New(rand.NewSource(1))
	iterations, accepted := 20000, 0
	if testing.Short() {
		iterations = 2000
	}
	for i := range iterations {
		msg := bytes.Clone(msgs[r.Intn(len(msgs))])
		for range 1 + r.Intn(3) {
			if len(msg) == 0 {
				break
			}
			switch at := r.Intn(len(msg)); r.Intn(4) {
			case 0:
				msg[at] ^= byte(1 << r.Intn(8))
			case 1:
				msg[at] = byte(r.Intn(256))
			case 2:
				msg = msg[:at]
			default:
				msg = append(msg[:at], msg[at+1:]...)
			}
		}
		rv := strconv.Itoa(r.Intn(1 << 30))
		got, err := SetResourceVersion(nil, msg, rv)
		if err != nil {
			continue
		}
		accepted++
		key, start, end, err := metadataField(got)
		if err != nil {
			t.Fatalf("#%d: accepted %x, wrote %x, which has no metadata: %v", i, msg, got, err)
		}
		at, rvEnd, err := resourceVersionField(got[start:end])
		if err != nil || string(got[start+at:start+rvEnd]) != string(pbBytes(6, []byte(rv))) {
			t.Fatalf("#%d: accepted %x, wrote %x: resourceVersion %x, %v", i, msg, got, got[start+at:start+rvEnd], err)
		}
		inKey, _, inEnd, _ := metadataField(msg)
		if !bytes.Equal(got[:key], msg[:inKey]) || !bytes.Equal(got[end:], msg[inEnd:]) {
			t.Fatalf("#%d: accepted %x, wrote %x: changed what is outside metadata", i, msg, got)
		}
	}
	if accepted == 0 {
		t.Error("no damaged message was accepted: the test checks nothing")
	}
	t.Logf("%d of %d damaged messages accepted", accepted, iterations)
}

func BenchmarkSetResourceVersion(b *testing.B) {
	msg := benchPodMessage(b)
	var buf []byte
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = SetResourceVersion(buf[:0], msg, "1234567"); err != nil {
			b.Fatal(err)
		}
	}
}
