package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/corekube/corekube/test/metricstest"
	"github.com/corekube/corekube/test/testserver"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

func priority(p int32) podOpt {
	return func(pod *v1.Pod) { pod.Spec.Priority = &p }
}

func onNode(node string) podOpt {
	return func(pod *v1.Pod) { pod.Spec.NodeName = node }
}

func podLabels(kv ...string) podOpt {
	return func(pod *v1.Pod) {
		pod.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			pod.Labels[kv[i]] = kv[i+1]
		}
	}
}

func getPod(t *testing.T, c kubernetes.Interface, name string) *v1.Pod {
	t.Helper()
	p, err := c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitPreempted waits until the victim is being deleted and carries kube's
// DisruptionTarget condition, then finishes the deletion as its kubelet
// would once the containers stopped.
func waitPreempted(t *testing.T, c kubernetes.Interface, name string) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	testserver.WaitFor(t, "victim "+name+" to be preempted", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.DeletionTimestamp != nil, nil
	}, func() string { return fmt.Sprintf("conditions %+v", pod.Status.Conditions) })
	var cond *v1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.DisruptionTarget {
			cond = &pod.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Status != v1.ConditionTrue || cond.Reason != v1.PodReasonPreemptionByScheduler ||
		cond.Message != "default-scheduler: preempting to accommodate a higher priority pod" {
		t.Errorf("victim %s: DisruptionTarget = %+v", name, cond)
	}
	return pod
}

func finishDeletion(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	err := c.CoreV1().Pods(ns).Delete(context.Background(), name, *metav1.NewDeleteOptions(0))
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func TestSchedulerPreemption(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "node-1", "1", "8Gi", "110")
	reg := prometheus.NewPedanticRegistry()
	cfg := fastConfig()
	cfg.Metrics = reg
	startScheduler(t, srv, cfg)

	createPod(t, c, "low", priority(10), requests("800m", ""))
	if n := waitBound(t, c, "low").Spec.NodeName; n != "node-1" {
		t.Fatalf("low on %s", n)
	}
	high := createPod(t, c, "high", priority(1000), requests("500m", ""))

	victim := waitPreempted(t, c, "low")
	ev := testserver.WaitEvent(t, c, ns, "low", "Preempted", fmt.Sprintf("Preempted by pod %s on node node-1", high.UID))
	if ev.Type != v1.EventTypeNormal || ev.Action != "Preempting" || ev.ReportingController != "default-scheduler" ||
		ev.InvolvedObject.UID != victim.UID || ev.Related == nil || ev.Related.UID != high.UID {
		t.Errorf("Preempted event = %+v", ev)
	}
	// The preemptor is nominated, not bound, while its victim terminates;
	// kube's message has no preemption part once victims were chosen.
	var pod *v1.Pod
	testserver.WaitFor(t, "high to be nominated to node-1", func(ctx context.Context) (bool, error) {
		pod = getPod(t, c, "high")
		cond := scheduledCondition(pod)
		return pod.Status.NominatedNodeName == "node-1" && cond != nil && cond.Message == "0/1 nodes are available: 1 Insufficient cpu.", nil
	}, func() string {
		return fmt.Sprintf("nominated %q, %+v", pod.Status.NominatedNodeName, scheduledCondition(pod))
	})
	testserver.WaitEvent(t, c, ns, "high", "FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu.")
	if pod.Spec.NodeName != "" {
		t.Fatalf("high bound to %s before its victim is gone", pod.Spec.NodeName)
	}

	// A pod of lower priority than the nominated one may not take the room
	// made for it: evicting "low" would not make room for both.
	createPod(t, c, "mid", priority(500), requests("600m", ""))
	waitUnschedulable(t, c, "mid", "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 Insufficient cpu.")

	finishDeletion(t, c, "low")
	if n := waitBound(t, c, "high").Spec.NodeName; n != "node-1" {
		t.Errorf("high bound to %s, want node-1", n)
	}

	testserver.WaitFor(t, "preemption metrics", func(_ context.Context) (bool, error) {
		fs := metricstest.Gather(t, reg)
		v, _ := fs.Value("scheduler_preemption_victims")
		a, _ := fs.Value("scheduler_preemption_attempts_total")
		return v == 1 && a >= 1, nil
	}, func() string {
		fs := metricstest.Gather(t, reg)
		v, _ := fs.Value("scheduler_preemption_victims")
		a, _ := fs.Value("scheduler_preemption_attempts_total")
		return fmt.Sprintf("victims %v attempts %v", v, a)
	})
	fs := metricstest.Gather(t, reg)
	h := fs["scheduler_preemption_victims"]
	if b := h.GetMetric()[0].GetHistogram().GetBucket(); len(b) != 8 || b[0].GetUpperBound() != 1 || b[6].GetUpperBound() != 64 {
		t.Errorf("victims buckets %v", b)
	}
	if !strings.HasPrefix(h.GetHelp(), "[STABLE] Number of selected preemption victims") {
		t.Errorf("victims help %q", h.GetHelp())
	}
}

