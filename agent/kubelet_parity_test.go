package agent

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// eventSummary is what a test reads of an object's events by reason: the
// occurrences (counts summed over the Event objects), the last message and
// the sources seen.
type eventSummary struct {
	count   int32
	message string
	types   map[string]bool
	sources map[string]bool
}

// events sums up the events about one object (kind/name; for pods, in ns).
func (e *env) events(ctx context.Context, ns, kind, name string) (map[string]*eventSummary, error) {
	list, err := e.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fmt.Sprintf("involvedObject.kind=%s,involvedObject.name=%s", kind, name),
	})
	if err != nil {
		return nil, err
	}
	out := map[string]*eventSummary{}
	for _, ev := range list.Items {
		s := out[ev.Reason]
		if s == nil {
			s = &eventSummary{types: map[string]bool{}, sources: map[string]bool{}}
			out[ev.Reason] = s
		}
		s.count += ev.Count
		s.message = ev.Message
		s.types[ev.Type] = true
		s.sources[ev.Source.Component+"/"+ev.Source.Host] = true
	}
	return out, nil
}

// TestNodeStartEvents: on every start, new Node or adopted, the agent
// records the kubelet's start events, and never RegisteredNode (the node
// lifecycle controller's).
func TestNodeStartEvents(t *testing.T) {
	testserver.SkipShort(t) // a server and node agents: slow
	s := testserver.StartMemory(t)
	e := &env{t: t, client: s.Client}
	want := map[string]string{
		"Starting":                "Starting kubelet.",
		"NodeAllocatableEnforced": "Updated Node Allocatable limit across pods",
		"NodeHasSufficientMemory": "Node node-1 status is now: NodeHasSufficientMemory",
		"NodeHasNoDiskPressure":   "Node node-1 status is now: NodeHasNoDiskPressure",
		"NodeHasSufficientPID":    "Node node-1 status is now: NodeHasSufficientPID",
	}
	check := func(starts int32) {
		t.Helper()
		e.poll(10*time.Second, fmt.Sprintf("the start events of start %d", starts), func(ctx context.Context) (bool, error) {
			got, err := e.events(ctx, metav1.NamespaceDefault, "Node", "node-1")
			if err != nil {
				return false, err
			}
			if r, ok := got["RegisteredNode"]; ok {
				return false, fmt.Errorf("RegisteredNode recorded by %v", r.sources)
			}
			for reason, msg := range want {
				s := got[reason]
				if s == nil || s.count < starts {
					return false, fmt.Errorf("%s: %+v", reason, s)
				}
				if s.message != msg || !s.sources["kubelet/node-1"] || len(s.sources) != 1 || !s.types[v1.EventTypeNormal] {
					return false, fmt.Errorf("%s: message %q sources %v types %v", reason, s.message, s.sources, s.types)
				}
			}
			ready := got["NodeReady"]
			if ready == nil || ready.message != "Node node-1 status is now: NodeReady" {
				return false, fmt.Errorf("NodeReady: %+v", ready)
			}
			return true, nil
		})
	}
	stop := e.startAgent(s.Config, fastConfig(1))
	e.waitNodeReady("node-1")
	check(1)
	stop()
	stop = e.startAgent(s.Config, fastConfig(1))
	defer stop()
	e.waitNodeReady("node-1")
	check(2)
}

// TestPulledEventImageSize: the Pulled event reports the pulled image's
// size in the kubelet's words.
func TestPulledEventImageSize(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	pod := simplePod("pulled", v1.RestartPolicyAlways)
	pod.Spec.Containers[0].Image = "nginx:1.27"
	e.runPod(pod, "node-1")
	re := regexp.MustCompile(`^Successfully pulled image "nginx:1\.27" in (\S+) \((\S+) including waiting\)\. Image size: ([1-9][0-9]*) bytes\.$`)
	e.poll(10*time.Second, "the Pulled event", func(ctx context.Context) (bool, error) {
		got, err := e.events(ctx, "default", "Pod", "pulled")
		if err != nil || got["Pulled"] == nil {
			return false, err
		}
		m := re.FindStringSubmatch(got["Pulled"].message)
		if m == nil {
			return false, fmt.Errorf("Pulled message %q", got["Pulled"].message)
		}
		if _, err := time.ParseDuration(m[1]); err != nil {
			return false, fmt.Errorf("pull duration %q: %v", m[1], err)
		}
		var size uint64
		fmt.Sscan(m[3], &size)
		if size < 60_000_000 || size > 85_000_000 {
			return false, fmt.Errorf("nginx:1.27 size %d, want about 72 MB", size)
		}
		return true, nil
	})
}

