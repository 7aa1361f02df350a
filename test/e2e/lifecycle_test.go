package e2e

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
)

// lifecycleFlags shorten the agents' periods so that the node-side
// lifecycle is seen through kubectl within seconds: leases renewed every
// second, node status computed every second and written every 2s when
// unchanged, a 1s..4s restart back-off, a fast PLEG, and periodic pod syncs
// (which must not undo what others wrote, like a readiness gate).
var lifecycleFlags = []string{
	"--nodes", "2",
	"--lease-renew-interval", "1s",
	"--node-status-update-frequency", "1s",
	"--node-status-report-frequency", "2s",
	"--restart-backoff-base", "1s",
	"--restart-backoff-max", "4s",
	"--pleg-relist-period", "200ms",
	"--sync-frequency", "5s",
}

// TestLifecycle drives the node-side pod lifecycle with the real kubectl
// against one `corekube up` with two simulated nodes: failed and
// crash-looping containers, the docs' liveness and memory examples,
// readiness gates, init containers, kubectl describe of pods and nodes,
// lease and heartbeat renewals, graceful deletion. The scenarios run in
// parallel; the docs' liveness example (a restart after about 70s, as on a
// real cluster) sets the wall time.
func TestLifecycle(t *testing.T) {
	bin := kubectlPath(t)
	p := startUpAt(t, t.TempDir(), freeAddr(t), lifecycleFlags...)
	p.kc(t, bin).ok("wait", "--for=condition=Ready", "node/node-1", "node/node-2", "--timeout=25s")

	var gated *kc
	t.Run("group", func(t *testing.T) {
		t.Run("Liveness", func(t *testing.T) { t.Parallel(); testLivenessExample(t, p.kc(t, bin)) })
		t.Run("Failed", func(t *testing.T) { t.Parallel(); testFailedPod(t, p.kc(t, bin)) })
		t.Run("CrashLoopBackOff", func(t *testing.T) { t.Parallel(); testCrashLoop(t, p.kc(t, bin)) })
		t.Run("OOMKilled", func(t *testing.T) { t.Parallel(); testOOMExample(t, p.kc(t, bin)) })
		t.Run("ReadinessGates", func(t *testing.T) {
			t.Parallel()
			gated = p.kc(t, bin)
			testReadinessGate(t, gated)
		})
		t.Run("InitContainers", func(t *testing.T) { t.Parallel(); testInitContainers(t, p.kc(t, bin)) })
		t.Run("Describe", func(t *testing.T) { t.Parallel(); testDescribe(t, p.kc(t, bin)) })
		t.Run("Heartbeats", func(t *testing.T) { t.Parallel(); testHeartbeats(t, p.kc(t, bin)) })
		t.Run("GracefulDelete", func(t *testing.T) { t.Parallel(); testGracefulDelete(t, p.kc(t, bin)) })
		t.Run("Admission", func(t *testing.T) { t.Parallel(); testAdmission(t, p.kc(t, bin)) })
		t.Run("SetImage", func(t *testing.T) { t.Parallel(); testSetImage(t, p.kc(t, bin)) })
	})
	// The liveness example kept the group busy for over a minute, during
	// which the agent synced the gated pod periodically and rewrote its
	// status: the condition set by another component must have survived.
	if gated != nil && !t.Failed() {
		k := p.kc(t, bin)
		k.expect("True True", "get", "pod", "lc-gated", "-o", `jsonpath={.status.conditions[?(@.type=="www.example.com/feature-1")].status} {.status.conditions[?(@.type=="Ready")].status}`)
		if gates := column(k.ok("get", "pod", "lc-gated", "-o", "wide", "--no-headers"), -1); gates != "1/1" {
			t.Errorf("READINESS GATES of lc-gated after a minute of syncs: %q, want 1/1", gates)
		}
	}
	// After the group: it labels node-1 and pulls images, which the
	// Describe checks would see.
	t.Run("NodeIdentity", func(t *testing.T) { testNodeIdentity(t, p.kc(t, bin)) })
	p.stop()
}

// testFailedPod: a container that exits 1 under restartPolicy Never fails
// the pod; kubectl shows the terminated reason in STATUS.
func testFailedPod(t *testing.T, k *kc) {
	k.expect(`pod/lc-fail created`, "run", "lc-fail", "--image=busybox", "--restart=Never", "--", "sh", "-c", "exit 1")
	k.okWithin(70*time.Second, "wait", "--for=jsonpath={.status.phase}=Failed", "pod/lc-fail", "--timeout=60s")
	k.expect(lines(
		"NAME      READY   STATUS   RESTARTS   AGE",
		"lc-fail   0/1     Error    0          0s",
	), "get", "pod", "lc-fail")
	k.expect("1 Error 0", "get", "pod", "lc-fail", "-o",
		"jsonpath={.status.containerStatuses[0].state.terminated.exitCode} {.status.containerStatuses[0].state.terminated.reason} {.status.containerStatuses[0].restartCount}")
	k.expect("False PodFailed", "get", "pod", "lc-fail", "-o",
		`jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason}`)
}

