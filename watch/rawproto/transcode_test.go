package rawproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand"
	"reflect"
	"testing"
	"time"

	fuzz "github.com/google/gofuzz"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// transcodedTypes are the types the API server caches.
var transcodedTypes = []runtime.Object{
	&corev1.Pod{}, &corev1.Node{}, &corev1.Namespace{}, &corev1.Event{},
	&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.ServiceAccount{},
	&coordinationv1.Lease{}, &eventsv1.Event{}, &policyv1.PodDisruptionBudget{},
	&rbacv1.Role{}, &rbacv1.ClusterRole{}, &rbacv1.RoleBinding{}, &rbacv1.ClusterRoleBinding{},
	&certificatesv1.CertificateSigningRequest{}, &schedulingv1.PriorityClass{},
	&admissionregistrationv1.MutatingWebhookConfiguration{},
	&admissionregistrationv1.ValidatingWebhookConfiguration{},
	&flowcontrolv1.FlowSchema{}, &flowcontrolv1.PriorityLevelConfiguration{},
}

type marshaler interface{ Marshal() ([]byte, error) }

// gogoOf is what the watch cache computed before the transcoder: the
// JSON decoded by encoding/json, marshalled by gogo.
func gogoOf(t *testing.T, typ reflect.Type, data []byte) []byte {
	t.Helper()
	obj := reflect.New(typ).Interface()
	if err := json.Unmarshal(data, obj); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	want, err := obj.(marshaler).Marshal()
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return want
}

// TestTranscodeFuzzed: for random objects of every cached type, the
// transcoded JSON is the decoded object's gogo Marshal, byte for byte.
// Breaking any rule (zero values always written, pointers only when set,
// map order, inlined members nested, times in whole seconds) fails it.
func TestTranscodeFuzzed(t *testing.T) {
	iterations := 100
	if testing.Short() {
		iterations = 40
	}
	f := newFuzzer(1)
	for _, proto := range transcodedTypes {
		typ := reflect.TypeOf(proto).Elem()
		t.Run(typ.String(), func(t *testing.T) {
			tc, err := NewTranscoder(typ)
			if err != nil {
				t.Fatal(err)
			}
			for i := range iterations {
				obj := reflect.New(typ).Interface()
				f.Fuzz(obj)
				data, err := json.Marshal(obj)
				if err != nil {
					t.Fatalf("#%d: encode: %v", i, err)
				}
				want := gogoOf(t, typ, data)
				got, err := tc.Append([]byte("prefix"), data)
				if err != nil {
					t.Fatalf("#%d: transcode %s: %v", i, data, err)
				}
				if !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
					t.Fatalf("#%d: transcoded\n%x\nwant\n%x\nfrom %s", i, got, want, data)
				}
			}
		})
	}
}

