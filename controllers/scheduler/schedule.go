package scheduler

import (
	"context"
	"encoding/json"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Kube's minimums for percentageOfNodesToScore.
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

// scheduleOne makes one attempt for the pod key: decide under the lock,
// assume the decision in the cache, and leave the API calls to the
// workers.
func (s *Scheduler) scheduleOne(ctx context.Context, key string) {
	s.mu.Lock()
	e := s.pending[key]
	if e == nil || e.state != stateQueued {
		s.mu.Unlock()
		return
	}
	pod := e.pod
	start := s.cfg.Clock.Now()
	if e.firstAttempt.IsZero() {
		e.firstAttempt = start
	}
	node, msg := s.decide(e)
	if node != "" {
		e.state = stateBinding
		s.cache.setPod(key, &assignedPod{node: node, req: e.req, nonZero: e.nonZero, ports: e.ports, assumed: true,
			ns: pod.Namespace, labels: pod.Labels, owner: e.owner, affinity: e.affinity})
		a := attempt{start: start, first: e.firstAttempt, n: e.attempts + 1}
		s.mu.Unlock()
		s.submit(ctx, func(ctx context.Context) { s.bind(ctx, key, pod, node, a) })
		return
	}
	e.state = stateFailing
	e.missed = false
	s.waiting[key] = e
	s.mu.Unlock()
	// Kube reports an attempt without nodes as an error, not as a fit
	// error.
	result := idxUnschedulable
	if msg == msgNoNodes {
		result = idxError
	}
	s.metrics.attempt(result, start, s.cfg.Clock.Now())
	s.submit(ctx, func(ctx context.Context) { s.recordFailure(ctx, key, pod, msg) })
}

// decide picks the node for e, or says why there is none; s.mu is held.
func (s *Scheduler) decide(e *podEntry) (node, msg string) {
	nodes := s.cache.candidates()
	n := len(nodes)
	if n == 0 {
		return "", msgNoNodes
	}
	want := numFeasibleNodesToFind(s.cfg.PercentageOfNodesToScore, n)
	feasible, failures := s.feasible[:0], s.failures[:0]
	start := s.nextStart % n
	processed := 0
	// PreFilter: the pod-topology plugins count over every node once.
	var tf *topologyFilters
	spread := newSpreadFilter(e, nodes)
	epoch := s.cache.nextEpoch()
	affinity := newAffinityFilter(e, nodes, s.cache.affinityPods, s.nsLabels, epoch)
	if spread != nil || affinity != nil {
		tf = &topologyFilters{spread: spread, affinity: affinity}
	}
	for i := 0; i < n && len(feasible) < want; i++ {
		ni := nodes[(start+i)%n]
		processed++
		if f := filter(e, ni, tf); f.kind == fits {
			feasible = append(feasible, ni)
		} else {
			failures = append(failures, f)
		}
	}
	s.nextStart = (start + processed) % n
	s.feasible, s.failures = feasible, failures
	if len(feasible) == 0 {
		return "", fitErrorMessage(e.pod, n, failures)
	}
	extra := s.topologyScores(e, nodes, feasible, epoch)
	best := scoreNodes(e, feasible, extra, &s.buf)
	pick := best[0]
	if len(best) > 1 {
		pick = best[s.tie%len(best)]
		s.tie++
	}
	return feasible[pick].name, ""
}

// topologyScores are the weighted InterPodAffinity and PodTopologySpread
// scores of the feasible nodes, nil when both score every node alike.
func (s *Scheduler) topologyScores(e *podEntry, nodes, feasible []*nodeInfo, epoch uint64) []int64 {
	buf := &s.buf
	affinity := affinityScores(e, nodes, feasible, s.cache.affinityPods, s.nsLabels, epoch, buf.affinity)
	spread := spreadScores(e, nodes, feasible, buf.spread)
	if affinity == nil && spread == nil {
		return nil
	}
	if affinity != nil {
		buf.affinity = affinity
	}
	if spread != nil {
		buf.spread = spread
	}
	extra := buf.extra[:0]
	for i := range feasible {
		var total int64
		if affinity != nil {
			total += weightInterPodAffinity * affinity[i]
		}
		if spread != nil {
			total += weightTopologySpread * spread[i]
		}
		extra = append(extra, total)
	}
	buf.extra = extra
	return extra
}

// numFeasibleNodesToFind is kube's: small clusters are searched whole,
// larger ones until a share of their nodes is found feasible.
func numFeasibleNodesToFind(percentage, numAllNodes int) int {
	if numAllNodes < minFeasibleNodesToFind {
		return numAllNodes
	}
	if percentage == 0 {
		percentage = max(50-numAllNodes/125, minFeasibleNodesPercentageToFind)
	}
	return max(numAllNodes*percentage/100, minFeasibleNodesToFind)
}

// attempt is what the metrics need of an attempt whose binding is in
// flight (the pod's entry may be gone when it completes: the informer
// can see the pod bound first).
type attempt struct {
	start, first time.Time // of this attempt, of the pod's first
	n            int       // attempts so far, this one included
}

// bind posts the binding and reports the outcome as kube-scheduler does.
func (s *Scheduler) bind(ctx context.Context, key string, pod *v1.Pod, node string, a attempt) {
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}
	err := s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	if err == nil {
		s.events.Eventf(pod, v1.EventTypeNormal, "Scheduled", "Binding", false, "Successfully assigned %v/%v to %v", pod.Namespace, pod.Name, node)
		now := s.cfg.Clock.Now()
		s.metrics.attempt(idxScheduled, a.start, now)
		s.metrics.scheduled(a.n, a.first, now)
		s.mu.Lock()
		if e := s.pending[key]; e != nil && e.state == stateBinding && e.pod.UID == pod.UID {
			s.dropPending(key)
		}
		s.mu.Unlock()
		return
	}
	if ctx.Err() != nil {
		return
	}
	s.metrics.attempt(idxError, a.start, s.cfg.Clock.Now())
	s.log.Info("binding failed", "pod", key, "node", node, "err", err)
	s.mu.Lock()
	if p := s.cache.pods[key]; p != nil && p.assumed && p.node == node {
		s.cache.removePod(key)
		s.markDirty(node, eventAssignedPodDelete)
	}
	e := s.pending[key]
	retry := e != nil && e.state == stateBinding && e.pod.UID == pod.UID
	if retry {
		if apierrors.IsNotFound(err) {
			s.dropPending(key)
			retry = false
		} else {
			e.attempts++
			e.lastFailure = s.cfg.Clock.Now()
			s.requeue(e, eventScheduleAttemptFailure)
		}
	}
	s.mu.Unlock()
	if retry && !apierrors.IsConflict(err) {
		s.events.Eventf(pod, v1.EventTypeWarning, "FailedScheduling", "Scheduling", true, "%s", err.Error())
	}
}