func TestSchedulerPreemptionAvoidsPDBViolation(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "node-a", "1", "8Gi", "110")
	createNode(t, c, "node-b", "1", "8Gi", "110")
	// Without the budget node-a would be chosen: its victim has the lower
	// priority.
	createPod(t, c, "db", onNode("node-a"), priority(5), podLabels("app", "db"), requests("800m", ""))
	createPod(t, c, "web", onNode("node-b"), priority(10), podLabels("app", "web"), requests("800m", ""))
	minAvailable := intstr.FromInt32(1)
	_, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(context.Background(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startScheduler(t, srv, fastConfig())

	createPod(t, c, "urgent", priority(1000), requests("500m", ""))
	waitPreempted(t, c, "web")
	testserver.WaitFor(t, "urgent to be nominated to node-b", func(ctx context.Context) (bool, error) {
		return getPod(t, c, "urgent").Status.NominatedNodeName == "node-b", nil
	}, nil)
	if db := getPod(t, c, "db"); db.DeletionTimestamp != nil {
		t.Errorf("the budget-protected pod was preempted")
	}
	finishDeletion(t, c, "web")
	if n := waitBound(t, c, "urgent").Spec.NodeName; n != "node-b" {
		t.Errorf("urgent bound to %s, want node-b", n)
	}
}

func TestSchedulerPreemptionMessages(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "node-1", "1", "8Gi", "110")
	createNode(t, c, "node-t", "4", "8Gi", "110", withTaint("dedicated", "gpu", v1.TaintEffectNoSchedule))
	createPod(t, c, "resident", onNode("node-1"), priority(50), requests("700m", ""))
	startScheduler(t, srv, fastConfig())

	never := v1.PreemptNever
	createPod(t, c, "never", priority(1000), requests("500m", ""), func(p *v1.Pod) { p.Spec.PreemptionPolicy = &never })
	createPod(t, c, "equal", priority(50), requests("500m", ""))
	createPod(t, c, "huge", priority(1000), requests("2", ""))
	waitUnschedulable(t, c, "never", "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}. preemption: not eligible due to preemptionPolicy=Never.")
	waitUnschedulable(t, c, "equal", "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.")
	msg := "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}. preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 Preemption is not helpful for scheduling."
	waitUnschedulable(t, c, "huge", msg)
	testserver.WaitEvent(t, c, ns, "huge", "FailedScheduling", msg)
	if p := getPod(t, c, "resident"); p.DeletionTimestamp != nil {
		t.Errorf("resident was preempted")
	}
	for _, name := range []string{"never", "equal", "huge"} {
		if p := getPod(t, c, name); p.Status.NominatedNodeName != "" {
			t.Errorf("%s nominated to %s", name, p.Status.NominatedNodeName)
		}
	}
}

// The queue takes the pod of higher priority first: with room for one
// pod, the later but more important one gets it. Both are queued before
// the first attempt (the scheduler waits for its informers' first sync).
func TestSchedulerPrioritySort(t *testing.T) {
	srv := testserver.StartMemory(t)
	c := srv.Client
	createNode(t, c, "node-1", "1", "8Gi", "110")
	createPod(t, c, "first-low", priority(1), requests("800m", ""))
	createPod(t, c, "second-high", priority(100), requests("800m", ""))
	startScheduler(t, srv, fastConfig())
	if n := waitBound(t, c, "second-high").Spec.NodeName; n != "node-1" {
		t.Fatalf("second-high on %s", n)
	}
	// The low one cannot preempt the high one: it waits.
	waitUnschedulable(t, c, "first-low", "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
}
