package rawproto

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	fuzz "github.com/google/gofuzz"
	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type unmarshaler interface{ Unmarshal([]byte) error }

// jsonOf is what the transcoder replaces: msg decoded by gogo, kind and
// apiVersion set, marshalled by encoding/json. ok is false when either
// step fails (the transcoder must fail then too).
func jsonOf(typ reflect.Type, msg []byte, apiVersion, kind string) ([]byte, bool) {
	pv := reflect.New(typ)
	if err := pv.Interface().(unmarshaler).Unmarshal(msg); err != nil {
		return nil, false
	}
	if tm := pv.Elem().FieldByName("TypeMeta"); tm.IsValid() {
		tm.Set(reflect.ValueOf(metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}))
	}
	want, err := json.Marshal(pv.Interface())
	return want, err == nil
}

// checkJSON asserts the contract on msg: the transcoder's JSON is the
// reference's, or an error. strict also fails an error the reference does
// not share.
func checkJSON(t *testing.T, tc *JSONTranscoder, typ reflect.Type, msg []byte, strict bool) (equal bool) {
	t.Helper()
	want, ok := jsonOf(typ, msg, "group/v1", "Kind")
	got, err := tc.AppendJSON([]byte("prefix"), msg, "group/v1", "Kind")
	if string(got[:len("prefix")]) != "prefix" {
		t.Fatalf("dst's contents changed: %q", got)
	}
	got = got[len("prefix"):]
	switch {
	case err != nil && len(got) != 0:
		t.Fatalf("error %v with output %s", err, got)
	case err != nil && strict && ok:
		t.Fatalf("error %v on %x, want\n%s", err, msg, want)
	case err == nil && !ok:
		t.Fatalf("no error on %x (the reference fails), got\n%s", msg, got)
	case err == nil && !bytes.Equal(got, want):
		t.Fatalf("on %x got\n%s\nwant\n%s", msg, got, want)
	}
	return err == nil
}

// TestJSONFuzzed: for random objects of every cached type, the JSON
// transcoded from gogo's message is encoding/json's of the message
// gogo decodes, byte for byte. Any rule broken (member order, inlined
// members, omitempty, nil against empty, times, escapes, map order)
// fails it.
func TestJSONFuzzed(t *testing.T) {
	iterations := 300
	if testing.Short() {
		iterations = 60
	}
	f := newJSONFuzzer(2)
	// ControllerRevision: a RawExtension.
	for _, proto := range append(slices.Clip(transcodedTypes), &appsv1.ControllerRevision{}) {
		typ := reflect.TypeOf(proto).Elem()
		t.Run(typ.String(), func(t *testing.T) {
			tc, err := NewJSONTranscoder(typ)
			if err != nil {
				t.Fatal(err)
			}
			equal := 0
			for range iterations {
				obj := reflect.New(typ).Interface()
				f.Fuzz(obj)
				msg, err := obj.(marshaler).Marshal()
				if err != nil {
					continue // a value gogo cannot write
				}
				if checkJSON(t, tc, typ, msg, true) {
					equal++
				}
			}
			// Some objects hold what encoding/json refuses (invalid raw
			// JSON, an IntOrString of no type): most must not.
			if equal < iterations/2 {
				t.Errorf("%d of %d objects transcoded", equal, iterations)
			}
			t.Logf("%d of %d objects transcoded", equal, iterations)
		})
	}
}

// TestJSONMutated: byte flips, cuts and insertions in real messages make
// the transcoder fail or agree with the reference, never disagree.
func TestJSONMutated(t *testing.T) {
	iterations := 3000
	if testing.Short() {
		iterations = 500
	}
	f := newJSONFuzzer(3)
	r := rand.New(rand.NewSource(3))
	equal := 0
	for _, proto := range []runtime.Object{&corev1.Pod{}, &corev1.Node{}, &policyv1.PodDisruptionBudget{}, &certificatesv1.CertificateSigningRequest{}} {
		typ := reflect.TypeOf(proto).Elem()
		tc, err := NewJSONTranscoder(typ)
		if err != nil {
			t.Fatal(err)
		}
		for range iterations {
			obj := reflect.New(typ).Interface()
			f.Fuzz(obj)
			msg, err := obj.(marshaler).Marshal()
			if err != nil || len(msg) == 0 {
				continue
			}
			for range 1 + r.Intn(3) {
				switch i := r.Intn(len(msg)); r.Intn(3) {
				case 0:
					msg[i] ^= byte(1 << r.Intn(8))
				case 1:
					msg = msg[:i]
				default:
					msg = append(msg[:i:i], append([]byte{byte(r.Intn(256))}, msg[i:]...)...)
				}
				if len(msg) == 0 {
					break
				}
			}
			if checkJSON(t, tc, typ, msg, false) {
				equal++
			}
		}
	}
	t.Logf("%d mutated messages transcoded, the others refused", equal)
}

