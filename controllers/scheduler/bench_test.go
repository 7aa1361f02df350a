package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkDecide measures one placement decision (filter, score, assume)
// in a cluster of 1,000 nodes already running 29,000 pods.
func BenchmarkDecide(b *testing.B) {
	s := New(nil, Config{})
	for i := range 1000 {
		node := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i), Labels: map[string]string{"zone": fmt.Sprint(i % 3)}},
			Status: v1.NodeStatus{
				Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("256Gi"), v1.ResourcePods: resource.MustParse("110")},
				Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			},
		}
		s.onNode(node)
	}
	podSpec := v1.PodSpec{SchedulerName: DefaultSchedulerName, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}}}}
	for i := range 29000 {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("bound-%d", i)}, Spec: *podSpec.DeepCopy()}
		pod.Spec.NodeName = fmt.Sprintf("node-%04d", i%1000)
		s.onPod(pod)
	}
	e := newPodEntry("ns/new", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}, Spec: podSpec})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.mu.Lock()
		node, msg := s.decide(e)
		if node == "" {
			b.Fatal(msg)
		}
		// assume and forget, so the cluster stays the same size
		s.cache.setPod(e.key, &assignedPod{node: node, req: e.req, nonZero: e.nonZero, assumed: true})
		s.cache.removePod(e.key)
		s.mu.Unlock()
	}
}

// BenchmarkUnschedulable measures a failing attempt (every node rejects
// the pod, the message is built, preemption finds nothing to evict) in
// the same cluster.
func BenchmarkUnschedulable(b *testing.B) {
	s := New(nil, Config{})
	for i := range 1000 {
		node := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i)},
			Status: v1.NodeStatus{
				Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")},
				Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			},
		}
		if i%10 == 0 {
			node.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "infra", Effect: v1.TaintEffectNoSchedule}}
		}
		s.onNode(node)
	}
	e := newPodEntry("ns/big", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "big"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8")},
	}}}}})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.mu.Lock()
		if node, _ := s.decide(e); node != "" {
			b.Fatal("fits")
		}
		// the post-filter's part of the message, as before preemption
		if pre := s.preempt(e, s.failures); pre.node != "" {
			b.Fatal("preempts")
		}
		s.mu.Unlock()
	}
}

// BenchmarkAttemptMetrics measures what the metrics add to one pod
// placed at the first attempt: the pod's arrival in the queue, the
// attempt's result and duration, and the pod's SLI and attempt count.
func BenchmarkAttemptMetrics(b *testing.B) {
	s := New(nil, Config{Metrics: prometheus.NewRegistry()})
	start := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.metrics.incomingPod(queueActive, eventPodAdd)
		now := time.Now()
		s.metrics.attempt(idxScheduled, start, now)
		s.metrics.scheduled(1, start, now)
	}
}
