package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corekube/corekube/auth/pki"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The node-simulator comparisons (issue 17): the same cluster of corekube
// processes (apiserver, scheduler, controllers) with its nodes simulated
// by KWOK (sigs.k8s.io/kwok, the `kwok` controller built into bin/ by
// `make bench-kwok`), by kubemark's hollow kubelets (kubemark_test.go,
// `make bench-kubemark`) or by corekube's own agents, one agent process
// per 1,000 nodes. Sizes come from scaleConfigFromEnv (NODES, PODS,
// SETTLE, WINDOW, TIMEOUT) and these:
const (
	// kwokBinEnv names the kwok binary; the benchmark fails without it
	// (it runs only when named, so this is never a skip in make test).
	kwokBinEnv = "COREKUBE_BENCH_KWOK_BIN"
	// kwokModesEnv lists the simulators to run, one after the other:
	// "kwok,agent" (the default), "kwok" or "agent".
	kwokModesEnv = "COREKUBE_BENCH_KWOK_MODES"
	// simLatencyPodsEnv and simLatencyQPSEnv size the latency phase of
	// both comparisons (named for the first): pods created at a steady
	// rate once the cluster holds its pods, as ClusterLoader2's density
	// test adds latency pods to saturation pods (defaults 500 pods at
	// 25/s).
	simLatencyPodsEnv = "COREKUBE_BENCH_KWOK_LATENCY_PODS"
	simLatencyQPSEnv  = "COREKUBE_BENCH_KWOK_LATENCY_QPS"
	// kwokConfigEnv replaces testdata/kwok.yaml (e.g. more parallelism).
	kwokConfigEnv = "COREKUBE_BENCH_KWOK_CONFIG"
)

// kwokNodeAnnotation marks the nodes kwok manages (its documented
// --manage-nodes-with-annotation-selector) and is the key of the taint that
// keeps real workloads off fake nodes.
const (
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
	nodesPerAgent      = 1000
)

// BenchmarkKwokVsAgent starts corekube's apiserver, scheduler and
// controllers as processes of bin/corekube, then simulates NODES nodes with
// kwok or with corekube agents, and measures the simulator's CPU and RSS
// with the nodes alone (per node) and again with PODS pods Running (the
// difference per pod), and pod startup latency (created -> scheduled ->
// running as watched) for the bulk create and for a steady-rate batch. It
// fails on any sign that kwok does not work against corekube: an error in
// kwok's log, nodes never Ready, pods never Running. Heavy: it runs only
// when named (-bench KwokVsAgent), never under -short or make test.
func BenchmarkKwokVsAgent(b *testing.B) {
	skipShort(b)
	if !strings.Contains(flag.Lookup("test.bench").Value.String(), "Kwok") {
		b.Skip("runs only when named: -bench KwokVsAgent")
	}
	cfg, err := scaleConfigFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	kc, err := simConfigFromEnv(kwokModesEnv, []string{"kwok", "agent"})
	if err != nil {
		b.Fatal(err)
	}
	runNodeSims(b, kc, cfg)
}

// runNodeSims runs each of kc's modes in turn, b.N times, prints each run
// and reports the last runs' figures per node and per pod.
func runNodeSims(b *testing.B, kc simConfig, cfg scaleConfig) {
	bin := corekubeBinary(b)
	var results []simResult
	for range b.N {
		results = results[:0]
		for _, mode := range kc.modes {
			r := runNodeSim(b, bin, kc, cfg, mode)
			r.print(os.Stdout, cfg, kc)
			results = append(results, r)
		}
	}
	b.ReportMetric(0, "ns/op")
	for _, r := range results {
		b.ReportMetric(r.rssPerNodeKiB(), r.mode+"-rss-KiB/node")
		b.ReportMetric(r.rssPerPodKiB(cfg), r.mode+"-rss-KiB/pod")
		b.ReportMetric(r.cpuPerNodeMilli(), r.mode+"-mCPU/node")
		b.ReportMetric(r.cpuPerPodMilli(cfg), r.mode+"-mCPU/pod")
		// The bench's clock (create's return -> watched Running): the
		// server's timestamps have whole seconds only.
		b.ReportMetric(r.latency.ClientPodStartup.P99ms, r.mode+"-startup-p99-ms")
	}
}