// TestTranscodeEdges covers JSON the fuzzer rarely writes: escapes,
// nulls, empty objects and arrays, absent members, unsorted maps.
func TestTranscodeEdges(t *testing.T) {
	podType := reflect.TypeFor[corev1.Pod]()
	cases := []string{
		`{}`,
		`{"kind":"Pod","apiVersion":"v1"}`,
		`{"metadata":null,"spec":null,"status":null}`,
		`{"metadata":{}}`,
		`{"metadata":{"name":"a\u003cb\u0026c\u2028\"\\","labels":{"b":"2","a":"1","c":""},"annotations":{}}}`,
		`{"metadata":{"creationTimestamp":null,"deletionTimestamp":null,"deletionGracePeriodSeconds":null}}`,
		`{"metadata":{"creationTimestamp":"1969-12-31T23:59:59Z","deletionTimestamp":"0001-01-01T00:00:00Z"}}`,
		`{"metadata":{"creationTimestamp":"2026-11-26T23:00:00.123456Z","deletionTimestamp":"2026-11-26T23:00:00+02:00"}}`,
		`{"metadata":{"managedFields":[{"manager":"m","time":null,"fieldsV1":null},{"fieldsV1":{"f:spec":{".":{}}}}]}}`,
		`{"spec":{"containers":[],"volumes":[{"name":"v","configMap":{"name":"c","items":null}}],"overhead":{"cpu":"1","memory":"1Gi"}}}`,
		`{"spec":{"containers":[{"name":"c","resources":{"requests":{"memory":"1000Mi","cpu":"1000m"}},"ports":[{"containerPort":-1}]}]}}`,
		`{"spec":{"securityContext":{"supplementalGroups":[1,2,-3]},"activeDeadlineSeconds":0,"hostNetwork":false}}`,
		`{"spec":{"containers":[{"name":"c","livenessProbe":{"httpGet":{"port":8080,"path":"/"},"periodSeconds":3}},{"name":"d","readinessProbe":{"tcpSocket":{"port":"http"}}}]}}`,
		`{"status":{"conditions":[{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-01-01T00:00:00Z"}],"podIPs":[{"ip":"10.0.0.1"}],"startTime":"2026-01-01T00:00:00Z"}}`,
	}
	tc, err := NewTranscoder(podType)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		got, err := tc.Append(nil, []byte(c))
		if err != nil {
			t.Errorf("transcode %s: %v", c, err)
			continue
		}
		if want := gogoOf(t, podType, []byte(c)); !bytes.Equal(got, want) {
			t.Errorf("transcode %s:\n%x\nwant\n%x", c, got, want)
		}
	}

	secretType := reflect.TypeFor[corev1.Secret]()
	stc, err := NewTranscoder(secretType)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{`{"data":{"b":"AAE=","a":null,"c":""}}`, `{"data":{}}`, `{"data":null,"stringData":{"x":"y"}}`} {
		got, err := stc.Append(nil, []byte(c))
		if err != nil {
			t.Errorf("transcode %s: %v", c, err)
			continue
		}
		if want := gogoOf(t, secretType, []byte(c)); !bytes.Equal(got, want) {
			t.Errorf("transcode %s:\n%x\nwant\n%x", c, got, want)
		}
	}
}

// TestTranscodeRefuses: what the plan does not expect is an error (the
// cache then decodes and marshals), never a wrong encoding.
func TestTranscodeRefuses(t *testing.T) {
	tc, err := NewTranscoder(reflect.TypeFor[corev1.Pod]())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{
		`{"metadata":{"nmae":"typo"}}`,
		`{"metadata":{"name":1}}`,
		`{"metadata":{"generation":"1"}}`,
		`{"metadata":{"generation":1.5}}`,
		`{"spec":{"containers":[{"ports":[{"containerPort":4294967296}]}]}}`,
		`{"metadata":{"creationTimestamp":"yesterday"}}`,
		`{"spec":{"hostNetwork":"yes"}}`,
		`{"spec":{"overhead":{"cpu":"lots"}}}`,
		`{"metadata":{"labels":{"a":"1","a":"2"}}}`,
		`{"metadata":`,
		`[]`,
	} {
		if _, err := tc.Append(nil, []byte(c)); err == nil {
			t.Errorf("transcode %s: no error", c)
		}
	}
	type withFloat struct {
		F float64 `json:"f" protobuf:"fixed64,1,opt,name=f"`
	}
	if _, err := NewTranscoder(reflect.TypeFor[withFloat]()); !errors.Is(err, ErrUnsupported) {
		t.Errorf("a float field: %v, want ErrUnsupported", err)
	}
}

