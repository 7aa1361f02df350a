package scheduler

import (
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// The tests below check the compact form of a bound pod (transformPod's
// assignedPod, which the informer stores instead of a v1.Pod) by what the
// scheduler does with it: placements, failure messages and preemption's
// victims must be the same whether the bound pods reach the scheduler as
// the API server serves them, stripped (stripPod, the form kept before),
// or compact.

// boundVariants are bound pods that each carry something a plugin or
// preemption reads: labels and a controller (spreading, affinity), host
// ports, priorities, inter-pod (anti-)affinity terms, start times, and a
// pod terminating because it was preempted.
func boundVariants(nodes []string) []*v1.Pod {
	var out []*v1.Pod
	add := func(name string, i int, mut func(*v1.Pod)) {
		p := servedPod(name, nodes[i%len(nodes)])
		p.UID = types.UID("uid-" + name)
		st := metav1.Unix(1700000000+int64(i)*60, 0)
		p.Status.StartTime = &st
		if mut != nil {
			mut(p)
		}
		out = append(out, p)
	}
	for i := range 12 {
		add(fmt.Sprintf("web-%d", i), i, func(p *v1.Pod) {
			p.Labels = map[string]string{"app": "web"}
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("64Mi")}
		})
	}
	for i := range 4 {
		add(fmt.Sprintf("db-%d", i), i*2, func(p *v1.Pod) {
			p.Labels = map[string]string{"app": "db"}
			p.Spec.Priority = ptr.To[int32](int32(10 * i))
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("1Gi")}
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
				{LabelSelector: selector("app", "db"), TopologyKey: v1.LabelHostname},
			}}}
		})
	}
	add("port-80", 1, func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "edge"}
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 8080, HostPort: 80, Protocol: v1.ProtocolTCP}}
	})
	add("cache-pref", 3, func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "cache"}
		p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
			{Weight: 50, PodAffinityTerm: v1.PodAffinityTerm{LabelSelector: selector("app", "web"), TopologyKey: v1.LabelTopologyZone}},
		}}}
	})
	add("preempted", 5, func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "batch"}
		now := metav1.Unix(1700001000, 0)
		p.DeletionTimestamp = &now
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
			Reason: v1.PodReasonPreemptionByScheduler, Message: "preempting"})
	})
	add("batch-late", 4, func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "batch"}
		p.Status.StartTime = nil
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	})
	return out
}

// pendingVariants are pods to place: podVariants (one per filter) and
// pods whose placement depends on the bound pods.
func pendingVariants() []*v1.Pod {
	var out []*v1.Pod
	vs := podVariants()
	for _, name := range slices.Sorted(maps.Keys(vs)) {
		p := vs[name]
		p.Name = "pending-" + name
		out = append(out, p)
	}
	pending := func(name string, mut func(*v1.Pod)) {
		p := servedPod(name, "")
		p.Status = v1.PodStatus{Phase: v1.PodPending}
		mut(p)
		out = append(out, p)
	}
	pending("anti-db", func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "db"}
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
			{LabelSelector: selector("app", "db"), TopologyKey: v1.LabelHostname},
		}}}
	})
	pending("near-web", func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "cache"}
		p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
			{LabelSelector: selector("app", "edge"), TopologyKey: v1.LabelTopologyZone},
		}}}
	})
	pending("web-spread", func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "web"}
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{spreadOn(v1.LabelTopologyZone, 1, v1.DoNotSchedule, selector("app", "web"))}
	})
	pending("port-80", func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 8080, HostPort: 80, Protocol: v1.ProtocolTCP}}
	})
	pending("huge-urgent", func(p *v1.Pod) {
		p.Spec.Priority = ptr.To[int32](100)
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("3500m")}
	})
	pending("huge-never", func(p *v1.Pod) {
		p.Spec.Priority = ptr.To[int32](100)
		p.Spec.PreemptionPolicy = ptr.To(v1.PreemptNever)
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("3500m")}
	})
	pending("huge-low", func(p *v1.Pod) {
		p.Spec.Priority = ptr.To[int32](5)
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}
	})
	return out
}

// outcome is what one attempt decided, preemption included.
type outcome struct {
	Node, Msg   string
	PreemptNode string
	PreemptMsg  string
	Victims     []string
	Unnominated []string
}

