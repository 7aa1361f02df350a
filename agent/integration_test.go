package agent

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// fastConfig shortens every interval so that tests run in seconds.
func fastConfig(nodes int) Config {
	return Config{
		Nodes:                     nodes,
		LeaseRenewInterval:        200 * time.Millisecond,
		NodeStatusUpdateFrequency: 100 * time.Millisecond,
		NodeStatusReportFrequency: time.Second,
		RelistPeriod:              100 * time.Millisecond,
		SyncFrequency:             5 * time.Second,
		BackoffBase:               300 * time.Millisecond,
		BackoffMax:                2 * time.Second,
		Logger:                    testserver.Logger(),
	}
}

type env struct {
	t          *testing.T
	client     kubernetes.Interface
	restConfig *rest.Config
	agent      *Agent
}

// start runs a server and an agent with cfg; both stop when the test ends
// (the agent first).
func start(t *testing.T, cfg Config) *env {
	t.Helper()
	testserver.SkipShort(t) // a server and node agents: slow
	s := testserver.StartMemory(t)
	e := &env{t: t, client: s.Client, restConfig: s.Config}
	stop := e.startAgent(s.Config, cfg)
	t.Cleanup(stop)
	return e
}

// startAgent runs an agent until the returned function is called.
func (e *env) startAgent(rc *rest.Config, cfg Config) (stop func()) {
	e.t.Helper()
	a, err := New(rc, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.agent = a
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("agent: %v", err)
		}
	}
}

// poll waits (up to timeout) for cond to hold.
func (e *env) poll(timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("timed out after %v waiting for %s (last error: %v)", timeout, what, last)
	}
}

func (e *env) waitNodeReady(name string) *v1.Node {
	e.t.Helper()
	var node *v1.Node
	e.poll(10*time.Second, "node "+name+" Ready", func(ctx context.Context) (bool, error) {
		n, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = n
		c := findNodeCondition(&n.Status, v1.NodeReady)
		return c != nil && c.Status == v1.ConditionTrue, nil
	})
	return node
}

// runPod creates the pod unscheduled and binds it to nodeName through the
// binding subresource, as the scheduler would.
func (e *env) runPod(pod *v1.Pod, nodeName string) *v1.Pod {
	e.t.Helper()
	ctx := context.Background()
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	created, err := e.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create pod: %v", err)
	}
	err = e.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("bind pod: %v", err)
	}
	return created
}

func (e *env) waitPod(pod *v1.Pod, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	e.t.Helper()
	var got *v1.Pod
	e.poll(timeout, fmt.Sprintf("pod %s: %s", pod.Name, what), func(ctx context.Context) (bool, error) {
		p, err := e.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		return cond(p), nil
	})
	return got
}

func phaseIs(phase v1.PodPhase) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool { return p.Status.Phase == phase }
}

func simplePod(name string, policy v1.RestartPolicy, argv ...string) *v1.Pod {
	c := v1.Container{Name: "main", Image: "busybox:1.36"}
	if len(argv) > 0 {
		c.Command = argv
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			RestartPolicy:                 policy,
			Containers:                    []v1.Container{c},
			TerminationGracePeriodSeconds: ptr.To(int64(30)),
		},
	}
}

func condition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	return findPodCondition(p.Status.Conditions, t)
}