// TestJSONPrefixes: every prefix of a pod's message is either a message
// of its own (cut between fields), transcoded as the reference does, or
// an error.
func TestJSONPrefixes(t *testing.T) {
	typ := reflect.TypeFor[corev1.Pod]()
	tc, err := NewJSONTranscoder(typ)
	if err != nil {
		t.Fatal(err)
	}
	msg := benchPodMessage(t)
	for n := range len(msg) {
		checkJSON(t, tc, typ, msg[:n], false)
	}
	checkJSON(t, tc, typ, msg, true)
	// Cut inside the last field (a length-delimited one): truncated.
	if _, err := tc.AppendJSON(nil, msg[:len(msg)-1], "v1", "Pod"); err == nil {
		t.Error("a truncated message: no error")
	}
}

// TestJSONConcurrent: transcoders of several types in parallel, sharing
// plans, caches and scratch (the race detector watches).
func TestJSONConcurrent(t *testing.T) {
	types := []reflect.Type{reflect.TypeFor[corev1.Pod](), reflect.TypeFor[corev1.Node](), reflect.TypeFor[policyv1.PodDisruptionBudget]()}
	var msgs [][][]byte
	f := newJSONFuzzer(6)
	for _, typ := range types {
		var ms [][]byte
		for range 20 {
			obj := reflect.New(typ).Interface()
			f.Fuzz(obj)
			if msg, err := obj.(marshaler).Marshal(); err == nil {
				ms = append(ms, msg)
			}
		}
		msgs = append(msgs, ms)
	}
	done := make(chan error)
	for g := range 4 {
		go func() {
			var err error
			defer func() { done <- err }()
			for i := range 200 {
				k := (g + i) % len(types)
				tc, terr := NewJSONTranscoder(types[k])
				if terr != nil {
					err = terr
					return
				}
				msg := msgs[k][i%len(msgs[k])]
				want, ok := jsonOf(types[k], msg, "group/v1", "Kind")
				got, terr := tc.AppendJSON(nil, msg, "group/v1", "Kind")
				if ok && (terr != nil || !bytes.Equal(got, want)) || !ok && terr == nil {
					err = fmt.Errorf("%v: got %s, %v; want %s", types[k], got, terr, want)
					return
				}
			}
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// FuzzAppendJSON: for any input, AppendJSON fails or writes what gogo's
// Unmarshal and encoding/json write. The seeds run with the tests; go
// test -fuzz FuzzAppendJSON searches further.
func FuzzAppendJSON(f *testing.F) {
	f.Add(benchPodMessage(f))
	fz := newJSONFuzzer(7)
	for range 20 {
		var pod corev1.Pod
		fz.Fuzz(&pod)
		if msg, err := pod.Marshal(); err == nil {
			f.Add(msg)
		}
	}
	typ := reflect.TypeFor[corev1.Pod]()
	tc, err := NewJSONTranscoder(typ)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		checkJSON(t, tc, typ, msg, false)
	})
}

// benchPodMessage is the benchmark's pod as gogo writes it, with what a
// Deployment's pod has besides: an owner, annotations, a port, the
// environment, the service account token's projected volume and its
// mount (about 4 KB of JSON).
func benchPodMessage(tb testing.TB) []byte {
	tb.Helper()
	var pod corev1.Pod
	if err := json.Unmarshal(benchPodJSON(tb), &pod); err != nil {
		tb.Fatal(err)
	}
	pod.GenerateName = "load-7-"
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "load-7-5d8f9c7b6d", UID: "0b7e3f5a-6c1d-4f2e-8a9b-1c2d3e4f5a6b", Controller: new(true), BlockOwnerDeletion: new(true)}}
	pod.Annotations = map[string]string{"kubernetes.io/psp": "restricted", "prometheus.io/scrape": "true"}
	c := &pod.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	c.Env = []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}, {Name: "LOG_LEVEL", Value: "info"}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
	pod.Spec.ServiceAccountName, pod.Spec.DeprecatedServiceAccount = "default", "default"
	expiry := int64(3607)
	mode := int32(420)
	pod.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &expiry, Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}}
	msg, err := pod.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	return msg
}

