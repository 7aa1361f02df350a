package disruption

import (
	"time"

	"github.com/corekube/corekube/controllers/sharedinformers"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// expectedAndDesired returns a budget's expectedPods and desiredHealthy for
// podCount matching pods, as kube's getExpectedPodCount does with the
// number of pods standing in for the controllers' scale: percentages are
// of expectedPods, rounded up (so minAvailable 50% of 3 is 2, and
// maxUnavailable 50% of 3 leaves 1).
func expectedAndDesired(spec *policyv1.PodDisruptionBudgetSpec, podCount int) (expected, desired int32, err error) {
	switch {
	case spec.MaxUnavailable != nil:
		expected = int32(podCount)
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, podCount, true)
		if err != nil {
			return 0, 0, err
		}
		desired = max(expected-int32(maxUnavailable), 0)
	case spec.MinAvailable != nil:
		expected = int32(podCount)
		switch spec.MinAvailable.Type {
		case intstr.Int:
			desired = spec.MinAvailable.IntVal
		case intstr.String:
			minAvailable, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, podCount, true)
			if err != nil {
				return 0, 0, err
			}
			desired = int32(minAvailable)
		}
	}
	return expected, desired, nil
}

// disruptedPods keeps the entries of recorded (a budget's
// status.disruptedPods) whose pod still exists, is not being deleted and
// was recorded less than timeout ago. expired lists the pods whose entry
// timed out without a deletion; recheck is when the next kept entry times
// out (nil if none).
func disruptedPods(pods []*sharedinformers.Pod, recorded map[string]metav1.Time, now time.Time, timeout time.Duration) (kept map[string]metav1.Time, expired []*sharedinformers.Pod, recheck *time.Time) {
	kept = map[string]metav1.Time{}
	if recorded == nil {
		return kept, nil, nil
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue // being deleted: the eviction happened
		}
		at, ok := recorded[pod.Name]
		if !ok {
			continue
		}
		deadline := at.Add(timeout)
		if deadline.Before(now) {
			expired = append(expired, pod)
			continue
		}
		if recheck == nil || deadline.Before(*recheck) {
			recheck = &deadline
		}
		kept[pod.Name] = at
	}
	return kept, expired, recheck
}

// countHealthy counts the Ready pods that are neither being deleted nor
// about to be (recorded in disrupted less than timeout ago).
func countHealthy(pods []*sharedinformers.Pod, disrupted map[string]metav1.Time, now time.Time, timeout time.Duration) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if at, ok := disrupted[pod.Name]; ok && at.Add(timeout).After(now) {
			continue
		}
		if podReady(pod) {
			n++
		}
	}
	return n
}

// podReady is kube's IsPodReady: the Ready condition is True.
func podReady(pod *sharedinformers.Pod) bool {
	c := pod.Condition(v1.PodReady)
	return c != nil && c.Status == v1.ConditionTrue
}

// disruptionsAllowed is currentHealthy - desiredHealthy, never below 0, and
// 0 while no pod is expected (a budget whose first pods just appeared must
// not allow disruptions before it has been computed for them).
func disruptionsAllowed(currentHealthy, desiredHealthy, expected int32) int32 {
	allowed := currentHealthy - desiredHealthy
	if expected <= 0 || allowed <= 0 {
		return 0
	}
	return allowed
}

// newStatus is the status a budget must have; it keeps the budget's
// conditions, updated, and reports whether it differs from the current
// one (kube's updatePdbStatus test).
func newStatus(pdb *policyv1.PodDisruptionBudget, currentHealthy, desiredHealthy, expected int32, disrupted map[string]metav1.Time, now time.Time) (policyv1.PodDisruptionBudgetStatus, bool) {
	allowed := disruptionsAllowed(currentHealthy, desiredHealthy, expected)
	st := pdb.Status
	if st.CurrentHealthy == currentHealthy &&
		st.DesiredHealthy == desiredHealthy &&
		st.ExpectedPods == expected &&
		st.DisruptionsAllowed == allowed &&
		apiequality.Semantic.DeepEqual(st.DisruptedPods, disrupted) &&
		st.ObservedGeneration == pdb.Generation &&
		conditionsUpToDate(pdb) {
		return st, false
	}
	out := policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation,
		DisruptedPods:      disrupted,
		DisruptionsAllowed: allowed,
		CurrentHealthy:     currentHealthy,
		DesiredHealthy:     desiredHealthy,
		ExpectedPods:       expected,
		Conditions:         copyConditions(pdb.Status.Conditions),
	}
	setDisruptionAllowedCondition(&out, now)
	return out, true
}

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	return append([]metav1.Condition{}, in...)
}

// setDisruptionAllowedCondition sets DisruptionAllowed from
// disruptionsAllowed (kube's UpdateDisruptionAllowedCondition);
// lastTransitionTime moves only when the condition's status changes.
func setDisruptionAllowedCondition(st *policyv1.PodDisruptionBudgetStatus, now time.Time) {
	if st.Conditions == nil {
		st.Conditions = []metav1.Condition{}
	}
	cond := metav1.Condition{
		Type:               policyv1.DisruptionAllowedCondition,
		Status:             metav1.ConditionFalse,
		Reason:             policyv1.InsufficientPodsReason,
		ObservedGeneration: st.ObservedGeneration,
		LastTransitionTime: metav1.NewTime(now),
	}
	if st.DisruptionsAllowed > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	apimeta.SetStatusCondition(&st.Conditions, cond)
}

// conditionsUpToDate is kube's ConditionsAreUpToDate: the condition is
// there, matches disruptionsAllowed, and the status is of the current
// generation.
func conditionsUpToDate(pdb *policyv1.PodDisruptionBudget) bool {
	cond := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if cond == nil || pdb.Status.ObservedGeneration != pdb.Generation {
		return false
	}
	if pdb.Status.DisruptionsAllowed > 0 {
		return cond.Status == metav1.ConditionTrue && cond.Reason == policyv1.SufficientPodsReason
	}
	return cond.Status == metav1.ConditionFalse && cond.Reason == policyv1.InsufficientPodsReason
}

// failSafeStatus is the status written when a budget's status cannot be
// computed: no disruption allowed, DisruptionAllowed False/SyncFailed with
// the error. changed is false when the budget already says so.
func failSafeStatus(pdb *policyv1.PodDisruptionBudget, err error, now time.Time) (policyv1.PodDisruptionBudgetStatus, bool) {
	st := *pdb.Status.DeepCopy()
	st.DisruptionsAllowed = 0
	if st.Conditions == nil {
		st.Conditions = []metav1.Condition{}
	}
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type:               policyv1.DisruptionAllowedCondition,
		Status:             metav1.ConditionFalse,
		Reason:             policyv1.SyncFailedReason,
		Message:            err.Error(),
		ObservedGeneration: st.ObservedGeneration,
		LastTransitionTime: metav1.NewTime(now),
	})
	return st, !apiequality.Semantic.DeepEqual(st, pdb.Status)
}