// recordFailure writes the FailedScheduling event and the PodScheduled
// condition, then parks the pod (or retries it at once if a change it may
// fit arrived meanwhile).
func (s *Scheduler) recordFailure(ctx context.Context, key string, pod *v1.Pod, msg string) {
	s.events.Eventf(pod, v1.EventTypeWarning, "FailedScheduling", "Scheduling", true, "%s", msg)
	gone := false
	if patch := podScheduledPatch(pod, msg, metav1.NewTime(s.cfg.Clock.Now())); patch != nil {
		_, err := s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		switch {
		case apierrors.IsNotFound(err):
			gone = true
		case err != nil && ctx.Err() == nil:
			s.log.Info("updating PodScheduled failed", "pod", key, "err", err)
		}
	}
	s.log.Debug("unschedulable", "pod", key, "reason", msg)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.pending[key]
	if e == nil || e.state != stateFailing || e.pod.UID != pod.UID {
		return
	}
	if gone {
		s.dropPending(key)
		return
	}
	e.attempts++
	now := s.cfg.Clock.Now()
	e.lastFailure = now
	if e.missed {
		s.requeue(e, eventScheduleAttemptFailure)
		return
	}
	e.state = stateParked
	e.parkedAt = now
	s.metrics.incomingPod(queueUnschedulable, eventScheduleAttemptFailure)
}

// podScheduledPatch is the strategic merge patch of pods/status that sets
// PodScheduled=False, reason Unschedulable, as kube-scheduler's
// updatePod does; nil when the pod already says so. The transition time
// moves only when the status changes.
func podScheduledPatch(pod *v1.Pod, msg string, now metav1.Time) []byte {
	cond := v1.PodCondition{
		Type:               v1.PodScheduled,
		Status:             v1.ConditionFalse,
		Reason:             v1.PodReasonUnschedulable,
		Message:            msg,
		LastTransitionTime: now,
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != v1.PodScheduled {
			continue
		}
		if c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			return nil
		}
		if c.Status == cond.Status {
			cond.LastTransitionTime = c.LastTransitionTime
		}
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"conditions": []v1.PodCondition{cond}},
	})
	if err != nil {
		return nil
	}
	return patch
}