// Hand-built messages: keys and fields.
func pbKey(num, wire int) []byte { return binary.AppendUvarint(nil, uint64(num)<<3|uint64(wire)) }

func pbBytes(num int, b []byte) []byte {
	return append(binary.AppendUvarint(pbKey(num, wireBytes), uint64(len(b))), b...)
}

func pbVarint(num int, v uint64) []byte { return binary.AppendUvarint(pbKey(num, wireVarint), v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestJSONEdges covers what the fuzzer rarely writes: present but empty
// against absent, escapes, negative and wrapped integers, zero times,
// fields out of number order, packed integers, unsorted map entries.
func TestJSONEdges(t *testing.T) {
	podType := reflect.TypeFor[corev1.Pod]()
	pod, err := NewJSONTranscoder(podType)
	if err != nil {
		t.Fatal(err)
	}
	meta := func(parts ...[]byte) []byte { return pbBytes(1, cat(parts...)) }
	spec := func(parts ...[]byte) []byte { return pbBytes(2, cat(parts...)) }
	container := func(parts ...[]byte) []byte { return pbBytes(2, cat(parts...)) } // PodSpec.containers
	minus1 := uint64(math.MaxUint64)                                               // -1 as gogo writes an int32
	cases := map[string][]byte{
		"empty":                  nil,
		"empty metadata":         meta(),
		"escapes":                meta(pbBytes(1, []byte("a<b>&c\u2028\u2029\"\\\x00\x1f\x7f\b\f\n\r\t\xff\xc3é"))),
		"label escapes":          meta(pbBytes(11, cat(pbBytes(1, []byte("<k>")), pbBytes(2, []byte("v\xfe"))))),
		"labels unsorted":        meta(pbBytes(11, cat(pbBytes(1, []byte("b")), pbBytes(2, []byte("2")))), pbBytes(11, cat(pbBytes(1, []byte("a")), pbBytes(2, []byte("1"))))),
		"label without value":    meta(pbBytes(11, pbBytes(1, []byte("k")))),
		"label without key":      meta(pbBytes(11, pbBytes(2, []byte("v")))),
		"fields reversed":        cat(spec(pbBytes(9, []byte("default"))), meta(pbBytes(3, []byte("ns")), pbBytes(1, []byte("n")))),
		"zero creation time":     meta(pbBytes(8, nil)),
		"epoch creation time":    meta(pbBytes(8, pbVarint(1, 0))),
		"negative time":          meta(pbBytes(8, pbVarint(1, minus1))),
		"year 1 (zero) time":     meta(pbBytes(8, pbVarint(1, uint64(time.Time{}.Unix())))),
		"time with nanos":        meta(pbBytes(8, cat(pbVarint(1, 1764200000), pbVarint(2, 999999999)))),
		"zero deletion time":     meta(pbBytes(9, nil)),
		"negative generation":    meta(pbVarint(7, minus1)),
		"negative grace":         meta(pbVarint(10, minus1)),
		"negative port":          spec(container(pbBytes(1, []byte("c")), pbBytes(6, pbVarint(3, minus1)))),
		"port wraps to int32":    spec(container(pbBytes(6, pbVarint(3, 1<<32|7)))),
		"bool from 2":            spec(pbVarint(11, 2)),
		"false hostNetwork":      spec(pbVarint(11, 0)),
		"packed groups":          spec(pbBytes(14, pbBytes(4, cat(binary.AppendUvarint(nil, 5), binary.AppendUvarint(nil, minus1))))),
		"packed empty groups":    spec(pbBytes(14, pbBytes(4, nil))),
		"mixed groups":           spec(pbBytes(14, cat(pbVarint(4, 1), pbBytes(4, binary.AppendUvarint(nil, 2)), pbVarint(4, 3)))),
		"interleaved containers": spec(container(pbBytes(1, []byte("a"))), pbBytes(1, pbBytes(1, cat(pbBytes(1, []byte("v"))))), container(pbBytes(1, []byte("b")))),
		"empty volume source":    spec(pbBytes(1, cat(pbBytes(1, []byte("v")), pbBytes(2, nil)))),
		"volume without source":  spec(pbBytes(1, pbBytes(1, []byte("v")))),
		"empty container":        spec(container()),
		"quantity 1000m":         spec(container(pbBytes(8, pbBytes(2, cat(pbBytes(1, []byte("cpu")), pbBytes(2, pbBytes(1, []byte("1000m")))))))),
		"quantity absent":        spec(container(pbBytes(8, pbBytes(2, pbBytes(1, []byte("cpu")))))),
		"empty string port":      spec(container(pbBytes(10, pbBytes(1, pbBytes(2, pbBytes(2, cat(pbVarint(1, 1), pbBytes(3, []byte("<p>"))))))))),
		"managedFields":          meta(pbBytes(17, cat(pbBytes(1, []byte("m")), pbBytes(7, pbBytes(1, []byte(" {\"f:a\" : {\"<\":[1, -2.5e+3, true,null,\"\\u2028\u2028\"]}} \n")))))),
		"nil fieldsV1 raw":       meta(pbBytes(17, pbBytes(7, nil))),
		"fieldsV1 null":          meta(pbBytes(17, pbBytes(7, pbBytes(1, []byte("null"))))),
		"fieldsV1 empty":         meta(pbBytes(17, pbBytes(7, pbBytes(1, nil)))),
		"fieldsV1 invalid":       meta(pbBytes(17, pbBytes(7, pbBytes(1, []byte("{\"a\":}"))))),
		"fieldsV1 CBOR":          meta(pbBytes(17, pbBytes(7, pbBytes(1, []byte{0xa0})))),
		"fieldsV1 string":        meta(pbBytes(17, pbBytes(7, pbBytes(1, []byte(`"x"`))))),
	}
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			checkJSON(t, pod, podType, msg, !strings.HasPrefix(name, "fieldsV1 "))
		})
	}
	// Kinds that must fail: JSON would fail, or needs a decoder.
	for _, name := range []string{"fieldsV1 empty", "fieldsV1 invalid", "fieldsV1 CBOR"} {
		if _, err := pod.AppendJSON(nil, cases[name], "v1", "Pod"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}

	// Bytes, present but empty against absent; an empty map; a map of
	// named lists.
	csrType := reflect.TypeFor[certificatesv1.CertificateSigningRequest]()
	csr, err := NewJSONTranscoder(csrType)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []*certificatesv1.CertificateSigningRequest{
		{},
		{Spec: certificatesv1.CertificateSigningRequestSpec{Request: []byte{}, Usages: []certificatesv1.KeyUsage{}, Extra: map[string]certificatesv1.ExtraValue{}}},
		{Spec: certificatesv1.CertificateSigningRequestSpec{Request: []byte("<pem>"), Extra: map[string]certificatesv1.ExtraValue{"b": nil, "a": {"x", "<y>"}, "c": {}}}},
		{Status: certificatesv1.CertificateSigningRequestStatus{Certificate: []byte{}, Conditions: []certificatesv1.CertificateSigningRequestCondition{{}}}},
	} {
		msg, err := obj.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		checkJSON(t, csr, csrType, msg, true)
	}
	// A map of times: disruptedPods.
	pdbType := reflect.TypeFor[policyv1.PodDisruptionBudget]()
	pdb, err := NewJSONTranscoder(pdbType)
	if err != nil {
		t.Fatal(err)
	}
	checkJSON(t, pdb, pdbType, pbBytes(3, cat(pbBytes(2, pbBytes(1, []byte("zero"))), pbBytes(2, cat(pbBytes(1, []byte("p")), pbBytes(2, pbVarint(1, 1)))))), true)
	// MicroTimes: renewTime with nanoseconds to truncate.
	leaseType := reflect.TypeFor[coordinationv1.Lease]()
	lease, err := NewJSONTranscoder(leaseType)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range [][]byte{nil, pbVarint(1, 5), cat(pbVarint(1, 1764200000), pbVarint(2, 123456789)), pbVarint(2, minus1), pbVarint(1, uint64(time.Time{}.Unix()))} {
		checkJSON(t, lease, leaseType, pbBytes(2, pbBytes(4, ts)), true)
	}
	// Secrets: a map of []byte, with a value absent (null) or empty.
	secretType := reflect.TypeFor[corev1.Secret]()
	secret, err := NewJSONTranscoder(secretType)
	if err != nil {
		t.Fatal(err)
	}
	checkJSON(t, secret, secretType, cat(pbBytes(2, pbBytes(1, []byte("a"))), pbBytes(2, cat(pbBytes(1, []byte("b")), pbBytes(2, nil))), pbBytes(2, cat(pbBytes(1, []byte("c")), pbBytes(2, []byte{0, 1, 0xff})))), true)
	// TypeMeta: omitted when empty.
	got, err := pod.AppendJSON(nil, nil, "", "")
	if err != nil || string(got) != `{"metadata":{"creationTimestamp":null},"spec":{"containers":null},"status":{}}` {
		t.Errorf("no TypeMeta: %s, %v", got, err)
	}
	got, err = pod.AppendJSON(nil, nil, "v1", "Pod")
	if err != nil || !strings.HasPrefix(string(got), `{"kind":"Pod","apiVersion":"v1","metadata"`) {
		t.Errorf("TypeMeta: %s, %v", got, err)
	}
}

