package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// The scale benchmark is configured from the environment, so that `make
// bench-scale NODES=.. PODS=..` and a plain go test command agree.
const (
	scaleNodesEnv   = "COREKUBE_BENCH_SCALE_NODES"   // default 1000
	scalePodsEnv    = "COREKUBE_BENCH_SCALE_PODS"    // default 30000
	scaleSettleEnv  = "COREKUBE_BENCH_SCALE_SETTLE"  // wait after all Running, default 30s
	scaleWindowEnv  = "COREKUBE_BENCH_SCALE_WINDOW"  // sampling window, default 60s
	scaleTimeoutEnv = "COREKUBE_BENCH_SCALE_TIMEOUT" // deadline for Ready nodes and Running pods, default 30m
	// scaleNodeIdentitiesEnv ("1") gives each node of the agent its own
	// client certificate (system:node:NAME), hence its own connection.
	scaleNodeIdentitiesEnv = "COREKUBE_BENCH_SCALE_NODE_IDENTITIES"
	// scaleBinEnv names a corekube binary to use; unset, the benchmark
	// builds one from this module into a temporary directory.
	scaleBinEnv = "COREKUBE_BENCH_BIN"
)

// scaleNamespace holds the benchmark's pods.
const scaleNamespace = "scale-bench"

// scaleConfig is one run's size and timing.
type scaleConfig struct {
	nodes, pods     int
	settle, window  time.Duration
	timeout         time.Duration
	createWorkers   int
	cpuRequest      string
	memoryRequest   string
	progressLogStep time.Duration
}

func scaleConfigFromEnv() (scaleConfig, error) {
	c := scaleConfig{
		nodes: 1000, pods: 30000,
		settle: 30 * time.Second, window: time.Minute, timeout: 30 * time.Minute,
		createWorkers: 16,
		// 30 pods of 100m and 64Mi fit on a node of the agent's default
		// capacity (4 CPUs, 16Gi, 110 pods).
		cpuRequest: "100m", memoryRequest: "64Mi",
		progressLogStep: 10 * time.Second,
	}
	var errs []error
	intEnv := func(name string, p *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a positive integer", name, v))
				return
			}
			*p = n
		}
	}
	durEnv := func(name string, p *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a duration", name, v))
				return
			}
			*p = d
		}
	}
	intEnv(scaleNodesEnv, &c.nodes)
	intEnv(scalePodsEnv, &c.pods)
	durEnv(scaleSettleEnv, &c.settle)
	durEnv(scaleWindowEnv, &c.window)
	durEnv(scaleTimeoutEnv, &c.timeout)
	if c.window == 0 {
		errs = append(errs, fmt.Errorf("%s must be positive", scaleWindowEnv))
	}
	return c, errors.Join(errs...)
}

// BenchmarkScaleSteadyState runs the cluster of the scale issue as
// separate processes of the real binary: `corekube apiserver` (embedded
// etcd), `corekube scheduler`, `corekube controllers` and one `corekube
// agent` carrying all the nodes; creates the pods with 16 clients, waits
// until every pod is Running, lets the cluster settle, then measures each
// process's CPU (utime+stime over the window) and memory (VmRSS sampled
// through the window, VmHWM). It is heavy (minutes, at full size most of a
// 2-core machine), so it runs only when named: -bench ScaleSteadyState,
// never under -short or -bench '.'. Each op is one whole cluster.
func BenchmarkScaleSteadyState(b *testing.B) {
	skipShort(b)
	if !strings.Contains(flag.Lookup("test.bench").Value.String(), "Scale") {
		b.Skip("runs only when named: -bench ScaleSteadyState")
	}
	cfg, err := scaleConfigFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	bin := corekubeBinary(b)
	var res scaleResult
	for i := range b.N {
		res = runScale(b, bin, cfg)
		res.print(os.Stdout, cfg, i+1)
	}
	b.ReportMetric(0, "ns/op") // one op is a whole cluster: its time means nothing
	b.ReportMetric(res.nodesReady.Seconds(), "nodes-ready-s")
	b.ReportMetric(res.created.Seconds(), "create-s")
	b.ReportMetric(res.allRunning.Seconds(), "all-running-s")
	for _, p := range res.procs {
		b.ReportMetric(p.cpuPercent, p.name+"-cpu-%")
		b.ReportMetric(p.rssMeanMiB, p.name+"-rss-MiB")
		b.ReportMetric(p.hwmMiB, p.name+"-peak-rss-MiB")
	}
	b.ReportMetric(res.foreignPercent, "foreign-cpu-%")
	b.ReportMetric(res.etcdMiB, "etcd-db-MiB")
}

