package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/corekube/corekube/test/testserver"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/controllers/disruption"
	"github.com/corekube/corekube/controllers/sharedinformers"
	"github.com/corekube/corekube/server"
	etcdstore "github.com/corekube/corekube/storage/etcd"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// startDisruptionController runs the disruption controller against the
// server cfg points at until the test ends.
func startDisruptionController(t *testing.T, config *rest.Config, c disruption.Config) {
	t.Helper()
	if c.Logger == nil {
		c.Logger = testserver.Logger()
	}
	factory, err := sharedinformers.NewFactoryForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := disruption.NewForConfig(config, factory, c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Start(ctx) }()
	factoryDone := make(chan struct{})
	go func() { sharedinformers.Run(ctx, factory); close(factoryDone) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("disruption controller: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("disruption controller did not stop")
		}
		<-factoryDone
	})
}

func evictionPath(ns, pod string) string {
	return "/api/v1/namespaces/" + ns + "/pods/" + pod + "/eviction"
}

// evictionBody is the request body the recording sent, in namespace ns.
func evictionBody(ns, pod string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":%q,"namespace":%q}}`, pod, ns)
}

// setPodRunning moves a pod to phase Running with its Ready condition as
// given, as a node agent would (none runs here).
func setPodRunning(t *testing.T, client kubernetes.Interface, ns, name string, ready bool) {
	t.Helper()
	pod, err := client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	pod.Status.Phase = v1.PodRunning
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createRunningPods creates pods with labels app=web, Running and Ready.
func createRunningPods(t *testing.T, client kubernetes.Interface, ns string, ready bool, podNames ...string) {
	t.Helper()
	for _, name := range podNames {
		if _, err := client.CoreV1().Pods(ns).Create(t.Context(), newPod(name, map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setPodRunning(t, client, ns, name, ready)
	}
}

// goldenBudgetStatus is the status of the PodDisruptionBudget kube answered.
func goldenBudgetStatus(t *testing.T, golden string) policyv1.PodDisruptionBudgetStatus {
	t.Helper()
	var pdb policyv1.PodDisruptionBudget
	if err := json.Unmarshal(goldenBody(t, golden), &pdb); err != nil {
		t.Fatal(err)
	}
	return pdb.Status
}

// budgetStatusDiff compares two budget statuses field by field; the times
// (disruptedPods values, lastTransitionTime) only need to be set.
func budgetStatusDiff(got, want policyv1.PodDisruptionBudgetStatus) string {
	var diffs []string
	ints := []struct {
		name      string
		got, want int64
	}{
		{"observedGeneration", got.ObservedGeneration, want.ObservedGeneration},
		{"disruptionsAllowed", int64(got.DisruptionsAllowed), int64(want.DisruptionsAllowed)},
		{"currentHealthy", int64(got.CurrentHealthy), int64(want.CurrentHealthy)},
		{"desiredHealthy", int64(got.DesiredHealthy), int64(want.DesiredHealthy)},
		{"expectedPods", int64(got.ExpectedPods), int64(want.ExpectedPods)},
	}
	for _, f := range ints {
		if f.got != f.want {
			diffs = append(diffs, fmt.Sprintf("%s %d, want %d", f.name, f.got, f.want))
		}
	}
	keys := func(m map[string]metav1.Time) []string {
		out := []string{}
		for k, v := range m {
			if v.IsZero() {
				k += "(no time)"
			}
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	if g, w := keys(got.DisruptedPods), keys(want.DisruptedPods); !reflect.DeepEqual(g, w) {
		diffs = append(diffs, fmt.Sprintf("disruptedPods %v, want %v", g, w))
	}
	strip := func(cs []metav1.Condition) []metav1.Condition {
		out := []metav1.Condition{}
		for _, c := range cs {
			if c.LastTransitionTime.IsZero() {
				c.Message += "(no lastTransitionTime)"
			}
			c.LastTransitionTime = metav1.Time{}
			out = append(out, c)
		}
		return out
	}
	if g, w := strip(got.Conditions), strip(want.Conditions); !reflect.DeepEqual(g, w) {
		diffs = append(diffs, fmt.Sprintf("conditions %+v, want %+v", g, w))
	}
	return strings.Join(diffs, "; ")
}

// waitBudget waits until the budget's status is the one kube answered in
// golden.
func waitBudget(t *testing.T, client kubernetes.Interface, ns, name, golden string) *policyv1.PodDisruptionBudget {
	t.Helper()
	want := goldenBudgetStatus(t, golden)
	var pdb *policyv1.PodDisruptionBudget
	diff := "never read"
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pdb = got
		diff = budgetStatusDiff(got.Status, want)
		return diff == "", nil
	})
	if err != nil {
		t.Fatalf("%s: budget %s status as in %s: %v; last difference: %s", t.Name(), name, golden, err, diff)
	}
	return pdb
}

// checkBudgetNow checks the budget's status right now.
func checkBudgetNow(t *testing.T, client kubernetes.Interface, ns, name, golden string) {
	t.Helper()
	got, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := budgetStatusDiff(got.Status, goldenBudgetStatus(t, golden)); diff != "" {
		t.Errorf("budget %s vs %s: %s", name, golden, diff)
	}
}

// checkGoldenReplacing is checkGolden with strings of kube's answer (its
// uids) replaced by ours.
func checkGoldenReplacing(t *testing.T, got rawResponse, golden string, oldnew ...string) {
	t.Helper()
	want := statusMap(t, []byte(strings.NewReplacer(oldnew...).Replace(string(goldenBody(t, golden)))))
	if code := int(want["code"].(float64)); got.Code != code {
		t.Errorf("%s: HTTP status %d, want %d; body %s", golden, got.Code, code, got.Body)
	}
	have := statusMap(t, got.Body)
	for _, k := range statusFields {
		w, wok := want[k]
		h, hok := have[k]
		if wok != hok || !reflect.DeepEqual(w, h) {
			t.Errorf("%s: Status.%s = %s, want %s", golden, k, jsonString(h, hok), jsonString(w, wok))
		}
	}
}

func checkPodGone(t *testing.T, ns, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod %s after eviction: %v, want NotFound", name, err)
	}
}

// TestEvictionReplaysKube replays the recorded eviction session
// (shared/reference/kube-apiserver-1.32/evict-*) against corekube and its
// disruption controller, comparing every answer field by field and every
// budget status the recording read.
func TestEvictionReplaysKube(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	const pdbBody = `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"web-pdb"},"spec":{"minAvailable":2,"selector":{"matchLabels":{"app":"web"}}}}`
	pdbPath := "/apis/policy/v1/namespaces/" + ns + "/poddisruptionbudgets"

	// A: the budget's status is not computed yet.
	if _, err := pods.Create(t.Context(), newPod("web-0", map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created := doRaw(t, "POST", pdbPath, []byte(pdbBody))
	if created.Code != http.StatusCreated {
		t.Fatalf("A0 create budget: %d %s", created.Code, created.Body)
	}
	var pdb policyv1.PodDisruptionBudget
	if err := json.Unmarshal(created.Body, &pdb); err != nil {
		t.Fatal(err)
	}
	if diff := budgetStatusDiff(pdb.Status, goldenBudgetStatus(t, "evict-A0-201-create-pdb")); diff != "" || pdb.Generation != 1 {
		t.Errorf("A0: generation %d, status: %s", pdb.Generation, diff)
	}
	checkGolden(t, doRaw(t, "POST", evictionPath(ns, "web-0"), evictionBody(ns, "web-0")), "evict-A1-201-pending-pod-ignores-pdb")
	checkPodGone(t, ns, "web-0")

	createRunningPods(t, cs, ns, true, "web-0", "web-1", "web-2")
	a2 := doRaw(t, "POST", evictionPath(ns, "web-0"), evictionBody(ns, "web-0"))
	checkGolden(t, a2, "evict-A2-429-pdb-status-not-observed")
	if ra := a2.Header.Get("Retry-After"); ra != "10" {
		t.Errorf("A2: Retry-After %q, want 10", ra)
	}
	checkBudgetNow(t, cs, ns, "web-pdb", "evict-A3-200-get-pdb-unobserved")

	// B: the controller computes the status; one disruption is allowed.
	startDisruptionController(t, cfg, disruption.Config{DeletionTimeout: 3 * time.Second})
	before := waitBudget(t, cs, ns, "web-pdb", "evict-B0-200-get-pdb-observed")

	checkGolden(t, doRaw(t, "POST", evictionPath(ns, "web-0")+"?dryRun=All", evictionBody(ns, "web-0")), "evict-B1-201-dryRun-allowed")
	checkGolden(t, doRaw(t, "POST", evictionPath(ns, "web-0"),
		fmt.Appendf(nil, `{"apiVersion":"policy/v1beta1","kind":"Eviction","metadata":{"name":"web-0","namespace":%q},"deleteOptions":{"dryRun":["All"]}}`, ns)),
		"evict-B2-201-policy-v1beta1-body-dryRun")
	after, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(t.Context(), "web-pdb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("dry runs wrote the budget: %+v", after.Status)
	}
	web0, err := pods.Get(t.Context(), "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("web-0 after dry runs: %v", err)
	}
	if podCondition(web0, v1.DisruptionTarget) != nil {
		t.Errorf("dry run marked web-0: %+v", web0.Status.Conditions)
	}

	// A failed uid precondition still takes the disruption (as in kube)
	// until the controller gives it back.
	b3 := doRaw(t, "POST", evictionPath(ns, "web-0"),
		fmt.Appendf(nil, `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"web-0","namespace":%q},"deleteOptions":{"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}}`, ns))
	checkGoldenReplacing(t, b3, "evict-B3-409-uid-precondition-mismatch-while-allowed", "f286476d-49af-4414-9d2a-d689474407fc", string(web0.UID))
	waitBudget(t, cs, ns, "web-pdb", "evict-B4-200-get-pdb-after-failed-precondition")
	if web0, err := pods.Get(t.Context(), "web-0", metav1.GetOptions{}); err != nil || web0.DeletionTimestamp != nil || podCondition(web0, v1.DisruptionTarget) != nil {
		t.Errorf("web-0 after a failed precondition: %v %+v", err, web0)
	}
	// After DeletionTimeout the entry goes (a NotDeleted event on web-0).
	waitBudget(t, cs, ns, "web-pdb", "evict-B0-200-get-pdb-observed")
	eventually(t, 10*time.Second, "NotDeleted event", func(ctx context.Context) (bool, error) {
		events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Reason == "NotDeleted" && ev.InvolvedObject.Name == "web-0" && ev.Type == v1.EventTypeWarning && ev.Source.Component == "controllermanager" {
				return true, nil
			}
		}
		return false, nil
	})

	checkGolden(t, doRaw(t, "POST", evictionPath(ns, "web-0"), evictionBody(ns, "web-0")), "evict-B5-201-allowed")
	checkPodGone(t, ns, "web-0")
	waitBudget(t, cs, ns, "web-pdb", "evict-B6-200-get-pdb-right-after-eviction")
	checkGolden(t, doRaw(t, "POST", evictionPath(ns, "web-1"), evictionBody(ns, "web-1")), "evict-B7-429-blocked-by-pdb")
	checkGolden(t, doRaw(t, "POST", evictionPath(ns, "web-1")+"?dryRun=All", evictionBody(ns, "web-1")), "evict-B8-429-dryRun-while-blocked")
	checkGolden(t, doRaw(t, "POST", evictionPath(ns, "no-such-pod"), evictionBody(ns, "no-such-pod")), "evict-B9-404-nonexistent-pod")
	checkGolden(t, doRaw(t, "POST", evictionPath(ns, "web-1"), evictionBody(ns, "web-2")), "evict-B10-400-name-mismatch")
	checkGolden(t, doRaw(t, "GET", evictionPath(ns, "web-1"), nil), "evict-B11-405-GET-on-eviction")
	checkGolden(t, doRaw(t, "POST", evictionPath(ns, "web-1"), []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1"}}`)), "evict-B12-400-wrong-kind-body")

	// C: two budgets select the pod.
	created = doRaw(t, "POST", pdbPath, []byte(`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"web-pdb2"},"spec":{"maxUnavailable":1,"selector":{"matchLabels":{"app":"web"}}}}`))
	if created.Code != http.StatusCreated {
		t.Fatalf("C0 create second budget: %d %s", created.Code, created.Body)
	}
	var pdb2 policyv1.PodDisruptionBudget
	if err := json.Unmarshal(created.Body, &pdb2); err != nil {
		t.Fatal(err)
	}
	if diff := budgetStatusDiff(pdb2.Status, goldenBudgetStatus(t, "evict-C0-201-create-second-pdb")); diff != "" {
		t.Errorf("C0: status: %s", diff)
	}
	checkGolden(t, doRaw(t, "POST", evictionPath(ns, "web-1"), evictionBody(ns, "web-1")), "evict-C1-500-two-pdbs-match")
	if _, err := pods.Create(t.Context(), newPod("web-p", map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, doRaw(t, "POST", evictionPath(ns, "web-p"), evictionBody(ns, "web-p")), "evict-C2-201-two-pdbs-match-pending-pod")
	checkPodGone(t, ns, "web-p")
	if err := cs.PolicyV1().PodDisruptionBudgets(ns).Delete(t.Context(), "web-pdb2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// D: an unready running pod goes without taking a disruption while
	// the budget is met without it.
	createRunningPods(t, cs, ns, false, "web-3")
	blocked := goldenBudgetStatus(t, "evict-B6-200-get-pdb-right-after-eviction")
	blocked.ExpectedPods = 3
	waitBudgetStatus(t, ns, "web-pdb", blocked)
	checkGolden(t, doRaw(t, "POST", evictionPath(ns, "web-3"), evictionBody(ns, "web-3")), "evict-D1-201-unready-running-pod-healthy-budget")
	checkPodGone(t, ns, "web-3")
	if got, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(t.Context(), "web-pdb", metav1.GetOptions{}); err != nil || len(got.Status.DisruptedPods) != 0 {
		t.Errorf("D1 took a disruption: %v %+v", err, got.Status)
	}
	createRunningPods(t, cs, ns, true, "web-0")
	waitBudget(t, cs, ns, "web-pdb", "evict-D2-200-get-pdb-final")
}

// waitBudgetStatus waits for a status that no recording has.
func waitBudgetStatus(t *testing.T, ns, name string, want policyv1.PodDisruptionBudgetStatus) {
	t.Helper()
	diff := "never read"
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		diff = budgetStatusDiff(got.Status, want)
		return diff == "", nil
	})
	if err != nil {
		t.Fatalf("budget %s: %v; last difference: %s", name, err, diff)
	}
}

func podCondition(pod *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func newBudget(name string, minAvailable intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
}

// waitAllowed waits until the budget allows n disruptions for its current
// generation.
func waitAllowed(t *testing.T, client kubernetes.Interface, ns, name string, n int32) {
	t.Helper()
	var last policyv1.PodDisruptionBudgetStatus
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = got.Status
		return got.Status.ObservedGeneration == got.Generation && got.Status.DisruptionsAllowed == n, nil
	})
	if err != nil {
		t.Fatalf("budget %s allowing %d: %v; last status %+v", name, n, err, last)
	}
}

// TestEvictionGraceful: an eviction of a pod on a node deletes it
// gracefully with the eviction's delete options and marks it
// DisruptionTarget; the controller then counts it as gone.
func TestEvictionGraceful(t *testing.T) {
	ns := newNamespace(t)
	startDisruptionController(t, cfg, disruption.Config{})
	for _, name := range []string{"a", "b"} {
		pod := newPod(name, map[string]string{"app": "web"})
		pod.Spec.NodeName = "node-1"
		pod.Spec.TerminationGracePeriodSeconds = ptr(int64(30))
		if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setPodRunning(t, cs, ns, name, true)
	}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), newBudget("web", intstr.FromInt32(1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, cs, ns, "web", 1)

	err := cs.CoreV1().Pods(ns).EvictV1(t.Context(), &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: "a", Namespace: ns},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(5))},
	})
	if err != nil {
		t.Fatalf("evict a: %v", err)
	}
	a, err := cs.CoreV1().Pods(ns).Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("a after eviction: %v", err)
	}
	if a.DeletionTimestamp == nil || a.DeletionGracePeriodSeconds == nil || *a.DeletionGracePeriodSeconds != 5 {
		t.Errorf("a: deletionTimestamp %v, grace %v; want a graceful deletion of 5s", a.DeletionTimestamp, a.DeletionGracePeriodSeconds)
	}
	cond := podCondition(a, v1.DisruptionTarget)
	if cond == nil || cond.Status != v1.ConditionTrue || cond.Reason != "EvictionByEvictionAPI" || cond.Message != "Eviction API: evicting" || cond.LastTransitionTime.IsZero() {
		t.Errorf("a: DisruptionTarget %+v", cond)
	}
	// a is terminating: not healthy, and its disruptedPods entry goes.
	waitBudgetStatus(t, ns, "web", policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: 1, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 2,
		Conditions: []metav1.Condition{{Type: "DisruptionAllowed", Status: "False", ObservedGeneration: 1, Reason: "InsufficientPods", LastTransitionTime: metav1.Now()}},
	})
	err = cs.CoreV1().Pods(ns).EvictV1(t.Context(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns}})
	st := checkStatusErr(t, err, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "Cannot evict pod as it would violate the pod's disruption budget.")
	if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Message != "The disruption budget web needs 1 healthy pods and has 1 currently" {
		t.Errorf("evict b: details %+v", st.Details)
	}
	// A terminating pod is evicted without a budget check.
	if err := cs.CoreV1().Pods(ns).EvictV1(t.Context(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns}}); err != nil {
		t.Errorf("evict terminating a: %v", err)
	}
}

