// Package podgc is corekube's pod garbage collector, kube's pod GC
// controller (pkg/controller/podgc) as of v1.32. Every Period it:
//
//   - deletes terminated pods (phase Succeeded or Failed) beyond
//     TerminatedPodThreshold (kube's --terminated-pod-gc-threshold, 12500),
//     evicted ones first, then the oldest;
//   - deletes terminating pods on nodes that are not Ready and carry the
//     node.kubernetes.io/out-of-service taint (kube's non-graceful node
//     shutdown);
//   - deletes pods bound to nodes that no longer exist, once the node has
//     been missing for Quarantine (40s) and a fresh read from the API
//     server confirms it, with the DisruptionTarget condition (reason
//     DeletionByPodGC, "PodGC: node no longer exists");
//   - deletes terminating pods that were never scheduled.
//
// A pod that is not yet terminal is first set to phase Failed (with the
// condition, if any) through pods/status; every deletion is forced (grace
// period 0), with the pod's UID as precondition. Kube writes the status
// with server-side apply, which corekube does not serve; a strategic
// merge patch of the same fields does the same here.
package podgc
