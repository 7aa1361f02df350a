package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corekube/corekube/test/etcdcluster"
	"github.com/corekube/corekube/test/informertest"
	"github.com/corekube/corekube/test/testserver"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestHATopology runs the HA topology of deploy/compose as separate
// processes on this machine, which is how CI proves it: three real etcd
// members, two `corekube apiserver` processes on one --data-dir behind a
// round-robin TCP load balancer, `corekube scheduler` and `corekube
// controllers` twice each with leader election, and one `corekube agent`
// with three nodes; the credentials are made by deploy/compose/pki-init.sh,
// as in the compose file. Through the load balancer, kubectl creates pods
// that get scheduled and Running and drains a node; then one API server,
// the etcd leader and the active scheduler are SIGKILLed at once, while a
// client writes through the balancer, and the cluster keeps working: writes
// begun after etcd's election succeed, no acknowledged write is lost, new
// pods are scheduled (no pod twice) and run, and the killed API server and
// etcd member rejoin. The figures are logged (docs/deploy.md has them).
func TestHATopology(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 etcd members and 7 corekube processes")
	}
	kubectl := kubectlPath(t)
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("WARNING: openssl is not on PATH: deploy/compose/pki-init.sh cannot run, the HA topology test did NOT run")
	}
	// etcd over TLS with client certificates, as compose.yaml and the
	// systemd units run it.
	etcd := etcdcluster.Start(t, 3, etcdcluster.Options{TLS: true})
	etcdTLS := etcd.TLS()

	lb := startBalancer(t)
	dir := t.TempDir()
	pkiInit := exec.Command("sh", filepath.Join(repoRoot(t), "deploy", "compose", "pki-init.sh"))
	pkiInit.Env = append(os.Environ(), "COREKUBE_DIR="+dir, "COREKUBE_SERVER=https://"+lb.addr())
	if out, err := pkiInit.CombinedOutput(); err != nil {
		t.Fatalf("pki-init.sh: %v\n%s", err, out)
	}
	admin := filepath.Join(dir, "admin.kubeconfig")
	k := &haKubectl{t: t, bin: kubectl, kubeconfig: admin, cacheDir: t.TempDir()}

	// Two API servers on one --data-dir: they load the CA pki-init.sh
	// made in <data-dir>/pki and share its ServiceAccount key, given
	// explicitly (the flags compose.yaml passes).
	saKey := filepath.Join(dir, "pki", "sa.key")
	apiserverArgs := func(listen string) []string {
		return []string{"apiserver", "--listen", listen,
			"--etcd-servers", strings.Join(etcd.Endpoints(), ","), "--data-dir", dir,
			"--etcd-cafile", etcdTLS.CAFile, "--etcd-certfile", etcdTLS.CertFile, "--etcd-keyfile", etcdTLS.KeyFile,
			"--service-account-signing-key-file", saKey, "--service-account-key-file", saKey}
	}
	addrs := []string{freeAddr(t), freeAddr(t)}
	apiservers := []*haProc{
		startHAProc(t, "apiserver-1", apiserverArgs(addrs[0])...),
		startHAProc(t, "apiserver-2", apiserverArgs(addrs[1])...),
	}
	lb.setBackends(addrs...)
	adminConfig, err := clientcmd.BuildConfigFromFlags("", admin)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range apiservers {
		waitReadyz(t, adminConfig, addrs[i], p)
	}

	// A ServiceAccount token issued by one API server authenticates on
	// the other: the signing key is shared.
	k.ok("create", "serviceaccount", "robot")
	token := k.ok("--server", "https://"+addrs[0], "create", "token", "robot")
	if user := whoAmI(t, adminConfig, addrs[1], token); user != "system:serviceaccount:default:robot" {
		t.Fatalf("token from apiserver-1 on apiserver-2: user %q", user)
	}

	// A client-go pod informer through the balancer, kept through every
	// fault: at the end it must hold exactly the server's pods, and no
	// handler may ever see a pod's resourceVersion go back.
	informerConfig := rest.CopyConfig(adminConfig)
	informerConfig.QPS = -1
	informerClient, err := kubernetes.NewForConfig(informerConfig)
	if err != nil {
		t.Fatal(err)
	}
	informer := informertest.Start(t, informerClient, "default", "")

	// Two of each on one machine: no secure port (kube's 10259 and 10257
	// would collide).
	election := []string{"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms", "--secure-port=0"}
	schedulerArgs := append([]string{"scheduler", "--kubeconfig", filepath.Join(dir, "scheduler.kubeconfig")}, election...)
	controllersArgs := append([]string{"controllers", "--kubeconfig", filepath.Join(dir, "controllers.kubeconfig"),
		"--cluster-signing-cert-file", filepath.Join(dir, "pki", "ca.crt"), "--cluster-signing-key-file", filepath.Join(dir, "pki", "ca.key")}, election...)
	schedulers := []*haProc{startHAProc(t, "scheduler-1", schedulerArgs...), startHAProc(t, "scheduler-2", schedulerArgs...)}
	controllers := []*haProc{startHAProc(t, "controllers-1", controllersArgs...), startHAProc(t, "controllers-2", controllersArgs...)}
	startHAProc(t, "agent", "agent", "--kubeconfig", filepath.Join(dir, "agent.kubeconfig"), "--nodes", "3",
		"--kubelet-listen", freeAddr(t))

	k.waitNodes(t, 3)
	k.ok("wait", "--for=condition=Ready", "node/node-1", "node/node-2", "node/node-3", "--timeout=60s")
	activeScheduler := leaseHolderProc(t, k, "kube-scheduler", schedulers)
	leaseHolderProc(t, k, "kube-controller-manager", controllers)

	// Pods without a controller: scheduled by the elected scheduler, run
	// by the agent.
	k.apply(t, podsManifest("ha", 6))
	k.ok("wait", "--for=condition=Ready", "pod", "-l", "app=ha", "--timeout=60s")

	// Drain node-1 (cordon, evict through the eviction API, wait for the
	// agent to stop the pods).
	out := k.ok("drain", "node-1", "--force", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s")
	if !strings.Contains(out, "node/node-1 drained") {
		t.Fatalf("kubectl drain node-1:\n%s", out)
	}
	survivors := strings.Fields(k.ok("get", "pods", "-l", "app=ha", "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.nodeName} {end}"))
	for _, s := range survivors {
		if strings.HasSuffix(s, "=node-1") {
			t.Fatalf("pod %s still on node-1 after the drain", s)
		}
	}
	t.Logf("after the drain: %v", survivors)

	// A client writing through the balancer all along: what it sees of the
	// faults (failed requests, longest time without a successful write)
	// and, at the end, that every write it was answered for is there.
	writer := startLeaseWriter(t, adminConfig)
	select {
	case <-writer.warm:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer had no 10 writes acknowledged in 30s")
	}

	// The faults, at once: one API server, the etcd leader and the active
	// scheduler are SIGKILLed.
	leader := etcdLeader(t, etcd)
	killed := time.Now()
	apiservers[0].kill(t)
	leader.Kill()
	activeScheduler.kill(t)

	// kubectl through the load balancer keeps working; new pods are
	// scheduled (by the other scheduler, once the lease has expired) to
	// the schedulable nodes and run.
	k.apply(t, podsManifest("after", 4))
	t.Logf("first write after the faults accepted %v after them", time.Since(killed).Round(time.Millisecond))
	k.ok("wait", "--for=condition=Ready", "pod", "-l", "app=after", "--timeout=60s")
	t.Logf("new pods Running %v after the faults", time.Since(killed).Round(time.Millisecond))
	for _, s := range strings.Fields(k.ok("get", "pods", "-l", "app=after", "-o", "jsonpath={range .items[*]}{.spec.nodeName} {end}")) {
		if s == "node-1" {
			t.Errorf("a pod was scheduled to the cordoned node-1")
		}
	}
	newScheduler := leaseHolderProc(t, k, "kube-scheduler", schedulers)
	if newScheduler == activeScheduler {
		t.Fatal("the killed scheduler still holds the lease")
	}

	// Nothing was lost: every pod that survived the drain is still there
	// and Running, and the nodes stay Ready.
	after := strings.Fields(k.ok("get", "pods", "-l", "app=ha", "-o", "jsonpath={range .items[*]}{.metadata.name}={.spec.nodeName} {end}"))
	if strings.Join(after, " ") != strings.Join(survivors, " ") {
		t.Errorf("pods after the faults %v, want %v", after, survivors)
	}
	k.ok("wait", "--for=condition=Ready", "pod", "-l", "app=ha", "--timeout=30s")
	k.ok("wait", "--for=condition=Ready", "node/node-1", "node/node-2", "node/node-3", "--timeout=30s")
	// A graceful delete still completes (agent, API server and etcd).
	k.ok("delete", "pod", "after-1", "--wait=true", "--timeout=60s")

	// The writer: every acknowledged write is stored (objects lost: 0).
	acked, failed, slowest := writer.stop()
	stored := map[string]bool{}
	for _, name := range strings.Fields(k.ok("get", "leases", "-l", "writer=ha", "-o", "jsonpath={range .items[*]}{.metadata.name} {end}")) {
		stored[name] = true
	}
	lost := 0
	for _, name := range acked {
		if !stored[name] {
			lost++
		}
	}
	// Writes fail only around the faults: the request in flight on the
	// killed API server's connection, and the proposals the dead etcd
	// leader took with it, which etcd answers "request timed out" after
	// its request timeout (5 s + 2 election timeouts), as kube-apiserver
	// would pass on. Writes begun later succeed.
	var lastFailed time.Duration
	for _, f := range failed {
		lastFailed = max(lastFailed, f.began.Sub(killed))
		if f.began.Sub(killed) > 5*time.Second {
			t.Errorf("write %s begun %v after the faults failed after %v: %v", f.name, f.began.Sub(killed).Round(time.Millisecond), f.took.Round(time.Millisecond), f.err)
		}
	}
	examples := failed[:min(3, len(failed))]
	t.Logf("writer through the balancer (50 creates/s): %d acknowledged, %d failed (the last begun %v after the faults; e.g. %v), slowest answer %v, acknowledged writes lost %d",
		len(acked), len(failed), lastFailed.Round(time.Millisecond), examples, slowest.Round(time.Millisecond), lost)
	if lost > 0 {
		t.Errorf("%d acknowledged writes lost", lost)
	}
	if len(acked) == 0 {
		t.Error("the writer had no write acknowledged")
	}

	// No pod was bound twice across the scheduler handover: at most one
	// Scheduled event each.
	scheduled := map[string]int{}
	for _, name := range strings.Fields(k.ok("get", "events", "--field-selector", "reason=Scheduled", "-o", "jsonpath={range .items[*]}{.involvedObject.name} {end}")) {
		scheduled[name]++
	}
	for name, n := range scheduled {
		if n > 1 {
			t.Errorf("pod %s: %d Scheduled events, want at most 1", name, n)
		}
	}

	// The killed API server and etcd member rejoin.
	if err := leader.Restart(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := leader.WaitHealthy(ctx); err != nil {
		t.Fatalf("%v\n%s", err, etcd.Logs())
	}
	apiservers[0] = startHAProc(t, "apiserver-1 (restarted)", apiserverArgs(addrs[0])...)
	waitReadyz(t, adminConfig, addrs[0], apiservers[0])
	if got := k.ok("--server", "https://"+addrs[0], "get", "pods", "-l", "app=after", "-o", "name"); strings.Count(got, "pod/") != 3 {
		t.Errorf("restarted apiserver-1 lists:\n%s\nwant the 3 pods left of app=after", got)
	}
	took := informer.WaitConverged(t, informerClient, 30*time.Second)
	informer.CheckMonotonic(t)
	t.Logf("the informer through the balancer holds exactly the server's pods (waited %v); handlers ran %+v", took.Round(time.Millisecond), informer.Counts())
	if t.Failed() {
		t.Logf("etcd:\n%s", etcd.Logs())
	}
}

// leaseWriter creates Leases labelled writer=ha through the balancer, one
// every 20 ms on schedule, each in its own request whatever the previous
// ones are doing (an open loop: a stuck request does not hide the ones
// after it), until stopped.
type leaseWriter struct {
	done    chan struct{}
	stopped chan struct{}
	warm    chan struct{} // closed once 10 writes were acknowledged

	mu      sync.Mutex
	acked   []string
	failed  []failedWrite
	slowest time.Duration
}

// failedWrite is one write the writer was not answered for.
type failedWrite struct {
	name  string
	began time.Time
	took  time.Duration
	err   error
}

func (f failedWrite) String() string {
	return fmt.Sprintf("%s after %v: %v", f.name, f.took.Round(time.Millisecond), f.err)
}

func startLeaseWriter(t *testing.T, admin *rest.Config) *leaseWriter {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	cfg.QPS = -1
	cfg.Timeout = 30 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &leaseWriter{done: make(chan struct{}), stopped: make(chan struct{}), warm: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		var inflight sync.WaitGroup
		defer inflight.Wait()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				name := fmt.Sprintf("w-%d", i)
				lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"writer": "ha"}}}
				began := time.Now()
				_, err := client.CoordinationV1().Leases("default").Create(context.Background(), lease, metav1.CreateOptions{})
				took := time.Since(began)
				w.mu.Lock()
				defer w.mu.Unlock()
				w.slowest = max(w.slowest, took)
				if err != nil {
					w.failed = append(w.failed, failedWrite{name, began, took, err})
					return
				}
				w.acked = append(w.acked, name)
				if len(w.acked) == 10 {
					close(w.warm)
				}
			}()
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the writer (once), waits for the requests in flight and
// returns what it saw.
func (w *leaseWriter) stop() (acked []string, failed []failedWrite, slowest time.Duration) {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	<-w.stopped
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.failed, w.slowest
}

