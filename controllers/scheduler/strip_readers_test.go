package scheduler

import (
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The tests below check the transforms by what the scheduler's readers
// make of their output rather than by the fields they keep: every reader
// (the filters in plugin order with their messages, the node's
// allocatable, taints and topology labels, the node events that requeue
// pods, a pod's requests, ports, priority and spreading owner) must give
// the same answer on a stripped object as on the object the API server
// serves. A transform that drops a field someone reads fails here, even a
// field the transform's own test forgot.

// servedNode is a node as an agent registers and updates it: every status
// field set, the Ready condition among others.
func servedNode(name string, mut func(*v1.Node)) *v1.Node {
	t := metav1.Unix(1700000000, 0)
	alloc := v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"),
		v1.ResourcePods: resource.MustParse("110"), v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		"hugepages-2Mi": resource.MustParse("1Gi"), "example.com/gpu": resource.MustParse("2"),
	}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: "uid-" + "name", ResourceVersion: "7", CreationTimestamp: t,
			Labels: map[string]string{
				v1.LabelHostname: name, v1.LabelTopologyZone: "zone-a", v1.LabelTopologyRegion: "r",
				v1.LabelOSStable: "linux", "disk": "ssd",
			},
			Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: v1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}, ProviderID: "sim://" + name},
		Status: v1.NodeStatus{
			Capacity: alloc, Allocatable: alloc,
			Conditions: []v1.NodeCondition{
				{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, LastHeartbeatTime: t},
				{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, LastHeartbeatTime: t},
				{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, LastHeartbeatTime: t},
				{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: t},
			},
			Addresses:       []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeHostName, Address: name}},
			DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: 10250}},
			NodeInfo:        v1.NodeSystemInfo{KubeletVersion: "v1.32.0", OperatingSystem: "linux", Architecture: "amd64"},
			Images:          []v1.ContainerImage{{Names: []string{"nginx:1.27"}, SizeBytes: 1 << 26}},
		},
	}
	if mut != nil {
		mut(n)
	}
	return n
}

func setReady(status v1.ConditionStatus) func(*v1.Node) {
	return func(n *v1.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == v1.NodeReady {
				n.Status.Conditions[i].Status = status
			}
		}
	}
}

// nodeVariants are one node in the states the filters tell apart.
func nodeVariants() map[string]*v1.Node {
	return map[string]*v1.Node{
		"ready":       servedNode("n", nil),
		"cordoned":    servedNode("n", func(n *v1.Node) { n.Spec.Unschedulable = true }),
		"not ready":   servedNode("n", setReady(v1.ConditionFalse)),
		"unreachable": servedNode("n", setReady(v1.ConditionUnknown)),
		"no Ready condition": servedNode("n", func(n *v1.Node) {
			n.Status.Conditions = n.Status.Conditions[:3]
		}),
		"memory pressure": servedNode("n", func(n *v1.Node) { n.Status.Conditions[0].Status = v1.ConditionTrue }),
		"tainted": servedNode("n", func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule},
				{Key: "soft", Effect: v1.TaintEffectPreferNoSchedule}}
		}),
		"not ready, tainted not-ready": servedNode("n", func(n *v1.Node) {
			setReady(v1.ConditionFalse)(n)
			n.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute}}
		}),
		"relabelled": servedNode("n", func(n *v1.Node) { n.Labels["disk"] = "hdd"; n.Labels[v1.LabelTopologyZone] = "zone-b" }),
		"smaller": servedNode("n", func(n *v1.Node) {
			n.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourcePods: resource.MustParse("1")}
		}),
		"other name": servedNode("m", nil),
	}
}

// podVariants are pods that each exercise one filter or reader.
func podVariants() map[string]*v1.Pod {
	pending := func(mut func(*v1.Pod)) *v1.Pod {
		p := servedPod("p", "")
		p.Status = v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: "0/3 nodes are available"}}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	return map[string]*v1.Pod{
		"plain":    pending(nil),
		"selector": pending(func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
		"by name": pending(func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n"}}}}},
			}}}
		}),
		"zone preferred": pending(func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
				Weight: 10, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{"zone-a"}}}},
			}}}}
		}),
		"tolerates everything": pending(func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}} }),
		"tolerates not-ready": pending(func(p *v1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})
		}),
		"big": pending(func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("3"), "example.com/gpu": resource.MustParse("3"), "hugepages-2Mi": resource.MustParse("2Gi")}
			p.Spec.Overhead = v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")}
		}),
		"host port and sidecar": pending(func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, v1.ContainerPort{ContainerPort: 8080, HostPort: 80, Protocol: v1.ProtocolTCP})
			p.Spec.InitContainers = []v1.Container{{Name: "proxy", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}
		}),
		"spread": pending(func(p *v1.Pod) {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone,
				WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "scale"}}}}
		}),
		"high priority": pending(func(p *v1.Pod) { p.Spec.Priority = ptr.To[int32](1000); p.Spec.PriorityClassName = "high" }),
	}
}

// sameReasons compares two failures' reasons as the message counts them:
// the extended resources come in map order, the histogram sorts them.
func sameReasons(a, b failure) bool {
	ra, rb := slices.Clone(a.reasons()), slices.Clone(b.reasons())
	slices.Sort(ra)
	slices.Sort(rb)
	return slices.Equal(ra, rb)
}