// testCrashLoop: a container that keeps exiting 1 under restartPolicy
// Always is restarted with back-off: STATUS CrashLoopBackOff, RESTARTS
// growing, and the kubelet's BackOff event.
func testCrashLoop(t *testing.T, k *kc) {
	k.expect(`pod/lc-crash created`, "run", "lc-crash", "--image=busybox", "--", "sh", "-c", "exit 1")
	restarts := func(row string) int {
		f := strings.Fields(row)
		if len(f) < 4 {
			return -1
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			return -1
		}
		return n
	}
	var first int
	k.poll(60*time.Second, "STATUS CrashLoopBackOff after 2 restarts", func(out string) bool {
		f := strings.Fields(out)
		first = restarts(out)
		return len(f) > 2 && f[1] == "0/1" && f[2] == "CrashLoopBackOff" && first >= 2
	}, "get", "pod", "lc-crash", "--no-headers")
	k.poll(60*time.Second, "RESTARTS to grow past "+strconv.Itoa(first), func(out string) bool {
		return restarts(out) > first
	}, "get", "pod", "lc-crash", "--no-headers")
	// RESTARTS is "<n> (<age> ago)" once the container has restarted.
	if out := k.ok("get", "pod", "lc-crash"); !regexp.MustCompile(`(?m)^lc-crash +0/1 +\S+ +\d+ \(\d+s ago\) +\d+s$`).MatchString(out) {
		t.Errorf("kubectl get pod lc-crash:\n%s\nwant RESTARTS like `3 (2s ago)`", out)
	}

	uid := k.ok("get", "pod", "lc-crash", "-o", "jsonpath={.metadata.uid}")
	// The container is back in CrashLoopBackOff between its short runs.
	k.poll(60*time.Second, "kubectl describe to show the container waiting in CrashLoopBackOff", matchAll(
		`(?m)^Status: +Running$`,
		`(?m)^    State: +Waiting\n      Reason: +CrashLoopBackOff\n    Last State: +Terminated\n      Reason: +Error\n      Exit Code: +1\n`,
		`(?m)^    Ready: +False\n    Restart Count: +[1-9]\d*\n`,
		`(?m)^  Ready +False $`,
		`(?m)^  Warning +BackOff +\S+ \(x\d+ over \S+\) +kubelet +Back-off restarting failed container lc-crash in pod lc-crash_default\(`+regexp.QuoteMeta(uid)+`\)$`,
	), "describe", "pod", "lc-crash")
	k.poll(60*time.Second, "the CrashLoopBackOff message", matchAll(
		`^back-off [1-4]s restarting failed container=lc-crash pod=lc-crash_default\(`+regexp.QuoteMeta(uid)+`\)$`,
	), "get", "pod", "lc-crash", "-o", "jsonpath={.status.containerStatuses[0].state.waiting.message}")
}

