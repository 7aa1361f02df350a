package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// updateStatus computes the node's status and, when it changed or the last
// write is older than NodeStatusReportFrequency (plus the random delay set
// at the last change, reportDelay), writes it as the kubelet does: a strategic merge patch of nodes/status against the node as the
// server has it.
func (n *node) updateStatus(ctx context.Context) error {
	now := n.a.clock.Now()
	n.mu.Lock()
	last, lastReport, delay := n.lastStatus, n.lastReport, n.reportDelay
	n.mu.Unlock()
	changed := true
	if last != nil {
		desired := n.desiredStatus(now, last)
		changed = !sameStatus(&desired, last)
		if !changed && now.Sub(lastReport) < n.a.cfg.NodeStatusReportFrequency+delay {
			return nil
		}
	}

	nodes := n.client.CoreV1().Nodes()
	// From the API server's cache (resourceVersion 0), as the kubelet's
	// first try does: these GETs are most of the node read load of a large
	// cluster, and the patch below merges onto whatever the server has.
	cur, err := nodes.Get(ctx, n.name, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("get node %s: %w", n.name, err)
	}
	updated := cur.DeepCopy()
	desired := n.desiredStatus(now, &cur.Status)
	// The agent's conditions replace theirs in place (the server's order
	// stays) or are appended; others (NetworkUnavailable, ...) stay.
	conds := append([]v1.NodeCondition(nil), cur.Status.Conditions...)
	for _, c := range desired.Conditions {
		if i := indexCondition(conds, c.Type); i >= 0 {
			conds[i] = c
			continue
		}
		conds = append(conds, c)
	}
	desired.Conditions = conds
	desired.Images = cur.Status.Images
	desired.VolumesInUse = cur.Status.VolumesInUse
	desired.VolumesAttached = cur.Status.VolumesAttached
	desired.Config = cur.Status.Config
	desired.RuntimeHandlers = cur.Status.RuntimeHandlers
	desired.Features = cur.Status.Features
	updated.Status = desired

	oldJSON, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	newJSON, err := json.Marshal(updated)
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Node{})
	if err != nil {
		return fmt.Errorf("node %s status patch: %w", n.name, err)
	}
	written, err := nodes.Patch(ctx, n.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("patch node %s status: %w", n.name, err)
	}
	// The status setters record the pressure transitions.
	for _, t := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		o, w := findNodeCondition(&cur.Status, t), findNodeCondition(&written.Status, t)
		if o != nil && w != nil && o.Status != w.Status {
			if e := pressureEvent(t, w.Status); e != "" {
				n.a.events.nodeStatusEvent(n, e)
			}
		}
	}
	oldReady, newReady := findNodeCondition(&cur.Status, v1.NodeReady), findNodeCondition(&written.Status, v1.NodeReady)
	if newReady != nil && (oldReady == nil || oldReady.Status != newReady.Status) {
		if newReady.Status == v1.ConditionTrue {
			n.a.events.nodeStatusEvent(n, "NodeReady")
		} else {
			n.a.events.nodeStatusEvent(n, "NodeNotReady")
			n.a.log.Info("node became not ready", "node", n.name, "message", newReady.Message)
		}
	}
	n.mu.Lock()
	n.lastStatus, n.lastReport = written.Status.DeepCopy(), now
	// A change starts a new random phase; a periodic report keeps it.
	n.reportDelay = 0
	if changed {
		n.reportDelay = reportDelay(n.a.cfg.NodeStatusReportFrequency)
	}
	n.mu.Unlock()
	return nil
}

// reportDelay is a random delay in [-period/2, period/2), the kubelet's
// spread of node status reports after a change.
func reportDelay(period time.Duration) time.Duration {
	return time.Duration(float64(period) * (rand.Float64() - 0.5))
}

func indexCondition(conds []v1.NodeCondition, t v1.NodeConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}
