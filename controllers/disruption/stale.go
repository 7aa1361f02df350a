package disruption

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// staleDisruptionCondition reports whether a pod (its deletionTimestamp,
// phase and conditions) carries a DisruptionTarget condition that will be
// stale if the pod is still not being deleted after
// StalePodDisruptionTimeout, and how long until then. Conditions the node
// agent set, and those of pods that finished, never go stale.
func (c *Controller) staleDisruptionCondition(deletion *metav1.Time, phase v1.PodPhase, conditions []v1.PodCondition) (bool, time.Duration) {
	if deletion != nil {
		return false, 0
	}
	cond := podCondition(conditions, v1.DisruptionTarget)
	if cond == nil || cond.Status != v1.ConditionTrue || cond.Reason == v1.PodReasonTerminationByKubelet ||
		phase == v1.PodSucceeded || phase == v1.PodFailed {
		return false, 0
	}
	return true, max(c.cfg.StalePodDisruptionTimeout-c.cfg.Clock.Since(cond.LastTransitionTime.Time), 0)
}

// syncStalePod sets the pod's DisruptionTarget condition to False once it
// has been True for StalePodDisruptionTimeout without the pod being
// deleted (an eviction approved it, then the delete failed).
func (c *Controller) syncStalePod(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, ok := c.pods.Get(namespace, name)
	if !ok {
		return nil
	}
	stale, after := c.staleDisruptionCondition(cached.DeletionTimestamp, cached.Status.Phase, cached.Status.Conditions)
	if !stale {
		return nil
	}
	if after > 0 {
		c.staleQueue.AddAfter(key, after)
		return nil
	}
	// The cache keeps only part of a pod: write from the whole one.
	pod, err := c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if stale, after := c.staleDisruptionCondition(pod.DeletionTimestamp, pod.Status.Phase, pod.Status.Conditions); !stale || after > 0 {
		return nil // changed meanwhile; its update event requeues it if needed
	}
	if !setPodCondition(&pod.Status, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionFalse}, c.cfg.Clock.Now()) {
		return nil
	}
	if _, err := c.client.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.log.Info("reset stale DisruptionTarget condition to False", "pod", key)
	return nil
}

func podCondition(conditions []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range conditions {
		if conditions[i].Type == t {
			return &conditions[i]
		}
	}
	return nil
}

// setPodCondition is kube's UpdatePodCondition: lastTransitionTime moves
// only when the status changes; it reports whether anything changed.
func setPodCondition(status *v1.PodStatus, cond v1.PodCondition, now time.Time) bool {
	cond.LastTransitionTime = metav1.NewTime(now)
	old := podCondition(status.Conditions, cond.Type)
	if old == nil {
		status.Conditions = append(status.Conditions, cond)
		return true
	}
	if cond.Status == old.Status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	equal := cond.Status == old.Status && cond.Reason == old.Reason && cond.Message == old.Message &&
		cond.LastProbeTime.Equal(&old.LastProbeTime) && cond.LastTransitionTime.Equal(&old.LastTransitionTime)
	*old = cond
	return !equal
}