// TestJSONRefuses: input gogo never writes (or would merge), and types
// that cannot be planned, are errors.
func TestJSONRefuses(t *testing.T) {
	tc, err := NewJSONTranscoder(reflect.TypeFor[corev1.Pod]())
	if err != nil {
		t.Fatal(err)
	}
	name := pbBytes(1, []byte("n"))
	for what, msg := range map[string][]byte{
		"unknown field":            pbBytes(9, nil),
		"unknown nested field":     pbBytes(1, pbBytes(99, nil)),
		"field 0":                  pbBytes(0, nil),
		"wrong wire type":          pbVarint(1, 1),
		"fixed64":                  append(pbKey(1, 1), make([]byte, 8)...),
		"metadata twice":           cat(pbBytes(1, nil), pbBytes(1, nil)),
		"name twice":               pbBytes(1, cat(name, name)),
		"truncated key":            {0x8a},
		"truncated length":         {0x0a},
		"truncated value":          {0x0a, 0x05, 0x0a},
		"truncated varint":         pbBytes(1, []byte{0x38, 0x80}),
		"overlong varint":          pbBytes(1, append([]byte{0x38}, bytes.Repeat([]byte{0xff}, 10)...)),
		"truncated packed":         pbBytes(2, pbBytes(14, pbBytes(4, []byte{0x80}))),
		"map key twice":            pbBytes(1, cat(pbBytes(11, pbBytes(1, []byte("a"))), pbBytes(11, pbBytes(1, []byte("a"))))),
		"map entry unknown field":  pbBytes(1, pbBytes(11, pbBytes(3, nil))),
		"timestamp unknown field":  pbBytes(1, pbBytes(8, pbVarint(3, 1))),
		"timestamp wire type":      pbBytes(1, pbBytes(8, pbBytes(1, nil))),
		"bad quantity":             pbBytes(2, pbBytes(2, pbBytes(8, pbBytes(2, cat(pbBytes(1, []byte("cpu")), pbBytes(2, pbBytes(1, []byte("lots")))))))),
		"fieldsV1 unknown field":   pbBytes(1, pbBytes(17, pbBytes(7, pbBytes(2, nil)))),
		"invalid IntOrString type": pbBytes(2, pbBytes(2, pbBytes(10, pbBytes(1, pbBytes(2, pbBytes(2, pbVarint(1, 7))))))),
	} {
		if got, err := tc.AppendJSON([]byte("x"), msg, "v1", "Pod"); err == nil || string(got) != "x" {
			t.Errorf("%s: %q, %v; want an error and dst unchanged", what, got, err)
		}
	}
	type withFloat struct {
		F float64 `json:"f" protobuf:"fixed64,1,opt,name=f"`
	}
	type withString struct {
		N int64 `json:"n,string" protobuf:"varint,1,opt,name=n"`
	}
	type withJSONOnly struct {
		N int64 `json:"n"`
	}
	type withShadow struct {
		corev1.LocalObjectReference `json:",inline" protobuf:"bytes,1,opt,name=ref"`
		Name                        string `json:"name" protobuf:"bytes,2,opt,name=name"`
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[withFloat](), reflect.TypeFor[withString](), reflect.TypeFor[withJSONOnly](), reflect.TypeFor[withShadow](), reflect.TypeFor[runtime.Unknown]()} {
		if _, err := NewJSONTranscoder(typ); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%v: %v, want ErrUnsupported", typ, err)
		}
	}
}