func TestNodesRegisterAndBecomeReady(t *testing.T) {
	cfg := fastConfig(3)
	cfg.Labels = map[string]string{"zone": "a"}
	cfg.Zones, cfg.Region = []string{"z1", "z2"}, "r1"
	cfg.Taints = []v1.Taint{{Key: "dedicated", Value: "test", Effect: v1.TaintEffectNoSchedule}}
	e := start(t, cfg)
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("node-%d", i)
		node := e.waitNodeReady(name)
		if got := node.Labels; got["kubernetes.io/hostname"] != name || got["kubernetes.io/os"] != "linux" || got["kubernetes.io/arch"] == "" || got["zone"] != "a" {
			t.Errorf("%s labels = %v", name, got)
		}
		// Zones round robin from node 1; one region for all.
		if got, want := node.Labels[v1.LabelTopologyZone], []string{"z1", "z2"}[(i-1)%2]; got != want {
			t.Errorf("%s zone = %q, want %q", name, got, want)
		}
		if got := node.Labels[v1.LabelTopologyRegion]; got != "r1" {
			t.Errorf("%s region = %q, want r1", name, got)
		}
		if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "dedicated" {
			t.Errorf("%s taints = %v", name, node.Spec.Taints)
		}
		cidr, err := netip.ParsePrefix(node.Spec.PodCIDR)
		if err != nil || cidr.Bits() != 24 || len(node.Spec.PodCIDRs) != 1 {
			t.Errorf("%s podCIDR %q %v", name, node.Spec.PodCIDR, node.Spec.PodCIDRs)
		}
		info := node.Status.NodeInfo
		if !strings.HasPrefix(info.KubeletVersion, "v1.32.") || info.ContainerRuntimeVersion != "sim://1.0.0" || info.OperatingSystem != "linux" ||
			info.Architecture == "" || info.MachineID == "" || info.SystemUUID == "" || info.BootID == "" || info.KernelVersion == "" || info.OSImage == "" {
			t.Errorf("%s nodeInfo = %+v", name, info)
		}
		// Hostname: the machine the kubelet API listens on, where
		// kube-apiserver's default address order reaches it.
		if len(node.Status.Addresses) != 2 || node.Status.Addresses[0].Type != v1.NodeInternalIP || node.Status.Addresses[1] != (v1.NodeAddress{Type: v1.NodeHostName, Address: "127.0.0.1"}) {
			t.Errorf("%s addresses = %v", name, node.Status.Addresses)
		}
		if k := e.kubelet(); node.Status.DaemonEndpoints.KubeletEndpoint.Port != k.port || node.Annotations[KubeletEndpointAnnotation] != "" {
			t.Errorf("%s daemonEndpoints = %v, annotation %q; agent listens at %s", name, node.Status.DaemonEndpoints, node.Annotations[KubeletEndpointAnnotation], k.url)
		}
		if q := node.Status.Capacity[v1.ResourcePods]; q.Value() != 110 {
			t.Errorf("%s capacity pods = %v", name, q.String())
		}
		if alloc, capacity := node.Status.Allocatable[v1.ResourceMemory], node.Status.Capacity[v1.ResourceMemory]; alloc.Cmp(capacity) >= 0 {
			t.Errorf("%s allocatable memory %v not below capacity %v", name, alloc.String(), capacity.String())
		}
		want := map[v1.NodeConditionType]string{
			v1.NodeMemoryPressure: "False/KubeletHasSufficientMemory",
			v1.NodeDiskPressure:   "False/KubeletHasNoDiskPressure",
			v1.NodePIDPressure:    "False/KubeletHasSufficientPID",
			v1.NodeReady:          "True/KubeletReady",
		}
		for _, c := range node.Status.Conditions {
			if got := string(c.Status) + "/" + c.Reason; got != want[c.Type] {
				t.Errorf("%s condition %s = %s, want %s", name, c.Type, got, want[c.Type])
			}
			if c.LastHeartbeatTime.IsZero() || c.LastTransitionTime.IsZero() {
				t.Errorf("%s condition %s has no times", name, c.Type)
			}
			if c.Type == v1.NodeReady && c.Message != "kubelet is posting ready status" {
				t.Errorf("%s Ready message %q", name, c.Message)
			}
		}
		if len(node.Status.Conditions) != 4 {
			t.Errorf("%s has %d conditions", name, len(node.Status.Conditions))
		}
	}
	// Distinct pod CIDRs.
	nodes, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range nodes.Items {
		if seen[n.Spec.PodCIDR] {
			t.Errorf("pod CIDR %s used twice", n.Spec.PodCIDR)
		}
		seen[n.Spec.PodCIDR] = true
	}
}

func TestLeaseRenewed(t *testing.T) {
	e := start(t, fastConfig(1))
	node := e.waitNodeReady("node-1")
	leases := e.client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	var first metav1.MicroTime
	e.poll(10*time.Second, "lease", func(ctx context.Context) (bool, error) {
		l, err := leases.Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") != "node-1" || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 40 || l.Spec.RenewTime == nil {
			return false, fmt.Errorf("lease spec %+v", l.Spec)
		}
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != node.UID {
			return false, fmt.Errorf("lease owners %+v", l.OwnerReferences)
		}
		first = *l.Spec.RenewTime
		return true, nil
	})
	e.poll(10*time.Second, "lease renewal", func(ctx context.Context) (bool, error) {
		l, err := leases.Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return l.Spec.RenewTime.After(first.Time), nil
	})
}

