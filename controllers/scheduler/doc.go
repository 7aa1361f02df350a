// Package scheduler is corekube's default-scheduler: it places pods whose
// spec.schedulerName is "default-scheduler" and that have no node yet,
// as kube-scheduler v1.32 does for the subset of the API corekube serves.
//
// # Placement
//
// The filters run in kube's plugin order and reject a node with kube's
// reasons:
//
//   - NodeUnschedulable: spec.unschedulable, unless the pod tolerates
//     node.kubernetes.io/unschedulable:NoSchedule ("node(s) were unschedulable").
//   - TaintToleration: the first NoSchedule or NoExecute taint the pod does
//     not tolerate ("node(s) had untolerated taint {key: value}"). A node
//     whose Ready condition is not True counts as carrying the taint the node
//     lifecycle controller gives it (node.kubernetes.io/not-ready, or
//     node.kubernetes.io/unreachable when Ready is Unknown), so pods that
//     tolerate it may still go there, as in kube.
//   - NodeAffinity: spec.nodeSelector and the required node affinity
//     (matchExpressions In, NotIn, Exists, DoesNotExist, Gt, Lt on labels,
//     matchFields on metadata.name) ("node(s) didn't match Pod's node
//     affinity/selector").
//   - NodePorts: host ports already used on the node ("node(s) didn't have
//     free ports for the requested pod ports").
//   - NodeResourcesFit: pod count, cpu, memory, ephemeral-storage and scalar
//     resources against the node's allocatable ("Too many pods",
//     "Insufficient cpu", ...). A pod's request is kube's: the sum over its
//     containers and sidecars, at least the largest init container (plus the
//     sidecars started before it), plus overhead.
//
// Feasible nodes are scored as kube's default profile does for these
// plugins: TaintToleration (PreferNoSchedule taints, weight 3),
// NodeAffinity (preferred terms, weight 2), NodeResourcesFit least
// allocated (weight 1) and NodeResourcesBalancedAllocation (weight 1).
// Ties go round robin. Like kube, a large cluster is searched from a
// rotating start until enough feasible nodes are found
// (percentageOfNodesToScore).
//
// When no node fits, the pod gets PodScheduled=False with reason
// Unschedulable and kube's message, for example
//
//	0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.
//
// and a FailedScheduling event; success is a binding through pods/binding
// and a Scheduled event ("Successfully assigned ns/pod to node").
// # Priority and preemption
//
// Pods are taken from the queue as kube's PrioritySort takes them: higher
// spec.priority first, then the one queued earliest (a pod that failed is
// queued again as of its failure).
//
// A pod that fits nowhere and whose spec.preemptionPolicy is not Never
// may preempt, as kube's DefaultPreemption does. Only nodes whose
// rejection removing pods could cure (ports, resources) are tried; on
// each, every pod of lower priority is taken away and, if the pod then
// fits, given back one by one while the pod still fits: first those
// whose eviction would violate a PodDisruptionBudget (read from an
// informer, best effort, as in kube), each group most important first
// (higher priority, then earlier start). The dry run stops, as kube's,
// once it has max(10% of those nodes, 100) candidates and one of them
// violates no budget. The node chosen has the fewest budget violations,
// then the lowest highest victim priority, the smallest sum of victim
// priorities, the fewest victims, and the latest start of its
// highest-priority victims; then the first found.
//
// The victims get the DisruptionTarget condition (reason
// PreemptionByScheduler) through pods/status, are deleted, and get a
// Preempted event ("Preempted by pod <uid> on node <node>"). The
// preemptor gets status.nominatedNodeName and waits, unbound, until the
// victims are gone; meanwhile its requests count on that node against
// pods of lower priority (kube's nominated pods), it tries that node
// first, and it preempts no more while a lower-priority pod there is
// still terminating because it was preempted ("preemption: not eligible
// due to a terminating pod on the nominated node."). Lower-priority pods nominated to the node lose
// their nomination. The FailedScheduling message of a pod that preempted
// has no preemption part; otherwise the part says why preemption did not
// help, node by node, as kube's does.
//
// Events are written as kube-scheduler's events.k8s.io recorder writes
// them (reportingComponent default-scheduler, action Scheduling or
// Binding, repeats counted in series).
//
// # Keeping up
//
// One pod informer (every pod not Succeeded or Failed) and one node
// informer feed an in-memory cache: per node the sum of the requests of
// the pods bound or being bound to it, its pod count and used host ports,
// updated as pods come and go, never recomputed per attempt. Pods waiting
// to be placed sit in a priority heap (those backing off first wait in a
// client-go delaying queue); one goroutine
// decides, a pool of workers talks to the API server (bindings, status
// patches), so a decision is assumed in the cache at once and the next
// pod does not wait for the network.
//
// A pod that does not fit is parked. It is tried again, after its back-off
// (1s doubling to 10s), when a node is added or changes, or a pod leaves a
// node, in a way that lets it fit that node; and in any case after
// MaxUnschedulableDuration (5 minutes), as kube's scheduling queue does.
//
// # Metrics
//
// With Config.Metrics, kube-scheduler's metrics under kube's names, help
// texts, labels and buckets: scheduler_schedule_attempts_total,
// scheduler_scheduling_attempt_duration_seconds, scheduler_pending_pods
// (counted from the pending pods when scraped, so that scheduling keeps no
// counts), scheduler_pod_scheduling_sli_duration_seconds,
// scheduler_pod_scheduling_attempts, scheduler_queue_incoming_pods_total
// scheduler_preemption_attempts_total (every run of the preemption
// post-filter) and scheduler_preemption_victims. Recording a
// placed pod costs about 0.5µs and no allocation (BenchmarkAttemptMetrics).
//
// # Not done
//
// Inter-pod affinity and anti-affinity, topology spread constraints, volumes,
// image locality, extenders and profiles other than the default one.
package scheduler