// TestCompactJSON: FieldsV1's raw JSON is written as encoding/json
// writes what a MarshalJSON returns, or fails when it fails, for random
// token soups around valid JSON.
func TestCompactJSON(t *testing.T) {
	tokens := []string{"{", "}", "[", "]", ",", ":", " ", "\n", `"a"`, `"f:x"`, `"<&>"`, "\"\u2028\u2029\"", `"\u00e9\n\"\\\/"`, `"\x"`, `"\u12g4"`,
		"\"\x01\"", "\"\xff\xe2\x80\"", "0", "-0", "01", "1.", "1.5", "-2e+10", "3E-1", "1e", "-", "true", "false", "null", "nul", "tru", "\t", "{}", "[]", `"k":`, `"k":{}`}
	r := rand.New(rand.NewSource(4))
	valid := 0
	for range 200000 {
		var b []byte
		for range 1 + r.Intn(12) {
			b = append(b, tokens[r.Intn(len(tokens))]...)
		}
		want, err := json.Marshal(metav1.FieldsV1{Raw: b})
		got, gotErr := appendCompactJSON([]byte("x"), b)
		if (err == nil) != (gotErr == nil) || err == nil && !bytes.Equal(got[1:], want) || gotErr != nil && string(got) != "x" {
			t.Fatalf("compact %q: %q, %v; want %q, %v", b, got, gotErr, want, err)
		}
		if err == nil {
			valid++
		}
	}
	if valid < 1000 {
		t.Fatalf("only %d valid inputs: the test tests little", valid)
	}
	deep := strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)
	if _, err := appendCompactJSON(nil, []byte(deep)); err == nil {
		t.Error("nesting beyond maxJSONDepth: no error")
	}
}

