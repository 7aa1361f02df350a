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
//   - PodTopologySpread: each DoNotSchedule constraint of the pod
//     (maxSkew, topologyKey, labelSelector plus matchLabelKeys, minDomains,
//     nodeAffinityPolicy, nodeTaintsPolicy): the pods its selector matches
//     in the node's domain, plus the pod if it matches, may exceed the
//     global minimum (0 while there are fewer domains than minDomains) by
//     maxSkew at most ("node(s) didn't match pod topology spread
//     constraints", or "... (missing required label)" when the node lacks
//     the key). Domains are the values of the key on the nodes that have
//     every constraint's key and pass the inclusion policies.
//   - InterPodAffinity: the required affinity terms (every term's domain
//     on the node must hold a pod matching all terms, unless no pod does
//     and the pod matches them itself: "node(s) didn't match pod affinity
//     rules"), the required anti-affinity terms ("node(s) didn't match pod
//     anti-affinity rules") and the existing pods' required anti-affinity
//     terms that select the pod ("node(s) didn't satisfy existing pods
//     anti-affinity rules"). Terms cover the pod's namespace, or their
//     namespaces and the namespaces their namespaceSelector selects (the
//     scheduler watches namespaces for their labels); matchLabelKeys and
//     mismatchLabelKeys were merged into the selector when the pod was
//     created, as kube-apiserver does.
//
// Feasible nodes are scored as kube's default profile does for these
// plugins: TaintToleration (PreferNoSchedule taints, weight 3),
// NodeAffinity (preferred terms, weight 2), NodeResourcesFit least
// allocated (weight 1), NodeResourcesBalancedAllocation (weight 1),
// PodTopologySpread (weight 2: the ScheduleAnyway constraints, fewer
// matching pods in the node's domains is better, each weighed by the log
// of the number of domains) and InterPodAffinity (weight 2: the weights of
// the pod's preferred terms, and of the existing pods' preferred terms and
// required affinity terms (weight 1) that match it, summed per domain and
// scaled between the lowest and highest node).
//
// A pod without spread constraints gets kube's system default ones
// (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway). Kube applies them
// when a Service, ReplicationController, ReplicaSet or StatefulSet selects
// the pod and counts the pods all of those select; corekube applies them
// when the pod's controller is a ReplicaSet, StatefulSet or
// ReplicationController and counts that controller's pods, which is the
// same set unless selectors overlap. Pods that only a Service selects are
// not spread by default.
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
// updated as pods come and go, never recomputed per attempt. For the
// pod-topology plugins each node also lists its pods, those with inter-pod
// affinity terms apart, and counts its pods per controller; pods sharing
// labels share one label set, which remembers the latest selectors'
// verdicts, and pods with equal inter-pod affinity terms share them, which
// remember whether they select the pod of the current attempt.
// PodTopologySpread and InterPodAffinity count over the cluster once per
// attempt (kube's PreFilter and PreScore), and only when the pod has
// constraints or terms, a controller (default spreading) or some existing
// pod has terms: other pods cost nothing more. Pods waiting to be placed
// sit in a priority heap (those backing off first wait in a client-go
// delaying queue); one goroutine
// decides, a pool of workers talks to the API server (bindings, status
// patches), so a decision is assumed in the cache at once and the next
// pod does not wait for the network.
//
// A pod that does not fit is parked. It is tried again, after its back-off
// (1s doubling to 10s), when a node is added or changes, or a pod leaves
// or (while pods wait) arrives on a node or changes its labels there, and
// the node now passes the pod's node-level filters (the pod-topology
// filters are not checked there: a pod coming or going is what a spread
// or affinity constraint waits for); a namespace's labels changing
// retries nobody; and in any case after
// MaxUnschedulableDuration (5 minutes), as kube's scheduling queue does.
//
// # Metrics
//
// With Config.Metrics, kube-scheduler's metrics under kube's names, help
// texts, labels and buckets: scheduler_schedule_attempts_total,
// scheduler_scheduling_attempt_duration_seconds, scheduler_pending_pods
// (counted from the pending pods when scraped, so that scheduling keeps no
// counts), scheduler_pod_scheduling_sli_duration_seconds,
// scheduler_pod_scheduling_attempts, scheduler_queue_incoming_pods_total,
// scheduler_preemption_attempts_total (every run of the preemption
// post-filter) and scheduler_preemption_victims. Recording a
// placed pod costs about 0.5µs and no allocation (BenchmarkAttemptMetrics).
//
// # Not done
//
// Volumes, image locality, extenders and profiles other than the default
// one. Preemption's dry run checks resources and ports with the victims
// removed, not the pod-topology filters as kube's does (it tries only the
// nodes that failed on resources or ports).
package scheduler