// corekubeBinary returns $COREKUBE_BENCH_BIN or a corekube built from this
// module for the benchmark.
func corekubeBinary(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv(scaleBinEnv); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			b.Fatalf("%s: %v", scaleBinEnv, err)
		}
		return abs
	}
	out := filepath.Join(b.TempDir(), "corekube")
	// The test runs in test/bench; the module root is two levels up.
	cmd := exec.Command("go", "build", "-o", out, "./cmd/corekube")
	cmd.Dir = filepath.Join("..", "..")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/corekube: %v\n%s", err, msg)
	}
	return out
}

// proc is one corekube process of the cluster, logging to a file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	// done is closed when the process has exited; err is then its exit.
	done chan struct{}
	err  error
}

// startProc starts bin with args; the caller stops it (proc.stop).
func startProc(b *testing.B, dir, name, bin string, args ...string) *proc {
	b.Helper()
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(p.log)
	if err != nil {
		b.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		b.Fatalf("start %s: %v", name, err)
	}
	// The waiter is owned by p: it ends when the process exits, which
	// stop guarantees.
	go func() {
		p.err = p.cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited returns a non-nil error if the process has exited.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.tail(30))
	default:
		return nil
	}
}

// stop ends the process: SIGTERM, then SIGKILL if it has not exited
// within 30s (the apiserver drains requests and closes etcd first).
func (p *proc) stop(b *testing.B) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		b.Logf("%s did not stop within 30s of SIGTERM: killing it", p.name)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// cluster is the processes of one run.
type cluster struct {
	apiserver, scheduler, controllers, agent *proc
}

func (c *cluster) all() []*proc {
	return []*proc{c.apiserver, c.scheduler, c.controllers, c.agent}
}

// stop stops the processes that were started, the server last.
func (c *cluster) stop(b *testing.B) {
	procs := c.all()
	for i := len(procs) - 1; i >= 0; i-- {
		if procs[i] != nil {
			procs[i].stop(b)
		}
	}
}

