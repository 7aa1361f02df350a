package nodelifecycle

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// labelExcludeDisruption keeps a node out of its zone's health count.
const labelExcludeDisruption = "node.kubernetes.io/exclude-disruption"

// zoneState is kube's zone health state.
type zoneState string

const (
	stateInitial           zoneState = "Initial"
	stateNormal            zoneState = "Normal"
	stateFullDisruption    zoneState = "FullDisruption"
	statePartialDisruption zoneState = "PartialDisruption"
)

// zoneKey is kube's GetZoneKey: region and zone, "" when the node has
// neither label.
func zoneKey(node *v1.Node) string {
	region := node.Labels[v1.LabelTopologyRegion]
	if region == "" {
		region = node.Labels[v1.LabelFailureDomainBetaRegion]
	}
	zone := node.Labels[v1.LabelTopologyZone]
	if zone == "" {
		zone = node.Labels[v1.LabelFailureDomainBetaZone]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// computeZoneState is kube's ComputeZoneState: no ready node is a full
// disruption; more than two not ready and at least the threshold's share
// a partial one.
func (c *Controller) computeZoneState(conditions []*v1.NodeCondition) zoneState {
	ready, notReady := 0, 0
	for _, cond := range conditions {
		if cond != nil && cond.Status == v1.ConditionTrue {
			ready++
		} else {
			notReady++
		}
	}
	switch {
	case ready == 0 && notReady > 0:
		return stateFullDisruption
	case notReady > 2 && float64(notReady)/float64(notReady+ready) >= c.cfg.UnhealthyZoneThreshold:
		return statePartialDisruption
	default:
		return stateNormal
	}
}

// zoneRate is the NoExecute tainting rate for a zone of size nodes in
// state (kube's setLimiterInZone).
func (c *Controller) zoneRate(size int, state zoneState) float64 {
	switch state {
	case statePartialDisruption:
		if size > c.cfg.LargeClusterThreshold {
			return c.cfg.SecondaryEvictionRate
		}
		return 0
	default:
		return c.cfg.EvictionRate
	}
}

// handleDisruption is kube's: it follows each zone's state and sets its
// tainting rate; when every zone is fully disrupted it stops tainting and
// removes the NoExecute taints (the fault is more likely ours than every
// node's), and when that ends it restarts every node's grace period.
func (c *Controller) handleDisruption(ctx context.Context, zoneConditions map[string][]*v1.NodeCondition, nodes []*v1.Node) {
	c.mu.Lock()
	newStates := map[string]zoneState{}
	allAreFullyDisrupted := true
	for zone, conds := range zoneConditions {
		state := c.computeZoneState(conds)
		if state != stateFullDisruption {
			allAreFullyDisrupted = false
		}
		newStates[zone] = state
		if _, ok := c.zoneStates[zone]; !ok {
			c.zoneStates[zone] = stateInitial
		}
	}
	allWasFullyDisrupted := true
	for zone, state := range c.zoneStates {
		if _, ok := zoneConditions[zone]; !ok {
			delete(c.zoneStates, zone)
			continue
		}
		if state != stateFullDisruption {
			allWasFullyDisrupted = false
		}
	}
	if allAreFullyDisrupted && allWasFullyDisrupted {
		c.mu.Unlock()
		return
	}
	switch {
	case allAreFullyDisrupted:
		c.log.Warn("all nodes are not ready: entering disruption mode, no NoExecute taints")
		for zone := range c.zoneStates {
			if z := c.tainters[zone]; z != nil {
				z.setRate(0, c.cfg.Clock)
			}
			c.zoneStates[zone] = stateFullDisruption
		}
		c.mu.Unlock()
		for _, node := range nodes {
			if err := c.markNodeAsReachable(ctx, node); err != nil && ctx.Err() == nil {
				c.log.Info("removing NoExecute taints failed", "node", node.Name, "err", err)
			}
		}
		return
	case allWasFullyDisrupted:
		c.log.Info("some nodes are ready again: leaving disruption mode")
		now := c.cfg.Clock.Now()
		for name, h := range c.health {
			copied := *h
			copied.probeTimestamp, copied.readyTransitionTimestamp = now, now
			c.health[name] = &copied
		}
		for zone := range c.zoneStates {
			if z := c.tainters[zone]; z != nil {
				z.setRate(c.zoneRate(len(zoneConditions[zone]), newStates[zone]), c.cfg.Clock)
			}
			c.zoneStates[zone] = newStates[zone]
		}
	default:
		for zone, state := range c.zoneStates {
			if newStates[zone] == state {
				continue
			}
			c.log.Info("zone changed state", "zone", zone, "state", newStates[zone])
			if z := c.tainters[zone]; z != nil {
				z.setRate(c.zoneRate(len(zoneConditions[zone]), newStates[zone]), c.cfg.Clock)
			}
			c.zoneStates[zone] = newStates[zone]
		}
	}
	c.mu.Unlock()
}