// createOnNode creates the pod with spec.nodeName set: it reaches the node
// without the scheduler, as the kubelet's admission cases do.
func (e *env) createOnNode(pod *v1.Pod, nodeName string) *v1.Pod {
	e.t.Helper()
	pod.Spec.NodeName = nodeName
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	created, err := e.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return created
}

func withRequests(pod *v1.Pod, list v1.ResourceList) *v1.Pod {
	pod.Spec.Containers[0].Resources.Requests = list
	return pod
}

// waitRejected waits for the pod to be rejected with reason and message
// and checks the status and event as the kubelet writes them.
func (e *env) waitRejected(pod *v1.Pod, reason, message string) {
	e.t.Helper()
	got := e.waitPod(pod, 10*time.Second, "rejected", phaseIs(v1.PodFailed))
	st := got.Status
	if st.Reason != reason || st.Message != "Pod was rejected: "+message {
		e.t.Errorf("%s: reason %q message %q, want %q %q", pod.Name, st.Reason, st.Message, reason, "Pod was rejected: "+message)
	}
	if len(st.ContainerStatuses) != 0 || st.QOSClass == "" || st.StartTime == nil || st.PodIP != "" || st.HostIP != "" {
		e.t.Errorf("%s: rejected pod's status %+v", pod.Name, st)
	}
	for _, c := range st.Conditions {
		if conditionByKubelet(c.Type) {
			e.t.Errorf("%s: rejected pod has condition %+v", pod.Name, c)
		}
	}
	e.poll(10*time.Second, pod.Name+"'s "+reason+" event", func(ctx context.Context) (bool, error) {
		got, err := e.events(ctx, pod.Namespace, "Pod", pod.Name)
		if err != nil {
			return false, err
		}
		ev := got[reason]
		if ev == nil {
			return false, nil
		}
		if ev.message != message || !ev.types[v1.EventTypeWarning] || !ev.sources["kubelet/node-1"] {
			return false, fmt.Errorf("event %+v", ev)
		}
		if got["Pulling"] != nil || got["Started"] != nil {
			return false, fmt.Errorf("a rejected pod ran: %v", got)
		}
		return true, nil
	})
}

// TestAdmission: pods created on the node (no scheduler) that do not fit
// are rejected as the kubelet rejects them; what ended frees its room.
func TestAdmission(t *testing.T) {
	cfg := fastConfig(1)
	cfg.Capacity = v1.ResourceList{v1.ResourcePods: resource.MustParse("3")}
	cfg.Taints = []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoExecute}}
	e := start(t, cfg)
	node := e.waitNodeReady("node-1")
	memory := node.Status.Allocatable[v1.ResourceMemory]
	tolerate := []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
	pod := func(name string) *v1.Pod {
		p := simplePod(name, v1.RestartPolicyAlways)
		p.Spec.Tolerations = tolerate
		return p
	}
	running := func(p *v1.Pod) *v1.Pod {
		created := e.createOnNode(p, "node-1")
		e.waitPod(created, 10*time.Second, "Running", phaseIs(v1.PodRunning))
		return created
	}

	// One cpu taken.
	one := running(withRequests(pod("one-cpu"), v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}))
	e.createOnNode(withRequests(pod("too-much-cpu"), v1.ResourceList{v1.ResourceCPU: resource.MustParse("3500m")}), "node-1")
	e.waitRejected(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "too-much-cpu", Namespace: "default"}}, "OutOfcpu",
		"Node didn't have enough resource: cpu, requested: 3500, used: 1000, capacity: 4000")

	e.createOnNode(withRequests(pod("too-much-memory"), v1.ResourceList{v1.ResourceMemory: resource.MustParse("20Gi")}), "node-1")
	e.waitRejected(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "too-much-memory", Namespace: "default"}}, "OutOfmemory",
		fmt.Sprintf("Node didn't have enough resource: memory, requested: %d, used: 0, capacity: %d", int64(20)<<30, memory.Value()))

	selector := pod("elsewhere")
	selector.Spec.NodeSelector = map[string]string{"disktype": "ssd"}
	e.createOnNode(selector, "node-1")
	e.waitRejected(selector, "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")

	untolerated := simplePod("untolerated", v1.RestartPolicyAlways)
	e.createOnNode(untolerated, "node-1")
	e.waitRejected(untolerated, "TaintToleration", "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate")

	// Three pods at most: one-cpu and two more.
	running(pod("second"))
	running(pod("third"))
	fourth := pod("fourth")
	e.createOnNode(fourth, "node-1")
	e.waitRejected(fourth, "OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3")

	// Once one-cpu is gone, a pod asking for 3.5 cpus fits.
	ctx := context.Background()
	if err := e.client.CoreV1().Pods("default").Delete(ctx, one.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	e.poll(10*time.Second, "one-cpu released", func(context.Context) (bool, error) {
		return e.agent.worker(one.UID) == nil, nil
	})
	running(withRequests(pod("fits-now"), v1.ResourceList{v1.ResourceCPU: resource.MustParse("3500m")}))
}

