package e2e

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpKubectlAndRestart: `corekube up` becomes ready, writes a kubeconfig
// kubectl uses, serves the system namespaces, keeps data across a SIGTERM
// and a restart on the same data dir.
func TestUpKubectlAndRestart(t *testing.T) {
	kubectlPath(t)
	dataDir := t.TempDir()
	p := startUp(t, dataDir)
	if _, err := os.Stat(filepath.Join(dataDir, "kubeconfig")); err != nil {
		t.Fatalf("kubeconfig not written: %v", err)
	}

	out := p.mustKubectl("get", "namespaces", "-o", "name")
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if !strings.Contains(out, "namespace/"+ns) {
			t.Errorf("kubectl get namespaces: missing %s in\n%s", ns, out)
		}
	}
	p.mustKubectl("create", "namespace", "e2e")
	p.mustKubectl("label", "namespace", "e2e", "team=core")
	if got := p.mustKubectl("get", "namespace", "-l", "team=core", "-o", "jsonpath={.items[*].metadata.name}"); got != "e2e" {
		t.Errorf("label selector: got %q, want e2e", got)
	}
	if out, err := p.kubectl("get", "pod", "nope", "-n", "e2e"); err == nil || !strings.Contains(out, `pods "nope" not found`) {
		t.Errorf("kubectl get missing pod: err=%v out=%s", err, out)
	}

	resp, err := p.http.Get(p.url + "/version")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"gitVersion": "v1.32`) && !strings.Contains(string(body), `"gitVersion":"v1.32`) {
		t.Errorf("/version: %s", body)
	}

	p.stop()
	p2 := startUp(t, dataDir)
	if got := p2.mustKubectl("get", "namespace", "e2e", "-o", "jsonpath={.metadata.labels.team}"); got != "core" {
		t.Errorf("after restart: label team = %q, want core", got)
	}
	p2.mustKubectl("delete", "namespace", "e2e", "--wait=true", "--timeout=30s")
	if out, err := p2.kubectl("get", "namespace", "e2e"); err == nil || !strings.Contains(out, "not found") {
		t.Errorf("namespace e2e still there after delete --wait: %s", out)
	}
	p2.stop()
}