// testLivenessExample runs exec-liveness.yaml of the Kubernetes docs
// ("Define a liveness command") unchanged: /tmp/healthy is removed after
// 30s, the probe fails three times, the kubelet kills the container (whose
// shell, PID 1, ignores SIGTERM, so the kill waits out the 30s grace
// period) and starts it again.
func testLivenessExample(t *testing.T, k *kc) {
	k.expect(`pod/liveness-exec created`, "create", "-f", "testdata/exec-liveness.yaml")
	k.okWithin(130*time.Second, "wait", "--for=jsonpath={.status.containerStatuses[0].restartCount}=1", "pod/liveness-exec", "--timeout=120s")

	if f := strings.Fields(k.ok("get", "pod", "liveness-exec", "--no-headers")); len(f) < 4 || f[3] != "1" {
		t.Errorf("kubectl get pod liveness-exec: %q, want RESTARTS 1", f)
	}
	const unhealthy = `Liveness probe failed: cat: can't open '/tmp/healthy': No such file or directory`
	const killing = `Container liveness failed liveness probe, will be restarted`
	// The events follow the status write by a little.
	k.poll(30*time.Second, "kubectl describe pod liveness-exec to show the restart and its events", matchAll(
		`(?m)^    State: +Running\n      Started: .*\n    Last State: +Terminated\n      Reason: +Error\n      Exit Code: +137\n`,
		`(?m)^    Liveness: +exec \[cat /tmp/healthy\] delay=5s timeout=1s period=5s #success=1 #failure=3$`,
		`(?m)^    Restart Count: +1$`,
		// Three failures (periodSeconds 5, failureThreshold 3), then the
		// prober holds off until the container is replaced.
		`(?m)^  Warning +Unhealthy +\S+ \(x3 over \S+\) +kubelet +`+regexp.QuoteMeta(unhealthy)+`$`,
		`(?m)^  Normal +Killing +\S+ +kubelet +`+regexp.QuoteMeta(killing)+`$`,
		`(?m)^  Normal +Started +\S+ \(x2 over \S+\) +kubelet +Started container liveness$`,
	), "describe", "pod", "liveness-exec")
	events := k.ok("get", "events", "--field-selector", "involvedObject.name=liveness-exec")
	for _, want := range []string{
		`(?m)^\S+ +Warning +Unhealthy +pod/liveness-exec +` + regexp.QuoteMeta(unhealthy) + `$`,
		`(?m)^\S+ +Normal +Killing +pod/liveness-exec +` + regexp.QuoteMeta(killing) + `$`,
	} {
		if !regexp.MustCompile(want).MatchString(events) {
			t.Errorf("kubectl get events --field-selector involvedObject.name=liveness-exec:\n%s\nwant a line matching %s", events, want)
		}
	}

	// Timing, as on a real node: no failure before the file is removed
	// (30s), and the kill takes the grace period (30s).
	started := k.timestamp("get", "pod", "liveness-exec", "-o", "jsonpath={.status.containerStatuses[0].lastState.terminated.startedAt}")
	finished := k.timestamp("get", "pod", "liveness-exec", "-o", "jsonpath={.status.containerStatuses[0].lastState.terminated.finishedAt}")
	killed := k.timestamp("get", "events", "--field-selector", "involvedObject.name=liveness-exec,reason=Killing", "-o", "jsonpath={.items[0].firstTimestamp}")
	firstFailure := k.timestamp("get", "events", "--field-selector", "involvedObject.name=liveness-exec,reason=Unhealthy", "-o", "jsonpath={.items[0].firstTimestamp}")
	if d := firstFailure.Sub(started); d < 29*time.Second {
		t.Errorf("first liveness failure %v after the container started, before /tmp/healthy was removed (30s)", d)
	}
	if d := killed.Sub(firstFailure); d < 9*time.Second || d > 20*time.Second {
		t.Errorf("killed %v after the first failure, want about 10s (failureThreshold 3, periodSeconds 5)", d)
	}
	if d := finished.Sub(killed); d < 29*time.Second {
		t.Errorf("the container ended %v after the liveness kill; sh as PID 1 ignores SIGTERM and lasts the 30s grace period", d)
	}
}

// testOOMExample runs memory-request-limit-2.yaml of the Kubernetes docs
// ("Exceed a Container's memory limit"): stress allocates 250M under a
// 100Mi limit and is OOM killed, again and again.
func testOOMExample(t *testing.T, k *kc) {
	k.expect(`namespace/mem-example created`, "create", "namespace", "mem-example")
	k.expect(`pod/memory-demo-2 created`, "create", "-f", "testdata/memory-request-limit-2.yaml")
	// The docs: kubectl get pod memory-demo-2 --namespace=mem-example shows
	// STATUS OOMKilled (between a kill and the back-off that follows).
	w := k.watch("get", "pod", "memory-demo-2", "--namespace=mem-example", "-w")
	w.until(60*time.Second, "a row with STATUS OOMKilled", regexp.MustCompile(`(?m)^memory-demo-2 +0/1 +OOMKilled +\d+`))
	w.stop()
	k.okWithin(70*time.Second, "wait", "--namespace=mem-example", "--for=jsonpath={.status.containerStatuses[0].lastState.terminated.reason}=OOMKilled", "pod/memory-demo-2", "--timeout=60s")
	k.expect("OOMKilled 137", "get", "pod", "memory-demo-2", "--namespace=mem-example", "-o",
		"jsonpath={.status.containerStatuses[0].lastState.terminated.reason} {.status.containerStatuses[0].lastState.terminated.exitCode}")
	k.poll(30*time.Second, "kubectl describe pod memory-demo-2 to show the OOM kill", matchAll(
		`(?m)^    Last State: +Terminated\n      Reason: +OOMKilled\n      Exit Code: +137\n`,
		`(?m)^    Limits:\n      memory: +100Mi\n    Requests:\n      memory: +50Mi\n`,
		`(?m)^QoS Class: +Burstable$`,
		`(?m)^  Warning +BackOff +.* +kubelet +Back-off restarting failed container memory-demo-2-ctr in pod memory-demo-2_mem-example\(`,
	), "describe", "pod", "memory-demo-2", "--namespace=mem-example")
}

