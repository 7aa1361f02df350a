package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
)

// TestDrainRespectsBudget reproduces the walk-through of the Kubernetes
// disruptions docs on three simulated nodes: pods a, b, c under a budget of
// minAvailable 2 and an unprotected pod x. Draining node-1 succeeds;
// draining node-2 then blocks (the eviction answers 429) until a
// replacement pod is Ready, and then succeeds.
func TestDrainRespectsBudget(t *testing.T) {
	kubectlPath(t)
	p := startUpAt(t, t.TempDir(), freeAddr(t), "--nodes", "3")
	p.mustKubectl("wait", "--for=condition=Ready", "node/node-1", "node/node-2", "node/node-3", "--timeout=30s")

	var manifest strings.Builder
	for _, pod := range []struct{ name, node, app string }{{"a", "node-1", "web"}, {"b", "node-2", "web"}, {"c", "node-3", "web"}, {"x", "node-1", "other"}} {
		fmt.Fprintf(&manifest, `apiVersion: v1
kind: Pod
metadata: {name: %s, labels: {app: %s}}
spec: {nodeName: %s, containers: [{name: c, image: nginx:1.27}]}
---
`, pod.name, pod.app, pod.node)
	}
	manifest.WriteString(`apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec: {minAvailable: 2, selector: {matchLabels: {app: web}}}
`)
	file := filepath.Join(t.TempDir(), "walkthrough.yaml")
	if err := os.WriteFile(file, []byte(manifest.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p.mustKubectl("apply", "-f", file)
	p.mustKubectl("wait", "--for=condition=Ready", "pod/a", "pod/b", "pod/c", "pod/x", "--timeout=30s")
	p.mustKubectl("wait", "--for=jsonpath={.status.disruptionsAllowed}=1", "pdb/web", "--timeout=30s")

	drain := []string{"drain", "--ignore-daemonsets", "--delete-emptydir-data", "--force"}
	out := p.mustKubectl(append(drain, "node-1", "--timeout=60s")...)
	for _, want := range []string{"node/node-1 cordoned", "evicting pod default/a", "evicting pod default/x", "node/node-1 drained"} {
		if !strings.Contains(out, want) {
			t.Errorf("drain node-1 output lacks %q:\n%s", want, out)
		}
	}
	p.mustKubectl("wait", "--for=jsonpath={.status.disruptionsAllowed}=0", "pdb/web", "--timeout=30s")

	// Drain node-2 in the background: it must block on the budget.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlPath(t), append(p.kubectlFlags(), append(drain, "node-2", "--timeout=80s")...)...)
	var drainOut testserver.SyncBuffer
	cmd.Stdout, cmd.Stderr = &drainOut, &drainOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case err := <-done:
				t.Fatalf("drain node-2 ended (%v) before %s:\n%s", err, what, drainOut.String())
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s:\n%s", what, drainOut.String())
			case <-time.After(50 * time.Millisecond): // polling another process's output, with a deadline
			}
		}
	}
	waitFor("the eviction of b to be refused", func() bool {
		return strings.Contains(drainOut.String(), "Cannot evict pod as it would violate the pod's disruption budget")
	})
	if phase := p.mustKubectl("get", "pod", "b", "-o", "jsonpath={.status.phase}"); phase != "Running" {
		t.Fatalf("pod b is %s while the budget forbids its eviction", phase)
	}

	// A replacement: scheduled to node-3, the only schedulable node.
	p.mustKubectl("run", "d", "--image=nginx:1.27", "--labels=app=web")
	p.mustKubectl("wait", "--for=condition=Ready", "pod/d", "--timeout=30s")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("drain node-2: %v\n%s", err, drainOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("drain node-2 did not finish after the replacement was Ready:\n%s", drainOut.String())
	}
	if !strings.Contains(drainOut.String(), "node/node-2 drained") {
		t.Errorf("drain node-2 output:\n%s", drainOut.String())
	}
	if node := p.mustKubectl("get", "pod", "d", "-o", "jsonpath={.spec.nodeName}"); node != "node-3" {
		t.Errorf("replacement scheduled to %q, want node-3 (node-1 and node-2 are cordoned)", node)
	}
	p.stop()
}
