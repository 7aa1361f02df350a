package nodelifecycle_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/controllers/nodelifecycle"
	"github.com/corekube/corekube/controllers/sharedinformers"
	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const ns = metav1.NamespaceDefault

// fastConfig: a node is lost after two seconds of silence (its live
// neighbours renew every 100ms); with startServer's tolerations its pods
// go a second after it is tainted.
func fastConfig() nodelifecycle.Config {
	return nodelifecycle.Config{
		Logger:        testserver.Logger(),
		MonitorPeriod: 100 * time.Millisecond,
		GracePeriod:   2 * time.Second,
		EvictionRate:  100,
	}
}

// startServer starts a server whose DefaultTolerationSeconds admission
// gives pods one second (not 300) on a not-ready or unreachable node.
func startServer(t *testing.T) *testserver.Server {
	t.Helper()
	return testserver.StartMemoryWith(t, func(c *server.Config) {
		c.DefaultNotReadyTolerationSeconds = 1
		c.DefaultUnreachableTolerationSeconds = 1
	})
}

func startController(t *testing.T, srv *testserver.Server, cfg nodelifecycle.Config) {
	t.Helper()
	// The test owns the informer factory, as a process does: started
	// after the controller registered its handlers, shut down after it
	// stopped.
	factory := sharedinformers.NewFactory(srv.Client)
	c, err := nodelifecycle.New(srv.Client, factory, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node lifecycle controller: %v", err)
		}
		factory.Shutdown()
		srv.CloseIdleConnections(t)
	})
}

// kubelet stands in for a node's agent: it registers the node with a
// Ready status and a lease, and renews the lease while alive.
type kubelet struct {
	t    *testing.T
	c    kubernetes.Interface
	name string

	mu      sync.Mutex
	stop    chan struct{}
	stopped chan struct{}
}

func newKubelet(t *testing.T, c kubernetes.Interface, name string, labels map[string]string) *kubelet {
	t.Helper()
	ctx := context.Background()
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")}
	node, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	now := metav1.Now()
	node.Status = v1.NodeStatus{
		Capacity: alloc, Allocatable: alloc,
		Conditions: []v1.NodeCondition{{
			Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}},
	}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("node %s status: %v", name, err)
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: ptr.To(metav1.NowMicro()),
		},
	}
	if _, err := c.CoordinationV1().Leases(v1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatalf("lease %s: %v", name, err)
	}
	return &kubelet{t: t, c: c, name: name}
}

// run renews the lease every 100ms until stopped (or the test ends).
func (k *kubelet) run() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stop != nil {
		return
	}
	k.stop, k.stopped = make(chan struct{}), make(chan struct{})
	stop, stopped := k.stop, k.stopped
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				k.renew()
			}
		}
	}()
	k.t.Cleanup(k.halt)
}

// halt stops renewing.
func (k *kubelet) halt() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stop != nil {
		close(k.stop)
		<-k.stopped
		k.stop = nil
	}
}

func (k *kubelet) renew() {
	ctx := context.Background()
	lease, err := k.c.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, k.name, metav1.GetOptions{})
	if err != nil {
		return
	}
	lease.Spec.RenewTime = ptr.To(metav1.NowMicro())
	_, _ = k.c.CoordinationV1().Leases(v1.NamespaceNodeLease).Update(ctx, lease, metav1.UpdateOptions{})
}

// postReady posts the Ready condition with a fresh heartbeat, as a
// kubelet does on a change; extra conditions are added.
func (k *kubelet) postStatus(ready v1.ConditionStatus, extra ...v1.NodeCondition) {
	k.t.Helper()
	ctx := context.Background()
	node, err := k.c.CoreV1().Nodes().Get(ctx, k.name, metav1.GetOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	now := metav1.Now()
	conds := []v1.NodeCondition{{Type: v1.NodeReady, Status: ready, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
	if ready != v1.ConditionTrue {
		conds[0].Reason = "KubeletNotReady"
	}
	for _, c := range extra {
		c.LastHeartbeatTime, c.LastTransitionTime = now, now
		conds = append(conds, c)
	}
	node.Status.Conditions = conds
	if _, err := k.c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		k.t.Fatal(err)
	}
	k.renew()
}

// createRunningPod creates a pod bound to node whose status says Running
// and Ready, as its kubelet would have written it.
func createRunningPod(t *testing.T, c kubernetes.Interface, name, node string, tolerations ...v1.Toleration) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.PodSpec{
			NodeName:    node,
			Containers:  []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			Tolerations: tolerations,
		},
	}
	created, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	now := metav1.Now()
	created.Status.Phase = v1.PodRunning
	created.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
	}
	updated, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("pod %s status: %v", name, err)
	}
	return updated
}

// waitNode waits until check accepts the node and returns it.
func waitNode(t *testing.T, c kubernetes.Interface, name, what string, check func(*v1.Node) bool) *v1.Node {
	t.Helper()
	var node *v1.Node
	testserver.WaitFor(t, "node "+name+" "+what, func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = n
		return check(n), nil
	}, func() string {
		return fmt.Sprintf("taints %+v, conditions %+v", node.Spec.Taints, node.Status.Conditions)
	})
	return node
}

func waitPod(t *testing.T, c kubernetes.Interface, name, what string, check func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	testserver.WaitFor(t, "pod "+name+" "+what, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return check(p), nil
	}, func() string {
		return fmt.Sprintf("deletionTimestamp %v, conditions %+v", pod.DeletionTimestamp, pod.Status.Conditions)
	})
	return pod
}

func getPod(t *testing.T, c kubernetes.Interface, name string) *v1.Pod {
	t.Helper()
	p, err := c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func nodeCondition(node *v1.Node, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

func podCondition(pod *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// taintKeys lists a node's taints as key:effect.
func taintKeys(node *v1.Node) []string {
	var out []string
	for _, t := range node.Spec.Taints {
		out = append(out, t.Key+":"+string(t.Effect))
	}
	slices.Sort(out)
	return out
}
