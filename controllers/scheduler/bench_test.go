package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
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
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// topologyBenchScheduler is the cluster of BenchmarkDecide with the
// well-known labels: 1,000 nodes in three zones, 29,000 pods of 100
// replica sets (app=app-N, 290 pods each), each pod with a controller
// reference; withAntiAffinity gives every tenth pod a required hostname
// anti-affinity against its own app, so that existing pods' terms are
// checked too.
func topologyBenchScheduler(b *testing.B, withAntiAffinity bool) *Scheduler {
	s := New(nil, Config{})
	for i := range 1000 {
		name := fmt.Sprintf("node-%04d", i)
		s.onNode(&v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name, v1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%3)}},
			Status: v1.NodeStatus{
				Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("256Gi"), v1.ResourcePods: resource.MustParse("110")},
				Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			},
		})
	}
	for i := range 29000 {
		app := fmt.Sprintf("app-%d", i%100)
		pod := benchPod(fmt.Sprintf("bound-%d", i), app)
		pod.Spec.NodeName = fmt.Sprintf("node-%04d", i%1000)
		if withAntiAffinity && i%10 == 0 {
			pod.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app + "-x"}},
			}}}}
		}
		s.onPod(pod)
	}
	return s
}

// benchPod is a pod of replica set app.
func benchPod(name, app string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": app},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app, UID: types.UID("uid-" + app), Controller: ptr.To(true)}}},
		Spec: v1.PodSpec{SchedulerName: DefaultSchedulerName, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		}}}},
	}
}

// benchDecide runs decide for pod as BenchmarkDecide does (assume, then
// forget) and reports decisions per second.
func benchDecide(b *testing.B, s *Scheduler, pod *v1.Pod) {
	e := newPodEntry("ns/"+pod.Name, pod)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.mu.Lock()
		node, msg := s.decide(e)
		if node == "" {
			b.Fatal(msg)
		}
		s.cache.setPod(e.key, &assignedPod{node: node, req: e.req, nonZero: e.nonZero, assumed: true,
			ns: pod.Namespace, labels: pod.Labels, owner: e.owner, affinity: e.affinity})
		s.cache.removePod(e.key)
		s.mu.Unlock()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkDecideTopology measures a decision in the labelled cluster of
// 1,000 nodes and 29,000 pods, for pods with and without spreading and
// inter-pod affinity:
//   - none: no constraints, no controller (the plugins are skipped);
//   - defaultSpread: a replica set's pod without constraints (kube's system
//     default constraints, scored);
//   - zoneSpread: a DoNotSchedule zone constraint, maxSkew 1, plus a
//     ScheduleAnyway hostname one;
//   - antiAffinity: a required hostname anti-affinity against its app;
//   - existingAntiAffinity: no terms of its own, 2,900 existing pods with
//     required anti-affinity terms.
func BenchmarkDecideTopology(b *testing.B) {
	plain := topologyBenchScheduler(b, false)
	b.Run("none", func(b *testing.B) {
		pod := benchPod("new", "app-7")
		pod.OwnerReferences = nil
		benchDecide(b, plain, pod)
	})
	b.Run("defaultSpread", func(b *testing.B) {
		benchDecide(b, plain, benchPod("new", "app-7"))
	})
	b.Run("zoneSpread", func(b *testing.B) {
		pod := benchPod("new", "app-7")
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app-7"}}
		pod.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: sel},
			{MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.ScheduleAnyway, LabelSelector: sel},
		}
		benchDecide(b, plain, pod)
	})
	b.Run("antiAffinity", func(b *testing.B) {
		pod := benchPod("new", "app-new")
		pod.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app-new"}},
		}}}}
		benchDecide(b, plain, pod)
	})
	b.Run("existingAntiAffinity", func(b *testing.B) {
		pod := benchPod("new", "app-7")
		pod.OwnerReferences = nil
		benchDecide(b, topologyBenchScheduler(b, true), pod)
	})
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