// TestCompactBoundPodsDecideAlike places the same pending pods in three
// clusters whose bound pods the scheduler was handed as served, stripped
// and compact, and wants the same outcomes (node, message, preemption's
// node, victims and message) in the same order.
func TestCompactBoundPodsDecideAlike(t *testing.T) {
	names := []string{"n0", "n1", "n2", "n3", "n4", "n5"}
	forms := map[string]func(*v1.Pod) any{
		"served":   func(p *v1.Pod) any { return p },
		"stripped": func(p *v1.Pod) any { return mustStripPod(t, p) },
		"compact": func(p *v1.Pod) any {
			obj, err := transformPod(p.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := obj.(*assignedPod); !ok {
				t.Fatalf("transformPod(bound pod) = %T, want *assignedPod", obj)
			}
			return obj
		},
	}
	results := map[string][]outcome{}
	for form, conv := range forms {
		s := New(nil, Config{})
		for i, name := range names {
			s.onNode(servedNode(name, func(n *v1.Node) {
				n.Labels[v1.LabelTopologyZone] = fmt.Sprintf("zone-%d", i%3)
				n.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")}
			}))
		}
		for _, p := range boundVariants(names) {
			s.onPod(conv(p))
		}
		var got []outcome
		for _, p := range pendingVariants() {
			e := newPodEntry(p.Namespace+"/"+p.Name, mustStripPod(t, p))
			s.mu.Lock()
			var o outcome
			o.Node, o.Msg = s.decide(e)
			if o.Node == "" {
				pre := s.preempt(e, s.failures)
				o.PreemptNode, o.PreemptMsg = pre.node, pre.msg
				for _, v := range pre.victims {
					o.Victims = append(o.Victims, fmt.Sprintf("%s/%s uid=%s rv=%s prio=%d labels=%v", v.Namespace, v.Name, v.UID, v.ResourceVersion, podPriority(v), v.Labels))
				}
				for _, u := range pre.unnominated {
					o.Unnominated = append(o.Unnominated, u.Name)
				}
			}
			s.mu.Unlock()
			got = append(got, o)
		}
		results[form] = got
	}
	want := results["served"]
	preempted := 0
	for _, o := range want {
		if len(o.Victims) > 0 {
			preempted++
		}
	}
	if preempted == 0 {
		t.Fatalf("no pending pod preempted anything: the test does not reach preemption (%+v)", want)
	}
	for _, form := range []string{"stripped", "compact"} {
		if !reflect.DeepEqual(results[form], want) {
			for i := range want {
				if i < len(results[form]) && !reflect.DeepEqual(results[form][i], want[i]) {
					t.Errorf("%s, pending pod %d: %+v, served: %+v", form, i, results[form][i], want[i])
				}
			}
		}
	}
}

// TestCompactBoundPodKeeps: the compact form gives every reader of a
// bound pod the answer the served pod gives: the informer's key and
// resourceVersion, requests, ports, priority, spreading owner, affinity,
// start time, the preempted-and-terminating test, and the victim that
// preemption writes and reports.
func TestCompactBoundPodKeeps(t *testing.T) {
	for _, served := range boundVariants([]string{"n0", "n1"}) {
		obj, err := transformPod(served.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		p := obj.(*assignedPod)
		if again, _ := transformPod(p); again != any(p) {
			t.Errorf("%s: transformPod is not idempotent", served.Name)
		}
		key, err := cache.MetaNamespaceKeyFunc(p)
		if err != nil || key != served.Namespace+"/"+served.Name {
			t.Errorf("%s: key %q, %v", served.Name, key, err)
		}
		if key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(cache.DeletedFinalStateUnknown{Key: key, Obj: p}); key != served.Namespace+"/"+served.Name {
			t.Errorf("%s: tombstone key %q", served.Name, key)
		}
		acc, err := meta.Accessor(p)
		if err != nil || acc.GetResourceVersion() != served.ResourceVersion || acc.GetUID() != served.UID {
			t.Errorf("%s: accessor %v, %v", served.Name, acc, err)
		}
		ref := newAssignedPod(served)
		type view struct {
			Node             string
			Prio             int32
			Req, NonZero     resources
			Ports            []hostPort
			Owner            types.UID
			Terminating      bool
			Labels           map[string]string
			Affinity         string
			Start            time.Time
			PreemptedTermina bool
		}
		now := time.Unix(1800000000, 0)
		viewOf := func(p *assignedPod) view {
			v := view{Node: p.node, Prio: p.priority, Req: p.req, NonZero: p.nonZero, Ports: p.ports, Owner: p.owner,
				Terminating: p.terminating, Labels: p.labels, Start: startTime(p, now), PreemptedTermina: terminatingByPreemption(p)}
			if p.affinity != nil {
				v.Affinity = p.affinity.key
			}
			return v
		}
		want := view{Node: served.Spec.NodeName, Prio: podPriority(served), Req: podRequests(served, false), NonZero: podRequests(served, true),
			Ports: podHostPorts(served), Owner: spreadOwner(served), Terminating: served.DeletionTimestamp != nil, Labels: served.Labels,
			Start: now, PreemptedTermina: servedTerminatingByPreemption(served)}
		if served.Status.StartTime != nil {
			want.Start = served.Status.StartTime.Time
		}
		if a := parsePodAffinity(served); a != nil {
			want.Affinity = a.key
		}
		for form, got := range map[string]view{"compact": viewOf(p), "from the served pod": viewOf(ref)} {
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s (%s):\n%+v\nwant\n%+v", served.Name, form, got, want)
			}
		}
		// The victim preemption patches, deletes and reports.
		v := p.asPod()
		if v.Name != served.Name || v.Namespace != served.Namespace || v.UID != served.UID || v.ResourceVersion != served.ResourceVersion ||
			!maps.Equal(v.Labels, served.Labels) || !reflect.DeepEqual(v.DeletionTimestamp, served.DeletionTimestamp) ||
			!reflect.DeepEqual(v.Status.StartTime, served.Status.StartTime) || podPriority(v) != podPriority(served) || v.Spec.NodeName != served.Spec.NodeName {
			t.Errorf("%s: victim %+v", served.Name, v.ObjectMeta)
		}
		cond := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler, Message: "preempting"}
		if hasCondition(v, cond) != hasCondition(served, cond) {
			t.Errorf("%s: victim's DisruptionTarget %v, served %v", served.Name, hasCondition(v, cond), hasCondition(served, cond))
		}
	}
	// A pending pod is stripped, not made compact.
	if obj, _ := transformPod(servedPod("p", "")); reflect.TypeOf(obj) != reflect.TypeOf(&v1.Pod{}) {
		t.Errorf("transformPod(pending pod) = %T", obj)
	}
}

