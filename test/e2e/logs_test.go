package e2e

import (
	"bufio"
	"context"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKubectlLogs: `kubectl logs` through the API server's pods/log, which
// proxies to the node agent's kubelet API: the echo output of a container
// is its log, with --tail, --timestamps, --previous, -c, -f, and kube's
// messages for a wrong container and a container still waiting.
func TestKubectlLogs(t *testing.T) {
	kubectl := kubectlPath(t)
	p := startUpAt(t, t.TempDir(), freeAddr(t), "--nodes", "1",
		"--restart-backoff-base", "1s", "--restart-backoff-max", "2s", "--pleg-relist-period", "200ms")
	p.mustKubectl("wait", "--for=condition=Ready", "node/node-1", "--timeout=30s")
	k := p.kc(t, kubectl)

	k.ok("run", "echo", "--image=busybox", "--restart=Never", "--", "sh", "-c", "echo hello; echo world")
	k.ok("run", "crash", "--image=busybox", "--", "sh", "-c", "echo attempt; exit 1")
	k.ok("run", "ticker", "--image=busybox", "--", "sh", "-c", "while true; do echo tick; sleep 1; done")
	k.ok("run", "pulling", "--image=busybox:doesnotexist")
	k.ok("run", "unscheduled", "--image=busybox", "--overrides", `{"spec":{"nodeSelector":{"no":"such-node"}}}`)
	k.ok("apply", "-f", k.file("two.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: two
spec:
  restartPolicy: Never
  containers:
  - name: a
    image: busybox
    command: ["sh", "-c", "echo from a"]
  - name: b
    image: busybox
    command: ["sh", "-c", "echo from b"]
`))
	k.ok("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/echo", "pod/two", "--timeout=60s")

	t.Run("whole log", func(t *testing.T) {
		k := p.kc(t, kubectl)
		k.expect("hello\nworld", "logs", "echo")
		k.expect("world", "logs", "echo", "--tail=1")
		k.expect("", "logs", "echo", "--tail=0")
		k.expect("hello\nworld", "logs", "pod/echo", "--limit-bytes=100")
		k.expect("hel", "logs", "echo", "--limit-bytes=3")
	})

	t.Run("timestamps", func(t *testing.T) {
		k := p.kc(t, kubectl)
		out := k.ok("logs", "echo", "--timestamps")
		stamped := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (hello|world)$`)
		lines := strings.Split(out, "\n")
		if len(lines) != 2 {
			t.Fatalf("kubectl logs --timestamps: %q, want 2 lines", out)
		}
		for _, l := range lines {
			if !stamped.MatchString(l) {
				t.Errorf("line %q is not <RFC3339 with 9 fraction digits> <text>", l)
			}
		}
		k.expect("", "logs", "echo", "--since-time=2100-01-01T00:00:00Z")
		k.expect("hello\nworld", "logs", "echo", "--since=1h")
	})

	t.Run("containers", func(t *testing.T) {
		k := p.kc(t, kubectl)
		k.expect("from b", "logs", "two", "-c", "b")
		// kubectl picks the first container itself and says so on stderr.
		k.expectOut("from a", `Defaulted container "a" out of: a, b`, "logs", "two")
		// kubectl reads the containers one after the other, in map order.
		all := strings.Split(k.ok("logs", "two", "--all-containers"), "\n")
		sort.Strings(all)
		if got := strings.Join(all, "\n"); got != "from a\nfrom b" {
			t.Errorf("kubectl logs two --all-containers: %q, want the lines of a and b", got)
		}
		// kubectl checks the name itself (the server's 400 for it is in
		// test/integration); with a name it cannot check it asks the server.
		k.expectFail("error: container nope is not valid for pod two", "logs", "two", "-c", "nope")
		k.expectFail("Error from server (BadRequest): container nope is not valid for pod two",
			"get", "--raw", "/api/v1/namespaces/default/pods/two/log?container=nope")
		k.expectFail("Error from server (BadRequest): a container name must be specified for pod two, choose one of: [a b]",
			"get", "--raw", "/api/v1/namespaces/default/pods/two/log")
	})

	t.Run("previous", func(t *testing.T) {
		k := p.kc(t, kubectl)
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, _, err := k.run("get", "pod", "crash", "-o", "jsonpath={.status.containerStatuses[0].restartCount}")
			if n, _ := strconv.Atoi(out); err == nil && n >= 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod crash never restarted (restartCount %q, %v)", out, err)
			}
			time.Sleep(200 * time.Millisecond) // polling another process's state
		}
		k.expect("attempt", "logs", "crash", "--previous")
		k.expectFail(`Error from server (BadRequest): previous terminated container "echo" in pod "echo" not found`, "logs", "echo", "--previous")
	})

	t.Run("waiting", func(t *testing.T) {
		k := p.kc(t, kubectl)
		k.ok("wait", "--for=jsonpath={.status.containerStatuses[0].state.waiting.reason}=ImagePullBackOff", "pod/pulling", "--timeout=60s")
		k.expectFail(`Error from server (BadRequest): container "pulling" in pod "pulling" is waiting to start: trying and failing to pull image`, "logs", "pulling")
		// A pod no node took has no log yet: kube answers an empty body.
		k.expect("", "logs", "unscheduled")
	})

	t.Run("follow", func(t *testing.T) {
		k := p.kc(t, kubectl)
		k.ok("wait", "--for=condition=Ready", "pod/ticker", "--timeout=60s")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectl, append(p.kubectlFlags(), "logs", "-f", "--tail=1", "ticker")...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		// The pod ticks once a second and --tail=1 returns one old tick:
		// three more that arrive after kubectl started prove the log is
		// streamed, not read once.
		lines := bufio.NewScanner(stdout)
		started := time.Now()
		n := 0
		for n < 4 && lines.Scan() {
			if lines.Text() != "tick" {
				t.Fatalf("kubectl logs -f: line %q, want tick", lines.Text())
			}
			n++
		}
		if n < 4 {
			t.Fatalf("kubectl logs -f ended after %d lines: %v", n, lines.Err())
		}
		if waited := time.Since(started); waited < 1500*time.Millisecond {
			t.Errorf("4 ticks (3 written after kubectl started) came in %v: not streamed?", waited)
		}
	})
}
