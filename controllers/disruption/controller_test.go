package disruption

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/corekube/corekube/controllers/sharedinformers"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 11, 21, 20, 17, 18, 0, time.UTC)

// startFake runs a controller over a fake clientset holding objs, on a
// fake clock, until the test ends. The test owns the informer factory, as
// a process does: it starts it after the controller registered its
// handlers and shuts it down after the controller stopped.
func startFake(t *testing.T, objs ...runtime.Object) (*fake.Clientset, *clocktesting.FakeClock) {
	t.Helper()
	client := fake.NewClientset(objs...)
	clk := clocktesting.NewFakeClock(t0)
	factory := sharedinformers.NewFactory(client)
	c, err := New(client, factory, Config{Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("controller did not stop")
		}
		factory.Shutdown()
	})
	return client, clk
}

func TestControllerStartsOnce(t *testing.T) {
	client := fake.NewClientset()
	c, err := New(client, sharedinformers.NewFactory(client), Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Start(ctx); err != nil {
		t.Errorf("Start with an ended context: %v", err)
	}
	if err := c.Start(context.Background()); err == nil {
		t.Error("a second Start succeeded")
	}
}

func readyPod(name string, labels map[string]string) *v1.Pod {
	p := pod(name, true, false)
	p.Labels = labels
	return p
}

func webBudget(name string, minAvailable string, st policyv1.PodDisruptionBudgetStatus) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: intOrPercent(minAvailable),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
		Status: st,
	}
}

var web = map[string]string{"app": "web"}

// poll waits for cond, stepping the fake clock by step (if any) each time.
func poll(t *testing.T, what string, clk *clocktesting.FakeClock, step time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		if step > 0 {
			clk.Step(step)
		}
		return cond(ctx)
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func budgetStatus(t *testing.T, client *fake.Clientset, name string) policyv1.PodDisruptionBudgetStatus {
	t.Helper()
	pdb, err := client.PolicyV1().PodDisruptionBudgets("ns").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pdb.Status
}

func hasEvent(ctx context.Context, client *fake.Clientset, typ, reason, object, message string) (bool, error) {
	events, err := client.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, ev := range events.Items {
		if ev.Type == typ && ev.Reason == reason && ev.InvolvedObject.Name == object && ev.Message == message && ev.Source.Component == "controllermanager" {
			return true, nil
		}
	}
	return false, nil
}

func TestControllerFollowsPods(t *testing.T) {
	client, _ := startFake(t, webBudget("b", "2", policyv1.PodDisruptionBudgetStatus{}),
		readyPod("p1", web), readyPod("p2", web), readyPod("p3", web), readyPod("other", map[string]string{"app": "db"}))
	poll(t, "status computed", nil, 0, func(context.Context) (bool, error) {
		st := budgetStatus(t, client, "b")
		return st.ObservedGeneration == 1 && st.ExpectedPods == 3 && st.CurrentHealthy == 3 && st.DesiredHealthy == 2 && st.DisruptionsAllowed == 1, nil
	})
	st := budgetStatus(t, client, "b")
	if len(st.Conditions) != 1 || st.Conditions[0].Reason != "SufficientPods" || !st.Conditions[0].LastTransitionTime.Time.Equal(t0) {
		t.Errorf("conditions %+v", st.Conditions)
	}
	if err := client.CoreV1().Pods("ns").Delete(t.Context(), "p3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "status after a pod went", nil, 0, func(context.Context) (bool, error) {
		st := budgetStatus(t, client, "b")
		return st.ExpectedPods == 2 && st.CurrentHealthy == 2 && st.DisruptionsAllowed == 0 &&
			len(st.Conditions) == 1 && st.Conditions[0].Reason == "InsufficientPods", nil
	})
	// A pod joining by a label change counts; leaving by one too.
	other, err := client.CoreV1().Pods("ns").Get(t.Context(), "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.Labels = web
	if _, err := client.CoreV1().Pods("ns").Update(t.Context(), other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "status after a pod joined", nil, 0, func(context.Context) (bool, error) {
		st := budgetStatus(t, client, "b")
		return st.ExpectedPods == 3 && st.DisruptionsAllowed == 1, nil
	})
}

func TestControllerDropsExpiredDisruption(t *testing.T) {
	client, clk := startFake(t,
		webBudget("b", "2", policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: 1, DisruptionsAllowed: 0, ExpectedPods: 3, CurrentHealthy: 3, DesiredHealthy: 2,
			DisruptedPods: map[string]metav1.Time{"p1": metav1.NewTime(t0), "gone": metav1.NewTime(t0)},
		}),
		readyPod("p1", web), readyPod("p2", web), readyPod("p3", web))
	// p1 was approved for eviction: not healthy until it times out.
	poll(t, "p1 counted as disrupted", nil, 0, func(context.Context) (bool, error) {
		st := budgetStatus(t, client, "b")
		_, p1 := st.DisruptedPods["p1"]
		_, gone := st.DisruptedPods["gone"]
		return p1 && !gone && st.CurrentHealthy == 2 && st.DisruptionsAllowed == 0 && len(st.Conditions) == 1, nil
	})
	clk.Step(2 * time.Minute)
	poll(t, "p1's entry to time out", clk, time.Second, func(context.Context) (bool, error) {
		st := budgetStatus(t, client, "b")
		return len(st.DisruptedPods) == 0 && st.CurrentHealthy == 3 && st.DisruptionsAllowed == 1, nil
	})
	poll(t, "NotDeleted event", nil, 0, func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, client, v1.EventTypeWarning, "NotDeleted", "p1", "Pod was expected by PDB ns/b to be deleted but it wasn't")
	})
}

