package e2e

import (
	"strings"
	"testing"
	"time"
)

// evictionPods: a burstable pod within its request, a BestEffort pod, then
// (the second manifest) a burstable pod over its request that leaves the
// 1Gi node less than the 300Mi hard threshold (1024-450-200-100 = 274Mi).
const evictionPods = `apiVersion: v1
kind: Pod
metadata: {name: ev-steady}
spec:
  containers:
  - name: app
    image: busybox
    command: [sleep, "3600"]
    env: [{name: SIM_MEMORY_USAGE, value: 450Mi}]
    resources: {requests: {memory: 500Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: ev-besteffort}
spec:
  containers:
  - name: app
    image: busybox
    command: [sleep, "3600"]
    env: [{name: SIM_MEMORY_USAGE, value: 200Mi}]
`

const evictionSpike = `apiVersion: v1
kind: Pod
metadata: {name: ev-spike}
spec:
  containers:
  - name: app
    image: busybox
    command: [sleep, "3600"]
    env: [{name: SIM_MEMORY_USAGE, value: 100Mi}]
    resources: {requests: {memory: 50Mi}}
`

// TestNodePressureEviction drives the agents' node-pressure eviction with
// kubectl against `corekube up` with one 1Gi node and a 300Mi hard
// threshold: the node turns MemoryPressure (kubectl describe node shows the
// condition and the taint), the BestEffort pod is evicted (Failed, reason
// Evicted, the kubelet's message and Evicted event) while the others run
// on, and the pressure clears after the transition period.
func TestNodePressureEviction(t *testing.T) {
	bin := kubectlPath(t)
	p := startUpAt(t, t.TempDir(), freeAddr(t), "--nodes", "1", "--capacity", "memory=1Gi",
		"--eviction-hard", "memory.available<300Mi", "--eviction-monitoring-period", "200ms",
		"--eviction-pressure-transition-period", "3s", "--node-status-update-frequency", "200ms",
		"--lease-renew-interval", "1s", "--pleg-relist-period", "200ms")
	k := p.kc(t, bin)
	k.okWithin(30*time.Second, "wait", "--for=condition=Ready", "node/node-1", "--timeout=25s")
	k.ok("apply", "-f", k.file("pods.yaml", evictionPods))
	k.okWithin(40*time.Second, "wait", "--for=condition=Ready", "pod/ev-steady", "pod/ev-besteffort", "--timeout=35s")
	k.expect("False KubeletHasSufficientMemory", "get", "node", "node-1", "-o",
		`jsonpath={.status.conditions[?(@.type=="MemoryPressure")].status} {.status.conditions[?(@.type=="MemoryPressure")].reason}`)

	k.ok("apply", "-f", k.file("spike.yaml", evictionSpike))
	k.poll(30*time.Second, "MemoryPressure and its taint in kubectl describe node", func(out string) bool {
		return strings.Contains(out, "node.kubernetes.io/memory-pressure:NoSchedule") &&
			strings.Contains(out, "KubeletHasInsufficientMemory") && strings.Contains(out, "kubelet has insufficient memory available")
	}, "describe", "node", "node-1")

	k.okWithin(30*time.Second, "wait", "--for=jsonpath={.status.phase}=Failed", "pod/ev-besteffort", "--timeout=25s")
	msg := "The node was low on resource: memory. Threshold quantity: 300Mi, available: 274Mi. " +
		"Container app was using 200Mi, request is 0, has larger consumption of memory. "
	k.expect("Evicted|"+msg+"|True TerminationByKubelet", "get", "pod", "ev-besteffort", "-o",
		`jsonpath={.status.reason}|{.status.message}|{.status.conditions[?(@.type=="DisruptionTarget")].status} {.status.conditions[?(@.type=="DisruptionTarget")].reason}`)
	k.expect("Warning Evicted "+msg, "get", "events", "--field-selector", "involvedObject.name=ev-besteffort,reason=Evicted",
		"-o", "jsonpath={.items[0].type} {.items[0].reason} {.items[0].message}")

	k.poll(30*time.Second, "MemoryPressure False and the taint gone", func(out string) bool {
		return !strings.Contains(out, "memory-pressure") && strings.Contains(out, "KubeletHasSufficientMemory")
	}, "describe", "node", "node-1")
	k.expect("Running Running", "get", "pod", "ev-steady", "ev-spike", "-o", "jsonpath={.items[*].status.phase}")
	p.stop()
}
