package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
)

// TestKubectlGetTables checks what `kubectl get` prints from corekube's
// server-side Tables: -o wide, -A, --show-labels, --sort-by and -w, against
// kubectl's output from a real kube-apiserver v1.32 where one was recorded
// (testdata/kubectl-get-nodes-wide.stdout).
func TestKubectlGetTables(t *testing.T) {
	kubectlPath(t)
	p := startUp(t, t.TempDir())
	manifests := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(manifests, []byte(tableManifests), 0o600); err != nil {
		t.Fatal(err)
	}
	p.mustKubectl("apply", "-f", manifests)
	p.mustKubectl("patch", "node", "node-1", "--subresource=status", "--type=merge", "-p", nodeStatusPatch(time.Now()))

	// Ages are a few seconds at most here; the recording's were 0s.
	oneDigitAge := regexp.MustCompile(`(?m)  [0-9]s(  |$)`)
	ages := func(s string) string { return oneDigitAge.ReplaceAllString(s, "  0s$1") }

	want, err := os.ReadFile(filepath.Join("testdata", "kubectl-get-nodes-wide.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	if got := ages(p.mustKubectl("get", "nodes", "-o", "wide")); got != strings.TrimSpace(string(want)) {
		t.Errorf("kubectl get nodes -o wide:\n%s\nwant (kube-apiserver v1.32):\n%s", got, want)
	}

	checkLines := func(args []string, want ...string) {
		t.Helper()
		got := strings.Split(ages(p.mustKubectl(args...)), "\n")
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("kubectl %s:\n%s\nwant:\n%s", strings.Join(args, " "), strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	checkLines([]string{"get", "pods", "-n", "tbl"},
		"NAME   READY   STATUS    RESTARTS   AGE",
		"gk1    0/1     Pending   0          0s",
		"gk2    0/1     Pending   0          0s")
	checkLines([]string{"get", "pods", "-n", "tbl", "-o", "wide"},
		"NAME   READY   STATUS    RESTARTS   AGE   IP       NODE     NOMINATED NODE   READINESS GATES",
		"gk1    0/1     Pending   0          0s    <none>   <none>   <none>           <none>",
		"gk2    0/1     Pending   0          0s    <none>   <none>   <none>           <none>")
	checkLines([]string{"get", "pods", "-A"},
		"NAMESPACE   NAME   READY   STATUS    RESTARTS   AGE",
		"tbl         gk1    0/1     Pending   0          0s",
		"tbl         gk2    0/1     Pending   0          0s")
	checkLines([]string{"get", "pods", "-n", "tbl", "--show-labels"},
		"NAME   READY   STATUS    RESTARTS   AGE   LABELS",
		"gk1    0/1     Pending   0          0s    app=gold,order=b",
		"gk2    0/1     Pending   0          0s    app=gold,order=a,tier=web")
	checkLines([]string{"get", "pods", "-n", "tbl", "--sort-by=.metadata.labels.order"},
		"NAME   READY   STATUS    RESTARTS   AGE",
		"gk2    0/1     Pending   0          0s",
		"gk1    0/1     Pending   0          0s")
	checkLines([]string{"get", "pdb", "-n", "tbl"},
		"NAME   MIN AVAILABLE   MAX UNAVAILABLE   ALLOWED DISRUPTIONS   AGE",
		"web    1               N/A               0                     0s")
	checkLines([]string{"get", "namespace", "tbl"},
		"NAME   STATUS   AGE",
		"tbl    Active   0s")
	checkLines([]string{"get", "pod", "gk1", "-n", "tbl", "--no-headers"},
		"gk1   0/1   Pending   0     0s")

	// kubectl get -w: the list, then the watch's rows without headers.
	// kubectl watches from its list's resourceVersion, so a change made
	// once the list is printed reaches it whenever its watch starts.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlPath(t), append(p.kubectlFlags(), "get", "pods", "-n", "tbl", "-w")...)
	var out testserver.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitLines := func(n int) {
		t.Helper()
		for strings.Count(out.String(), "\n") < n {
			if ctx.Err() != nil {
				t.Fatalf("kubectl get -w printed %q, want %d lines", out.String(), n)
			}
			time.Sleep(20 * time.Millisecond) // polling another process's output, with a deadline
		}
	}
	waitLines(3)
	p.mustKubectl("label", "pod", "gk1", "-n", "tbl", "changed=yes")
	waitLines(4)
	cancel()
	_ = cmd.Wait()
	got := strings.Split(strings.TrimSpace(ages(out.String())), "\n")
	wantW := []string{
		"NAME   READY   STATUS    RESTARTS   AGE",
		"gk1    0/1     Pending   0          0s",
		"gk2    0/1     Pending   0          0s",
		"gk1    0/1     Pending   0          0s",
	}
	if strings.Join(got, "\n") != strings.Join(wantW, "\n") {
		t.Errorf("kubectl get pods -w:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantW, "\n"))
	}
}

// tableManifests are the objects the test prints: node-1 as in the
// recording, and two pods and a PodDisruptionBudget in namespace tbl. The
// pods name a scheduler that does not run, so that nothing writes them
// while kubectl get -w watches (the scheduler's Unschedulable condition
// would be a row of its own, or not, depending on when it came).
const tableManifests = `apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels:
    kubernetes.io/hostname: node-1
spec:
  podCIDR: 10.244.0.0/24
  podCIDRs: [10.244.0.0/24]
---
apiVersion: v1
kind: Namespace
metadata:
  name: tbl
---
apiVersion: v1
kind: Pod
metadata:
  name: gk1
  namespace: tbl
  labels: {app: gold, order: b}
spec:
  schedulerName: e2e-nobody
  containers:
  - name: c
    image: busybox
---
apiVersion: v1
kind: Pod
metadata:
  name: gk2
  namespace: tbl
  labels: {app: gold, tier: web, order: a}
spec:
  schedulerName: e2e-nobody
  containers:
  - name: c
    image: busybox
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
  namespace: tbl
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: gold}
`

// nodeStatusPatch is the status of node-1 in the recording.
func nodeStatusPatch(now time.Time) string {
	ts := now.UTC().Format(time.RFC3339)
	return `{"status":{"addresses":[{"type":"InternalIP","address":"10.1.2.3"}],` +
		`"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastHeartbeatTime":"` + ts + `","lastTransitionTime":"` + ts + `"}],` +
		`"nodeInfo":{"machineID":"m","systemUUID":"s","bootID":"b","kernelVersion":"6.1.0","osImage":"Debian GNU/Linux 12 (bookworm)",` +
		`"containerRuntimeVersion":"containerd://1.7.0","kubeletVersion":"v1.32.13","kubeProxyVersion":"","operatingSystem":"linux","architecture":"amd64"}}}`
}
