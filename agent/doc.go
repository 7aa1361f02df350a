// Package agent runs simulated nodes: node agents that behave, on the wire,
// like the kubelet v1.32. They are ordinary API clients (client-go over
// HTTP, from a *rest.Config) and never touch server internals.
//
// For each node the agent
//   - registers the Node as the kubelet does (capacity and allocatable,
//     nodeInfo with kubeletVersion and containerRuntimeVersion sim://1.0.0,
//     InternalIP and Hostname addresses, a /24 podCIDR, the
//     kubernetes.io/{hostname,os,arch} labels plus Config.Labels,
//     Config.Taints, and where its kubelet API is: the Hostname address
//     (Config.KubeletAdvertiseHost, the machine all the process's nodes
//     run on) and daemonEndpoints.kubeletEndpoint.Port), or adopts an
//     existing one, updating the port and the rest of its status at once
//     (a restarted process listens elsewhere) and dropping the
//     node.corekube.io/kubelet-endpoint annotation of earlier versions;
//   - renews its Lease in kube-node-lease every 10s (leaseDurationSeconds 40);
//   - computes its status every 10s (conditions MemoryPressure, as the
//     eviction manager below finds it, DiskPressure, PIDPressure, Ready)
//     and writes it, as a strategic merge patch of
//     nodes/status, when it changed or every 5 minutes; Ready turns False
//     ("PLEG is not healthy: ...") when the node's PLEG has not relisted for
//     3 minutes;
//   - runs the pods bound to it on a simulated runtime (package
//     agent/runtime/sim: containers run a tiny shell in virtual time), with
//     a generic PLEG (package agent/pleg) that relists every second and wakes
//     the pods whose containers changed;
//   - admits each pod before running it, as the kubelet's canAdmitPod
//     (node informer for labels and taints; the pods it admitted that have
//     not ended): first the eviction manager's (under memory pressure a
//     BestEffort pod that does not tolerate the memory-pressure taint is
//     rejected, reason Evicted, "The node had condition:
//     [MemoryPressure]. "; critical pods always pass), then the OS checks, resources (pod count, cpu, memory,
//     ephemeral storage, hugepages and known extended resources against
//     allocatable), required node affinity and nodeSelector, host ports,
//     NoExecute taints; a pod that does not fit (one created with
//     spec.nodeName, bypassing the scheduler) is rejected: phase Failed,
//     reason OutOfcpu, NodeAffinity, TaintToleration, ..., message "Pod was
//     rejected: <the kubelet's message>", and a Warning event;
//   - runs init containers in order, then the containers (sidecars, i.e.
//     init containers with restartPolicy Always, start in their turn, run
//     beside the containers and stop after them);
//   - writes pod status through pods/status exactly as the kubelet computes
//     it (phase per restartPolicy, conditions incl. readiness gates,
//     container statuses with state, last state, restart count, image IDs,
//     termination messages; IPs from the node's podCIDR, start time, QoS),
//     restarts containers with back-off (CrashLoopBackOff), restarts a
//     running container whose image changed ("Container c definition
//     changed, will be restarted", whatever the restart policy), runs startup,
//     liveness and readiness probes (exec probes run through the simulated
//     shell in the container's files; HTTP, TCP and gRPC probes succeed while
//     the container runs; lifecycle hooks likewise: exec through the shell,
//     httpGet answered while the container runs, sleep, tcpSocket failing as
//     the kubelet does not run it; a failed postStart kills the container,
//     FailedPostStartHook, a failed preStop is FailedPreStopHook),
//     enforces activeDeadlineSeconds, stops deleted
//     pods within their grace period (preStop, SIGTERM, SIGKILL; sidecars
//     last), then deletes them with gracePeriodSeconds=0 and a UID
//     precondition;
//   - evicts pods under node memory pressure (below);
//   - serves the kubelet's container logs (below);
//   - records the kubelet's events (Pulling, Pulled with the image's size,
//     Created, Started, Killing, BackOff, Unhealthy, Failed,
//     FailedPostStartHook, ...; for nodes, at every start, Starting,
//     NodeAllocatableEnforced, NodeHasSufficientMemory,
//     NodeHasNoDiskPressure, NodeHasSufficientPID, then NodeReady and
//     NodeNotReady as Ready changes; RegisteredNode is left to the node
//     lifecycle controller, as in kube).
//
// One process carries many nodes cheaply: one pod informer for all of them
// (bound pods; several processes sharing a cluster's nodes each drop the
// others' pods and Nodes from the list and the watch before they reach the
// cache, listwatch.go), one node informer, one work queue of pod syncs served by
// a few workers (no goroutine per pod or per node), one queue of node tasks
// (registration, lease renewals, status updates) with a few workers, one
// goroutine relisting every node's PLEG, and a few event writers. Nothing
// in a node needs a timer of its own: containers advance in virtual time
// when listed, and future work (back-off ends, probes, deadlines, renewals)
// is a delayed queue item.
//
// # Node-pressure eviction
//
// Each node runs the kubelet's eviction manager (eviction.go) every
// Config.EvictionMonitoringPeriod (10s) as a node task. It observes
// memory.available: the node's memory capacity minus the working sets of
// its running containers, which the simulated runtime reports (a
// container's SIM_MEMORY_USAGE env var, a quantity, else what a running
// stress --vm-bytes holds, else 1Mi; see package sim). The thresholds are
// the kubelet's flags: --eviction-hard (default
// memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,
// nodefs.inodesFree<5%), --eviction-soft with --eviction-soft-grace-period,
// and --eviction-minimum-reclaim (a threshold that drove evictions stays
// met until the signal is above it by that much), parsed with the
// kubelet's rules and errors; only memory.available is
// ever observed (the simulated nodes have no disks or PIDs to run out of).
// A met threshold sets MemoryPressure True ("KubeletHasInsufficientMemory",
// "kubelet has insufficient memory available", event
// NodeHasInsufficientMemory) until --eviction-pressure-transition-period
// (5m) has passed since it was last met; the node lifecycle controller
// taints the node node.kubernetes.io/memory-pressure:NoSchedule from the
// condition, as in kube. Once a threshold has been met for its grace
// period (none for hard ones), one pod per round is evicted, in the
// kubelet's order: pods using more memory than they request first, then
// lower priority, then the larger use above the request; critical pods
// (system-critical priority, static or mirror) are skipped. The pod is
// stopped within 2s (the kubelet's 1s override for hard thresholds; for
// soft ones --eviction-max-pod-grace-period or the pod's own grace period
// when shorter; never under 2s), gets the DisruptionTarget condition (TerminationByKubelet) at
// once and, when its containers have stopped, phase Failed, reason
// Evicted and the kubelet's message ("The node was low on resource:
// memory. Threshold quantity: 100Mi, available: 51200Ki. Container c was
// using 300Mi, request is 0, has larger consumption of memory. "), also
// the message of the Warning event Evicted. As the kubelet's eviction
// blocks until the pod is gone, no other pod is evicted while it still
// runs. PodDisruptionBudgets are not consulted, as in kube. Allocatable
// memory is the capacity minus the hard memory.available threshold.
//
// # Kubelet API
//
// Each process runs one HTTPS server for all its nodes (Config.KubeletListen,
// default 127.0.0.1:0; reached at Config.KubeletAdvertiseHost, default the
// listening host, which must be given when the listen address is every
// interface), with a self-signed certificate unless given one. Callers
// authenticate as the kubelet's (a client certificate of Config.ClientCA,
// default the cluster CA, or a bearer token through a TokenReview;
// anonymous ones get 401) and are authorized by a SubjectAccessReview on
// nodes/metrics, nodes/stats, nodes/log or nodes/proxy (kubeletauth.go);
// /healthz is open. The API server's pods/log proxies to it:
//
//   - GET /containerLogs/{namespace}/{pod}/{container}?follow=&previous=&
//     timestamps=&tailLines=&sinceSeconds=&sinceTime=&limitBytes= answers as
//     the kubelet's getContainerLogs: 404 "pod %q does not exist\n" or
//     "container %q not found in pod %q\n", then the kubelet's
//     validateContainerLogStatus on the pod's status as the agent is
//     writing it or last wrote it, as the kubelet's status manager (400
//     "container %q in pod %q is not available", "... is waiting to
//     start: ...", "previous terminated container %q in pod %q not found",
//     ...), bad query values 400; else 200 text/plain, flushed after every
//     write, read by the runtime's ReadLogs (tail, since, limitBytes,
//     timestamps as the kubelet's ReadLogs). A followed log streams until
//     the container exits or is removed, the client goes away or Run ends;
//   - GET /healthz: "ok";
//   - GET /metrics: the kubelet's metrics (Prometheus text format), for
//     every node of the process (below).
//
// # Metrics
//
// The kubelet v1.32's metrics, under its names, help texts ("[ALPHA] ..."),
// labels and buckets, registered into Config.Metrics (nil: a registry of
// the agent's own with the Go and process collectors; `corekube up` passes
// the API server's, so its /metrics has them too):
// kubelet_node_name{node}, kubelet_running_pods,
// kubelet_running_containers{container_state} (created, running, exited,
// unknown, as the PLEG's last relist counted them),
// kubelet_pleg_relist_duration_seconds, kubelet_pleg_relist_interval_seconds,
// kubelet_pleg_last_seen_seconds, kubelet_pleg_discard_events,
// kubelet_pod_worker_duration_seconds{operation_type} (create, update,
// sync, kill, terminated), kubelet_pod_start_duration_seconds (first seen to Running),
// kubelet_pod_start_sli_duration_seconds and
// kubelet_pod_start_total_duration_seconds (creation to all containers
// started as seen through the watch, without and with image pulls),
// kubelet_started_pods_total, kubelet_started_pods_errors_total,
// kubelet_started_containers_total{container_type},
// kubelet_evictions{eviction_signal}; and, for the kubelet
// API server, kubelet_http_requests_total, kubelet_http_requests_duration_seconds
// and kubelet_http_inflight_requests{method,path,server_type,long_running}.
//
// Where kube runs one kubelet per node, with one series of each, the
// agent runs many nodes in one process: every per-node series has a node
// label with the node's name (the label kube's kubelet_node_name has), so
// sum by (node) or drop it to aggregate; the kubelet API's request
// metrics are the process's and have none. Each node's series are created
// with the node, so a pod sync observes them without a label lookup.
//
// The simulated runtime keeps each container's last 1,000 lines (256 KiB at
// most) for as long as it keeps the container: the agent keeps the newest
// exited container of each name beside the current one, which is what
// previous=true reads (lastState.terminated.containerID).
//
// # Restarts
//
// An agent that restarts (SIGKILL included) is a restarted kubelet, not a
// rebooted machine: it adopts its Nodes (same boot ID, Ready's transition
// time kept) and the pods they were running. The simulated runtime dies
// with the process, so the agent rebuilds it, before its first pod sync,
// from the status it last wrote for each pod that has not ended (see
// adopt.go): sandboxes with their IPs, containers with their IDs,
// attempts, images and times (running ones replayed from their start),
// waiting reasons and CrashLoopBackOff back-off, and the startup and
// readiness results the status shows. The pods' status does not change: no
// restart is counted and nothing flaps.
//
// Everything long-running belongs to Agent.Run and stops when its context
// ends; Run returns after the kubelet API server has shut down.
package agent