// etcdLeader is the member that leads the cluster now.
func etcdLeader(t *testing.T, c *etcdcluster.Cluster) *etcdcluster.Member {
	t.Helper()
	files := c.TLS()
	tlsConfig, err := transport.TLSInfo{CertFile: files.CertFile, KeyFile: files.KeyFile, TrustedCAFile: files.CAFile}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, TLS: tlsConfig, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range c.Members() {
		st, err := client.Status(ctx, m.ClientURL)
		if err != nil {
			t.Fatalf("etcd status of %s: %v", m.Name, err)
		}
		if st.Header.MemberId == st.Leader {
			return m
		}
	}
	t.Fatal("no etcd member leads")
	return nil
}

// repoRoot is the repository's top directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// podsManifest is n pods named prefix-1..n labelled app=prefix, no
// controller, no node.
func podsManifest(prefix string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata: {name: %s-%d, labels: {app: %s}}\nspec: {containers: [{name: c, image: nginx:1.27}]}\n---\n", prefix, i, prefix)
	}
	return b.String()
}

// haKubectl runs kubectl with one kubeconfig.
type haKubectl struct {
	t                    *testing.T
	bin                  string
	kubeconfig, cacheDir string
}

// ok runs kubectl, which must succeed, and returns its output.
func (k *haKubectl) ok(args ...string) string {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", k.cacheDir}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return strings.TrimSpace(out.String())
}

