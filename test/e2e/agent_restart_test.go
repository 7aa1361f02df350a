package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// agentProcess is a running `corekube agent`.
type agentProcess struct {
	t      *testing.T
	cmd    *exec.Cmd
	mu     sync.Mutex
	logs   bytes.Buffer
	exited chan error
}

func (a *agentProcess) Write(b []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.logs.Write(b)
}

func (a *agentProcess) output() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.logs.String()
}

// startAgent runs `corekube agent` with the kubeconfig of the `up` in
// dataDir; the test's cleanup kills it if it still runs.
func startAgent(t *testing.T, dataDir string, args ...string) *agentProcess {
	t.Helper()
	a := &agentProcess{t: t, exited: make(chan error, 1)}
	a.cmd = exec.Command(binary, append([]string{"agent", "--kubeconfig", filepath.Join(dataDir, "kubeconfig")}, args...)...)
	a.cmd.Stdout, a.cmd.Stderr = a, a
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.exited <- a.cmd.Wait() }()
	t.Cleanup(func() {
		if a.cmd.ProcessState == nil {
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
		if t.Failed() {
			t.Logf("agent output:\n%s", a.output())
		}
	})
	return a
}

// kill9 kills the agent with SIGKILL and waits for it to be gone.
func (a *agentProcess) kill9() {
	a.t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		a.t.Fatal(err)
	}
	select {
	case <-a.exited:
	case <-time.After(20 * time.Second):
		a.t.Fatal("agent still running 20s after SIGKILL")
	}
}