// check returns an error if any process has exited.
func (c *cluster) check() error {
	for _, p := range c.all() {
		if p == nil {
			continue
		}
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}

// scaleResult is what one run measured.
type scaleResult struct {
	nodesReady, created, allRunning time.Duration
	procs                           []procResult
	machineBusyPercent              float64
	foreignPercent                  float64
	etcdMiB                         float64
}

// procResult is one process's steady state over the window.
type procResult struct {
	name       string
	cpuPercent float64 // of one CPU
	rssMeanMiB float64
	rssMaxMiB  float64
	hwmMiB     float64
	// anonMiB and fileMiB split the RSS at the end of the window
	// (smaps_rollup): heap, stacks and runtime versus mapped files (the
	// binary, etcd's bbolt mmap).
	anonMiB, fileMiB float64
}

func runScale(b *testing.B, bin string, cfg scaleConfig) scaleResult {
	b.Helper()
	// Every run cleans up after itself, so that with -benchtime Nx no
	// cluster runs beside the next one.
	dir, err := os.MkdirTemp("", "corekube-bench-scale-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	dataDir := filepath.Join(dir, "etcd")
	var c cluster
	defer c.stop(b) // agent, controllers, scheduler, then the server
	c.apiserver = startProc(b, dir, "apiserver", bin, "apiserver", "--data-dir", dataDir, "--write-kubeconfig", kubeconfig, "--listen", "127.0.0.1:0")
	client := waitServer(b, &c, kubeconfig)
	// No secure ports: other runs on the machine may hold kube's.
	c.scheduler = startProc(b, dir, "scheduler", bin, "scheduler", "--kubeconfig", kubeconfig, "--secure-port=0")
	c.controllers = startProc(b, dir, "controllers", bin, "controllers", "--kubeconfig", kubeconfig, "--secure-port=0")

	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create namespace: %v", err)
	}

	// Informers count Ready nodes and Running pods; they are stopped
	// before the measurement so that the benchmark's own watch decoding
	// is not part of the servers' steady state.
	infCtx, stopInformers := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	readyNodes := newCounter(factory.Core().V1().Nodes().Informer(), func(obj any) bool {
		n, ok := obj.(*v1.Node)
		return ok && nodeReady(n)
	})
	podFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(scaleNamespace))
	runningPods := newCounter(podFactory.Core().V1().Pods().Informer(), func(obj any) bool {
		p, ok := obj.(*v1.Pod)
		return ok && p.Status.Phase == v1.PodRunning
	})
	factory.Start(infCtx.Done())
	podFactory.Start(infCtx.Done())
	defer func() {
		stopInformers()
		factory.Shutdown()
		podFactory.Shutdown()
	}()

	var res scaleResult
	start := time.Now()
	agentArgs := []string{"agent", "--kubeconfig", kubeconfig, "--nodes", strconv.Itoa(cfg.nodes)}
	if os.Getenv(scaleNodeIdentitiesEnv) == "1" {
		agentArgs = append(agentArgs, "--node-identities-ca-dir", filepath.Join(dataDir, "pki"))
	}
	c.agent = startProc(b, dir, "agent", bin, agentArgs...)
	if err := readyNodes.wait(ctx, &c, "Ready nodes", cfg.nodes, cfg.progressLogStep); err != nil {
		b.Fatal(err)
	}
	res.nodesReady = time.Since(start)

	start = time.Now()
	if err := createPods(ctx, client, cfg); err != nil {
		b.Fatal(err)
	}
	res.created = time.Since(start)
	if err := runningPods.wait(ctx, &c, "Running pods", cfg.pods, cfg.progressLogStep); err != nil {
		b.Fatal(err)
	}
	res.allRunning = time.Since(start)
	stopInformers()
	factory.Shutdown()
	podFactory.Shutdown()

	fmt.Fprintf(os.Stderr, "scale: %d nodes Ready in %v, %d pods created in %v, all Running after %v; settling %v, then measuring %v\n",
		cfg.nodes, res.nodesReady.Round(time.Millisecond), cfg.pods, res.created.Round(time.Millisecond),
		res.allRunning.Round(time.Millisecond), cfg.settle, cfg.window)
	select {
	case <-time.After(cfg.settle):
	case <-ctx.Done():
		b.Fatal(ctx.Err())
	}
	if err := c.check(); err != nil {
		b.Fatal(err)
	}
	if err := measure(&res, c.all(), cfg.window); err != nil {
		b.Fatal(err)
	}
	if err := c.check(); err != nil {
		b.Fatal(err)
	}
	res.etcdMiB = float64(etcdDBSize(dataDir)) / (1 << 20)
	fmt.Fprintf(os.Stderr, "scale: node identities %q; agent process: %d sockets open, %d threads\n",
		os.Getenv(scaleNodeIdentitiesEnv), countSockets(c.agent.pid()), countThreads(c.agent.pid()))
	return res
}

// waitServer waits until the apiserver has written its kubeconfig and
// answers /readyz, and returns a client for it. Polling is the only signal
// another process offers.
func waitServer(b *testing.B, c *cluster, kubeconfig string) kubernetes.Interface {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var lastErr error
	for time.Now().Before(deadline) {
		if err := c.check(); err != nil {
			b.Fatal(err)
		}
		client, err := readyClient(kubeconfig)
		if err == nil {
			return client
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("apiserver not ready within 2m: %v\n%s", lastErr, c.apiserver.tail(30))
	return nil
}

func readyClient(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS = -1
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, err
	}
	return client, nil
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// counter counts the objects of an informer for which pred holds.
type counter struct {
	pred    func(obj any) bool
	mu      sync.Mutex
	matches map[string]bool
	// changed is signalled (without blocking) on every change of the count.
	changed chan struct{}
}

func newCounter(inf cache.SharedIndexInformer, pred func(obj any) bool) *counter {
	c := &counter{pred: pred, matches: map[string]bool{}, changed: make(chan struct{}, 1)}
	set := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		c.set(key, c.pred(obj))
	}
	// AddEventHandler fails only on a stopped informer; these are new.
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.set(key, false)
			}
		},
	})
	return c
}

