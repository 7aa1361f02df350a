package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corekube/corekube/controllers/internal/intern"
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
	// A panic under the lock must not leave it held: tryScheduleOne recovers
	// it and the scheduler goes on.
	unlock := sync.OnceFunc(s.mu.Unlock)
	defer unlock()
	e := s.pending[key]
	if e == nil || e.state != stateQueued {
		unlock()
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
		// An assumed pod's nomination ends: its requests now count on its
		// node as a pod's.
		s.nominate(e, "")
		s.cache.setPod(key, &assignedPod{name: pod.Name, uid: pod.UID, resourceVersion: pod.ResourceVersion,
			startTime: pod.Status.StartTime, deletionTimestamp: pod.DeletionTimestamp, disruption: disruptionOf(pod),
			priority: e.priority, node: node, req: e.req, nonZero: e.nonZero, ports: e.ports, assumed: true,
			ns: intern.String(pod.Namespace), labels: pod.Labels, owner: types.UID(intern.String(string(e.owner))), affinity: e.affinity})
		a := attempt{start: start, first: e.firstAttempt, n: e.attempts + 1}
		unlock()
		s.submit(ctx, func(ctx context.Context) { s.bind(ctx, key, pod, node, a) })
		return
	}
	var pre preemption
	if msg != msgNoNodes {
		pre = s.preempt(e, s.failures)
		if pre.msg != "" {
			msg += " " + pre.msg
		}
	}
	e.state = stateFailing
	e.missed = false
	s.waiting[key] = e
	unlock()
	// Kube reports an attempt without nodes as an error, not as a fit
	// error.
	result := idxUnschedulable
	if msg == msgNoNodes {
		result = idxError
	}
	s.metrics.attempt(result, start, s.cfg.Clock.Now())
	s.submit(ctx, func(ctx context.Context) { s.recordFailure(ctx, key, pod, msg, pre) })
}