// simConfig is what a node-simulator comparison runs: its modes in order
// and the binaries of the simulators among them.
type simConfig struct {
	modes       []string
	kwokBin     string
	kubemarkBin string
	latencyPods int
	latencyQPS  float64
}

// simBinEnvs are the variables naming each simulator's binary, and the
// make target that builds it.
var simBinEnvs = map[string]struct{ env, target string }{
	"kwok":     {kwokBinEnv, "bench-kwok"},
	"kubemark": {kubemarkBinEnv, "bench-kubemark"},
}

// simConfigFromEnv reads a comparison's configuration: its modes from
// modesEnv, each among modes (also the default, in that order).
func simConfigFromEnv(modesEnv string, modes []string) (simConfig, error) {
	c := simConfig{modes: modes, latencyPods: 500, latencyQPS: 25}
	var errs []error
	if v := os.Getenv(modesEnv); v != "" {
		c.modes = strings.Split(v, ",")
		for _, m := range c.modes {
			if !slices.Contains(modes, m) {
				errs = append(errs, fmt.Errorf("%s=%q: want %s", modesEnv, v, strings.Join(modes, " and/or ")))
			}
		}
	}
	for _, m := range c.modes {
		be, ok := simBinEnvs[m]
		if !ok {
			continue
		}
		var abs string
		if bin := os.Getenv(be.env); bin == "" {
			errs = append(errs, fmt.Errorf("%s: unset (make %s builds the binary into bin/ and sets it)", be.env, be.target))
		} else if a, err := filepath.Abs(bin); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", be.env, err))
		} else if _, err := os.Stat(a); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", be.env, err))
		} else {
			abs = a
		}
		switch m {
		case "kwok":
			c.kwokBin = abs
		case "kubemark":
			c.kubemarkBin = abs
		}
	}
	if v := os.Getenv(simLatencyPodsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a count", simLatencyPodsEnv, v))
		}
		c.latencyPods = n
	}
	if v := os.Getenv(simLatencyQPSEnv); v != "" {
		q, err := strconv.ParseFloat(v, 64)
		if err != nil || q <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive rate", simLatencyQPSEnv, v))
		}
		c.latencyQPS = q
	}
	return c, errors.Join(errs...)
}

// simResult is one simulator's run.
type simResult struct {
	mode                string
	nodeCount           int
	simulators          int // processes simulating the nodes
	nodesReady, created time.Duration
	allRunning          time.Duration
	// nodesOnly and withPods are the steady states without and with the
	// pods: the simulator processes summed under the name "sim".
	nodesOnly, withPods simWindow
	bulk, latency       startupSLI
	// simLog is the simulator's warnings and errors, deduplicated (kwok's;
	// the hollow kubelets' errors, all processes together).
	simLog []string
	// standIn says what the kubemark run's API stand-in answered.
	standIn string
	// lagged and closed are the API server's watchers that fell behind
	// their buffer and went on from the window, and those it closed for
	// falling behind, by client and cache (its log, as bench-scale reads
	// it); watchersErr is why they could not be read.
	lagged, closed map[string]watcherCloses
	watchersErr    error
}

// simWindow is one steady state of a simulator run: every process over
// the window, and the etcd database file after it.
type simWindow struct {
	procsWindow
	etcdMiB float64
}

func (r simResult) sim(s simWindow) procResult {
	var sum procResult
	for _, p := range s.Procs {
		if isSimProc(r.mode, p.Name) {
			sum.CPUPercent += p.CPUPercent
			sum.RSSMeanMiB += p.RSSMeanMiB
			sum.HWMMiB += p.HWMMiB
		}
	}
	return sum
}

func (r simResult) nodes() float64 { return float64(r.nodeCount) }

