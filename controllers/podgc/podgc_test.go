package podgc_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/corekube/corekube/controllers/podgc"
	"github.com/corekube/corekube/controllers/sharedinformers"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	ns          = metav1.NamespaceDefault
	waitTimeout = 30 * time.Second
)

func startGC(t *testing.T, srv *testserver.Server, cfg podgc.Config) {
	t.Helper()
	cfg.Logger = testserver.Logger()
	if cfg.Period == 0 {
		cfg.Period = 50 * time.Millisecond
	}
	// The test owns the informer factory, as a process does: started
	// after the controller took its informers, shut down after it stopped.
	factory := sharedinformers.NewFactory(srv.Client)
	gc := podgc.New(srv.Client, factory, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- gc.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("pod GC: %v", err)
		}
		factory.Shutdown()
		// net/http's Server.Shutdown waits up to 5s for connections that
		// never carried a request; close the client's unused ones.
		if rt, err := rest.TransportFor(srv.Config); err == nil {
			if tr, ok := rt.(interface{ CloseIdleConnections() }); ok {
				tr.CloseIdleConnections()
			}
		}
	})
}

func createNode(t *testing.T, c kubernetes.Interface, name string, ready v1.ConditionStatus, taints ...v1.Taint) {
	t.Helper()
	ctx := context.Background()
	node, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Taints: taints}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	now := metav1.Now()
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: ready, LastHeartbeatTime: now, LastTransitionTime: now}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("node %s status: %v", name, err)
	}
}

// createPod creates a pod on node (none if "") in phase (Running if "").
func createPod(t *testing.T, c kubernetes.Interface, name, node string, phase v1.PodPhase, mut ...func(*v1.Pod)) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	for _, m := range mut {
		m(pod)
	}
	created, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	if phase == "" {
		phase = v1.PodRunning
	}
	created.Status.Phase = phase
	if phase == v1.PodFailed && name == "evicted" {
		created.Status.Reason = "Evicted"
	}
	updated, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("pod %s status: %v", name, err)
	}
	return updated
}

func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func waitGone(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	waitFor(t, "pod "+name+" to be deleted", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func podNames(t *testing.T, c kubernetes.Interface) []string {
	t.Helper()
	list, err := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func TestOrphanedPodsAreDeletedAfterQuarantine(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "here", v1.ConditionTrue)
	orphan := createPod(t, c, "orphan", "gone", "")
	createPod(t, c, "kept", "here", "")
	createPod(t, c, "late", "late-node", "")

	w, err := c.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "orphan").String(), ResourceVersion: orphan.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	startGC(t, srv, podgc.Config{Quarantine: 2 * time.Second})
	// late-node shows up well within the quarantine: its pod must stay.
	createNode(t, c, "late-node", v1.ConditionTrue)

	// The orphan is marked Failed with DisruptionTarget, then deleted.
	var last *v1.Pod
	deadline := time.After(waitTimeout)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			switch ev.Type {
			case watch.Modified:
				last = ev.Object.(*v1.Pod)
			case watch.Deleted:
				done = true
			}
		case <-deadline:
			t.Fatal("orphan was not deleted")
		}
	}
	if last == nil || last.Status.Phase != v1.PodFailed {
		t.Fatalf("orphan was not set Failed before deletion: %+v", last)
	}
	var target *v1.PodCondition
	for i := range last.Status.Conditions {
		if last.Status.Conditions[i].Type == v1.DisruptionTarget {
			target = &last.Status.Conditions[i]
		}
	}
	if target == nil || target.Status != v1.ConditionTrue || target.Reason != "DeletionByPodGC" || target.Message != "PodGC: node no longer exists" {
		t.Errorf("DisruptionTarget = %+v", target)
	}
	if got := podNames(t, c); !slices.Equal(got, []string{"kept", "late"}) {
		t.Errorf("pods left %v, want [kept late]", got)
	}
}

func TestTerminatedPodThreshold(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "n", v1.ConditionTrue)
	for i := 1; i <= 3; i++ {
		createPod(t, c, fmt.Sprintf("done-%d", i), "n", v1.PodSucceeded)
	}
	createPod(t, c, "evicted", "n", v1.PodFailed)
	createPod(t, c, "running", "n", "")
	createPod(t, c, "pending", "", v1.PodPending)
	startGC(t, srv, podgc.Config{TerminatedPodThreshold: 2})
	// Four terminated, two kept: the evicted one goes first, then the
	// oldest (same second here, so by name).
	waitGone(t, c, "evicted")
	waitGone(t, c, "done-1")
	if got := podNames(t, c); !slices.Equal(got, []string{"done-2", "done-3", "pending", "running"}) {
		t.Errorf("pods left %v", got)
	}
}

func TestTerminatingPodsOnOutOfServiceNodes(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	oos := v1.Taint{Key: v1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute}
	createNode(t, c, "shut-down", v1.ConditionFalse, oos)
	createNode(t, c, "down", v1.ConditionFalse)
	createNode(t, c, "up-but-tainted", v1.ConditionTrue, oos)
	for _, p := range []struct{ name, node string }{{"stuck", "shut-down"}, {"waiting", "down"}, {"fine", "up-but-tainted"}, {"alive", "shut-down"}} {
		createPod(t, c, p.name, p.node, "")
	}
	// Graceful deletion leaves them terminating: no kubelet finishes it.
	for _, name := range []string{"stuck", "waiting", "fine"} {
		if err := c.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	startGC(t, srv, podgc.Config{})
	waitGone(t, c, "stuck")
	// Only terminating pods on a not-ready, out-of-service node go.
	if got := podNames(t, c); !slices.Equal(got, []string{"alive", "fine", "waiting"}) {
		t.Errorf("pods left %v, want [alive fine waiting]", got)
	}
}

func TestUnscheduledTerminatingPods(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createPod(t, c, "held", "", v1.PodPending, func(p *v1.Pod) { p.Finalizers = []string{"example.com/hold"} })
	if err := c.CoreV1().Pods(ns).Delete(context.Background(), "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	startGC(t, srv, podgc.Config{})
	// The finalizer keeps it, but pod GC marks it Failed and deletes it.
	waitFor(t, "held to be Failed", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "held", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == v1.PodFailed && p.DeletionTimestamp != nil, nil
	})
	p, err := c.CoreV1().Pods(ns).Get(context.Background(), "held", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Finalizers = nil
	if _, err := c.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, "held")
}