// testReadinessGate: a pod with a readiness gate runs with its containers
// ready but is not Ready until another component sets the gate's condition
// in the pod's status.
func testReadinessGate(t *testing.T, k *kc) {
	k.expect(`pod/lc-gated created`, "create", "-f", k.file("gated.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: lc-gated
spec:
  readinessGates:
  - conditionType: "www.example.com/feature-1"
  containers:
  - name: web
    image: nginx:1.27
`))
	k.okWithin(70*time.Second, "wait", "--for=condition=ContainersReady", "pod/lc-gated", "--timeout=60s")
	wide := k.ok("get", "pod", "lc-gated", "-o", "wide")
	if !regexp.MustCompile(`^NAME +READY +STATUS +RESTARTS +AGE +IP +NODE +NOMINATED NODE +READINESS GATES\nlc-gated +1/1 +Running +0 +\d+s +10\.244\.\d+\.\d+ +node-[12] +<none> +0/1$`).MatchString(wide) {
		t.Errorf("kubectl get pod lc-gated -o wide:\n%s\nwant 1/1 Running with READINESS GATES 0/1", wide)
	}
	k.expect(`False ReadinessGatesNotReady corresponding condition of pod readiness gate "www.example.com/feature-1" does not exist.`,
		"get", "pod", "lc-gated", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason} {.status.conditions[?(@.type=="Ready")].message}`)
	if out := k.ok("describe", "pod", "lc-gated"); !regexp.MustCompile(`(?m)^Readiness Gates:\n  Type +Status\n  www\.example\.com/feature-1 +<none> $`).MatchString(out) {
		t.Errorf("kubectl describe pod lc-gated:\n%s\nwant Readiness Gates with www.example.com/feature-1 <none>", out)
	}

	k.expect(`pod/lc-gated patched`, "patch", "pod", "lc-gated", "--subresource=status", "--type=json",
		"-p", `[{"op":"add","path":"/status/conditions/-","value":{"type":"www.example.com/feature-1","status":"True"}}]`)
	k.okWithin(70*time.Second, "wait", "--for=condition=Ready", "pod/lc-gated", "--timeout=60s")
	if gates := column(k.ok("get", "pod", "lc-gated", "-o", "wide", "--no-headers"), -1); gates != "1/1" {
		t.Errorf("READINESS GATES of lc-gated: %q, want 1/1", gates)
	}
	if out := k.ok("describe", "pod", "lc-gated"); !regexp.MustCompile(`(?m)^Readiness Gates:\n  Type +Status\n  www\.example\.com/feature-1 +True $`).MatchString(out) {
		t.Errorf("kubectl describe pod lc-gated:\n%s\nwant Readiness Gates with www.example.com/feature-1 True", out)
	}
}

// testInitContainers: two init containers run in order before the app
// container; kubectl shows Init:<done>/<total> meanwhile.
func testInitContainers(t *testing.T, k *kc) {
	w := k.watch("get", "pods", "--field-selector=metadata.name=lc-init", "-w")
	k.expect(`pod/lc-init created`, "create", "-f", k.file("init.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: lc-init
spec:
  initContainers:
  - name: init-first
    image: busybox:1.28
    command: ['sh', '-c', 'sleep 1']
  - name: init-second
    image: busybox:1.28
    command: ['sh', '-c', 'echo initialized']
  containers:
  - name: app
    image: busybox:1.28
    command: ['sh', '-c', 'echo The app is running! && sleep 3600']
`))
	running := regexp.MustCompile(`(?m)^lc-init +1/1 +Running +0 +\d+s$`)
	w.until(60*time.Second, "lc-init Running", running)
	w.stop()
	rows := w.out.String()
	initRow := regexp.MustCompile(`(?m)^lc-init +0/1 +Init:[01]/2 +0 +\d+s$`).FindStringIndex(rows)
	if initRow == nil || initRow[0] > running.FindStringIndex(rows)[0] {
		t.Errorf("kubectl get pods -w:\n%s\nwant an Init:0/2 or Init:1/2 row before Running", rows)
	}
	out := k.ok("describe", "pod", "lc-init")
	initSection, _, _ := strings.Cut(out, "\nContainers:\n")
	_, initSection, _ = strings.Cut(initSection, "\nInit Containers:\n")
	for _, want := range []string{
		`(?m)^  init-first:\n(    .*\n)*?    Command:\n      sh\n      -c\n      sleep 1\n    State: +Terminated\n      Reason: +Completed\n      Exit Code: +0\n`,
		`(?m)^  init-second:\n(    .*\n)*?    State: +Terminated\n      Reason: +Completed\n      Exit Code: +0\n      Started: .*\n      Finished: .*\n    Ready: +True\n    Restart Count: +0\n`,
	} {
		if !regexp.MustCompile(want).MatchString(initSection + "\n") {
			t.Errorf("kubectl describe pod lc-init:\n%s\nwant Init Containers matching %s", out, want)
		}
	}
	if !regexp.MustCompile(`(?m)^  Initialized +True $`).MatchString(out) {
		t.Errorf("kubectl describe pod lc-init:\n%s\nwant condition Initialized True", out)
	}
}

// testDescribe: kubectl describe of a running pod and of its node.
func testDescribe(t *testing.T, k *kc) {
	k.expect(`pod/lc-web created`, "run", "lc-web", "--image=nginx:1.27",
		`--overrides={"apiVersion":"v1","spec":{"nodeSelector":{"kubernetes.io/hostname":"node-1"}}}`)
	k.okWithin(70*time.Second, "wait", "--for=condition=Ready", "pod/lc-web", "--timeout=60s")
	// The Started event follows the status write by a little.
	k.poll(30*time.Second, "kubectl describe pod lc-web", matchAll(
		`(?m)^Name: +lc-web\nNamespace: +default\nPriority: +0\nService Account: +default\nNode: +node-1/172\.20\.0\.1\nStart Time: +\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d \+0000\nLabels: +run=lc-web\n`,
		`(?m)^Status: +Running\nIP: +10\.244\.0\.\d+\nIPs:\n  IP: +10\.244\.0\.\d+\n`,
		`(?m)^    Container ID: +sim://[0-9a-f]{64}\n    Image: +nginx:1\.27\n    Image ID: +docker\.io/library/nginx@sha256:[0-9a-f]{64}\n`,
		`(?m)^    State: +Running\n      Started: .*\n    Ready: +True\n    Restart Count: +0\n`,
		`(?m)^Conditions:\n  Type +Status\n  PodReadyToStartContainers +True \n  Initialized +True \n  Ready +True \n  ContainersReady +True \n  PodScheduled +True \n`,
		// ServiceAccount admission's token volume, as kube's describe
		// shows it.
		`(?m)^    Mounts:\n      /var/run/secrets/kubernetes\.io/serviceaccount from kube-api-access-[a-z0-9]{5} \(ro\)\n`,
		`(?m)^Volumes:\n  kube-api-access-[a-z0-9]{5}:\n    Type: +Projected \(a volume that contains injected data from multiple sources\)\n`+
			`    TokenExpirationSeconds: +3607\n    ConfigMapName: +kube-root-ca\.crt\n    ConfigMapOptional: +<nil>\n    DownwardAPI: +true\n`,
		`(?m)^QoS Class: +BestEffort$`,
		`(?m)^Events:\n  Type +Reason +Age +From +Message\n  ---- +------ +---- +---- +-------\n`+
			`  Normal +Scheduled +\S+ +default-scheduler +Successfully assigned default/lc-web to node-1\n`+
			// Pulled by this pod, or by an earlier one on node-1.
			`(  Normal +Pulling +\S+ +kubelet +Pulling image "nginx:1\.27"\n`+
			`  Normal +Pulled +\S+ +kubelet +Successfully pulled image "nginx:1\.27" in \S+ \(\S+ including waiting\)\. Image size: \d+ bytes\.\n`+
			`|  Normal +Pulled +\S+ +kubelet +Container image "nginx:1\.27" already present on machine\n)`+
			`  Normal +Created +\S+ +kubelet +Created container lc-web\n`+
			`  Normal +Started +\S+ +kubelet +Started container lc-web$`,
	), "describe", "pod", "lc-web")

	out := k.ok("describe", "node", "node-1")
	for _, want := range []string{
		`(?m)^Name: +node-1\nRoles: +<none>\nLabels: +beta\.kubernetes\.io/arch=amd64\n +beta\.kubernetes\.io/os=linux\n +kubernetes\.io/arch=amd64\n +kubernetes\.io/hostname=node-1\n +kubernetes\.io/os=linux\n`,
		`(?m)^Taints: +<none>\nUnschedulable: +false\n`,
		`(?m)^Lease:\n  HolderIdentity: +node-1\n  AcquireTime: +<unset>\n  RenewTime: +\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d \+0000\n`,
		`(?m)^Conditions:\n  Type +Status +LastHeartbeatTime +LastTransitionTime +Reason +Message\n  ---- .*\n` +
			`  MemoryPressure +False +.* +KubeletHasSufficientMemory +kubelet has sufficient memory available\n` +
			`  DiskPressure +False +.* +KubeletHasNoDiskPressure +kubelet has no disk pressure\n` +
			`  PIDPressure +False +.* +KubeletHasSufficientPID +kubelet has sufficient PID available\n` +
			`  Ready +True +.* +KubeletReady +kubelet is posting ready status\n`,
		`(?m)^Addresses:\n  InternalIP: +172\.20\.0\.1\n  Hostname: +127\.0\.0\.1\n`,
		`(?m)^Capacity:\n  cpu: +4\n  ephemeral-storage: +100Gi\n  hugepages-1Gi: +0\n  hugepages-2Mi: +0\n  memory: +16Gi\n  pods: +110\n`,
		`(?m)^Allocatable:\n  cpu: +4\n  ephemeral-storage: +90Gi\n  hugepages-1Gi: +0\n  hugepages-2Mi: +0\n  memory: +16284Mi\n  pods: +110\n`,
		`(?m)^System Info:\n  Machine ID: +[0-9a-f]{32}\n  System UUID: +[0-9a-f-]{36}\n  Boot ID: +[0-9a-f-]{36}\n  Kernel Version: +\S+\n  OS Image: +.+\n  Operating System: +linux\n  Architecture: +amd64\n  Container Runtime Version: +sim://1\.0\.0\n  Kubelet Version: +v1\.32\.3\n`,
		`(?m)^PodCIDR: +10\.244\.0\.0/24\nPodCIDRs: +10\.244\.0\.0/24\n`,
		`(?m)^Non-terminated Pods: +\(\d+ in total\)\n  Namespace +Name +CPU Requests +CPU Limits +Memory Requests +Memory Limits +Age\n`,
		`(?m)^  default +lc-web +0 \(0%\) +0 \(0%\) +0 \(0%\) +0 \(0%\) +\d+s$`,
		`(?m)^Allocated resources:\n`,
		`(?m)^  Normal +Starting +\S+ +kubelet +Starting kubelet\.$`,
		`(?m)^  Normal +NodeReady +\S+ +kubelet +Node node-1 status is now: NodeReady$`,
		`(?m)^  Normal +RegisteredNode +\S+ +node-controller +Node node-1 event: Registered Node node-1 in Controller$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("kubectl describe node node-1:\n%s\nwant a match for %s", out, want)
		}
	}
	// The kubelet reports the size of the image it pulled (the image's
	// size in the registry, never 0).
	t.Run("PulledImageSize", func(t *testing.T) {
		k := k.p.kc(t, k.bin)
		out := k.ok("get", "events", "--field-selector=reason=Pulled", "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
		pulled := regexp.MustCompile(`^Successfully pulled image "([^"]+)" in \S+ \(\S+ including waiting\)\. Image size: (\d+) bytes\.$`)
		sizes := map[string]int{}
		for _, msg := range strings.Split(out, "\n") {
			if !strings.HasPrefix(msg, "Successfully pulled") {
				continue
			}
			m := pulled.FindStringSubmatch(msg)
			if m == nil {
				t.Errorf("Pulled message %q, want the kubelet's format", msg)
				continue
			}
			size, _ := strconv.Atoi(m[2])
			if size == 0 {
				t.Errorf("Pulled message %q reports no size", msg)
			}
			if prev, ok := sizes[m[1]]; ok && prev != size {
				t.Errorf("%s pulled with sizes %d and %d", m[1], prev, size)
			}
			sizes[m[1]] = size
		}
		// nginx:1.27 is about 70 MB, busybox about 4 MB.
		if size := sizes["nginx:1.27"]; size < 50_000_000 || size > 100_000_000 {
			t.Errorf("nginx:1.27 pulled with size %d, want about 72 MB; Pulled messages:\n%s", size, out)
		}
	})
	// The kubelet records Starting, NodeAllocatableEnforced, NodeHas*,
	// NodeReady; RegisteredNode is the node lifecycle controller's alone.
	t.Run("KubeletNodeEvents", func(t *testing.T) {
		k := k.p.kc(t, k.bin)
		out := k.ok("get", "events", "--field-selector=involvedObject.kind=Node,involvedObject.name=node-1",
			"-o", `jsonpath={range .items[*]}{.source.component} {.reason}: {.message}{"\n"}{end}`)
		if strings.Contains(out, "kubelet RegisteredNode:") {
			t.Errorf("a RegisteredNode event from kubelet; RegisteredNode is node-controller's only. Events:\n%s", out)
		}
		for _, want := range []string{
			"kubelet Starting: Starting kubelet.",
			"kubelet NodeAllocatableEnforced: Updated Node Allocatable limit across pods",
			"kubelet NodeHasSufficientMemory: Node node-1 status is now: NodeHasSufficientMemory",
			"kubelet NodeHasNoDiskPressure: Node node-1 status is now: NodeHasNoDiskPressure",
			"kubelet NodeHasSufficientPID: Node node-1 status is now: NodeHasSufficientPID",
			"kubelet NodeReady: Node node-1 status is now: NodeReady",
			"node-controller RegisteredNode: Node node-1 event: Registered Node node-1 in Controller",
		} {
			if !strings.Contains(out+"\n", want+"\n") {
				t.Errorf("node-1's events lack %q. Events:\n%s", want, out)
			}
		}
	})
}