func (r simResult) rssPerNodeKiB() float64 {
	return r.sim(r.nodesOnly).RSSMeanMiB * 1024 / r.nodes()
}

func (r simResult) rssPerPodKiB(cfg scaleConfig) float64 {
	return (r.sim(r.withPods).RSSMeanMiB - r.sim(r.nodesOnly).RSSMeanMiB) * 1024 / float64(cfg.pods)
}

// cpuPerNodeMilli is millicores (thousandths of one CPU) per node.
func (r simResult) cpuPerNodeMilli() float64 {
	return r.sim(r.nodesOnly).CPUPercent * 10 / r.nodes()
}

func (r simResult) cpuPerPodMilli(cfg scaleConfig) float64 {
	return (r.sim(r.withPods).CPUPercent - r.sim(r.nodesOnly).CPUPercent) * 10 / float64(cfg.pods)
}

// isSimProc tells whether the process named name simulates nodes in mode:
// kwok, an agent, a hollow kubelet.
func isSimProc(mode, name string) bool {
	return name == mode || strings.HasPrefix(name, "agent-") || strings.HasPrefix(name, hollowProcPrefix)
}

// runNodeSim runs one cluster with mode ("kwok", "kubemark" or "agent")
// simulating its nodes, and stops it.
func runNodeSim(b *testing.B, bin string, kc simConfig, cfg scaleConfig, mode string) simResult {
	b.Helper()
	res := simResult{mode: mode, nodeCount: cfg.nodes}
	dir, err := os.MkdirTemp("", "corekube-bench-"+mode+"-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	dataDir := filepath.Join(dir, "etcd")
	var c cluster
	var sims []*proc
	var hollow *hollowNodes
	defer func() {
		c.stop(b) // the simulators, controllers, scheduler, then the server
		if hollow != nil {
			hollow.cleanup(b)
		}
	}()
	check := c.check
	c.apiserver = c.start(b, dir, "apiserver", bin, "apiserver", "--data-dir", dataDir, "--write-kubeconfig", kubeconfig, "--listen", "127.0.0.1:0")
	client := waitServer(b, &c, kubeconfig)
	c.start(b, dir, "scheduler", bin, "scheduler", "--kubeconfig", kubeconfig, "--secure-port=0")
	c.start(b, dir, "controllers", bin, "controllers", "--kubeconfig", kubeconfig, "--secure-port=0")

	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create namespace: %v", err)
	}

	// Nodes: kwok takes Node objects created as its docs show (annotation,
	// NoSchedule taint, capacity); hollow kubelets and agents register
	// their own.
	nodeCtx, stopNodeInformer := context.WithCancel(ctx)
	nodeFactory := informers.NewSharedInformerFactory(client, 0)
	readyNodes := newCounter(nodeFactory.Core().V1().Nodes().Informer(), func(obj any) bool {
		n, ok := obj.(*v1.Node)
		return ok && nodeReady(n)
	})
	nodeFactory.Start(nodeCtx.Done())
	start := time.Now()
	switch mode {
	case "kwok":
		if err := createKwokNodes(ctx, client, cfg.nodes); err != nil {
			b.Fatal(err)
		}
		// kwok has an identity of its own, so that the API server's log
		// (a watcher closed for falling behind) tells its calls from the
		// bench's, which use the admin's.
		kwokKubeconfig := identityKubeconfig(b, kubeconfig, filepath.Join(dataDir, "pki"), kwokUser)
		sims = append(sims, startKwok(b, &c, dir, kc.kwokBin, kwokKubeconfig, cfg.nodes))
	case "kubemark":
		hollow = startHollowNodes(b, &c, dir, kc.kubemarkBin, kubeconfig, cfg.nodes)
		sims = hollow.procs
	case "agent":
		for first := 1; first <= cfg.nodes; first += nodesPerAgent {
			n := min(nodesPerAgent, cfg.nodes-first+1)
			sims = append(sims, c.start(b, dir, fmt.Sprintf("agent-%d", len(sims)+1), bin, "agent",
				"--kubeconfig", kubeconfig, "--nodes", strconv.Itoa(n), "--first-node", strconv.Itoa(first),
				// The default /14 holds 1,024 nodes' /24s.
				"--pod-cidrs", "10.0.0.0/8"))
		}
	}
	res.simulators = len(sims)
	if err := waitCount(ctx, readyNodes, check, "Ready nodes", cfg.nodes, cfg.progressLogStep); err != nil {
		b.Fatal(simFailure(mode, sims, err))
	}
	res.nodesReady = time.Since(start)
	stopNodeInformer()
	nodeFactory.Shutdown()
	fmt.Fprintf(os.Stderr, "%s: %d nodes Ready in %v; settling %v, then measuring %v\n", mode, cfg.nodes, res.nodesReady.Round(time.Millisecond), cfg.settle, cfg.window)
	procs := c.all()
	if err := settleAndMeasure(ctx, &res.nodesOnly, procs, check, cfg); err != nil {
		b.Fatal(simFailure(mode, sims, err))
	}

	// The bulk create: every pod at once from 16 clients, as bench-scale.
	// Pod startup as bench-scale measures it (podStartup), with a pod
	// informer of the phase's own: none runs in the steady states.
	pods, err := startStartupWatch(ctx, client)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if pods != nil {
			pods.stop()
		}
	}()
	pods.arm()
	start = time.Now()
	if err := createPodsFunc(ctx, client, cfg.pods, cfg.createWorkers, 0, func(i int) *v1.Pod {
		return simPod(fmt.Sprintf("scale-%05d", i), mode, cfg)
	}, pods.created); err != nil {
		b.Fatal(err)
	}
	res.created = time.Since(start)
	if err := waitCount(ctx, pods.running, check, "Running pods", cfg.pods, cfg.progressLogStep); err != nil {
		b.Fatal(simFailure(mode, sims, err))
	}
	res.allRunning = time.Since(start)
	res.bulk = pods.result()
	pods.stop()
	pods = nil
	fmt.Fprintf(os.Stderr, "%s: %d pods created in %v, all Running after %v; settling %v, then measuring %v\n",
		mode, cfg.pods, res.created.Round(time.Millisecond), res.allRunning.Round(time.Millisecond), cfg.settle, cfg.window)
	if err := settleAndMeasure(ctx, &res.withPods, procs, check, cfg); err != nil {
		b.Fatal(simFailure(mode, sims, err))
	}
	res.withPods.etcdMiB = float64(etcdDBSize(dataDir)) / (1 << 20)

	// The latency pods: created at a steady rate on the loaded cluster.
	if kc.latencyPods > 0 {
		if pods, err = startStartupWatch(ctx, client); err != nil {
			b.Fatal(err)
		}
		pods.arm()
		interval := time.Duration(float64(time.Second) / kc.latencyQPS)
		if err := createPodsFunc(ctx, client, kc.latencyPods, 1, interval, func(i int) *v1.Pod {
			return simPod(fmt.Sprintf("latency-%05d", i), mode, cfg)
		}, pods.created); err != nil {
			b.Fatal(err)
		}
		if err := waitCount(ctx, pods.running, check, "Running pods", cfg.pods+kc.latencyPods, cfg.progressLogStep); err != nil {
			b.Fatal(simFailure(mode, sims, err))
		}
		res.latency = pods.result()
		pods.stop()
		pods = nil
	}
	if err := check(); err != nil {
		b.Fatal(err)
	}
	if res.lagged, res.watchersErr = laggedWatchers(c.apiserver.log); res.watchersErr == nil {
		res.closed, res.watchersErr = closedWatchers(c.apiserver.log)
	}
	if len(res.closed) > 0 {
		b.Errorf("%s: the API server closed watchers for falling behind: %s", mode, strings.Join(watcherLines(res.closed), ", "))
	}
	switch mode {
	case "kubemark":
		res.standIn = hollow.standIn.summary()
		res.simLog = hollow.problems(b, cfg)
	case "kwok":
		res.simLog = kwokProblems(sims[0].log)
		// The run's directory goes; kwok's log is kept for a look at what
		// it did against corekube.
		if data, err := os.ReadFile(sims[0].log); err == nil {
			kept := filepath.Join(os.TempDir(), fmt.Sprintf("corekube-bench-kwok-%d.log", cfg.nodes))
			if err := os.WriteFile(kept, data, 0o644); err == nil {
				fmt.Fprintf(os.Stderr, "kwok: its log is kept in %s\n", kept)
			}
		}
		if len(res.simLog) > 0 {
			b.Errorf("kwok logged errors against corekube:\n%s", strings.Join(res.simLog, "\n"))
		}
	}
	return res
}