// TestUvarint: the varint reader agrees with binary.Uvarint where it
// reads one, and refuses what binary.Uvarint refuses.
func TestUvarint(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for range 100000 {
		b := make([]byte, r.Intn(12))
		for i := range b {
			b[i] = byte(r.Intn(256))
			if r.Intn(3) == 0 {
				b[i] |= 0x80
			}
		}
		want, n := binary.Uvarint(b)
		got, next, err := uvarint(b, 0)
		if n <= 0 && err == nil || n > 0 && (err != nil || got != want || next != n) {
			t.Fatalf("%x: %d, %d, %v; want %d, %d", b, got, next, err, want, n)
		}
	}
}

// TestJSONString: strings are escaped as encoding/json escapes them,
// for every byte and some runes around the ones it treats specially.
func TestJSONString(t *testing.T) {
	var cases []string
	for c := range 256 {
		cases = append(cases, string([]byte{'a', byte(c), 'b'}), string([]byte{byte(c)}))
	}
	cases = append(cases, "\u2027\u2028\u2029\u202a", "\xe2\x80", "\xe2\x80\xa8x", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\U0010ffff", "é😀", "")
	for _, s := range cases {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: %s, want %s", s, got, want)
		}
		if got := appendJSONString(nil, []byte(s)); !bytes.Equal(got, want) {
			t.Errorf("%q as bytes: %s, want %s", s, got, want)
		}
	}
}