// newFuzzer fills objects with values whose JSON round-trips: times in
// whole seconds (microseconds for MicroTime), quantities, int-or-strings
// and raw JSON that encoding/json accepts, strings with characters it
// escapes.
func newFuzzer(seed int64) *fuzz.Fuzzer {
	words := []string{"", "a", "pod-1", "kube-system", "<&>", "é\u2028", `"\`, "\x01tab\t", "x.y/z"}
	quantities := []string{"0", "1", "100m", "1500m", "1Gi", "512Mi", "1e3", "12345678", "1.5", "-2"}
	raws := []string{`{}`, `{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`, `{"a":[1,"b",null,true]}`}
	return fuzz.NewWithSeed(seed).NilChance(0.3).NumElements(0, 3).Funcs(
		func(s *string, c fuzz.Continue) { *s = words[c.Intn(len(words))] },
		func(tm *metav1.Time, c fuzz.Continue) {
			if c.Intn(5) == 0 {
				*tm = metav1.Time{}
				return
			}
			*tm = metav1.Unix(c.Int63n(1<<34), 0)
		},
		func(tm *metav1.MicroTime, c fuzz.Continue) {
			*tm = metav1.NewMicroTime(time.Unix(c.Int63n(1<<34), c.Int63n(1e9)).Truncate(time.Microsecond))
		},
		func(q *resource.Quantity, c fuzz.Continue) {
			*q = resource.MustParse(quantities[c.Intn(len(quantities))])
		},
		func(v *intstr.IntOrString, c fuzz.Continue) {
			if c.RandBool() {
				*v = intstr.FromInt32(c.Int31() - 1<<30)
			} else {
				*v = intstr.FromString(words[c.Intn(len(words))])
			}
		},
		func(f *metav1.FieldsV1, c fuzz.Continue) { f.Raw = []byte(raws[c.Intn(len(raws))]) },
		func(r *runtime.RawExtension, c fuzz.Continue) {
			if c.RandBool() {
				r.Raw = []byte(raws[c.Intn(len(raws))])
			}
		},
		func(d *metav1.Duration, c fuzz.Continue) { d.Duration = time.Duration(c.Int63n(1e12)) },
	).RandSource(rand.NewSource(seed))
}

// BenchmarkTranscodePod compares the transcoder with what it replaces
// (decode with encoding/json, gogo Marshal) on a running pod as the
// scale benchmark's agents leave it, managedFields included.
func BenchmarkTranscodePod(b *testing.B) {
	data := benchPodJSON(b)
	typ := reflect.TypeFor[corev1.Pod]()
	b.Run("transcode", func(b *testing.B) {
		tc, err := NewTranscoder(typ)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		var buf []byte
		for b.Loop() {
			if buf, err = tc.Append(buf[:0], data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode+marshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var pod corev1.Pod
			if err := json.Unmarshal(data, &pod); err != nil {
				b.Fatal(err)
			}
			if _, err := pod.Marshal(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchPodJSON(tb testing.TB) []byte {
	tb.Helper()
	now := metav1.Unix(1764200000, 0)
	fields := func(s string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(s)} }
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "load-7-00123", Namespace: "bench", UID: "8d1f4c2e-2b0f-4c5e-9a43-0d3f6d0a7b11",
			ResourceVersion: "1234567", CreationTimestamp: now,
			Labels: map[string]string{"app": "load", "group": "7"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1: fields(`{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:group":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: fields(`{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.1.2.3\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`)},
			},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10", ImagePullPolicy: corev1.PullIfNotPresent,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, NodeName: "node-0042",
			SchedulerName: "default-scheduler", SecurityContext: &corev1.PodSecurityContext{},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64)},
			},
			Priority: new(int32), EnableServiceLinks: new(bool), PreemptionPolicy: new(corev1.PreemptionPolicy),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.0.42", PodIP: "10.1.2.3", StartTime: &now, QOSClass: corev1.PodQOSBurstable,
			HostIPs: []corev1.HostIP{{IP: "10.0.0.42"}}, PodIPs: []corev1.PodIP{{IP: "10.1.2.3"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", Ready: true, Image: "registry.k8s.io/pause:3.10", ImageID: "sha256:873ed75102791e5b0b8a7fcd41606c92fcec98d56d05ead4ac5131650004c136",
				ContainerID: "corekube://0123456789abcdef", Started: new(bool),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			}},
		},
	}
	data, err := json.Marshal(pod)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// TestTranscodeBenchPod: the benchmark's pod transcodes exactly.
func TestTranscodeBenchPod(t *testing.T) {
	data := benchPodJSON(t)
	typ := reflect.TypeFor[corev1.Pod]()
	tc, err := NewTranscoder(typ)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tc.Append(nil, data)
	if err != nil {
		t.Fatal(err)
	}
	if want := gogoOf(t, typ, data); !bytes.Equal(got, want) {
		t.Fatalf("transcoded %x, want %x", got, want)
	}
}