// decide picks the node for e, or says why there is none; s.mu is held.
func (s *Scheduler) decide(e *podEntry) (node, msg string) {
	nodes := s.cache.candidates()
	n := len(nodes)
	if n == 0 {
		return "", msgNoNodes
	}
	// PreFilter: the pod-topology plugins count over every node once.
	var tf *topologyFilters
	spread := newSpreadFilter(e, nodes)
	epoch := s.cache.nextEpoch()
	affinity := newAffinityFilter(e, nodes, s.cache.affinityPods, s.nsLabels, epoch)
	if spread != nil || affinity != nil {
		tf = &topologyFilters{spread: spread, affinity: affinity}
	}
	// kube's evaluateNominatedNode: a pod that preempted tries the node
	// it made room on first.
	if e.nominated != "" {
		if ni := s.cache.nodes[e.nominated]; ni != nil && ni.node != nil && s.filterNode(e, ni, tf).kind == fits {
			return ni.name, ""
		}
	}
	// Nominated pods are rare: without them the plain filter runs.
	withNominated := len(s.nominated) > 0
	want := numFeasibleNodesToFind(s.cfg.PercentageOfNodesToScore, n)
	feasible, failures := s.feasible[:0], s.failures[:0]
	start := s.nextStart % n
	processed := 0
	for i := 0; i < n && len(feasible) < want; i++ {
		ni := nodes[(start+i)%n]
		processed++
		var f failure
		if withNominated {
			f = s.filterNode(e, ni, tf)
		} else {
			f = filter(e, ni, tf)
		}
		if f.kind == fits {
			feasible = append(feasible, ni)
		} else {
			f.node = ni
			failures = append(failures, f)
		}
	}
	s.nextStart = (start + processed) % n
	s.feasible, s.failures = feasible, failures
	if len(feasible) == 0 {
		return "", fitErrorMessage(n, failures)
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

// filterNode is filter with the pods nominated to ni that are at least as
// important as e counted as if they ran there (kube's
// RunFilterPluginsWithNominatedPods): room made by preemption is kept for
// the preemptor. s.mu is held.
func (s *Scheduler) filterNode(e *podEntry, ni *nodeInfo, tf *topologyFilters) failure {
	if len(s.nominated) == 0 {
		return filter(e, ni, tf)
	}
	var sim *nodeInfo
	for _, n := range s.nominated[ni.name] {
		if n == e || n.priority < e.priority {
			continue
		}
		if sim == nil {
			sim = &s.sim
			simNode(sim, ni)
		}
		sim.addPod(&assignedPod{req: n.req, nonZero: n.nonZero, ports: n.ports})
	}
	if sim == nil {
		return filter(e, ni, tf)
	}
	return filter(e, sim, tf)
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
func (s *Scheduler) recordFailure(ctx context.Context, key string, pod *v1.Pod, msg string, pre preemption) {
	var nominated *string
	switch {
	case pre.node != "":
		s.evictVictims(ctx, pod, pre)
		nominated = &pre.node
	case pre.clearNomination:
		none := ""
		nominated = &none
	}
	s.events.Eventf(pod, v1.EventTypeWarning, "FailedScheduling", "Scheduling", true, "%s", msg)
	gone := false
	if patch := podScheduledPatch(pod, msg, metav1.NewTime(s.cfg.Clock.Now()), nominated); patch != nil {
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
func podScheduledPatch(pod *v1.Pod, msg string, now metav1.Time, nominated *string) []byte {
	cond := v1.PodCondition{
		Type:               v1.PodScheduled,
		Status:             v1.ConditionFalse,
		Reason:             v1.PodReasonUnschedulable,
		Message:            msg,
		LastTransitionTime: now,
	}
	status := map[string]any{}
	if nominated != nil && *nominated != pod.Status.NominatedNodeName {
		if *nominated == "" {
			status["nominatedNodeName"] = nil
		} else {
			status["nominatedNodeName"] = *nominated
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != v1.PodScheduled {
			continue
		}
		if c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message && len(status) == 0 {
			return nil
		}
		if c.Status == cond.Status {
			cond.LastTransitionTime = c.LastTransitionTime
		}
	}
	status["conditions"] = []v1.PodCondition{cond}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   status,
	})
	if err != nil {
		return nil
	}
	return patch
}

// evictVictims carries out a preemption as kube's prepareCandidate does:
// each victim not already terminating gets the DisruptionTarget condition,
// then is deleted, then a Preempted event; the lower-priority pods
// nominated to the node lose their nomination.
func (s *Scheduler) evictVictims(ctx context.Context, preemptor *v1.Pod, pre preemption) {
	pods := s.client.CoreV1().Pods
	for _, victim := range pre.victims {
		if victim.DeletionTimestamp != nil {
			continue
		}
		cond := v1.PodCondition{
			Type:               v1.DisruptionTarget,
			Status:             v1.ConditionTrue,
			Reason:             v1.PodReasonPreemptionByScheduler,
			Message:            fmt.Sprintf("%s: preempting to accommodate a higher priority pod", preemptor.Spec.SchedulerName),
			LastTransitionTime: metav1.NewTime(s.cfg.Clock.Now()),
		}
		// As kube, the condition is written only when it changes.
		if !hasCondition(victim, cond) {
			patch, err := json.Marshal(map[string]any{
				"metadata": map[string]any{"uid": victim.UID},
				"status":   map[string]any{"conditions": []v1.PodCondition{cond}},
			})
			if err != nil {
				continue
			}
			if _, err := pods(victim.Namespace).Patch(ctx, victim.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
				if !apierrors.IsNotFound(err) && ctx.Err() == nil {
					s.log.Info("setting DisruptionTarget on a preemption victim failed", "pod", victim.Namespace+"/"+victim.Name, "err", err)
				}
				continue
			}
		}
		uid := victim.UID
		if err := pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
			if !apierrors.IsNotFound(err) && ctx.Err() == nil {
				s.log.Info("deleting a preemption victim failed", "pod", victim.Namespace+"/"+victim.Name, "err", err)
			}
			continue
		}
		s.events.EventfRelated(victim, preemptor, v1.EventTypeNormal, "Preempted", "Preempting", "Preempted by pod %v on node %v", preemptor.UID, pre.node)
	}
	s.metrics.preemptionVictims(len(pre.victims))
	for _, p := range pre.unnominated {
		if p.Status.NominatedNodeName == "" {
			continue
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": p.UID},
			"status":   map[string]any{"nominatedNodeName": nil},
		})
		if err != nil {
			continue
		}
		if _, err := pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			s.log.Info("clearing nominatedNodeName failed", "pod", p.Namespace+"/"+p.Name, "err", err)
		}
	}
}

// hasCondition reports whether pod already has cond's type with its
// status, reason and message.
func hasCondition(pod *v1.Pod, cond v1.PodCondition) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == cond.Type {
			return c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message
		}
	}
	return false
}