func (c *counter) set(key string, match bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.matches[key] == match {
		return
	}
	if match {
		c.matches[key] = true
	} else {
		delete(c.matches, key)
	}
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.matches)
}

// wait returns once the count reaches want, logging progress every step;
// it fails when ctx ends or a process of the cluster exits.
func (c *counter) wait(ctx context.Context, cl *cluster, what string, want int, step time.Duration) error {
	progress := time.NewTicker(step)
	defer progress.Stop()
	start := time.Now()
	for {
		if n := c.count(); n >= want {
			return nil
		}
		select {
		case <-c.changed:
		case <-progress.C:
			if err := cl.check(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "scale: %d/%d %s after %v\n", c.count(), want, what, time.Since(start).Round(time.Second))
		case <-ctx.Done():
			return fmt.Errorf("%d/%d %s when the deadline passed: %w", c.count(), want, what, ctx.Err())
		}
	}
}

// createPods creates cfg.pods pods with cfg.createWorkers clients.
func createPods(ctx context.Context, client kubernetes.Interface, cfg scaleConfig) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range cfg.createWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.pods || ctx.Err() != nil {
					return
				}
				_, err := client.CoreV1().Pods(scaleNamespace).Create(ctx, scalePod(i, cfg), metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					cancel(fmt.Errorf("create pod %d: %w", i, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

// scalePod runs forever: an nginx container without a command.
func scalePod(i int, cfg scaleConfig) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%05d", i), Labels: map[string]string{"app": "scale"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name:  "nginx",
			Image: "nginx:1.27",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU:    resource.MustParse(cfg.cpuRequest),
				v1.ResourceMemory: resource.MustParse(cfg.memoryRequest),
			}},
		}}},
	}
}

// measure samples procs over window: CPU from the utime+stime delta, RSS
// every second, VmHWM at the end; and the machine's busy time, to tell how
// much of it was someone else's.
func measure(res *scaleResult, procs []*proc, window time.Duration) error {
	type sample struct {
		ticks  uint64
		rssSum float64
		rssMax float64
		n      int
	}
	samples := make([]sample, len(procs))
	for i, p := range procs {
		t, err := procTicks(p.pid())
		if err != nil {
			return err
		}
		samples[i].ticks = t
	}
	selfStart, err := procTicks(os.Getpid())
	if err != nil {
		return err
	}
	stat0, err := readProcStat()
	if err != nil {
		return err
	}
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(start) < window {
		<-tick.C
		for i, p := range procs {
			rss, _, err := procMemory(p.pid())
			if err != nil {
				return err
			}
			samples[i].rssSum += rss
			samples[i].rssMax = max(samples[i].rssMax, rss)
			samples[i].n++
		}
	}
	elapsed := time.Since(start).Seconds()
	stat1, err := readProcStat()
	if err != nil {
		return err
	}
	selfEnd, err := procTicks(os.Getpid())
	if err != nil {
		return err
	}
	ours := float64(selfEnd - selfStart)
	for i, p := range procs {
		t, err := procTicks(p.pid())
		if err != nil {
			return err
		}
		_, hwm, err := procMemory(p.pid())
		if err != nil {
			return err
		}
		anon, file, err := procRSSSplit(p.pid())
		if err != nil {
			return err
		}
		d := float64(t - samples[i].ticks)
		ours += d
		res.procs = append(res.procs, procResult{
			name:       p.name,
			cpuPercent: d / clockTicks / elapsed * 100,
			rssMeanMiB: samples[i].rssSum / float64(max(samples[i].n, 1)),
			rssMaxMiB:  samples[i].rssMax,
			hwmMiB:     hwm,
			anonMiB:    anon,
			fileMiB:    file,
		})
	}
	// utime and stime count in the same clock ticks (clockTicks, USER_HZ)
	// as /proc/stat.
	if total := float64(stat1.total - stat0.total); total > 0 {
		busy := float64(stat1.busy - stat0.busy)
		res.machineBusyPercent = busy / total * 100
		res.foreignPercent = (busy - ours) / total * 100
	}
	return nil
}

