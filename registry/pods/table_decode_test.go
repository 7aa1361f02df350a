package pods

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tableDecodePods are pods of every shape the printer distinguishes, with
// fields it does not read filled in, so that skipping them is tested too.
func tableDecodePods() map[string]*v1.Pod {
	started := true
	full := richPod()
	deleted := richPod()
	deleting(deleted)
	deleted.DeletionGracePeriodSeconds = new(int64)
	return map[string]*v1.Pod{
		"rich running pod": full,
		"deleting":         deleted,
		"empty":            {},
		"pending":          tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending}),
		"crash loop": tpod([]string{"a", "b"}, v1.PodStatus{Phase: v1.PodRunning,
			ContainerStatuses: []v1.ContainerStatus{withRestarts(waiting("a", "CrashLoopBackOff"), 3, 5*time.Minute), terminated("b", "", 0, 9)}}),
		"init and sidecar": tpod([]string{"c"}, v1.PodStatus{Phase: v1.PodPending,
			Conditions: []v1.PodCondition{cond(v1.PodInitialized, v1.ConditionFalse, "x")},
			InitContainerStatuses: []v1.ContainerStatus{terminated("i", "", 2, 0), func() v1.ContainerStatus {
				cs := withRestarts(running("s", true), 2, 3*time.Minute)
				cs.Started = &started
				return cs
			}()}}, withInit("i"), withSidecar("s")),
		"escapes": {ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "\"}{\\\u2028<>&"}},
			Spec: v1.PodSpec{NodeName: "node-\"1\"", Containers: []v1.Container{{Image: "x", Name: "c\\"}}}},
	}
}

// richPod is a scheduled, running pod as a kubelet reports it.
func richPod() *v1.Pod {
	q := resource.MustParse
	p := tpod([]string{"app", "proxy"}, v1.PodStatus{
		Phase: v1.PodRunning, HostIP: "10.0.0.1", HostIPs: []v1.HostIP{{IP: "10.0.0.1"}},
		PodIP: "10.1.0.7", PodIPs: []v1.PodIP{{IP: "10.1.0.7"}, {IP: "fd00::7"}}, NominatedNodeName: "n2",
		StartTime: ptrTime(ago(9 * time.Minute)), QOSClass: v1.PodQOSBurstable,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, LastTransitionTime: ago(9 * time.Minute)},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: ago(9 * time.Minute)},
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: ago(8 * time.Minute)},
			{Type: "example.com/gate", Status: v1.ConditionTrue, Reason: "Set", Message: "by a controller"},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: ago(10 * time.Minute)},
		},
		ContainerStatuses: []v1.ContainerStatus{
			withRestarts(running("app", true), 1, 8*time.Minute),
			running("proxy", true),
		},
	}, func(p *v1.Pod) {
		p.UID, p.ResourceVersion, p.GenerateName = "0b8c-11", "4242", "p-"
		p.Labels = map[string]string{"app": "shop", "pod-template-hash": "7d4b9c8f6d"}
		p.Annotations = map[string]string{"prometheus.io/scrape": "true"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u"}}
		p.Finalizers = []string{"example.com/f"}
		p.Spec.NodeName = "n1"
		p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}, {ConditionType: "example.com/other"}}
		p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}}
		for i := range p.Spec.Containers {
			c := &p.Spec.Containers[i]
			c.Env = []v1.EnvVar{{Name: "A", Value: "b"}}
			c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: q("250m"), v1.ResourceMemory: q("64Mi")}
			c.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		}
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			cs.Image, cs.ImageID, cs.ContainerID = "img:1", "sha256:abc", "sim://1"
			cs.Started = new(bool)
		}
	})
	return p
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

// TestDecodeForTable: a pod decoded for a table prints the same row and has
// the same ObjectMeta as the pod decoded whole.
func TestDecodeForTable(t *testing.T) {
	s := NewStrategy()
	for name, pod := range tableDecodePods() {
		t.Run(name, func(t *testing.T) {
			data, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			whole := &v1.Pod{}
			if err := json.Unmarshal(data, whole); err != nil {
				t.Fatal(err)
			}
			obj, err := s.DecodeForTable(data)
			if err != nil {
				t.Fatal(err)
			}
			got := obj.(*v1.Pod)
			if !reflect.DeepEqual(got.ObjectMeta, whole.ObjectMeta) {
				t.Errorf("ObjectMeta\n got %#v\nwant %#v", got.ObjectMeta, whole.ObjectMeta)
			}
			gotRow, err := s.TableRow(got, tableNow)
			if err != nil {
				t.Fatal(err)
			}
			wantRow, _ := s.TableRow(whole, tableNow)
			if !reflect.DeepEqual(gotRow, wantRow) {
				t.Errorf("row\n got %#v\nwant %#v", gotRow, wantRow)
			}
		})
	}
	for _, bad := range []string{`x`, `{"metadata":[]}`, `{"spec":{"containers":{}}}`, `{"status":{"phase":1}}`, `{"spec":{"nodeName":1}}`} {
		if _, err := s.DecodeForTable([]byte(bad)); err == nil {
			t.Errorf("DecodeForTable(%s) did not fail", bad)
		}
	}
}

func BenchmarkDecodeForTable(b *testing.B) {
	data, err := json.Marshal(richPod())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := json.Unmarshal(data, &v1.Pod{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("table", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		s := NewStrategy()
		for b.Loop() {
			if _, err := s.DecodeForTable(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