// TestAdmissionChecks covers the predicates without a server.
func TestAdmissionChecks(t *testing.T) {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"zone": "a", "gen": "5"}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi"),
			v1.ResourcePods: resource.MustParse("10"), v1.ResourceEphemeralStorage: resource.MustParse("10Gi"),
			"hugepages-2Mi": resource.MustParse("0"),
		}},
	}
	container := func(req v1.ResourceList, ports ...v1.ContainerPort) v1.Container {
		return v1.Container{Name: "c", Image: "busybox", Resources: v1.ResourceRequirements{Requests: req}, Ports: ports}
	}
	mk := func(uid string, spec v1.PodSpec) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}, Spec: spec}
	}
	affinity := func(reqs ...v1.NodeSelectorRequirement) *v1.Affinity {
		return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: reqs}},
		}}}
	}
	var s admissions
	if rej := s.admit(mk("a", v1.PodSpec{Containers: []v1.Container{container(v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")},
		v1.ContainerPort{ContainerPort: 80, HostPort: 8080})}}), node); rej != nil {
		t.Fatalf("first pod rejected: %+v", rej)
	}
	tests := []struct {
		name   string
		spec   v1.PodSpec
		labels map[string]string
		reason string
		msg    string
	}{
		{name: "fits", spec: v1.PodSpec{Containers: []v1.Container{container(v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")})}}},
		{name: "cpu", spec: v1.PodSpec{Containers: []v1.Container{container(v1.ResourceList{v1.ResourceCPU: resource.MustParse("501m")})}},
			reason: "OutOfcpu", msg: "Node didn't have enough resource: cpu, requested: 501, used: 1500, capacity: 2000"},
		{name: "init containers count at their largest", spec: v1.PodSpec{
			InitContainers: []v1.Container{container(v1.ResourceList{v1.ResourceCPU: resource.MustParse("600m")})},
			Containers:     []v1.Container{container(v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")})}},
			reason: "OutOfcpu", msg: "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000"},
		{name: "hugepages", spec: v1.PodSpec{Containers: []v1.Container{container(v1.ResourceList{"hugepages-2Mi": resource.MustParse("2Mi")})}},
			reason: "OutOfhugepages-2Mi", msg: "Node didn't have enough resource: hugepages-2Mi, requested: 2097152, used: 0, capacity: 0"},
		{name: "unknown extended resources are left to the cluster", spec: v1.PodSpec{Containers: []v1.Container{container(v1.ResourceList{"example.com/gpu": resource.MustParse("1")})}}},
		{name: "affinity In", spec: v1.PodSpec{Affinity: affinity(v1.NodeSelectorRequirement{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a", "b"}}),
			Containers: []v1.Container{container(nil)}}},
		{name: "affinity Gt", spec: v1.PodSpec{Affinity: affinity(v1.NodeSelectorRequirement{Key: "gen", Operator: v1.NodeSelectorOpGt, Values: []string{"5"}}),
			Containers: []v1.Container{container(nil)}},
			reason: "NodeAffinity", msg: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{name: "host port taken", spec: v1.PodSpec{Containers: []v1.Container{container(nil, v1.ContainerPort{ContainerPort: 81, HostPort: 8080, HostIP: "10.0.0.1"})}},
			reason: "NodePorts", msg: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{name: "other protocol", spec: v1.PodSpec{Containers: []v1.Container{container(nil, v1.ContainerPort{ContainerPort: 81, HostPort: 8080, Protocol: v1.ProtocolUDP})}}},
		{name: "os label", labels: map[string]string{v1.LabelOSStable: "windows"}, spec: v1.PodSpec{Containers: []v1.Container{container(nil)}},
			reason: "PodOSSelectorNodeLabelDoesNotMatch", msg: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		{name: "os field", spec: v1.PodSpec{OS: &v1.PodOS{Name: v1.Windows}, Containers: []v1.Container{container(nil)}},
			reason: "PodOSNotSupported", msg: "Failed to admit pod as the OS field doesn't match node OS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mk(strings.ReplaceAll(tc.name, " ", "-"), tc.spec)
			p.Labels = tc.labels
			rej := s.check(p, node)
			switch {
			case tc.reason == "" && rej != nil:
				t.Errorf("rejected: %+v", rej)
			case tc.reason != "" && (rej == nil || rej.reason != tc.reason || rej.message != tc.msg):
				t.Errorf("rejection %+v, want %s %q", rej, tc.reason, tc.msg)
			}
		})
	}
}

// TestContainerDefinitionChanged: a new image for a running container
// restarts it, whatever the restart policy, as the kubelet does.
func TestContainerDefinitionChanged(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	pod := simplePod("set-image", v1.RestartPolicyNever)
	pod.Spec.TerminationGracePeriodSeconds = ptr.To(int64(1))
	created := e.runPod(pod, "node-1")
	running := e.waitPod(pod, 10*time.Second, "Running", phaseIs(v1.PodRunning))
	oldID := running.Status.ContainerStatuses[0].ContainerID

	ctx := context.Background()
	patch := []byte(`{"spec":{"containers":[{"name":"main","image":"busybox:1.37"}]}}`)
	if _, err := e.client.CoreV1().Pods("default").Patch(ctx, created.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	got := e.waitPod(pod, 10*time.Second, "running busybox:1.37", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].Image == "docker.io/library/busybox:1.37" && cs[0].State.Running != nil
	})
	cs := got.Status.ContainerStatuses[0]
	if got.Status.Phase != v1.PodRunning || cs.RestartCount != 1 || cs.ContainerID == oldID || cs.LastTerminationState.Terminated == nil ||
		cs.LastTerminationState.Terminated.ContainerID != oldID || !strings.HasPrefix(cs.ImageID, "docker.io/library/busybox@sha256:") {
		t.Errorf("after the image change: phase %s, container %+v", got.Status.Phase, cs)
	}
	e.poll(10*time.Second, "Killing and Pulled events", func(ctx context.Context) (bool, error) {
		got, err := e.events(ctx, "default", "Pod", "set-image")
		if err != nil {
			return false, err
		}
		k := got["Killing"]
		if k == nil || k.message != "Container main definition changed, will be restarted" {
			return false, fmt.Errorf("Killing: %+v", k)
		}
		return got["Started"] != nil && got["Started"].count == 2 && got["Pulled"] != nil &&
			strings.HasPrefix(got["Pulled"].message, `Successfully pulled image "busybox:1.37"`), nil
	})
}

// TestLifecycleHooks: postStart and preStop hooks of each kind.
func TestLifecycleHooks(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	httpGet := &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/started", Port: intstr.FromInt32(8080)}}
	tcp := &v1.LifecycleHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}}
	exec := func(script string) *v1.LifecycleHandler {
		return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", script}}}
	}
	tests := []struct {
		name      string
		postStart *v1.LifecycleHandler
		// postStartFails: the container is killed and restarts.
		postStartFails bool
		waitingMsg     string // a prefix of the PostStartHookError message
		preStop        *v1.LifecycleHandler
		preStopFails   bool
		// readiness: an exec readiness probe reading what postStart wrote.
		readiness []string
	}{
		{name: "poststart-http", postStart: httpGet},
		{name: "poststart-exec-writes", postStart: exec("echo ok > /tmp/started"), readiness: []string{"cat", "/tmp/started"}},
		{name: "poststart-exec-fails", postStart: exec("exit 3"), postStartFails: true,
			waitingMsg: `Exec lifecycle hook ([sh -c exit 3]) for Container "main" in Pod "hook-poststart-exec-fails_default(`},
		{name: "poststart-tcp", postStart: tcp, postStartFails: true, waitingMsg: "Cannot run handler: invalid handler: &LifecycleHandler{"},
		{name: "prestop-http", preStop: httpGet},
		{name: "prestop-exec-fails", preStop: exec("exit 1"), preStopFails: true},
		{name: "prestop-tcp", preStop: tcp, preStopFails: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pod := simplePod("hook-"+tc.name, v1.RestartPolicyAlways)
			c := &pod.Spec.Containers[0]
			c.Lifecycle = &v1.Lifecycle{PostStart: tc.postStart, PreStop: tc.preStop}
			if tc.readiness != nil {
				c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: tc.readiness}}, PeriodSeconds: 1}
			}
			e.runPod(pod, "node-1")
			ctx := context.Background()
			if tc.postStartFails {
				// The PostStartHookError wait is short (until back-off
				// turns it into CrashLoopBackOff): checked when seen.
				e.waitPod(pod, 20*time.Second, "restarted after its postStart hook failed", func(p *v1.Pod) bool {
					if cs := p.Status.ContainerStatuses; len(cs) == 1 {
						if w := cs[0].State.Waiting; w != nil && w.Reason == "PostStartHookError" {
							if !strings.HasPrefix(w.Message, tc.waitingMsg) {
								t.Errorf("waiting message %q, want prefix %q", w.Message, tc.waitingMsg)
							}
						}
						return cs[0].RestartCount >= 1
					}
					return false
				})
				e.poll(10*time.Second, "FailedPostStartHook and Killing events", func(ctx context.Context) (bool, error) {
					got, err := e.events(ctx, "default", "Pod", pod.Name)
					if err != nil {
						return false, err
					}
					f, k := got["FailedPostStartHook"], got["Killing"]
					if f == nil || k == nil {
						return false, nil
					}
					if f.message != "PostStartHook failed" || !f.types[v1.EventTypeWarning] || k.message != "FailedPostStartHook" {
						return false, fmt.Errorf("events FailedPostStartHook %+v Killing %+v", f, k)
					}
					return true, nil
				})
				return
			}
			e.waitPod(pod, 10*time.Second, "Running and Ready", func(p *v1.Pod) bool {
				c := condition(p, v1.PodReady)
				return p.Status.Phase == v1.PodRunning && c != nil && c.Status == v1.ConditionTrue
			})
			if err := e.client.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			e.poll(20*time.Second, "pod gone", func(ctx context.Context) (bool, error) {
				_, err := e.client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
				return err != nil, nil
			})
			// Events are written asynchronously: the pod may be gone
			// before the recorder has written its last one.
			var got map[string]*eventSummary
			e.poll(10*time.Second, "the hook events", func(ctx context.Context) (bool, error) {
				var err error
				got, err = e.events(ctx, "default", "Pod", pod.Name)
				return err == nil && (!tc.preStopFails || got["FailedPreStopHook"] != nil), err
			})
			if got["FailedPostStartHook"] != nil {
				t.Errorf("FailedPostStartHook: %+v", got["FailedPostStartHook"])
			}
			if f := got["FailedPreStopHook"]; (f != nil) != tc.preStopFails || (f != nil && (f.message != "PreStopHook failed" || !f.types[v1.EventTypeWarning])) {
				t.Errorf("FailedPreStopHook: %+v, want one: %v", f, tc.preStopFails)
			}
		})
	}
}