// TestEvictionUnhealthyPodPolicy: an unready pod is protected while the
// budget is not met (IfHealthyBudget), and not with AlwaysAllow.
func TestEvictionUnhealthyPodPolicy(t *testing.T) {
	ns := newNamespace(t)
	startDisruptionController(t, cfg, disruption.Config{})
	createRunningPods(t, cs, ns, true, "r1", "r2")
	createRunningPods(t, cs, ns, false, "u1", "u2")
	pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), newBudget("web", intstr.FromString("75%")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// 75% of 4 is 3 healthy pods; there are 2.
	waitBudgetStatus(t, ns, "web", policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: 1, CurrentHealthy: 2, DesiredHealthy: 3, ExpectedPods: 4,
		Conditions: []metav1.Condition{{Type: "DisruptionAllowed", Status: "False", ObservedGeneration: 1, Reason: "InsufficientPods", LastTransitionTime: metav1.Now()}},
	})
	evict := func(name string) error {
		return cs.CoreV1().Pods(ns).EvictV1(t.Context(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
	checkStatusErr(t, evict("u1"), http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "")

	// Patched, not replaced: the controller writes the status meanwhile.
	patch := []byte(`{"spec":{"unhealthyPodEvictionPolicy":"AlwaysAllow"}}`)
	pdb, err = cs.PolicyV1().PodDisruptionBudgets(ns).Patch(t.Context(), "web", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil || pdb.Generation != 2 {
		t.Fatalf("patch budget: %v (generation %d)", err, pdb.Generation)
	}
	// A ready pod still meets the budget (not observed yet, or exhausted;
	// raw, as client-go waits out a Retry-After).
	if r := doRaw(t, "POST", evictionPath(ns, "r1"), evictionBody(ns, "r1")); r.Code != http.StatusTooManyRequests {
		t.Errorf("evict ready r1: %d %s", r.Code, r.Body)
	}
	if err := evict("u1"); err != nil {
		t.Errorf("evict unready u1 with AlwaysAllow: %v", err)
	}
	checkPodGone(t, ns, "u1")
	waitAllowed(t, cs, ns, "web", 0)
	checkStatusErr(t, evict("r1"), http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "")
}

// TestEvictionEncodings: protobuf bodies in policy/v1 and policy/v1beta1,
// and the dryRun of query and body that must agree.
func TestEvictionEncodings(t *testing.T) {
	ns := newNamespace(t)
	createRunningPods(t, cs, ns, true, "p")
	pcfg := rest.CopyConfig(cfg)
	pcfg.ContentType = "application/vnd.kubernetes.protobuf"
	pcs, err := kubernetes.NewForConfig(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	dry := &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	if err := pcs.CoreV1().Pods(ns).EvictV1(t.Context(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, DeleteOptions: dry}); err != nil {
		t.Errorf("protobuf policy/v1 eviction: %v", err)
	}
	if err := pcs.CoreV1().Pods(ns).EvictV1beta1(t.Context(), &policyv1beta1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, DeleteOptions: dry}); err != nil {
		t.Errorf("protobuf policy/v1beta1 eviction: %v", err)
	}
	if err := cs.PolicyV1().Evictions(ns).Evict(t.Context(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, DeleteOptions: dry}); err != nil {
		t.Errorf("policy/v1 Evictions client: %v", err)
	}
	body := fmt.Appendf(nil, `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p"},"deleteOptions":{"dryRun":["All"]}}`)
	if r := doRaw(t, "POST", evictionPath(ns, "p")+"?dryRun=All", body); r.Code != http.StatusCreated {
		t.Errorf("matching dry runs: %d %s", r.Code, r.Body)
	}
	body = fmt.Appendf(nil, `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p","namespace":"other"}}`)
	if r := doRaw(t, "POST", evictionPath(ns, "p"), body); r.Code != http.StatusBadRequest {
		t.Errorf("namespace mismatch: %d %s", r.Code, r.Body)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(t.Context(), "p", metav1.GetOptions{}); err != nil {
		t.Errorf("p after dry runs: %v", err)
	}
}

// evictConcurrently fires one eviction per pod at once, the i-th through
// servers[i%len(servers)], and returns how many answered each code.
func evictConcurrently(t *testing.T, servers []string, ns string, podNames []string) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, name := range podNames {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := doRawURL(t, servers[i%len(servers)], "POST", evictionPath(ns, name), evictionBody(ns, name))
			mu.Lock()
			defer mu.Unlock()
			codes[r.Code]++
			if r.Code == http.StatusTooManyRequests {
				st := statusMap(t, r.Body)
				if st["reason"] != "TooManyRequests" || !strings.Contains(string(r.Body), "DisruptionBudget") {
					t.Errorf("evict %s: %s", name, r.Body)
				}
			} else if r.Code != http.StatusCreated {
				t.Errorf("evict %s: %d %s", name, r.Code, r.Body)
			}
		}()
	}
	close(start)
	wg.Wait()
	return codes
}

func podNamesN(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("web-%d", i)
	}
	return out
}

// TestEvictionConcurrentBudget: 20 evictions at once against a budget
// allowing 3, with the disruption controller running: exactly 3 pods go.
func TestEvictionConcurrentBudget(t *testing.T) {
	ns := newNamespace(t)
	startDisruptionController(t, cfg, disruption.Config{})
	names := podNamesN(20)
	createRunningPods(t, cs, ns, true, names...)
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), newBudget("web", intstr.FromInt32(17)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, cs, ns, "web", 3)
	codes := evictConcurrently(t, []string{srv.URL()}, ns, names)
	if codes[http.StatusCreated] != 3 || codes[http.StatusTooManyRequests] != 17 {
		t.Errorf("answers %v, want 3 × 201 and 17 × 429", codes)
	}
	left, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 17 {
		t.Errorf("%d pods left, want 17", len(left.Items))
	}
	waitBudgetStatus(t, ns, "web", policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: 1, CurrentHealthy: 17, DesiredHealthy: 17, ExpectedPods: 17,
		Conditions: []metav1.Condition{{Type: "DisruptionAllowed", Status: "False", ObservedGeneration: 1, Reason: "InsufficientPods", LastTransitionTime: metav1.Now()}},
	})
}