func mustStripNode(t *testing.T, n *v1.Node) *v1.Node {
	t.Helper()
	obj, err := stripNode(n.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*v1.Node)
}

func mustStripPod(t *testing.T, p *v1.Pod) *v1.Pod {
	t.Helper()
	obj, err := stripPod(p.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*v1.Pod)
}

// nodeView is what the cache and filters derive from a node object.
type nodeView struct {
	Name                 string
	Taints               []v1.Taint
	Allocatable          resources
	AllowedPods          int64
	Zone, Hostname       string
	HasZone, HasHostname bool
}

func viewNode(n *v1.Node) (*nodeInfo, nodeView) {
	ni := &nodeInfo{name: n.Name}
	ni.setNode(n)
	return ni, nodeView{Name: n.Name, Taints: ni.taints, Allocatable: ni.allocatable, AllowedPods: ni.allowedPods,
		Zone: ni.zone, Hostname: ni.hostname, HasZone: ni.hasZone, HasHostname: ni.hasHostname}
}

// podView is what the queue, the filters and preemption derive from a pod.
type podView struct {
	Priority               int32
	Req, NonZero           resources
	Ports                  any
	TolUnschedulable       bool
	Owner                  any
	Preferred, Spread, Aff bool
	Patch                  string
}

func viewPod(p *v1.Pod) (*podEntry, podView) {
	e := newPodEntry(p.Namespace+"/"+p.Name, p)
	now := metav1.Unix(1700000100, 0)
	return e, podView{Priority: e.priority, Req: e.req, NonZero: e.nonZero, Ports: e.ports, TolUnschedulable: e.toleratesUnschedulable,
		Owner: e.owner, Preferred: len(e.preferred) > 0, Spread: len(e.spread) > 0, Aff: e.affinity != nil,
		Patch: string(podScheduledPatch(p, "0/1 nodes are available", now, nil))}
}

// TestStripNodeReaders: every reader of a node gives the same answer on
// the stripped node as on the served one, alone and paired with every pod
// variant in the filters (kind and the "0/N nodes are available"
// reasons), and every update between two node states yields the same
// requeue event and change report.
func TestStripNodeReaders(t *testing.T) {
	nodes, pods := nodeVariants(), podVariants()
	for name, full := range nodes {
		stripped := mustStripNode(t, full)
		fullInfo, fullView := viewNode(full)
		strippedInfo, strippedView := viewNode(stripped)
		if !reflect.DeepEqual(fullView, strippedView) {
			t.Errorf("%s: cache view\n%+v\nstripped\n%+v", name, strippedView, fullView)
		}
		for pname, pod := range pods {
			e, _ := viewPod(pod)
			want, got := filter(e, fullInfo, nil), filter(e, strippedInfo, nil)
			if want.kind != got.kind || !sameReasons(want, got) {
				t.Errorf("node %s, pod %s: filter on the stripped node %v %v, on the served one %v %v", name, pname, got.kind, got.reasons(), want.kind, want.reasons())
			}
			for i := range e.preferred {
				if e.preferred[i].term.matches(full) != e.preferred[i].term.matches(stripped) {
					t.Errorf("node %s, pod %s: preferred term %d matches differently", name, pname, i)
				}
			}
		}
		for oname, other := range nodes {
			if other.Name != full.Name {
				continue
			}
			strippedOther := mustStripNode(t, other)
			if a, b := nodeEvent(other, full), nodeEvent(strippedOther, stripped); a != b {
				t.Errorf("%s -> %s: event %s on stripped nodes, %s on served ones", oname, name, b, a)
			}
			fi, _ := viewNode(other)
			si, _ := viewNode(strippedOther)
			if a, b := fi.setNode(full), si.setNode(stripped); a != b {
				t.Errorf("%s -> %s: changed=%v on stripped nodes, %v on served ones", oname, name, b, a)
			}
		}
	}
}

// TestStripPodReaders: every reader of a pod gives the same answer on the
// stripped pod as on the served one, and the filters decide the same for
// it on every node variant.
func TestStripPodReaders(t *testing.T) {
	nodes, pods := nodeVariants(), podVariants()
	for pname, full := range pods {
		for _, bound := range []bool{false, true} {
			pod := full.DeepCopy()
			if bound {
				pod.Spec.NodeName = "n"
				pod.Status.Phase = v1.PodRunning
			}
			fe, fv := viewPod(pod)
			se, sv := viewPod(mustStripPod(t, pod))
			if bound {
				// A bound pod's PodScheduled is dropped: the scheduler
				// never writes the status of a pod it has placed.
				fv.Patch, sv.Patch = "", ""
			}
			if !reflect.DeepEqual(fv, sv) {
				t.Errorf("pod %s (bound %v): view\n%+v\nstripped\n%+v", pname, bound, fv, sv)
			}
			for nname, node := range nodes {
				ni, _ := viewNode(node)
				want, got := filter(fe, ni, nil), filter(se, ni, nil)
				if want.kind != got.kind || !sameReasons(want, got) {
					t.Errorf("pod %s on %s: stripped %v %v, served %v %v", pname, nname, got.kind, got.reasons(), want.kind, want.reasons())
				}
			}
		}
	}
}