// orNone joins lines, or says there are none.
func orNone(lines []string) string {
	if len(lines) == 0 {
		return "none"
	}
	return strings.Join(lines, ", ")
}

// simFailure adds the tail of the simulators' logs to err: those of the
// processes that exited, else of the first three (hollow kubelets are one
// process a node).
func simFailure(mode string, sims []*proc, err error) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: %v", mode, err)
	shown := slices.DeleteFunc(slices.Clone(sims), func(p *proc) bool { return p.exited() == nil })
	if len(shown) == 0 {
		shown = sims[:min(3, len(sims))]
	}
	for _, p := range shown {
		fmt.Fprintf(&sb, "\n--- %s log, last lines:\n%s", p.name, p.tail(20))
	}
	if len(shown) < len(sims) {
		fmt.Fprintf(&sb, "\n(%d more simulator processes)", len(sims)-len(shown))
	}
	return errors.New(sb.String())
}

// settleAndMeasure waits cfg.settle, then samples procs over cfg.window.
func settleAndMeasure(ctx context.Context, res *simWindow, procs []*proc, check func() error, cfg scaleConfig) error {
	select {
	case <-time.After(cfg.settle):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := check(); err != nil {
		return err
	}
	w, err := measure(ctx, procs, cfg.window)
	if err != nil {
		return err
	}
	res.procsWindow = w
	return check()
}

// waitCount returns once c counts want objects; it fails when ctx ends or
// check reports a process gone.
func waitCount(ctx context.Context, c *counter, check func() error, what string, want int, step time.Duration) error {
	progress := time.NewTicker(step)
	defer progress.Stop()
	start := time.Now()
	for c.count() < want {
		select {
		case <-c.changed:
		case <-progress.C:
			if err := check(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "  %d/%d %s after %v\n", c.count(), want, what, time.Since(start).Round(time.Second))
		case <-ctx.Done():
			return fmt.Errorf("%d/%d %s when the deadline passed: %w", c.count(), want, what, ctx.Err())
		}
	}
	return nil
}

// createKwokNodes creates n Node objects for kwok, as its documentation's
// example node: the kwok annotation, the NoSchedule taint, a type=kwok
// label pods select, the capacity of the agent's default nodes, and a pod
// CIDR (kwok gives pods addresses from it; corekube allocates none).
func createKwokNodes(ctx context.Context, client kubernetes.Interface, n int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("4"),
		v1.ResourceMemory: resource.MustParse("16Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > n || ctx.Err() != nil {
					return
				}
				name := fmt.Sprintf("kwok-node-%d", i)
				node := &v1.Node{
					ObjectMeta: metav1.ObjectMeta{
						Name:        name,
						Annotations: map[string]string{kwokNodeAnnotation: kwokNodeValue, "node.alpha.kubernetes.io/ttl": "0"},
						Labels: map[string]string{
							"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
							"kubernetes.io/role": "agent", "node-role.kubernetes.io/agent": "", "type": "kwok",
						},
					},
					Spec: v1.NodeSpec{
						PodCIDR:  fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256),
						PodCIDRs: []string{fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256)},
						Taints:   []v1.Taint{{Key: kwokNodeAnnotation, Value: kwokNodeValue, Effect: v1.TaintEffectNoSchedule}},
					},
					Status: v1.NodeStatus{Capacity: capacity, Allocatable: capacity},
				}
				if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					cancel(fmt.Errorf("create node %s: %w", name, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

// startKwok starts kwok on the nodes annotated kwokNodeAnnotation, with its
// default stages (node-initialize, node-heartbeat-with-lease, pod-ready,
// pod-complete, pod-delete) and testdata/kwok.yaml's parallelism
// (kwok-large.yaml's above 1,000 nodes), logging warnings and errors only
// (at its default level, info, it writes a line per node and pod patch and
// lease renewal). HOME is the run's directory, so that no ~/.kwok of the
// machine changes anything.
// kwokUser is the user of kwok's client certificate.
const kwokUser = "kwok-controller"

// identityKubeconfig writes beside kubeconfig a copy whose user is a
// client certificate for user in system:masters, issued by the cluster's
// CA (pkiDir, the API server's, which exists once the server answers).
func identityKubeconfig(b *testing.B, kubeconfig, pkiDir, user string) string {
	b.Helper()
	if _, err := os.Stat(filepath.Join(pkiDir, "ca.key")); err != nil {
		b.Fatalf("the cluster's CA: %v", err)
	}
	ca, err := pki.LoadOrCreateCA(pkiDir, "")
	if err != nil {
		b.Fatal(err)
	}
	pair, err := ca.Client(user, "system:masters")
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.ClientCertificate, ai.ClientKey = "", ""
		ai.ClientCertificateData, ai.ClientKeyData = pair.CertPEM, pair.KeyPEM
	}
	out := kubeconfig + "-" + user
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		b.Fatal(err)
	}
	return out
}