// servedTerminatingByPreemption is the test terminatingByPreemption makes,
// read from a served pod.
func servedTerminatingByPreemption(p *v1.Pod) bool {
	if p.DeletionTimestamp == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			return c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonPreemptionByScheduler
		}
	}
	return false
}

// BenchmarkBoundPodRetained decodes b.N bound pods from protobuf as the
// informer does and keeps them as the scheduler does: the informer's
// store and the scheduler's cache. It reports the live heap they hold
// (B/pod-kept) for the compact form (transformPod, the store without a
// namespace index) and for the form kept before (the stripped v1.Pod in
// a store with the namespace index, and the cache's own entry).
func BenchmarkBoundPodRetained(b *testing.B) {
	raw := make([][]byte, 0, 64)
	for i := range 64 {
		data, err := servedPod(fmt.Sprintf("pod-%d", i), "node-1").Marshal()
		if err != nil {
			b.Fatal(err)
		}
		raw = append(raw, data)
	}
	for _, form := range []string{"stripped", "compact"} {
		b.Run("form="+form, func(b *testing.B) {
			s := New(nil, Config{})
			indexers := cache.Indexers{}
			transform := transformPod
			if form == "stripped" {
				indexers = cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
				transform = stripPod
			}
			store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for i := range b.N {
				pod := &v1.Pod{}
				if err := pod.Unmarshal(raw[i%len(raw)]); err != nil {
					b.Fatal(err)
				}
				pod.Name = fmt.Sprintf("pod-%d", i)
				pod.UID = types.UID(fmt.Sprintf("8d3c6a7e-5f7b-4c1e-9a0b-%012d", i))
				pod.Spec.NodeName = fmt.Sprintf("node-%d", i%1000)
				obj, err := transform(pod)
				if err != nil {
					b.Fatal(err)
				}
				if err := store.Add(obj); err != nil {
					b.Fatal(err)
				}
				s.onPod(obj)
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "B/pod-kept")
			runtime.KeepAlive(store)
			runtime.KeepAlive(s)
		})
	}
}