func TestNodeStatusHeartbeat(t *testing.T) {
	e := start(t, fastConfig(1))
	node := e.waitNodeReady("node-1")
	first := findNodeCondition(&node.Status, v1.NodeReady)
	e.poll(10*time.Second, "a status report after NodeStatusReportFrequency", func(ctx context.Context) (bool, error) {
		n, err := e.client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := findNodeCondition(&n.Status, v1.NodeReady)
		if !c.LastTransitionTime.Equal(&first.LastTransitionTime) {
			return false, fmt.Errorf("lastTransitionTime moved without a transition")
		}
		return c.LastHeartbeatTime.After(first.LastHeartbeatTime.Time), nil
	})
}

func TestPLEGUnhealthyMakesNodeNotReady(t *testing.T) {
	cfg := fastConfig(1)
	cfg.PLEGRelistThreshold = 500 * time.Millisecond
	e := start(t, cfg)
	e.waitNodeReady("node-1")
	rt := e.agent.byName["node-1"].runtime
	rt.SetDown(fmt.Errorf("runtime broken for the test"))
	e.poll(10*time.Second, "node NotReady", func(ctx context.Context) (bool, error) {
		n, err := e.client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := findNodeCondition(&n.Status, v1.NodeReady)
		if c.Status != v1.ConditionFalse {
			return false, nil
		}
		if c.Reason != "KubeletNotReady" || !strings.HasPrefix(c.Message, "PLEG is not healthy: pleg was last seen active ") {
			return false, fmt.Errorf("Ready condition %+v", c)
		}
		return true, nil
	})
	rt.SetDown(nil)
	e.waitNodeReady("node-1")
	e.poll(10*time.Second, "NodeNotReady and NodeReady events", func(ctx context.Context) (bool, error) {
		evs, err := e.client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got := map[string]bool{}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == "Node" && ev.InvolvedObject.Name == "node-1" {
				got[ev.Reason] = true
			}
		}
		return got["NodeNotReady"] && got["NodeReady"] && got["Starting"], nil
	})
}

func TestPodRuns(t *testing.T) {
	e := start(t, fastConfig(2))
	node := e.waitNodeReady("node-2")
	pod := simplePod("server", v1.RestartPolicyAlways) // no command: runs until stopped
	e.runPod(pod, "node-2")
	got := e.waitPod(pod, 10*time.Second, "Running and Ready", func(p *v1.Pod) bool {
		c := condition(p, v1.PodReady)
		return p.Status.Phase == v1.PodRunning && c != nil && c.Status == v1.ConditionTrue
	})
	st := got.Status
	cidr := netip.MustParsePrefix(node.Spec.PodCIDR)
	if ip, err := netip.ParseAddr(st.PodIP); err != nil || !cidr.Contains(ip) || len(st.PodIPs) != 1 || st.PodIPs[0].IP != st.PodIP {
		t.Errorf("podIP %q podIPs %v not in %s", st.PodIP, st.PodIPs, cidr)
	}
	if st.HostIP != node.Status.Addresses[0].Address || len(st.HostIPs) != 1 || st.HostIPs[0].IP != st.HostIP {
		t.Errorf("hostIP %q hostIPs %v, node %v", st.HostIP, st.HostIPs, node.Status.Addresses)
	}
	if st.StartTime == nil || st.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("startTime %v qosClass %q", st.StartTime, st.QOSClass)
	}
	for _, ct := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled} {
		if c := condition(got, ct); c == nil || c.Status != v1.ConditionTrue || c.LastTransitionTime.IsZero() {
			t.Errorf("condition %s = %+v", ct, c)
		}
	}
	if len(st.ContainerStatuses) != 1 {
		t.Fatalf("containerStatuses = %+v", st.ContainerStatuses)
	}
	cs := st.ContainerStatuses[0]
	if cs.State.Running == nil || cs.State.Running.StartedAt.IsZero() || !cs.Ready || !ptr.Deref(cs.Started, false) || cs.RestartCount != 0 ||
		!strings.HasPrefix(cs.ContainerID, "sim://") || cs.Image != "docker.io/library/busybox:1.36" || !strings.HasPrefix(cs.ImageID, "docker.io/library/busybox@sha256:") {
		t.Errorf("container status = %+v", cs)
	}
	e.poll(10*time.Second, "Pulled/Created/Started events", func(ctx context.Context) (bool, error) {
		evs, err := e.client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=server"})
		if err != nil {
			return false, err
		}
		got := map[string]string{}
		for _, ev := range evs.Items {
			if ev.Source.Component != "kubelet" || ev.Source.Host != "node-2" || ev.InvolvedObject.FieldPath != "spec.containers{main}" {
				return false, fmt.Errorf("event %s: source %+v fieldPath %q", ev.Reason, ev.Source, ev.InvolvedObject.FieldPath)
			}
			got[ev.Reason] = ev.Message
		}
		return got["Pulling"] == `Pulling image "busybox:1.36"` && strings.HasPrefix(got["Pulled"], `Successfully pulled image "busybox:1.36" in `) &&
			got["Created"] == "Created container main" && got["Started"] == "Started container main", nil
	})
	// The kubelet metrics, on the same agent: 3 pods on node-1, this one
	// on node-2.
	t.Run("metrics", func(t *testing.T) { checkKubeletMetrics(t, e, 3, 1) })
}

