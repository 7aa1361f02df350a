package pods

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corekube/corekube/registry/pods/internal/podtest"
)

func TestPropagateDryRun(t *testing.T) {
	all := []string{metav1.DryRunAll}
	cases := []struct {
		name    string
		body    *metav1.DeleteOptions
		query   []string
		want    []string
		wantErr bool
	}{
		{"neither", nil, nil, nil, false},
		{"query only", nil, all, all, false},
		{"body only", &metav1.DeleteOptions{DryRun: all}, nil, all, false},
		{"query into body options", &metav1.DeleteOptions{GracePeriodSeconds: podtest.Int64(3)}, all, all, false},
		{"both agree", &metav1.DeleteOptions{DryRun: all}, all, all, false},
		{"both disagree", &metav1.DeleteOptions{DryRun: []string{"Other"}}, all, nil, true},
	}
	for _, c := range cases {
		opts, err := propagateDryRun(&policyv1.Eviction{DeleteOptions: c.body}, c.query)
		if c.wantErr {
			var se *apierrors.StatusError
			if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusInternalServerError || se.ErrStatus.Reason != "" ||
				se.ErrStatus.Message != "Non-matching dry-run options in request and content: [All] and [Other]" {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err != nil || len(opts.DryRun) != len(c.want) {
			t.Errorf("%s: %v %v, want dryRun %v", c.name, opts, err, c.want)
		}
		if c.body != nil && c.body.GracePeriodSeconds != nil && opts.GracePeriodSeconds == nil {
			t.Errorf("%s: lost the body's options", c.name)
		}
	}
}

func TestCanIgnorePDB(t *testing.T) {
	now := metav1.Now()
	cases := []struct {
		phase    v1.PodPhase
		deleting bool
		ignore   bool
		enforce  bool
	}{
		{v1.PodPending, false, true, true},
		{v1.PodRunning, false, false, true},
		{v1.PodRunning, true, true, false},
		{v1.PodSucceeded, false, true, false},
		{v1.PodFailed, false, true, false},
		{v1.PodUnknown, false, false, true},
	}
	for _, c := range cases {
		pod := &v1.Pod{Status: v1.PodStatus{Phase: c.phase}}
		if c.deleting {
			pod.DeletionTimestamp = &now
		}
		if got := canIgnorePDB(pod); got != c.ignore {
			t.Errorf("%s deleting=%v: canIgnorePDB %v, want %v", c.phase, c.deleting, got, c.ignore)
		}
		if got := shouldEnforceResourceVersion(pod); got != c.enforce {
			t.Errorf("%s deleting=%v: shouldEnforceResourceVersion %v, want %v", c.phase, c.deleting, got, c.enforce)
		}
	}
}

func TestCheckAndDecrement(t *testing.T) {
	e := &EvictionREST{now: time.Now}
	budget := func(gen, observed int64, allowed int32) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "web-pdb", Namespace: "default", Generation: gen},
			Status:     policyv1.PodDisruptionBudgetStatus{ObservedGeneration: observed, DisruptionsAllowed: allowed, CurrentHealthy: 2, DesiredHealthy: 2},
		}
	}
	status := func(err error) metav1.Status {
		t.Helper()
		var se *apierrors.StatusError
		if !errors.As(err, &se) {
			t.Fatalf("not a Status error: %v", err)
		}
		return se.ErrStatus
	}

	st := status(e.checkAndDecrement(ctx, "p", budget(2, 1, 1), true))
	if st.Code != 429 || st.Details.RetryAfterSeconds != 10 || st.Details.Causes[0].Message != "The disruption budget web-pdb is still being processed by the server." {
		t.Errorf("unobserved: %+v", st)
	}
	st = status(e.checkAndDecrement(ctx, "p", budget(1, 1, 0), true))
	if st.Code != 429 || st.Details.RetryAfterSeconds != 0 || st.Details.Causes[0].Type != "DisruptionBudget" ||
		st.Details.Causes[0].Message != "The disruption budget web-pdb needs 2 healthy pods and has 2 currently" {
		t.Errorf("exhausted: %+v", st)
	}
	st = status(e.checkAndDecrement(ctx, "p", budget(1, 1, -1), true))
	if st.Code != 403 {
		t.Errorf("negative: %+v", st)
	}
	big := budget(1, 1, 1)
	big.Status.DisruptedPods = map[string]metav1.Time{}
	for i := range MaxDisruptedPodSize + 1 {
		big.Status.DisruptedPods[fmt.Sprint("p", i)] = metav1.Now()
	}
	if st = status(e.checkAndDecrement(ctx, "p", big, true)); st.Code != 403 {
		t.Errorf("too many disrupted: %+v", st)
	}

	// A dry run decrements only the copy in hand.
	b := budget(1, 1, 1)
	if err := e.checkAndDecrement(ctx, "p", b, true); err != nil {
		t.Fatal(err)
	}
	if b.Status.DisruptionsAllowed != 0 || len(b.Status.DisruptedPods) != 0 || len(b.Status.Conditions) != 1 ||
		b.Status.Conditions[0].Reason != policyv1.InsufficientPodsReason || b.Status.Conditions[0].Status != metav1.ConditionFalse {
		t.Errorf("dry run: %+v", b.Status)
	}
}

func TestEvictionRetry(t *testing.T) {
	r := evictionRetry{steps: 4, interval: time.Millisecond}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "x"}, "n", errors.New("changed"))
	calls := 0
	err := r.do(context.Background(), apierrors.IsConflict, func() error { calls++; return conflict })
	if calls != 4 || !apierrors.IsConflict(err) {
		t.Errorf("exhausted: %d calls, %v", calls, err)
	}
	calls = 0
	err = r.do(context.Background(), apierrors.IsConflict, func() error {
		calls++
		if calls < 3 {
			return conflict
		}
		return nil
	})
	if calls != 3 || err != nil {
		t.Errorf("succeeding: %d calls, %v", calls, err)
	}
	calls = 0
	err = r.do(context.Background(), apierrors.IsConflict, func() error { calls++; return errors.New("other") })
	if calls != 1 || err == nil {
		t.Errorf("not retriable: %d calls, %v", calls, err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls = 0
	err = evictionRetry{steps: 20, interval: time.Hour}.do(cctx, apierrors.IsConflict, func() error { calls++; return conflict })
	if calls != 1 || !apierrors.IsConflict(err) {
		t.Errorf("ended context: %d calls, %v", calls, err)
	}
}

func TestSetPodCondition(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var st v1.PodStatus
	setPodCondition(&st, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "A"}, t0)
	setPodCondition(&st, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "B"}, t0.Add(time.Minute))
	if len(st.Conditions) != 1 || st.Conditions[0].Reason != "B" || !st.Conditions[0].LastTransitionTime.Time.Equal(t0) {
		t.Errorf("same status: %+v", st.Conditions)
	}
	setPodCondition(&st, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionFalse}, t0.Add(time.Hour))
	if !st.Conditions[0].LastTransitionTime.Time.Equal(t0.Add(time.Hour)) {
		t.Errorf("new status: %+v", st.Conditions)
	}
}