func startKwok(b *testing.B, c *cluster, dir, bin, kubeconfig string, nodes int) *proc {
	b.Helper()
	config := filepath.Join("testdata", "kwok.yaml")
	if nodes > nodesPerAgent {
		config = filepath.Join("testdata", "kwok-large.yaml")
	}
	if env := os.Getenv(kwokConfigEnv); env != "" {
		config = env
	}
	config, err := filepath.Abs(config)
	if err != nil {
		b.Fatal(err)
	}
	// kwok keeps its own files under $HOME: the run's directory.
	return c.add(startProcEnv(b, dir, "kwok", bin, []string{"HOME=" + dir},
		"--kubeconfig", kubeconfig, "--config", config, "--v=WARN",
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+kwokNodeAnnotation+"="+kwokNodeValue,
		"--node-lease-duration-seconds=40",
		"--cidr=10.0.0.1/16"))
}

// klogProblemLine matches client-go's klog warnings and errors (kwok's
// own log is JSON: kwokLogLine).
var klogProblemLine = regexp.MustCompile(`^[EW]\d{4} [0-9:.]+ +\d+ [^\]]*\] (.*)$`)

// kwokLogLine is the part of a line of kwok's JSON log kept to tell
// messages apart.
type kwokLogLine struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	Err   string `json:"err"`
	Kind  string `json:"kind"`
}

