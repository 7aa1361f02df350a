package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/corekube/corekube/test/testserver"
)

// restartPods are pods of several shapes for the restart tests: a server,
// init containers and startup and readiness probes, a sidecar, a pod that
// completed, a pod in CrashLoopBackOff.
func restartPods() []*v1.Pod {
	server := simplePod("server", v1.RestartPolicyAlways)

	probed := simplePod("probed", v1.RestartPolicyAlways, "sh", "-c", "echo hello; touch /tmp/ready; sleep 3600")
	probed.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo init done"}}}
	probe := func() *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-f", "/tmp/ready"}}}, PeriodSeconds: 1}
	}
	probed.Spec.Containers[0].ReadinessProbe = probe()
	probed.Spec.Containers[0].StartupProbe = probe()

	sidecar := simplePod("sidecar", v1.RestartPolicyAlways, "sleep", "3600")
	sidecar.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "busybox:1.36", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}

	done := simplePod("done", v1.RestartPolicyNever, "sh", "-c", "echo bye")
	crashing := simplePod("crashing", v1.RestartPolicyAlways, "sh", "-c", "exit 1")
	return []*v1.Pod{server, probed, sidecar, done, crashing}
}

// TestAgentRestartAdoptsPods: an agent that stops and a new one that
// starts on the same nodes (the state of the old one lost, as with
// SIGKILL) adopts the node and its pods: the pods' status does not change
// at all (no restart counted, same container IDs and start times, Ready
// stays True), the node stays Ready with the same boot ID, and pods
// created and deleted afterwards work.
func TestAgentRestartAdoptsPods(t *testing.T) {
	testserver.SkipShort(t) // a server and node agents: slow
	s := testserver.StartMemory(t)
	e := &env{t: t, client: s.Client, restConfig: s.Config}
	cfg := fastConfig(1)
	cfg.SyncFrequency = time.Second
	// Long enough that the crashing pod waits in CrashLoopBackOff through
	// the restart: its back-off is adopted too.
	cfg.BackoffBase, cfg.BackoffMax = 30*time.Second, time.Minute
	stop := e.startAgent(s.Config, cfg)
	first := e.waitNodeReady("node-1")
	pods := restartPods()
	for _, pod := range pods {
		e.runPod(pod, "node-1")
	}
	before := map[types.UID]*v1.Pod{}
	for _, pod := range pods {
		want := v1.PodRunning
		if pod.Name == "done" {
			want = v1.PodSucceeded
		}
		got := e.waitPod(pod, 10*time.Second, string(want)+" and ready", func(p *v1.Pod) bool {
			if p.Status.Phase != want {
				return false
			}
			if p.Name == "crashing" {
				cs := p.Status.ContainerStatuses
				return len(cs) == 1 && cs[0].RestartCount == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == reasonCrashLoopBackOff
			}
			if want == v1.PodSucceeded {
				return true
			}
			c := condition(p, v1.PodReady)
			return c != nil && c.Status == v1.ConditionTrue
		})
		before[got.UID] = got
	}
	// The status the old agent wrote last.
	list, err := e.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		before[list.Items[i].UID] = &list.Items[i]
	}
	stop()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	podWatch, err := e.client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer podWatch.Stop()

	stop = e.startAgent(s.Config, cfg)
	defer stop()
	// Every adopted pod synced a few times (its probes ran, it resynced)
	// and a new pod runs.
	after := simplePod("after", v1.RestartPolicyAlways, "sleep", "3600")
	e.runPod(after, "node-1")
	e.waitPod(after, 10*time.Second, "Running", phaseIs(v1.PodRunning))
	e.poll(20*time.Second, "adopted pods synced 3 times", func(context.Context) (bool, error) {
		for uid, p := range before {
			want := uint64(3)
			if isTerminalPhase(p.Status.Phase) {
				want = 1 // synced when seen; nothing to wake it since
			}
			w := e.agent.worker(uid)
			if w == nil || w.syncs.Load() < want {
				return false, nil
			}
		}
		return true, nil
	})
	node := e.waitNodeReady("node-1")
	if node.UID != first.UID || node.Spec.PodCIDR != first.Spec.PodCIDR || node.Status.NodeInfo.BootID != first.Status.NodeInfo.BootID {
		t.Errorf("node not adopted: uid %s → %s, podCIDR %s → %s, bootID %s → %s", first.UID, node.UID,
			first.Spec.PodCIDR, node.Spec.PodCIDR, first.Status.NodeInfo.BootID, node.Status.NodeInfo.BootID)
	}
	if c := findNodeCondition(&node.Status, v1.NodeReady); c.LastTransitionTime != findNodeCondition(&first.Status, v1.NodeReady).LastTransitionTime {
		t.Errorf("Ready's lastTransitionTime moved: %v → %v", findNodeCondition(&first.Status, v1.NodeReady).LastTransitionTime, c.LastTransitionTime)
	}

	// An adopted pod is deleted as any other; its IP is not handed out
	// twice.
	if err := e.client.CoreV1().Pods("default").Delete(ctx, "server", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.poll(10*time.Second, "server deleted", func(ctx context.Context) (bool, error) {
		_, err := e.client.CoreV1().Pods("default").Get(ctx, "server", metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), nil
	})
	// A last write, unbound: once the watch shows it, it has shown
	// everything before.
	if _, err := e.client.CoreV1().Pods("default").Create(ctx, simplePod("marker", v1.RestartPolicyAlways), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ips := map[string]string{}
	modified := 0
	for ev := range podWatch.ResultChan() {
		p, ok := ev.Object.(*v1.Pod)
		if !ok {
			t.Fatalf("watch event %v %T", ev.Type, ev.Object)
		}
		if p.Name == "marker" {
			break
		}
		if ev.Type == watch.Modified {
			modified++
		}
		if p.Status.PodIP != "" && p.Name != ips[p.Status.PodIP] && ips[p.Status.PodIP] != "" {
			t.Errorf("pods %s and %s share IP %s", p.Name, ips[p.Status.PodIP], p.Status.PodIP)
		}
		ips[p.Status.PodIP] = p.Name
		old := before[p.UID]
		if old == nil || ev.Type != watch.Modified {
			continue
		}
		if p.DeletionTimestamp != nil {
			continue // the deleted one
		}
		if !apiequality.Semantic.DeepEqual(old.Status, p.Status) {
			t.Errorf("pod %s status changed after the restart:\n  before %+v\n  after  %+v", p.Name, old.Status.ContainerStatuses, p.Status.ContainerStatuses)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the watch ended before it showed the last write")
	}
	if modified == 0 {
		t.Error("the watch saw no pod modified after the restart (the new pod's progress at least)")
	}
	for _, p := range before {
		// (A finished pod's address is free again.)
		if !isTerminalPhase(p.Status.Phase) && p.Status.PodIP != "" && ips[p.Status.PodIP] != "" && ips[p.Status.PodIP] != p.Name {
			t.Errorf("pod %s's IP %s went to %s", p.Name, p.Status.PodIP, ips[p.Status.PodIP])
		}
	}
	// The adopted container's log is there (replayed).
	rt := e.agent.byName["node-1"].runtime
	probedStatus := before[podUID(before, "probed")].Status.ContainerStatuses[0]
	lines, err := rt.Logs(probedStatus.ContainerID)
	if err != nil || len(lines) != 1 || lines[0].Text != "hello\n" {
		t.Errorf("log of the adopted container: %v %v", lines, err)
	}
}

func podUID(pods map[types.UID]*v1.Pod, name string) types.UID {
	for uid, p := range pods {
		if p.Name == name {
			return uid
		}
	}
	return ""
}