// testAdmission: a pod created with spec.nodeName (no scheduler) that asks
// for more cpu than the node has is rejected by the node's kubelet: phase
// Failed, STATUS OutOfcpu, the kubelet's message and Warning event.
func testAdmission(t *testing.T, k *kc) {
	k.expect(`pod/lc-big created`, "create", "-f", k.file("lc-big.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: lc-big
spec:
  nodeName: node-2
  containers:
  - name: big
    image: busybox
    command: ["sleep", "3600"]
    resources:
      requests:
        cpu: "8"
`))
	k.okWithin(40*time.Second, "wait", "--for=jsonpath={.status.phase}=Failed", "pod/lc-big", "--timeout=30s")
	k.expect(lines(
		"NAME     READY   STATUS     RESTARTS   AGE",
		"lc-big   0/1     OutOfcpu   0          0s",
	), "get", "pod", "lc-big")
	const msg = "Node didn't have enough resource: cpu, requested: 8000, used: 0, capacity: 4000"
	k.expect("OutOfcpu Pod was rejected: "+msg, "get", "pod", "lc-big", "-o", "jsonpath={.status.reason} {.status.message}")
	k.poll(30*time.Second, "the kubelet's OutOfcpu event", matchAll(`^Warning kubelet `+regexp.QuoteMeta(msg)+`$`),
		"get", "events", "--field-selector=involvedObject.name=lc-big,reason=OutOfcpu", "-o", "jsonpath={.items[*].type} {.items[*].source.component} {.items[*].message}")
}

// testSetImage: kubectl set image on a running pod makes the kubelet kill
// the container and start the new image; RESTARTS becomes 1.
func testSetImage(t *testing.T, k *kc) {
	k.expect(`pod/lc-image created`, "run", "lc-image", "--image=nginx:1.26")
	k.okWithin(70*time.Second, "wait", "--for=condition=Ready", "pod/lc-image", "--timeout=60s")
	k.expect(`pod/lc-image image updated`, "set", "image", "pod/lc-image", "lc-image=nginx:1.27")
	// nginx stops on SIGTERM: the new container starts at once.
	k.poll(60*time.Second, "the new image to run, restart count 1", matchAll(`^docker\.io/library/nginx:1\.27 1 true$`),
		"get", "pod", "lc-image", "-o", "jsonpath={.status.containerStatuses[0].image} {.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].ready}")
	k.expect("Normal Killing kubelet Container lc-image definition changed, will be restarted", "get", "events", "--field-selector=involvedObject.name=lc-image,reason=Killing",
		"-o", "jsonpath={.items[*].type} {.items[*].reason} {.items[*].source.component} {.items[*].message}")
}

// testHeartbeats: the node leases are renewed, and the node's Ready
// condition is re-written (lastHeartbeatTime) while nothing changes.
func testHeartbeats(t *testing.T, k *kc) {
	k.expect(lines(
		"NAME     HOLDER   AGE",
		"node-1   node-1   0s",
		"node-2   node-2   0s",
	), "get", "leases", "--namespace=kube-node-lease")
	k.expect("node-1 40", "get", "lease", "node-1", "--namespace=kube-node-lease", "-o", "jsonpath={.spec.holderIdentity} {.spec.leaseDurationSeconds}")

	lease := []string{"get", "lease", "node-1", "--namespace=kube-node-lease", "-o", "jsonpath={.spec.renewTime}"}
	first := k.timestamp(lease...)
	k.poll(30*time.Second, "the lease of node-1 to be renewed after "+first.Format(time.RFC3339Nano), func(out string) bool {
		renewed, err := time.Parse(time.RFC3339Nano, out)
		return err == nil && renewed.After(first)
	}, lease...)

	ready := []string{"get", "node", "node-1", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].lastHeartbeatTime} {.status.conditions[?(@.type=="Ready")].lastTransitionTime} {.status.conditions[?(@.type=="Ready")].status}`}
	before := strings.Fields(k.ok(ready...))
	if len(before) != 3 || before[2] != "True" {
		t.Fatalf("node-1 Ready condition: %q", before)
	}
	k.poll(30*time.Second, "node-1's Ready heartbeat to advance past "+before[0], func(out string) bool {
		return len(strings.Fields(out)) == 3 && strings.Fields(out)[0] > before[0]
	}, ready...)
	if after := strings.Fields(k.ok(ready...)); after[1] != before[1] || after[2] != "True" {
		t.Errorf("node-1 Ready condition went from %q to %q; only lastHeartbeatTime should move", before, after)
	}
	k.expect(lines(
		"NAME     STATUS   ROLES    AGE   VERSION",
		"node-1   Ready    <none>   0s    v1.32.3",
		"node-2   Ready    <none>   0s    v1.32.3",
	), "get", "nodes")
}

// testGracefulDelete: kubectl delete waits for the agent to stop the pod;
// a server stops at SIGTERM, well before the grace period ends, while a
// shell or sleep as PID 1 ignores SIGTERM and is killed when it ends.
func testGracefulDelete(t *testing.T, k *kc) {
	k.expect(`pod/lc-term created`, "run", "lc-term", "--image=nginx:1.27")
	k.expect(`pod/lc-sleep created`, "run", "lc-sleep", "--image=busybox", "--", "sleep", "3600")
	k.okWithin(70*time.Second, "wait", "--for=condition=Ready", "pod/lc-term", "pod/lc-sleep", "--timeout=60s")

	start := time.Now()
	k.expect(`pod "lc-term" deleted`, "delete", "pod", "lc-term", "--grace-period=60", "--timeout=25s")
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("kubectl delete pod lc-term --grace-period=60 took %v; nginx stops on SIGTERM", d)
	}
	start = time.Now()
	k.expect(`pod "lc-sleep" deleted`, "delete", "pod", "lc-sleep", "--grace-period=3", "--timeout=25s")
	if d := time.Since(start); d < 3*time.Second || d > 20*time.Second {
		t.Errorf("kubectl delete pod lc-sleep --grace-period=3 took %v; sleep ignores SIGTERM and is killed after 3s", d)
	}
	k.expectFail(`Error from server (NotFound): pods "lc-sleep" not found`, "get", "pod", "lc-sleep")
	for _, pod := range []string{"lc-term", "lc-sleep"} {
		k.expect("Normal Killing kubelet Stopping container "+pod, "get", "events", "--field-selector=involvedObject.name="+pod+",reason=Killing",
			"-o", "jsonpath={.items[*].type} {.items[*].reason} {.items[*].source.component} {.items[*].message}")
	}
}