func TestControllerResetsStaleDisruptionTarget(t *testing.T) {
	stale := readyPod("p", nil)
	stale.Status.Conditions = append(stale.Status.Conditions, v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.NewTime(t0),
	})
	byKubelet := readyPod("k", nil)
	byKubelet.Status.Conditions = append(byKubelet.Status.Conditions, v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, LastTransitionTime: metav1.NewTime(t0),
	})
	client, clk := startFake(t, stale, byKubelet)
	clk.Step(time.Minute)
	if p, err := client.CoreV1().Pods("ns").Get(t.Context(), "p", metav1.GetOptions{}); err != nil || podCondition(p.Status.Conditions, v1.DisruptionTarget).Status != v1.ConditionTrue {
		t.Fatalf("reset early: %v %+v", err, p.Status.Conditions)
	}
	poll(t, "the stale condition reset", clk, 10*time.Second, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := podCondition(p.Status.Conditions, v1.DisruptionTarget)
		return c.Status == v1.ConditionFalse && c.Reason == "" && c.Message == "", nil
	})
	k, err := client.CoreV1().Pods("ns").Get(t.Context(), "k", metav1.GetOptions{})
	if err != nil || podCondition(k.Status.Conditions, v1.DisruptionTarget).Status != v1.ConditionTrue {
		t.Errorf("the node agent's condition was reset: %v %+v", err, k.Status.Conditions)
	}
}

func TestControllerEvents(t *testing.T) {
	empty := webBudget("empty", "1", policyv1.PodDisruptionBudgetStatus{})
	empty.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "none"}}
	pct := webBudget("pct", "50%", policyv1.PodDisruptionBudgetStatus{})
	max := webBudget("max", "0", policyv1.PodDisruptionBudgetStatus{})
	max.Spec.MinAvailable = nil
	max.Spec.MaxUnavailable = &intstr.IntOrString{Type: intstr.String, StrVal: "34%"}
	client, _ := startFake(t, empty, pct, max, readyPod("p1", web), readyPod("p2", web), readyPod("p3", web))
	poll(t, "NoPods event", nil, 0, func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, client, v1.EventTypeNormal, "NoPods", "empty", "No matching pods found")
	})
	// Every budget of a pod is kept current: 50% of 3 is 2 (rounded up),
	// 34% unavailable of 3 is 2 (rounded up), leaving 1.
	poll(t, "both budgets computed", nil, 0, func(context.Context) (bool, error) {
		p, m, e := budgetStatus(t, client, "pct"), budgetStatus(t, client, "max"), budgetStatus(t, client, "empty")
		return p.DesiredHealthy == 2 && p.DisruptionsAllowed == 1 && m.DesiredHealthy == 1 && m.DisruptionsAllowed == 2 &&
			e.ObservedGeneration == 1 && e.ExpectedPods == 0 && e.DesiredHealthy == 1 && e.DisruptionsAllowed == 0, nil
	})
	// A pod event (here a label added) warns when the pod has several
	// budgets; the budgets are known by now.
	p1, err := client.CoreV1().Pods("ns").Get(t.Context(), "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1.Labels = map[string]string{"app": "web", "touched": "yes"}
	if _, err := client.CoreV1().Pods("ns").Update(t.Context(), p1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "MultiplePodDisruptionBudgets event", nil, 0, func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, client, v1.EventTypeWarning, "MultiplePodDisruptionBudgets", "p1", `Pod "ns"/"p1" matches multiple PodDisruptionBudgets.  Chose "max" arbitrarily.`)
	})
}
