package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/controllers/scheduler"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const ns = metav1.NamespaceDefault

// fastConfig shortens the back-offs so retries show within a test.
func fastConfig() scheduler.Config {
	return scheduler.Config{
		Logger:           testserver.Logger(),
		InitialBackoff:   10 * time.Millisecond,
		MaxBackoff:       50 * time.Millisecond,
		EventSeriesFlush: 100 * time.Millisecond,
	}
}

// startScheduler runs a scheduler against srv until the test ends.
//
// It first waits until the watch cache serves every node the test made:
// the scheduler's informers list at resourceVersion "0", which the server
// answers from its watch cache at once, as kube does, so a node created
// just before may be missing from that list and arrive by watch after
// the first attempt. A pod that failed on the nodes it saw is retried
// only when a changed node passes its filters (kube's queueing hints), so
// a cordoned or not-ready node arriving late would leave the first
// attempt's "0/1 nodes are available" on the pod: kube's integration
// tests wait for the scheduler's cache to hold the nodes for the same
// reason.
func startScheduler(t *testing.T, srv *testserver.Server, cfg scheduler.Config) {
	t.Helper()
	waitNodesCached(t, srv.Client)
	s := scheduler.New(srv.Client, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scheduler: %v", err)
		}
		srv.CloseIdleConnections(t)
	})
}

// waitNodesCached waits until a resourceVersion "0" list of nodes (the
// watch cache's, as informers list) has every node a quorum read has.
func waitNodesCached(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	var cached, stored int
	testserver.WaitFor(t, "the watch cache to serve every node", func(ctx context.Context) (bool, error) {
		all, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		fromCache, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		cached, stored = len(fromCache.Items), len(all.Items)
		return cached == stored, nil
	}, func() string { return fmt.Sprintf("%d nodes cached, %d stored", cached, stored) })
}

// nodeOpt adjusts a node before it is created.
type nodeOpt func(*v1.Node)

func withLabels(kv ...string) nodeOpt {
	return func(n *v1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withTaint(key, value string, effect v1.TaintEffect) nodeOpt {
	return func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func withReady(status v1.ConditionStatus) nodeOpt {
	return func(n *v1.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == v1.NodeReady {
				n.Status.Conditions[i].Status = status
			}
		}
	}
}

func cordoned(n *v1.Node) { n.Spec.Unschedulable = true }

// createNode registers a node with cpu, memory and pods allocatable and,
// unless an option changes it, a Ready=True status, as an agent would.
func createNode(t *testing.T, c kubernetes.Interface, name, cpu, mem, pods string, opts ...nodeOpt) *v1.Node {
	t.Helper()
	node, err := registerNode(c, name, cpu, mem, pods, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return node
}

func registerNode(c kubernetes.Interface, name, cpu, mem, pods string, opts ...nodeOpt) (*v1.Node, error) {
	ctx := context.Background()
	alloc := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(cpu),
		v1.ResourceMemory: resource.MustParse(mem),
		v1.ResourcePods:   resource.MustParse(pods),
	}
	now := metav1.Now()
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: v1.NodeStatus{
			Capacity:    alloc,
			Allocatable: alloc,
			Conditions: []v1.NodeCondition{{
				Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
				Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
			}},
		},
	}
	for _, opt := range opts {
		opt(node)
	}
	status := node.Status
	created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", name, err)
	}
	created.Status = status
	updated, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("node %s status: %w", name, err)
	}
	return updated, nil
}

// podOpt adjusts a pod before it is created.
type podOpt func(*v1.Pod)

func requests(cpu, mem string) podOpt {
	return func(p *v1.Pod) {
		r := v1.ResourceList{}
		if cpu != "" {
			r[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			r[v1.ResourceMemory] = resource.MustParse(mem)
		}
		p.Spec.Containers[0].Resources.Requests = r
	}
}

func tolerating(key, value string, effect v1.TaintEffect) podOpt {
	return func(p *v1.Pod) {
		op := v1.TolerationOpEqual
		if value == "" {
			op = v1.TolerationOpExists
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: key, Operator: op, Value: value, Effect: effect})
	}
}

func hostPortPod(port int32) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: port}}
	}
}

func createPod(t *testing.T, c kubernetes.Interface, name string, opts ...podOpt) *v1.Pod {
	t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	for _, opt := range opts {
		opt(pod)
	}
	created, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil && pod.Spec.Priority != nil && apierrors.IsForbidden(err) && strings.Contains(err.Error(), "must not be provided in pod spec") {
		// With kube's Priority admission plugin a priority comes from a
		// PriorityClass only.
		created, err = c.CoreV1().Pods(ns).Create(context.Background(), withPriorityClass(t, c, pod), metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return created
}

// withPriorityClass returns pod with its spec.priority and
// spec.preemptionPolicy replaced by a PriorityClass of that value and
// policy, which it creates if need be.
func withPriorityClass(t *testing.T, c kubernetes.Interface, pod *v1.Pod) *v1.Pod {
	t.Helper()
	pod = pod.DeepCopy()
	class := &schedulingv1.PriorityClass{Value: *pod.Spec.Priority, PreemptionPolicy: pod.Spec.PreemptionPolicy}
	class.Name = fmt.Sprintf("test-priority-%d", class.Value)
	if class.PreemptionPolicy != nil {
		class.Name += "-" + strings.ToLower(string(*class.PreemptionPolicy))
	}
	if _, err := c.SchedulingV1().PriorityClasses().Create(context.Background(), class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create PriorityClass %s: %v", class.Name, err)
	}
	pod.Spec.Priority, pod.Spec.PreemptionPolicy = nil, nil
	pod.Spec.PriorityClassName = class.Name
	return pod
}

// waitBound waits until the pod has a node and returns it.
func waitBound(t *testing.T, c kubernetes.Interface, name string) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	testserver.WaitFor(t, "pod "+name+" to be bound", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Spec.NodeName != "", nil
	}, func() string { return fmt.Sprintf("conditions %+v", pod.Status.Conditions) })
	return pod
}

// scheduledCondition returns the pod's PodScheduled condition.
func scheduledCondition(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// waitUnschedulable waits until the pod says PodScheduled=False with
// reason Unschedulable and message msg, and checks it is still unbound.
func waitUnschedulable(t *testing.T, c kubernetes.Interface, name, msg string) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	testserver.WaitFor(t, "pod "+name+" to be unschedulable", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		cond := scheduledCondition(p)
		return cond != nil && cond.Status == v1.ConditionFalse && cond.Reason == v1.PodReasonUnschedulable && cond.Message == msg, nil
	}, func() string {
		return fmt.Sprintf("node %q, condition %+v\nwant message %s", pod.Spec.NodeName, scheduledCondition(pod), msg)
	})
	if pod.Spec.NodeName != "" {
		t.Fatalf("pod %s is unschedulable yet bound to %s", name, pod.Spec.NodeName)
	}
	return pod
}

func deletePod(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	if err := c.CoreV1().Pods(ns).Delete(context.Background(), name, *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
