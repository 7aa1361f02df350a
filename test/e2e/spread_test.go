package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSpreadAcrossZones: `corekube up --node-zones a,b` puts node-1 and
// node-3 in zone a and node-2 in zone b; 6 pods with a
// zone spread constraint (maxSkew 1) ends 3 and 3 per zone, where the
// resource scores alone would place 2 on each node (4 in zone a). A pod
// whose hostname anti-affinity no node can satisfy waits with kube's
// message.
func TestSpreadAcrossZones(t *testing.T) {
	kubectlPath(t)
	p := startUpAt(t, t.TempDir(), freeAddr(t), "--nodes", "3", "--node-zones", "a,b", "--node-region", "r1")
	p.mustKubectl("wait", "--for=condition=Ready", "node/node-1", "node/node-2", "node/node-3", "--timeout=30s")
	out := p.mustKubectl("get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.topology\.kubernetes\.io/zone}/{.metadata.labels.topology\.kubernetes\.io/region}{" "}{end}`)
	if got, want := strings.TrimSpace(out), "node-1=a/r1 node-2=b/r1 node-3=a/r1"; got != want {
		t.Fatalf("node zones/regions %q, want %q", got, want)
	}

	var manifest strings.Builder
	for i := range 6 {
		fmt.Fprintf(&manifest, `apiVersion: v1
kind: Pod
metadata: {name: web-%d, labels: {app: web}}
spec:
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}
  containers: [{name: c, image: nginx:1.27}]
---
`, i)
	}
	manifest.WriteString(`apiVersion: v1
kind: Pod
metadata: {name: alone, labels: {app: web}}
spec:
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}
  containers: [{name: c, image: nginx:1.27}]
`)
	file := filepath.Join(t.TempDir(), "spread.yaml")
	if err := os.WriteFile(file, []byte(manifest.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p.mustKubectl("apply", "-f", file)
	p.mustKubectl("wait", "--for=condition=Ready", "pod/web-0", "pod/web-1", "pod/web-2", "pod/web-3", "pod/web-4", "pod/web-5", "--timeout=60s")
	out = p.mustKubectl("get", "pods", "-l", "app=web", "--field-selector=metadata.name!=alone", "-o", `jsonpath={range .items[*]}{.spec.nodeName}{" "}{end}`)
	perZone := map[string]int{}
	for _, node := range strings.Fields(out) {
		if node == "node-2" {
			perZone["b"]++
		} else if node != "" {
			perZone["a"]++
		}
	}
	if perZone["a"] != 3 || perZone["b"] != 3 {
		t.Errorf("pods per zone %v (nodes %q), want 3 and 3", perZone, out)
	}
	msg := "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
	p.mustKubectl("wait", "--for=jsonpath={.status.conditions[0].message}="+msg, "pod/alone", "--timeout=30s")
}