// TestAgentSIGKILLAdoptsPods: `corekube agent` (two nodes) killed with
// SIGKILL and started again adopts its nodes and their pods. Through a
// watch over the whole restart: no pod's status changes at all (no
// restart counted, same container IDs and start times, phase Running and
// Ready True throughout, a completed pod stays Completed), no node leaves
// Ready (it is back after a missed lease renewal, within the node monitor
// grace period) or changes
// its boot ID; the restarted agent serves the adopted containers' logs,
// stops an adopted pod that is deleted, and runs a new pod.
func TestAgentSIGKILLAdoptsPods(t *testing.T) {
	if testing.Short() {
		t.Skip("starts corekube up and two agent processes")
	}
	kubectlPath(t)
	dataDir := t.TempDir()
	p := startUp(t, dataDir)
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS = -1
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	poll := func(what string, cond func(ctx context.Context) (bool, error)) {
		t.Helper()
		var last error
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			ok, err := cond(ctx)
			last = err
			return ok && err == nil, nil
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
		}
	}

	ag := startAgent(t, dataDir, "--nodes", "2")
	// kubectl wait fails at once on a node not registered yet.
	poll("the agent's nodes registered", func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err == nil && len(nodes.Items) >= 2, err
	})
	p.mustKubectl("wait", "--for=condition=Ready", "node/node-1", "node/node-2", "--timeout=30s")

	pods := adoptionPods()
	for _, pod := range pods {
		if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll("the pods Running and Ready, or Succeeded", func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != len(pods) {
			return false, err
		}
		for _, pod := range list.Items {
			ready := false
			for _, c := range pod.Status.Conditions {
				ready = ready || (c.Type == v1.PodReady && c.Status == v1.ConditionTrue)
			}
			if !(pod.Status.Phase == v1.PodRunning && ready) && pod.Status.Phase != v1.PodSucceeded {
				return false, nil
			}
		}
		return true, nil
	})
	before, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodesBefore, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podWatch, err := client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer podWatch.Stop()
	nodeWatch, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: nodesBefore.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer nodeWatch.Stop()

	ag.kill9()
	killed := time.Now()
	// Down long enough to miss a lease renewal (every 10s), well within
	// the node monitor grace period (40s).
	poll("a missed lease renewal", func(ctx context.Context) (bool, error) {
		lease, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil || lease.Spec.RenewTime == nil {
			return false, err
		}
		return time.Since(lease.Spec.RenewTime.Time) > 11*time.Second, nil
	})
	ag = startAgent(t, dataDir, "--nodes", "2")
	restarted := time.Now()
	poll("the new agent's nodes registered and its pods adopted", func(ctx context.Context) (bool, error) {
		return strings.Contains(ag.output(), "adopted running pods") && strings.Count(ag.output(), "node agents running") == 1, nil
	})
	t.Logf("agent back %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))

	// Logs of an adopted container, through the new kubelet endpoint.
	poll("the node's kubelet endpoint updated", func(ctx context.Context) (bool, error) {
		out, err := p.kubectl("logs", "probed", "-c", "main")
		return out == "hello", err
	})
	// A new pod runs; an adopted one is deleted and stops.
	after := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "after"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"sleep", "3600"}}}},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, after, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("pod after Running and pod web gone", func(ctx context.Context) (bool, error) {
		got, err := client.CoreV1().Pods("default").Get(ctx, "after", metav1.GetOptions{})
		if err != nil || got.Status.Phase != v1.PodRunning {
			return false, err
		}
		_, err = client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// The probes of the adopted pods (period 1s, failure threshold 3) have
	// had time to fail the pods had they been reset.
	poll("3 probe periods since the agent started", func(context.Context) (bool, error) {
		return time.Since(restarted) > 4*time.Second, nil
	})

	// A last write, unscheduled: once a watch shows it, it has shown
	// everything before.
	marker := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "marker"},
		Spec: v1.PodSpec{
			Containers:   []v1.Container{{Name: "main", Image: "busybox:1.36"}},
			NodeSelector: map[string]string{"no-such-node": "x"},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, marker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	beforeByName := map[string]*v1.Pod{}
	for i := range before.Items {
		beforeByName[before.Items[i].Name] = &before.Items[i]
	}
	podEvents := 0
	for ev := range podWatch.ResultChan() {
		pod, ok := ev.Object.(*v1.Pod)
		if !ok {
			t.Fatalf("pod watch: %v %T", ev.Type, ev.Object)
		}
		if pod.Name == "marker" {
			break
		}
		podEvents++
		old := beforeByName[pod.Name]
		if old == nil || ev.Type != watch.Modified || pod.DeletionTimestamp != nil {
			continue
		}
		if !apiequality.Semantic.DeepEqual(old.Status, pod.Status) {
			t.Errorf("pod %s: status changed across the agent's restart:\n  before %+v\n  after  %+v", pod.Name, old.Status, pod.Status)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the pod watch ended before it showed the last write")
	}
	t.Logf("%d pod events after the SIGKILL (the new pod and the deleted one)", podEvents)

	// Nodes: a write of the same kind to end the watch.
	if _, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "marker"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bootIDs := map[string]string{}
	for _, n := range nodesBefore.Items {
		bootIDs[n.Name] = n.Status.NodeInfo.BootID
	}
	nodeEvents := 0
	for ev := range nodeWatch.ResultChan() {
		n, ok := ev.Object.(*v1.Node)
		if !ok {
			t.Fatalf("node watch: %v %T", ev.Type, ev.Object)
		}
		if n.Name == "marker" {
			break
		}
		nodeEvents++
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status != v1.ConditionTrue {
				t.Errorf("node %s: Ready %s (%s: %s) after the agent's restart", n.Name, c.Status, c.Reason, c.Message)
			}
		}
		if n.Status.NodeInfo.BootID != bootIDs[n.Name] {
			t.Errorf("node %s: bootID %s → %s (a restarted agent is not a rebooted node)", n.Name, bootIDs[n.Name], n.Status.NodeInfo.BootID)
		}
		if n.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
			t.Errorf("node %s lost its kubelet endpoint", n.Name)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the node watch ended before it showed the last write")
	}
	if nodeEvents == 0 {
		t.Error("the node watch saw no write of the new agent (its endpoint at least)")
	}
	if n := strings.Count(p.mustKubectl("get", "events", "-A", "--field-selector", "reason=NodeNotReady", "-o", "name"), "event"); n != 0 {
		t.Errorf("%d NodeNotReady events", n)
	}
	ag.kill9()
	p.stop()
}

// adoptionPods are pods of the shapes a restart could disturb: a server,
// init containers with startup and readiness probes, a sidecar, and a
// completed pod.
func adoptionPods() []*v1.Pod {
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}}, PeriodSeconds: 1}
	return []*v1.Pod{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "probed"},
			Spec: v1.PodSpec{
				InitContainers: []v1.Container{{Name: "init", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo init done"}}},
				Containers: []v1.Container{{
					Name: "main", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo hello; touch /tmp/ready; sleep 3600"},
					StartupProbe: probe, ReadinessProbe: probe,
				}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "sidecar"},
			Spec: v1.PodSpec{
				InitContainers: []v1.Container{{Name: "proxy", Image: "busybox:1.36", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}},
				Containers:     []v1.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"sleep", "3600"}}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "done"},
			Spec: v1.PodSpec{
				RestartPolicy: v1.RestartPolicyNever,
				Containers:    []v1.Container{{Name: "main", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo bye"}}},
			},
		},
	}
}
