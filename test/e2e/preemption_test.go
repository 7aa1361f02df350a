package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestPreemption: on a one-node `corekube up`, a pod of high priority
// that does not fit preempts the running pod of low priority: the victim
// gets the DisruptionTarget condition and a Preempted event, its agent
// stops it, and the preemptor, nominated to the node meanwhile, then runs
// there.
func TestPreemption(t *testing.T) {
	k := startUpAt(t, t.TempDir(), freeAddr(t), "--nodes", "1").kc(t, kubectlPath(t))
	k.ok("wait", "--for=condition=Ready", "node/node-1", "--timeout=30s")

	// A priority comes from a PriorityClass once the Priority admission
	// plugin is there; before, spec.priority is taken as given.
	priority := func(value int) string { return fmt.Sprintf("  priority: %d", value) }
	if _, _, err := k.run("get", "priorityclasses"); err == nil {
		k.ok("apply", "-f", k.file("classes.yaml", lines(
			"apiVersion: scheduling.k8s.io/v1", "kind: PriorityClass", "metadata:", "  name: e2e-low", "value: 1", "---",
			"apiVersion: scheduling.k8s.io/v1", "kind: PriorityClass", "metadata:", "  name: e2e-high", "value: 1000", "")))
		priority = func(value int) string {
			if value == 1 {
				return "  priorityClassName: e2e-low"
			}
			return "  priorityClassName: e2e-high"
		}
	}
	pod := func(name string, prio int, cpu string) string {
		return lines("apiVersion: v1", "kind: Pod", "metadata:", "  name: "+name, "spec:", priority(prio),
			"  terminationGracePeriodSeconds: 1",
			"  containers:", "  - name: app", "    image: nginx:1.27", "    resources:", "      requests:", "        cpu: "+cpu, "")
	}
	k.ok("apply", "-f", k.file("low.yaml", pod("low", 1, "3")))
	k.ok("wait", "--for=condition=Ready", "pod/low", "--timeout=30s")
	k.ok("apply", "-f", k.file("high.yaml", pod("high", 1000, "2")))
	uid := k.ok("get", "pod", "high", "-o", "jsonpath={.metadata.uid}")

	k.ok("wait", "--for=condition=Ready", "pod/high", "--timeout=60s")
	k.ok("wait", "--for=delete", "pod/low", "--timeout=30s")
	if node := k.ok("get", "pod", "high", "-o", "jsonpath={.spec.nodeName}"); node != "node-1" {
		t.Errorf("high runs on %q", node)
	}
	k.eventually("Preempted by pod "+uid+" on node node-1",
		"get", "events", "--field-selector", "involvedObject.name=low,reason=Preempted", "-o", "jsonpath={.items[0].message}")
	events := k.ok("get", "events", "--field-selector", "involvedObject.name=high,reason=FailedScheduling", "-o", "jsonpath={.items[*].message}")
	if !strings.Contains(events, "0/1 nodes are available: 1 Insufficient cpu.") {
		t.Errorf("FailedScheduling of high: %q", events)
	}
}