// procTicks returns utime+stime of pid, in clock ticks.
func procTicks(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of process %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; fields count from
	// after its closing parenthesis: state is field 3, utime 14, stime 15.
	rest := data[bytes.LastIndexByte(data, ')')+1:]
	f := strings.Fields(string(rest))
	if len(f) < 13 {
		return 0, fmt.Errorf("cpu of process %d: short /proc stat %q", pid, data)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("cpu of process %d: %w", pid, err)
	}
	return utime + stime, nil
}

// procMemory returns VmRSS and VmHWM of pid in MiB.
func procMemory(pid int) (rss, hwm float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("memory of process %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("memory of process %d: %s: %w", pid, name, err)
		}
		if name == "VmRSS" {
			rss = kb / 1024
		} else {
			hwm = kb / 1024
		}
	}
	return rss, hwm, sc.Err()
}

// procRSSSplit returns the anonymous and the file-backed resident memory
// of pid in MiB, from /proc/PID/smaps_rollup (Rss = Anonymous + file pages
// + shared memory; the last is counted with the files).
func procRSSSplit(pid int) (anon, file float64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("smaps of process %d: %w", pid, err)
	}
	var rss float64
	for _, line := range strings.Split(string(data), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "Rss" && name != "Anonymous") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("smaps of process %d: %s: %w", pid, name, err)
		}
		if name == "Rss" {
			rss = kb / 1024
		} else {
			anon = kb / 1024
		}
	}
	return anon, rss - anon, nil
}

// etcdDBSize is the size of the etcd database file (member/snap/db) under
// dataDir: the live keys and their history since the last compaction and
// defragmentation, without the preallocated WAL segments.
func etcdDBSize(dataDir string) int64 {
	var n int64
	_ = filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "db" && filepath.Base(filepath.Dir(path)) == "snap" {
			if info, err := d.Info(); err == nil {
				n = info.Size()
			}
		}
		return nil
	})
	return n
}

// print writes the run as a table.
func (r scaleResult) print(w io.Writer, cfg scaleConfig, run int) {
	fmt.Fprintf(w, "\nscale run %d: %d nodes (one agent process), %d pods (%s cpu, %s memory each), %d create clients\n",
		run, cfg.nodes, cfg.pods, cfg.cpuRequest, cfg.memoryRequest, cfg.createWorkers)
	fmt.Fprintf(w, "  nodes Ready after %v; pods created in %v (%.0f/s); all Running %v after the first create\n",
		r.nodesReady.Round(time.Millisecond), r.created.Round(time.Millisecond),
		float64(cfg.pods)/r.created.Seconds(), r.allRunning.Round(time.Millisecond))
	fmt.Fprintf(w, "  steady state: %v after all Running, over %v; CPU %% of one CPU\n", cfg.settle, cfg.window)
	fmt.Fprintf(w, "  %-12s %8s %14s %13s %14s %9s %9s\n", "process", "CPU %", "RSS mean MiB", "RSS max MiB", "peak RSS MiB", "anon MiB", "file MiB")
	for _, p := range r.procs {
		fmt.Fprintf(w, "  %-12s %8.1f %14.0f %13.0f %14.0f %9.0f %9.0f\n", p.name, p.cpuPercent, p.rssMeanMiB, p.rssMaxMiB, p.hwmMiB, p.anonMiB, p.fileMiB)
	}
	fmt.Fprintf(w, "  machine busy %.1f%% of all CPUs, of which not ours %.1f%%; etcd db file %.0f MiB\n\n",
		r.machineBusyPercent, r.foreignPercent, r.etcdMiB)
}

// countSockets counts the sockets pid holds open (its connections to the
// API server, and its listeners).
func countSockets(pid int) int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

// countThreads is the Threads line of pid's status.
func countThreads(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}