// waitNodes polls until n nodes are registered (kubectl wait fails at
// once on a node that does not exist yet).
func (k *haKubectl) waitNodes(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out := k.ok("get", "nodes", "-o", "name")
		if strings.Count(out, "node/") >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d nodes after 60s, want %d:\n%s", strings.Count(out, "node/"), n, out)
		}
		time.Sleep(100 * time.Millisecond) // polling another process's registrations, with a deadline
	}
}

// apply writes manifest to a file and applies it.
func (k *haKubectl) apply(t *testing.T, manifest string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	k.ok("apply", "-f", file)
}

// haProc is one corekube process of the topology.
type haProc struct {
	name   string
	cmd    *exec.Cmd
	out    *testserver.SyncBuffer
	exited chan struct{}
}

// startHAProc starts the corekube binary with args; it is killed when the
// test ends, and its output logged if the test failed.
func startHAProc(t *testing.T, name string, args ...string) *haProc {
	t.Helper()
	p := &haProc{name: name, out: &testserver.SyncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("--- %s (corekube %s) ---\n%s", name, strings.Join(args, " "), p.out.String())
		}
	})
	return p
}

// kill SIGKILLs the process and waits for it to be gone.
func (p *haProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", p.name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still running 10s after SIGKILL", p.name)
	}
}

