package registry

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// runningPod is a pod as a node agent leaves it: scheduled, running, with
// the managedFields of its creator, the scheduler and the kubelet (~4 KB of
// JSON, like the scale bench's pods).
func runningPod() *v1.Pod {
	now := metav1.NewTime(time.Date(2026, 11, 27, 15, 4, 5, 0, time.UTC))
	fields := func(raw string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(raw)} }
	return &v1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-7d4b9c-x2x9z", Namespace: "load-12", UID: "6f1c1a55-6d0e-4f0c-9d51-0d2b8c1f0e11",
			CreationTimestamp: now, Labels: map[string]string{"app": "web", "pod-template-hash": "7d4b9c"},
			Annotations: map[string]string{"note": "<escaped & quoted \"html\">"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c",
				UID: "0b0a9c3e-1a2b-4c5d-8e9f-a0b1c2d3e4f5", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now,
					FieldsType: "FieldsV1", FieldsV1: fields(`{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}}}}}}`)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now, Subresource: "status",
					FieldsType: "FieldsV1", FieldsV1: fields(`{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:startTime":{}}}`)},
			},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "web", Image: "registry.k8s.io/pause:3.10", ImagePullPolicy: v1.PullIfNotPresent,
				Ports: []v1.ContainerPort{{ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("128Mi")}},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
			}},
			RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy: v1.DNSClusterFirst, ServiceAccountName: "default", NodeName: "node-0042",
			SecurityContext: &v1.PodSecurityContext{}, SchedulerName: "default-scheduler",
			Tolerations: []v1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			Priority: ptr.To[int32](0), EnableServiceLinks: ptr.To(true), PreemptionPolicy: ptr.To(v1.PreemptLowerPriority),
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, HostIP: "10.0.0.42", PodIP: "10.244.42.7", StartTime: &now, QOSClass: v1.PodQOSBurstable,
			HostIPs: []v1.HostIP{{IP: "10.0.0.42"}}, PodIPs: []v1.PodIP{{IP: "10.244.42.7"}},
			Conditions: []v1.PodCondition{
				{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, LastTransitionTime: now},
				{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: now},
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
				{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
				{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
			},
			ContainerStatuses: []v1.ContainerStatus{{
				Name: "web", Ready: true, Started: ptr.To(true), Image: "registry.k8s.io/pause:3.10",
				ImageID:     "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
				ContainerID: "containerd://4c1e9f0b3a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
			}},
		},
	}
}

// codecObjects are objects of several types as the Store encodes them.
func codecObjects(t testing.TB) map[string][]byte {
	t.Helper()
	objs := map[string]runtime.Object{
		"pod": runningPod(),
		"lease": &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease", UID: "u1"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1"), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: time.Date(2026, 11, 27, 15, 4, 5, 123456000, time.UTC)}}},
		// rules without omitempty: absent and empty are both null once
		// stored, as kube stores them.
		"clusterrole": &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{Kind: "ClusterRole", APIVersion: "rbac.authorization.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "view"},
			Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}}},
	}
	out := map[string][]byte{}
	for name, obj := range objs {
		data, err := MarshalJSON(obj)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = data
	}
	return out
}

func codecFor(t testing.TB, data []byte, mediaType string) *storageCodec {
	t.Helper()
	env, err := envelopeOf(data)
	if err != nil {
		t.Fatal(err)
	}
	proto, err := scheme.Scheme.New(schemaGVK(t, env.APIVersion, env.Kind))
	if err != nil {
		t.Fatal(err)
	}
	return newStorageCodec(func() runtime.Object { return proto.DeepCopyObject() }, mediaType)
}

// TestStorageCodec: objects are written in kube's protobuf encoding (its
// own serializer reads them back equal), read back as the JSON the Store
// wrote, and JSON values (an older data directory) are read as they are.
func TestStorageCodec(t *testing.T) {
	kube := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	for name, data := range codecObjects(t) {
		t.Run(name, func(t *testing.T) {
			c := codecFor(t, data, MediaTypeProtobuf)
			stored, err := c.ToStorage(data)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(stored, []byte("k8s\x00")) || len(stored) >= len(data) {
				t.Errorf("stored %d bytes for %d of JSON: %q", len(stored), len(data), stored[:min(len(stored), 16)])
			}
			// kube reads it as the object the JSON is.
			got, _, err := kube.Decode(stored, nil, nil)
			if err != nil {
				t.Fatalf("kube's serializer: %v", err)
			}
			want := c.newObject()
			if err := jsonUnmarshal(data, want); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("kube decodes\n%#v\nwant\n%#v", got, want)
			}
			// A value kube wrote is read the same: both encodings are
			// kube's serializer's, byte for byte.
			var buf bytes.Buffer
			if err := kube.Encode(want, &buf); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), stored) {
				t.Errorf("kube encodes\n%q\nthe codec\n%q", buf.Bytes(), stored)
			}
			back, err := c.FromStorage(stored)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, data) {
				t.Errorf("read back\n%s\nwrote\n%s", back, data)
			}
			if again, err := c.ToStorage(back); err != nil || !bytes.Equal(again, stored) {
				t.Errorf("written again: %v, same bytes %v", err, bytes.Equal(again, stored))
			}
			// A JSON value is read as it is; the JSON media type writes it.
			if got, err := c.FromStorage(data); err != nil || !bytes.Equal(got, data) {
				t.Errorf("JSON value read as %q, %v", got, err)
			}
			if got, err := codecFor(t, data, MediaTypeJSON).ToStorage(data); err != nil || !bytes.Equal(got, data) {
				t.Errorf("JSON media type writes %q, %v", got, err)
			}
			if got, err := StoredJSON(stored); err != nil || !bytes.Equal(got, data) {
				t.Errorf("StoredJSON: %q, %v", got, err)
			}
		})
	}

	// An object of another kind, or a damaged one, is an error, not a
	// wrong object.
	data := codecObjects(t)
	pods := codecFor(t, data["pod"], MediaTypeProtobuf)
	lease, err := codecFor(t, data["lease"], MediaTypeProtobuf).ToStorage(data["lease"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pods.FromStorage(lease); err == nil || !strings.Contains(err.Error(), "is a Lease") {
		t.Errorf("a lease read as a pod: %v", err)
	}
	stored, err := pods.ToStorage(data["pod"])
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{stored[:len(stored)/2], append([]byte("k8s\x00"), 0xff, 0xff)} {
		if got, err := pods.FromStorage(bad); err == nil {
			t.Errorf("damaged value %q read as %s", bad, got)
		}
	}
	if _, err := pods.ToStorage([]byte(`{"metadata":{}}`)); err == nil {
		t.Error("an object without kind and apiVersion was written")
	}
}

// BenchmarkStorageCodec: a running pod's JSON to its stored protobuf and
// back.
func BenchmarkStorageCodec(b *testing.B) {
	data := codecObjects(b)["pod"]
	c := codecFor(b, data, MediaTypeProtobuf)
	stored, err := c.ToStorage(data)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("pod: %d bytes of JSON, %d stored", len(data), len(stored))
	b.Run("ToStorage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.ToStorage(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("FromStorage", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.FromStorage(stored); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func schemaGVK(t testing.TB, apiVersion, kind string) schema.GroupVersionKind {
	t.Helper()
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		t.Fatal(err)
	}
	return gv.WithKind(kind)
}

func jsonUnmarshal(data []byte, obj runtime.Object) error { return json.Unmarshal(data, obj) }