// okWithin is ok for kubectl commands (kubectl wait) that may take longer
// than runTimeout.
func (k *kc) okWithin(d time.Duration, args ...string) string {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd, out, errOut := k.start(ctx, args...)
	err := cmd.Wait()
	if err != nil || errOut.Len() != 0 {
		k.t.Fatalf("kubectl %s: %v (deadline %v)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, d, out, errOut)
	}
	return strings.TrimSuffix(out.String(), "\n")
}

// poll runs kubectl until ok accepts its stdout, for state that the agents
// change; it fails after d, showing the last output.
func (k *kc) poll(d time.Duration, what string, ok func(stdout string) bool, args ...string) string {
	k.t.Helper()
	deadline := time.Now().Add(d)
	for {
		out, errOut, err := k.run(args...)
		if err == nil && ok(out) {
			return out
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("waited %v for %s; kubectl %s last printed (%v):\n%s\n%s", d, what, strings.Join(args, " "), err, out, errOut)
		}
		time.Sleep(250 * time.Millisecond) // polling another process's state, with a deadline
	}
}

// timestamp runs kubectl for one RFC 3339 time.
func (k *kc) timestamp(args ...string) time.Time {
	k.t.Helper()
	out := k.ok(args...)
	ts, err := time.Parse(time.RFC3339Nano, out)
	if err != nil {
		k.t.Fatalf("kubectl %s: %q is not a time: %v", strings.Join(args, " "), out, err)
	}
	return ts
}

// matchAll accepts output that matches every pattern.
func matchAll(patterns ...string) func(string) bool {
	res := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		res[i] = regexp.MustCompile(p)
	}
	return func(out string) bool {
		for _, re := range res {
			if !re.MatchString(out) {
				return false
			}
		}
		return true
	}
}