func (p *haProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// waitReadyz polls the API server at addr (not through the balancer) until
// its /readyz says ok.
func waitReadyz(t *testing.T, admin *rest.Config, addr string, p *haProc) {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	cfg.Host = "https://" + addr
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(cfg.Host + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(body) == "ok" {
				return
			}
		}
		if !p.running() {
			t.Fatalf("%s exited before it was ready:\n%s", p.name, p.out.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 30s:\n%s", p.name, p.out.String())
		}
		time.Sleep(50 * time.Millisecond) // polling another process's readiness, with a deadline
	}
}

// whoAmI is the user a bearer token authenticates as on the server at addr
// (a SelfSubjectReview with the token alone), "" when it does not.
func whoAmI(t *testing.T, admin *rest.Config, addr, token string) string {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(admin.CAData) {
		t.Fatal("admin kubeconfig has no CA")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest(http.MethodPost, "https://"+addr+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
		strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Logf("selfsubjectreview on %s: %d %s", addr, resp.StatusCode, body)
		return ""
	}
	if err := json.Unmarshal(body, &review); err != nil {
		t.Fatal(err)
	}
	return review.Status.UserInfo.Username
}

// leaseHolderProc polls until the Lease kube-system/name is held by one of
// procs (each logs its identity when it campaigns) and returns it.
func leaseHolderProc(t *testing.T, k *haKubectl, name string, procs []*haProc) *haProc {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var holder string
	for time.Now().Before(deadline) {
		holder = k.ok("get", "lease", "-n", "kube-system", name, "--ignore-not-found", "-o", "jsonpath={.spec.holderIdentity}")
		if holder != "" {
			for _, p := range procs {
				if p.running() && strings.Contains(p.out.String(), "identity="+holder) {
					return p
				}
			}
		}
		time.Sleep(100 * time.Millisecond) // polling the lease, with a deadline
	}
	t.Fatalf("lease kube-system/%s held by %q after 30s, not by a running process", name, holder)
	return nil
}

// balancer is a round-robin TCP load balancer, as haproxy in TCP mode in
// compose.yaml: each connection goes to the next backend that accepts it,
// so that a dead API server (connection refused) is skipped.
type balancer struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string
	next     int
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// startBalancer listens on a loopback port; its accept loop and every
// proxied connection end when the test does.
func startBalancer(t *testing.T) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(b.close)
	return b
}

func (b *balancer) addr() string { return b.ln.Addr().String() }

func (b *balancer) setBackends(addrs ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = addrs
}

func (b *balancer) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return // closed
		}
		if !b.track(c) {
			c.Close()
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer b.untrack(c)
			b.proxy(c)
		}()
	}
}

// track registers a connection so that close ends it; false once closed.
func (b *balancer) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *balancer) untrack(c net.Conn) {
	c.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.conns, c)
}

// pick returns the backends in the order to try for one connection.
func (b *balancer) pick() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.backends)
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, b.backends[(b.next+i)%n])
	}
	if n > 0 {
		b.next = (b.next + 1) % n
	}
	return out
}

// proxy connects client to the first backend that answers and copies both
// ways until either side closes.
func (b *balancer) proxy(client net.Conn) {
	var backend net.Conn
	var err error
	for _, addr := range b.pick() {
		if backend, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			break
		}
	}
	if backend == nil {
		return
	}
	if !b.track(backend) {
		backend.Close()
		return
	}
	defer b.untrack(backend)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Either side closing ends the pair (as haproxy does).
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(backend, client)
	go pipe(client, backend)
	<-done
	<-done
}

// close stops accepting, ends every proxied connection and waits for the
// goroutines.
func (b *balancer) close() {
	b.ln.Close()
	b.mu.Lock()
	conns := b.conns
	b.conns = nil
	b.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	b.wg.Wait()
}