// kwokProblems returns kwok's warnings and errors, each message once with
// its count. The warning kwok gives on every start without a stages
// configuration (its defaults are used) is left out.
func kwokProblems(logPath string) []string {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return []string{err.Error()}
	}
	counts := map[string]int{}
	var order []string
	for _, line := range strings.Split(string(data), "\n") {
		var key string
		var l kwokLogLine
		if m := klogProblemLine.FindStringSubmatch(line); m != nil {
			key = line[:1] + " (client-go) " + m[1]
		} else if json.Unmarshal([]byte(line), &l) == nil && (l.Level == "WARN" || l.Level == "ERROR") {
			if l.Msg == "No node stages found, using default node stages" {
				continue
			}
			key = fmt.Sprintf("%s %s %s err=%q", l.Level, l.Msg, l.Kind, l.Err)
		} else {
			continue
		}
		if len(key) > 400 {
			key = key[:400]
		}
		if counts[key] == 0 {
			order = append(order, key)
		}
		counts[key]++
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, fmt.Sprintf("%dx %s", counts[k], k))
	}
	return out
}

// simPod is the benchmark's pod: nginx with bench-scale's requests; for
// kwok it tolerates the fake nodes' taint and selects them.
func simPod(name, mode string, cfg scaleConfig) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "scale"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name:  "nginx",
			Image: "nginx:1.27",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU:    resource.MustParse(cfg.cpuRequest),
				v1.ResourceMemory: resource.MustParse(cfg.memoryRequest),
			}},
		}}},
	}
	if mode == "kwok" {
		pod.Spec.NodeSelector = map[string]string{"type": "kwok"}
		pod.Spec.Tolerations = []v1.Toleration{{Key: kwokNodeAnnotation, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	}
	return pod
}

// createPodsFunc creates n pods (pod(i)) with workers clients, one every
// interval if interval > 0, calling created with the pod's
// namespace/name and the time each create returned.
func createPodsFunc(ctx context.Context, client kubernetes.Interface, n, workers int, interval time.Duration, pod func(int) *v1.Pod, created func(key string, at time.Time)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var tick *time.Ticker
	if interval > 0 {
		tick = time.NewTicker(interval)
		defer tick.Stop()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if tick != nil {
					select {
					case <-tick.C:
					case <-ctx.Done():
						return
					}
				}
				p := pod(i)
				_, err := client.CoreV1().Pods(scaleNamespace).Create(ctx, p, metav1.CreateOptions{})
				switch {
				case err == nil:
					created(scaleNamespace+"/"+p.Name, time.Now())
				case !apierrors.IsAlreadyExists(err):
					cancel(fmt.Errorf("create pod %s: %w", p.Name, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

// startupWatch is a pod informer on the bench's namespace feeding a
// podStartup (the tracker bench-scale uses, ClusterLoader2's definitions)
// and counting the Running pods, for a harness without informers of its
// own.
type startupWatch struct {
	*podStartup
	running *counter
	factory informers.SharedInformerFactory
	cancel  context.CancelFunc
}

// startStartupWatch starts the informer and waits for its initial list,
// so that every later change is seen as it happens; stop ends it.
func startStartupWatch(ctx context.Context, client kubernetes.Interface) (*startupWatch, error) {
	t := &startupWatch{podStartup: newPodStartup()}
	t.factory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(scaleNamespace))
	running, err := watchStartup(t.factory.Core().V1().Pods().Informer(), t.podStartup)
	if err != nil {
		return nil, err
	}
	t.running = running
	ctx, t.cancel = context.WithCancel(ctx)
	t.factory.Start(ctx.Done())
	t.factory.WaitForCacheSync(ctx.Done())
	return t, nil
}

func (t *startupWatch) stop() {
	t.cancel()
	t.factory.Shutdown()
}

// foldHollow sums the hollow kubelets' processes into one row, "hollow
// xN", where the first was: a process a node would make the table as long.
func foldHollow(procs []procResult) []procResult {
	var out []procResult
	at, n := -1, 0
	for _, p := range procs {
		if !strings.HasPrefix(p.Name, hollowProcPrefix) {
			out = append(out, p)
			continue
		}
		if at < 0 {
			at = len(out)
			out = append(out, procResult{})
		}
		n++
		sum := &out[at]
		sum.CPUPercent += p.CPUPercent
		sum.RSSMeanMiB += p.RSSMeanMiB
	}
	if at >= 0 {
		out[at].Name = fmt.Sprintf("hollow x%d", n)
	}
	return out
}

// print writes one run as a table.
func (r simResult) print(w io.Writer, cfg scaleConfig, kc simConfig) {
	what := "kwok (one process)"
	switch r.mode {
	case "agent":
		what = fmt.Sprintf("corekube agents (%d processes of up to %d nodes)", r.simulators, nodesPerAgent)
	case "kubemark":
		what = fmt.Sprintf("kubemark hollow kubelets (%d processes, one a node, through the API stand-in)", r.simulators)
	}
	fmt.Fprintf(w, "\nnode simulator %s: %d nodes, %d pods (%s cpu, %s memory each)\n", what, cfg.nodes, cfg.pods, cfg.cpuRequest, cfg.memoryRequest)
	fmt.Fprintf(w, "  nodes Ready after %v; pods created in %v (%.0f/s); all Running %v after the first create\n",
		r.nodesReady.Round(time.Millisecond), r.created.Round(time.Millisecond), float64(cfg.pods)/r.created.Seconds(), r.allRunning.Round(time.Millisecond))
	fmt.Fprintf(w, "  steady states: %v after Ready / all Running, over %v; CPU %% of one CPU\n", cfg.settle, cfg.window)
	fmt.Fprintf(w, "  %-12s %14s %14s %16s %16s\n", "process", "CPU % nodes", "CPU % +pods", "RSS MiB nodes", "RSS MiB +pods")
	nodesOnly := foldHollow(r.nodesOnly.Procs)
	for i, p := range foldHollow(r.withPods.Procs) {
		var n procResult
		if i < len(nodesOnly) {
			n = nodesOnly[i]
		}
		fmt.Fprintf(w, "  %-12s %14.1f %14.1f %16.0f %16.0f\n", p.Name, n.CPUPercent, p.CPUPercent, n.RSSMeanMiB, p.RSSMeanMiB)
	}
	if r.mode == "kubemark" {
		// RSS at the end of each window, not its mean.
		fmt.Fprintf(w, "  %-12s %14.1f %14.1f %16.0f %16.0f   (the bench process, which holds the API stand-in: in no figure below)\n",
			"bench", r.nodesOnly.SelfCPUPercent, r.withPods.SelfCPUPercent, r.nodesOnly.SelfRSSMiB, r.withPods.SelfRSSMiB)
	}
	fmt.Fprintf(w, "  simulator: %.1f KiB and %.3f mCPU per node; %.2f KiB and %.4f mCPU per pod\n",
		r.rssPerNodeKiB(), r.cpuPerNodeMilli(), r.rssPerPodKiB(cfg), r.cpuPerPodMilli(cfg))
	fmt.Fprintf(w, "  machine busy %.1f%% / %.1f%% of all CPUs, of which not ours %.1f%% / %.1f%%; etcd db file %.0f MiB\n",
		r.nodesOnly.MachineBusyPercent, r.withPods.MachineBusyPercent, r.nodesOnly.ForeignPercent, r.withPods.ForeignPercent, r.withPods.etcdMiB)
	printStartup(w, fmt.Sprintf("pod startup latency, bulk %d", cfg.pods), r.bulk)
	printStartup(w, fmt.Sprintf("pod startup latency, %d latency pods at %.0f/s", kc.latencyPods, kc.latencyQPS), r.latency)
	if r.watchersErr != nil {
		fmt.Fprintf(w, "  API server watchers: %v\n", r.watchersErr)
	} else {
		fmt.Fprintf(w, "  API server watchers that fell behind their buffer and went on from the window (client cache: n): %s\n", orNone(watcherLines(r.lagged)))
		fmt.Fprintf(w, "  API server watchers closed for falling behind: %s\n", orNone(watcherLines(r.closed)))
	}
	switch r.mode {
	case "kwok":
		fmt.Fprintf(w, "  kwok warnings and errors against corekube: %d\n", len(r.simLog))
		for _, l := range r.simLog {
			fmt.Fprintf(w, "    %s\n", l)
		}
	case "kubemark":
		fmt.Fprintf(w, "  API stand-in: %s\n", r.standIn)
		fmt.Fprintf(w, "  hollow kubelets' errors, all processes, by kind (%d kinds, node names, UIDs and numbers masked):\n", len(r.simLog))
		for _, l := range r.simLog[:min(len(r.simLog), 20)] {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	fmt.Fprintln(w)
}
