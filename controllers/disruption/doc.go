// Package disruption is kube's disruption controller
// (pkg/controller/disruption in kube-controller-manager v1.32): it keeps the
// status of every policy/v1 PodDisruptionBudget true, which is what the
// API server's pods/eviction subresource decides on.
//
// For each budget, from the pods its selector matches in its namespace:
//
//   - expectedPods: the number of matching pods. kube takes the scale of the
//     pods' controllers (ReplicaSets, Deployments, StatefulSets, ...) for
//     maxUnavailable and percentage minAvailable; corekube serves no
//     workload controllers, so every budget counts its pods, as kube does
//     for an integer minAvailable.
//   - desiredHealthy: minAvailable (a percentage of expectedPods rounded up),
//     or expectedPods minus maxUnavailable (a percentage rounded up), never
//     below 0.
//   - currentHealthy: Ready pods that are not being deleted and not recorded
//     in disruptedPods.
//   - disruptionsAllowed: currentHealthy - desiredHealthy, never below 0, and
//     0 while expectedPods is 0.
//   - disruptedPods: the evictions the API server approved; an entry goes
//     when its pod is gone or being deleted, or after DeletionTimeout (2
//     minutes) without that (a Warning event NotDeleted on the pod).
//   - observedGeneration, and the DisruptionAllowed condition: True/
//     SufficientPods, False/InsufficientPods, or False/SyncFailed (with
//     disruptionsAllowed forced to 0) when the status cannot be computed.
//
// It also resets, after 2 minutes, a DisruptionTarget=True pod condition
// left on a pod that was not deleted after all (an eviction whose delete
// failed). Status is written only when it changes, guarded by the
// resourceVersion the controller read; a conflict requeues the budget.
// Events: NoPods, NotDeleted, MultiplePodDisruptionBudgets.
package disruption