// TestEvictionConcurrentServers: three API servers share one etcd; 30
// evictions at once spread over them against a budget allowing 5 take
// exactly 5 pods. The budget's status is written by hand (no controller),
// so only the evictions change it.
func TestEvictionConcurrentServers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	etcd, err := etcdstore.StartEmbedded(ctx, etcdstore.EmbeddedConfig{Dir: t.TempDir(), UnsafeNoFsync: true, Logger: testserver.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	var urls []string
	for i := range 3 {
		c, err := testserver.NewConfig(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		c.EtcdServers, c.ShutdownTimeout = etcd.Endpoints(), 2*time.Second
		s, err := server.Start(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := s.Shutdown(context.Background()); err != nil {
				t.Logf("shutdown: %v", err)
			}
		}()
		if i == 0 {
			// The pods need the default ServiceAccount; deferred after
			// the shutdowns, the controller stops before them.
			defer testserver.StartControllers(s)()
		}
		urls = append(urls, s.URL())
	}
	client, err := kubernetes.NewForConfig(testserver.ClientConfig(urls[0]))
	if err != nil {
		t.Fatal(err)
	}
	const ns = metav1.NamespaceDefault
	names := podNamesN(30)
	createRunningPods(t, client, ns, true, names...)
	pdb, err := client.PolicyV1().PodDisruptionBudgets(ns).Create(t.Context(), newBudget("web", intstr.FromInt32(25)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 5, CurrentHealthy: 30, DesiredHealthy: 25, ExpectedPods: 30}
	if _, err := client.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(t.Context(), pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	codes := evictConcurrently(t, urls, ns, names)
	if codes[http.StatusCreated] != 5 || codes[http.StatusTooManyRequests] != 25 {
		t.Errorf("answers %v, want 5 × 201 and 25 × 429", codes)
	}
	left, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 25 || got.Status.DisruptionsAllowed != 0 || len(got.Status.DisruptedPods) != 5 {
		t.Errorf("%d pods left (want 25); budget %+v (want 0 allowed, 5 disrupted)", len(left.Items), got.Status)
	}
	var gone []string
	for name := range got.Status.DisruptedPods {
		if _, err := client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("disrupted pod %s: %v, want NotFound", name, err)
		}
		gone = append(gone, name)
	}
	sort.Strings(gone)
	t.Logf("evicted %v", gone)
}