// newJSONFuzzer fills objects with values gogo can write, wider than
// what kube writes (so that the transcoder's reading of them is tested):
// times with nanoseconds and far from now, quantities of all forms,
// raw JSON with white space and characters to escape (and some that is
// not JSON), strings with characters to escape and invalid UTF-8.
func newJSONFuzzer(seed int64) *fuzz.Fuzzer {
	words := []string{"", "a", "pod-1", "kube-system", "<&>", "é\u2028\u2029", `"\`, "\x01tab\t\b\f\r\n\x7f", "x.y/z", "\xff\xfe", "a\xc3", "😀", "\xed\xa0\x80"}
	quantities := []string{"0", "1", "100m", "1000m", "1500m", "1Gi", "1024Mi", "512Mi", "1e3", "1E3", "12345678", "1.5", "-2", "0.1", "1k", "100n", "9223372036854775807", "1Ei"}
	raws := []string{`{}`, `{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`, `{"a":[1,"b",null,true]}`, " { \"<\" : [ -1.5e3 , \"\u2028\" ] }\n", `null`, `[1]`, `"s"`}
	// What encoding/json refuses to write, each object's value rarely,
	// so that most objects can be written.
	badRaws := []string{`{"a":}`, ``, "\x01", `{"a":1}x`}
	return fuzz.NewWithSeed(seed).NilChance(0.3).NumElements(0, 3).Funcs(
		func(s *string, c fuzz.Continue) { *s = words[c.Intn(len(words))] },
		func(b *[]byte, c fuzz.Continue) {
			switch c.Intn(3) {
			case 0:
				*b = nil
			case 1:
				*b = []byte{}
			default:
				*b = []byte(words[c.Intn(len(words))])
			}
		},
		func(tm *metav1.Time, c fuzz.Continue) {
			switch c.Intn(5) {
			case 0:
				*tm = metav1.Time{}
			case 1:
				*tm = metav1.NewTime(time.Unix(c.Int63n(1<<40)-1<<39, c.Int63n(1e9)))
			default:
				*tm = metav1.Unix(c.Int63n(1<<34), 0)
			}
		},
		func(tm *metav1.MicroTime, c fuzz.Continue) {
			if c.Intn(5) == 0 {
				*tm = metav1.MicroTime{}
				return
			}
			*tm = metav1.NewMicroTime(time.Unix(c.Int63n(1<<34), c.Int63n(1e9)))
		},
		func(q *resource.Quantity, c fuzz.Continue) {
			switch c.Intn(3) {
			case 0:
				*q = resource.MustParse(quantities[c.Intn(len(quantities))])
			case 1:
				*q = *resource.NewMilliQuantity(c.Int63n(1<<40)-1<<39, resource.DecimalSI)
			default:
				*q = *resource.NewQuantity(c.Int63n(1<<40), resource.BinarySI)
			}
		},
		func(v *intstr.IntOrString, c fuzz.Continue) {
			switch c.Intn(50) {
			case 0:
				*v = intstr.IntOrString{Type: intstr.Type(c.Intn(4)), IntVal: 1, StrVal: "s"}
			case 1:
				*v = intstr.IntOrString{Type: intstr.String, IntVal: 1}
			default:
				if c.RandBool() {
					*v = intstr.FromInt32(int32(c.Uint32()))
				} else {
					*v = intstr.FromString(words[c.Intn(len(words))])
				}
			}
		},
		func(f *metav1.FieldsV1, c fuzz.Continue) {
			switch c.Intn(40) {
			case 0, 1, 2:
				f.Raw = nil
			case 3:
				f.Raw = []byte(badRaws[c.Intn(len(badRaws))])
			default:
				f.Raw = []byte(raws[c.Intn(len(raws))])
			}
		},
		func(r *runtime.RawExtension, c fuzz.Continue) {
			if c.RandBool() {
				r.Raw = []byte(raws[c.Intn(len(raws))])
			}
		},
		func(d *metav1.Duration, c fuzz.Continue) { d.Duration = time.Duration(c.Int63()) },
	).RandSource(rand.NewSource(seed))
}

// BenchmarkJSONPod compares AppendJSON with what it replaces (gogo
// Unmarshal, encoding/json Marshal) on a running pod as the scale
// benchmark's agents leave it, managedFields included.
func BenchmarkJSONPod(b *testing.B) {
	msg := benchPodMessage(b)
	typ := reflect.TypeFor[corev1.Pod]()
	want, _ := jsonOf(typ, msg, "v1", "Pod")
	b.Logf("message %d bytes, JSON %d bytes", len(msg), len(want))
	b.Run("transcode", func(b *testing.B) {
		tc, err := NewJSONTranscoder(typ)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		var buf []byte
		for b.Loop() {
			if buf, err = tc.AppendJSON(buf[:0], msg, "v1", "Pod"); err != nil {
				b.Fatal(err)
			}
		}
		if !bytes.Equal(buf, want) {
			b.Fatalf("got %s\nwant %s", buf, want)
		}
	})
	b.Run("unmarshal+marshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			var pod corev1.Pod
			if err := pod.Unmarshal(msg); err != nil {
				b.Fatal(err)
			}
			pod.APIVersion, pod.Kind = "v1", "Pod"
			if _, err := json.Marshal(&pod); err != nil {
				b.Fatal(err)
			}
		}
	})
}
