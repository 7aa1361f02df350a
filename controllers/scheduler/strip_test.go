package scheduler

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"

	"github.com/corekube/corekube/test/informertest"
)

// servedPod is a pod as the API server serves it to the scheduler once an
// agent runs it: the defaults, the service account volume and a status.
func servedPod(name, node string) *v1.Pod {
	t := metav1.Unix(1700000000, 0)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "scale-bench", UID: uuid.NewUUID(), ResourceVersion: "229188",
			Labels: map[string]string{"app": "scale"}, CreationTimestamp: t,
			Annotations:     map[string]string{"note": "x"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f", UID: "rs-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}},
		},
		Spec: v1.PodSpec{
			NodeName: node, SchedulerName: v1.DefaultSchedulerName, Priority: ptr.To[int32](0),
			PreemptionPolicy: ptr.To(v1.PreemptLowerPriority), ServiceAccountName: "default",
			Containers: []v1.Container{{
				Name: "nginx", Image: "nginx:1.27", ImagePullPolicy: v1.PullIfNotPresent,
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
				},
				Ports:                    []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
				VolumeMounts:             []v1.VolumeMount{{Name: "kube-api-access-g8m6q", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			}},
			Tolerations: []v1.Toleration{
				{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			Volumes: []v1.Volume{{Name: "kube-api-access-g8m6q", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			}}}}},
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, StartTime: &t, PodIP: "10.0.0.1", HostIP: "10.1.0.1",
			Conditions: []v1.PodCondition{
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: t},
				{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: t},
			},
			ContainerStatuses: []v1.ContainerStatus{{Name: "nginx", Ready: true, Image: "docker.io/library/nginx:1.27", ContainerID: "sim://ae65eb4c",
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: t}}}},
		},
	}
}

// TestStripPodKeepsWhatTheSchedulerReads: the transform keeps exactly
// the fields the scheduler reads; a bound pod drops PodScheduled, a
// pending one keeps it for the scheduler's own status writes.
func TestStripPodKeepsWhatTheSchedulerReads(t *testing.T) {
	for _, node := range []string{"node-1", ""} {
		pod := servedPod("p", node)
		pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler})
		pod.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		pod.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")}
		pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("5m")}},
			Ports:     []v1.ContainerPort{{ContainerPort: 53, HostPort: 53, Protocol: v1.ProtocolUDP}}}}
		want := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
				Labels: pod.Labels, CreationTimestamp: pod.CreationTimestamp, OwnerReferences: pod.OwnerReferences},
			Spec: v1.PodSpec{
				NodeName: node, SchedulerName: v1.DefaultSchedulerName, NodeSelector: pod.Spec.NodeSelector, Tolerations: pod.Spec.Tolerations,
				Priority: pod.Spec.Priority, PreemptionPolicy: pod.Spec.PreemptionPolicy, Overhead: pod.Spec.Overhead,
				Containers: []v1.Container{{Name: "nginx", Resources: v1.ResourceRequirements{Requests: pod.Spec.Containers[0].Resources.Requests}}},
				InitContainers: []v1.Container{{Name: "init", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
					Resources: v1.ResourceRequirements{Requests: pod.Spec.InitContainers[0].Resources.Requests}, Ports: pod.Spec.InitContainers[0].Ports}},
			},
			Status: v1.PodStatus{Phase: v1.PodRunning, StartTime: pod.Status.StartTime, Conditions: pod.Status.Conditions[2:]},
		}
		if node == "" {
			want.Status.Conditions = pod.Status.Conditions[1:]
		}
		obj, err := stripPod(pod)
		if err != nil {
			t.Fatal(err)
		}
		if got := obj.(*v1.Pod); !reflect.DeepEqual(got, want) {
			t.Errorf("node %q: stripPod =\n%+v\nwant\n%+v", node, got, want)
		}
	}
}

// TestStripPodShares: pods of one template share their labels,
// tolerations, containers and owner reference; a pod with other requests
// keeps its own.
func TestStripPodShares(t *testing.T) {
	strip := func(p *v1.Pod) *v1.Pod {
		obj, err := stripPod(p)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*v1.Pod)
	}
	a, b := strip(servedPod("a", "n1")), strip(servedPod("b", "n2"))
	ptrOf := func(v any) uintptr { return uintptr(reflect.ValueOf(v).UnsafePointer()) }
	if ptrOf(a.Labels) != ptrOf(b.Labels) || &a.Spec.Tolerations[0] != &b.Spec.Tolerations[0] ||
		&a.Spec.Containers[0] != &b.Spec.Containers[0] || &a.OwnerReferences[0] != &b.OwnerReferences[0] {
		t.Error("pods of one template share nothing")
	}
	other := servedPod("c", "n1")
	other.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("200m")
	c := strip(other)
	if &c.Spec.Containers[0] == &a.Spec.Containers[0] || c.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 200 {
		t.Errorf("a pod with other requests got %v", c.Spec.Containers[0].Resources.Requests)
	}
	if a.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 100 {
		t.Error("the shared requests changed")
	}
}

// TestStripNode: the transform keeps a node's labels, taints,
// unschedulable flag, allocatable and Ready condition only.
func TestStripNode(t *testing.T) {
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u", ResourceVersion: "5", Labels: map[string]string{v1.LabelHostname: "n"},
			Annotations: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: v1.NodeSpec{Unschedulable: true, Taints: []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}, PodCIDR: "10.0.0.0/24"},
		Status: v1.NodeStatus{
			Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")},
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourcePods: resource.MustParse("110")},
			Conditions:  []v1.NodeCondition{{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse}, ready},
			Images:      []v1.ContainerImage{{Names: []string{"nginx"}}},
			Addresses:   []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}},
			NodeInfo:    v1.NodeSystemInfo{KubeletVersion: "v1.32.0"},
		},
	}
	want := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u", ResourceVersion: "5", Labels: node.Labels},
		Spec:       v1.NodeSpec{Unschedulable: true, Taints: node.Spec.Taints},
		Status:     v1.NodeStatus{Allocatable: node.Status.Allocatable, Conditions: []v1.NodeCondition{ready}},
	}
	obj, err := stripNode(node)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*v1.Node); !reflect.DeepEqual(got, want) {
		t.Errorf("stripNode =\n%+v\nwant\n%+v", got, want)
	}
	// A node without a Ready condition has none (the scheduler taints it
	// not-ready).
	node.Status.Conditions = node.Status.Conditions[:1]
	if obj, _ := stripNode(node); obj.(*v1.Node).Status.Conditions != nil {
		t.Errorf("conditions %v", obj.(*v1.Node).Status.Conditions)
	}
}

// BenchmarkStripPodRetained decodes b.N pods from protobuf as the
// informer does, keeps what the transform returns, and reports the live
// heap they hold (B/pod-kept).
func BenchmarkStripPodRetained(b *testing.B) {
	raw := make([][]byte, 0, 64)
	for i := range 64 {
		data, err := servedPod("pod-"+string(rune('a'+i%26))+string(rune('a'+i/26)), "node-1").Marshal()
		if err != nil {
			b.Fatal(err)
		}
		raw = append(raw, data)
	}
	informertest.ReportRetained(b, raw, stripPod)
}
