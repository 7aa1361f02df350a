package watch

import (
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"sync/atomic"
	"testing"

	"github.com/corekube/corekube/storage"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// benchPod is a pod as the scale run's pods look once Running: labels, an
// owner, managedFields of two managers (the status entry its own: it names
// the pod's IP), one container with resources,
// a status with conditions and IPs.
func benchPod(i int) *v1.Pod {
	t := metav1.Unix(1764000000, 0)
	node := fmt.Sprintf("node-%04d", i%1000)
	mf := func(manager string, op metav1.ManagedFieldsOperationType, sub string, raw string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", Time: &t,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}, Subresource: sub}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("load-%06d", i), Namespace: fmt.Sprintf("ns-%03d", i%100),
			UID: types.UID("6f1c2d3e-0000-4000-8000-" + fmt.Sprintf("%012d", i)), CreationTimestamp: t,
			Labels: map[string]string{"app": "load", "group": fmt.Sprintf("g%d", i%50)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
				Name: "load-rs", UID: "0e5a6b7c-0000-4000-8000-000000000001"}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				mf("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "",
					`{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:group":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0e5a6b7c\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`),
				mf("corekube-agent", metav1.ManagedFieldsOperationUpdate, "status",
					`{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"`+podIP(i)+`\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`),
			},
		},
		Spec: v1.PodSpec{
			NodeName: node, SchedulerName: "default-scheduler", RestartPolicy: v1.RestartPolicyAlways,
			DNSPolicy: v1.DNSClusterFirst, ServiceAccountName: "default",
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				ImagePullPolicy: v1.PullIfNotPresent, TerminationMessagePath: "/dev/termination-log",
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("10Mi")}}}},
			Tolerations: []v1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}},
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, HostIP: "10.0.0.1", PodIP: podIP(i), StartTime: &t,
			QOSClass: v1.PodQOSBurstable,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: t},
				{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: t},
				{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: t},
				{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: t}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true, Image: "registry.k8s.io/pause:3.10",
				ImageID:     "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
				ContainerID: "corekube://" + fmt.Sprintf("%064d", i),
				State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: t}}}},
		},
	}
}

// podIP is benchPod(i)'s IP, which its status's managedFields entry names
// too (podIPs is a list keyed by IP), as a kubelet's does.
func podIP(i int) string { return fmt.Sprintf("10.1.%d.%d", i/250%250, i%250) }

// decodeFullPod decodes a stored pod as the registry does: the object, its
// labels and the fields pods select on.
func decodeFullPod(kv storage.KV) (runtime.Object, labels.Set, fields.Set, error) {
	pod := &v1.Pod{}
	if err := json.Unmarshal(kv.Value, pod); err != nil {
		return nil, nil, nil, err
	}
	pod.ResourceVersion = fmt.Sprint(kv.Revision)
	return pod, pod.Labels, fields.Set{"metadata.name": pod.Name, "metadata.namespace": pod.Namespace,
		"spec.nodeName": pod.Spec.NodeName, "spec.restartPolicy": string(pod.Spec.RestartPolicy),
		"spec.schedulerName": pod.Spec.SchedulerName, "spec.serviceAccountName": pod.Spec.ServiceAccountName,
		"spec.hostNetwork": "false", "status.phase": string(pod.Status.Phase), "status.podIP": pod.Status.PodIP,
		"status.nominatedNodeName": pod.Status.NominatedNodeName}, nil
}

// BenchmarkCachedPodHeap reports the live heap one cached pod costs once
// protobuf clients (every client-go component) and JSON clients have read
// it: 5,000 pods loaded as the cache's first LIST loads them, each read
// in both encodings, then a GC. One op is the whole load.
func BenchmarkCachedPodHeap(b *testing.B) {
	const pods = 5000
	values := make([][]byte, pods)
	for i := range values {
		pod := benchPod(i)
		data, err := json.Marshal(pod)
		if err != nil {
			b.Fatal(err)
		}
		values[i] = data
	}
	c := New(Config{Prefix: "/pods/", Decode: decodeFullPod})
	measureCachedHeap(b, c, values)
}

// BenchmarkCachedPodHeapProtobuf is BenchmarkCachedPodHeap over pods
// stored as kube's protobuf (the registry's default): the cache keeps each
// pod's message, and its JSON only as a memo the collector may drop.
func BenchmarkCachedPodHeapProtobuf(b *testing.B) {
	const pods = 5000
	values := make([][]byte, pods)
	for i := range values {
		values[i] = storedProtobuf(b, benchPod(i))
	}
	var calls atomic.Int64
	cfg := protoPodConfig(b, &calls)
	cfg.Prefix = "/pods/"
	c := New(cfg)
	measureCachedHeap(b, c, values)
}

// measureCachedHeap reports the live heap a cache's objects of values
// (stored pods) take, each read in both encodings once (the memos then
// held as a cached object's are), per pod and against its stored size.
func measureCachedHeap(b *testing.B, c *Cache, values [][]byte) {
	b.Helper()
	var perPod float64
	for range b.N {
		var items ordered
		goruntime.GC()
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		for i, v := range values {
			obj, err := c.decode(storage.KV{Key: fmt.Sprintf("/pods/ns/load-%06d", i), Value: v, Revision: int64(i + 1)}, false)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := obj.Protobuf(); err != nil {
				b.Fatal(err)
			}
			if _, err := obj.JSON(); err != nil {
				b.Fatal(err)
			}
			items.put(obj)
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		perPod = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(values))
		goruntime.KeepAlive(items)
	}
	b.ReportMetric(perPod, "heapB/pod")
	b.ReportMetric(float64(len(values[0])), "storedB/pod")
}
