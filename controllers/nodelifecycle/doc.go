// Package nodelifecycle is corekube's node lifecycle controller: kube's
// node lifecycle controller (pkg/controller/nodelifecycle) with the
// taint-based eviction of kube's taint eviction controller
// (pkg/controller/tainteviction), for the API subset corekube serves.
//
// # Node health
//
// A node is healthy while its kubelet renews its Lease in kube-node-lease
// or posts a new heartbeat in its Ready condition. Every MonitorPeriod the
// controller looks at each node; when neither happened for GracePeriod
// (StartupGracePeriod for a node that never posted a Ready condition), it
// sets the node's Ready, MemoryPressure, DiskPressure and PIDPressure
// conditions to Unknown with reason NodeStatusUnknown and message
// "Kubelet stopped posting node status." (NodeStatusNeverUpdated and
// "Kubelet never posted node status." for conditions never posted), marks
// the node's pods not Ready, and records NodeNotReady events. As in kube,
// timestamps are the controller's own observations, not the kubelet's
// clock, and a controller that starts counts from its start.
//
// # Taints
//
// As kube's TaintNodesByCondition, every node carries the NoSchedule taint
// of its conditions: node.kubernetes.io/not-ready (Ready False),
// node.kubernetes.io/unreachable (Ready Unknown), memory-pressure,
// disk-pressure, pid-pressure, network-unavailable, and
// node.kubernetes.io/unschedulable when cordoned; they go when the
// condition clears.
//
// A node whose Ready is False or Unknown also gets the NoExecute taint
// not-ready or unreachable (the two exclude each other), removed when it
// is Ready again. These taints are added at EvictionRate nodes per second
// per zone (topology.kubernetes.io/region and zone labels), slowed to
// SecondaryEvictionRate (or stopped in clusters of at most
// LargeClusterThreshold nodes) in a zone where at least
// UnhealthyZoneThreshold of the nodes (and more than two) are not ready,
// and stopped altogether, with the existing ones removed, when every node
// of every zone is not ready: the controller then assumes its own network
// is at fault. Nodes labelled node.kubernetes.io/exclude-disruption do not
// count in their zone's health.
//
// # Taint-based eviction
//
// A pod on a node with NoExecute taints it does not tolerate is deleted
// (gracefully, after the DisruptionTarget condition with reason
// DeletionByTaintManager is added and a TaintManagerEviction event
// recorded). A pod that tolerates all of them with tolerationSeconds is
// deleted when the shortest of those has passed since the controller saw
// the taint; without tolerationSeconds it stays. The API server gives
// every pod, through the DefaultTolerationSeconds admission plugin (package
// admission), tolerations for the not-ready and unreachable NoExecute
// taints with tolerationSeconds 300, as kube's does. A pod on a dead node
// therefore gets its deletionTimestamp after 300s; with no kubelet to finish the deletion it stays
// terminating, as in kube, until the node is deleted (pod GC) or gets the
// out-of-service taint.
package nodelifecycle