// column returns a field of a one-row table without headers; negative
// indexes count from the end.
func column(row string, i int) string {
	f := strings.Fields(row)
	if i < 0 {
		i += len(f)
	}
	if i < 0 || i >= len(f) {
		return ""
	}
	return f[i]
}

// kubectlWatch is a kubectl running in the background (get -w).
type kubectlWatch struct {
	k      *kc
	args   []string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	out    testserver.SyncBuffer
	done   chan struct{}
}

// watch starts kubectl in the background; it is stopped at the latest when
// the test ends.
func (k *kc) watch(args ...string) *kubectlWatch {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	w := &kubectlWatch{k: k, args: args, cancel: cancel, done: make(chan struct{})}
	w.cmd = exec.CommandContext(ctx, k.bin, append(k.p.kubectlFlags(), args...)...)
	w.cmd.Stdout, w.cmd.Stderr = &w.out, &w.out
	if err := w.cmd.Start(); err != nil {
		cancel()
		k.t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	k.t.Cleanup(w.stop)
	return w
}

// until waits for the watch's output to match re.
func (w *kubectlWatch) until(d time.Duration, what string, re *regexp.Regexp) {
	w.k.t.Helper()
	deadline := time.After(d)
	for !re.MatchString(w.out.String()) {
		select {
		case <-w.done:
			w.k.t.Fatalf("kubectl %s ended before %s:\n%s", strings.Join(w.args, " "), what, w.out.String())
		case <-deadline:
			w.k.t.Fatalf("waited %v for %s; kubectl %s printed:\n%s", d, what, strings.Join(w.args, " "), w.out.String())
		case <-time.After(100 * time.Millisecond): // polling another process's output, with a deadline
		}
	}
}

// stop ends the watch.
func (w *kubectlWatch) stop() {
	w.cancel()
	<-w.done
}