func TestGracefulDelete(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	tests := []struct {
		name    string
		argv    []string
		preStop []string
		grace   int64
		code    int32
		phase   v1.PodPhase
		atLeast time.Duration
	}{
		// A server stops at once on SIGTERM (exit 0).
		{name: "server", grace: 30, code: 0, phase: v1.PodSucceeded},
		// sleep as PID 1 ignores SIGTERM: killed when the grace period ends.
		{name: "sleeper", argv: []string{"sleep", "3600"}, grace: 1, code: 137, phase: v1.PodFailed},
		// The preStop hook runs first: SIGTERM comes after its sleep.
		{name: "prestop", preStop: []string{"sh", "-c", "sleep 1"}, grace: 30, code: 0, phase: v1.PodSucceeded, atLeast: time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := simplePod("del-"+tc.name, v1.RestartPolicyAlways, tc.argv...)
			if tc.preStop != nil {
				pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: tc.preStop}}}
			}
			e.runPod(pod, "node-1")
			running := e.waitPod(pod, 10*time.Second, "Running", phaseIs(v1.PodRunning))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			w, err := e.client.CoreV1().Pods(pod.Namespace).Watch(ctx, metav1.ListOptions{
				FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: running.ResourceVersion,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			started := time.Now()
			if err := e.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(tc.grace)}); err != nil {
				t.Fatal(err)
			}
			var last *v1.Pod
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*v1.Pod)
				if !ok {
					t.Fatalf("watch event %v %T", ev.Type, ev.Object)
				}
				if ev.Type == "DELETED" {
					break
				}
				last = p
			}
			if ctx.Err() != nil {
				t.Fatal("pod not deleted in time")
			}
			took := time.Since(started)
			if tc.grace >= 1 && tc.code == 137 && took < time.Duration(tc.grace)*time.Second {
				t.Errorf("deleted after %v, before the grace period of %ds ended", took, tc.grace)
			}
			if took < tc.atLeast {
				t.Errorf("deleted after %v, before the preStop hook ended", took)
			}
			if last == nil || last.Status.Phase != tc.phase || len(last.Status.ContainerStatuses) != 1 {
				t.Fatalf("final status: %+v", last)
			}
			term := last.Status.ContainerStatuses[0].State.Terminated
			if term == nil || term.ExitCode != tc.code {
				t.Errorf("final container state %+v, want exit code %d", last.Status.ContainerStatuses[0].State, tc.code)
			}
			if c := condition(last, v1.PodReady); c == nil || c.Status != v1.ConditionFalse {
				t.Errorf("final Ready condition %+v", c)
			}
			if _, err := e.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("pod still there: %v", err)
			}
		})
	}
}

// TestForceDelete: a pod deleted with grace period 0 vanishes from the API
// at once; the agent kills and forgets its containers.
func TestForceDelete(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	pod := simplePod("forced", v1.RestartPolicyAlways, "sleep", "3600")
	created := e.runPod(pod, "node-1")
	e.waitPod(pod, 10*time.Second, "Running", phaseIs(v1.PodRunning))
	if err := e.client.CoreV1().Pods("default").Delete(context.Background(), "forced", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	rt := e.agent.byName["node-1"].runtime
	e.poll(10*time.Second, "runtime cleaned up", func(ctx context.Context) (bool, error) {
		st, err := rt.GetPodStatus(ctx, created.UID)
		return err == nil && len(st.ContainerStatuses) == 0 && !st.SandboxReady && e.agent.worker(created.UID) == nil, err
	})
}
