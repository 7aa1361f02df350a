package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/corekube/corekube/test/informertest"
)

// The scale benchmark is configured from the environment, so that `make
// The scale benchmark is configured from the environment, so that `make
// bench-scale NODES=.. PODS=..` and a plain go test command agree.
const (
	scaleNodesEnv  = "COREKUBE_BENCH_SCALE_NODES"          // default 1000
	scalePodsEnv   = "COREKUBE_BENCH_SCALE_PODS"           // default 30000
	scaleAgentsEnv = "COREKUBE_BENCH_SCALE_AGENTS"         // agent processes, default one per 1,000 nodes
	scaleSettleEnv = "COREKUBE_BENCH_SCALE_SETTLE"         // wait after all Running, default 30s
	scaleWindowEnv = "COREKUBE_BENCH_SCALE_WINDOW"         // steady-state sampling window, default 60s
	scaleChurnEnv  = "COREKUBE_BENCH_SCALE_CHURN"          // share of the pods replaced in the churn phase, default 0.1 (0: no churn)
	scaleChurnDEnv = "COREKUBE_BENCH_SCALE_CHURN_DURATION" // over how long, default from the rate
	// scaleChurnRateEnv is the churn's pace, in pods deleted (and as many
	// created) a second: default 50, the pace of kube's own 5,000-node
	// load test (ClusterLoader2's CL2_LOAD_TEST_THROUGHPUT and
	// CL2_DELETE_TEST_THROUGHPUT in its 5,000-node job). A churn duration,
	// when set, wins.
	scaleChurnRateEnv = "COREKUBE_BENCH_SCALE_CHURN_RATE"
	scaleTimeoutEnv   = "COREKUBE_BENCH_SCALE_TIMEOUT"     // deadline of the whole run, default 60m
	scaleJSONEnv      = "COREKUBE_BENCH_SCALE_JSON"        // write the results as JSON to this file
	scaleProfileEnv   = "COREKUBE_BENCH_SCALE_PROFILE_DIR" // save the apiserver's heap and CPU profiles and the agents' heap profiles here
	// scaleNodeIdentitiesEnv ("1") gives each node of the agent its own
	// client certificate (system:node:NAME), hence its own connection.
	scaleNodeIdentitiesEnv = "COREKUBE_BENCH_SCALE_NODE_IDENTITIES"
	// scaleAgentArgsEnv holds extra flags for every agent process,
	// space-separated (e.g. "--pod-workers 50"), for A/B runs of its knobs.
	scaleAgentArgsEnv = "COREKUBE_BENCH_SCALE_AGENT_ARGS"
	// scaleAPIServerArgsEnv holds extra flags for the API server, the same
	// way (e.g. "--memory-limit 1536Mi").
	scaleAPIServerArgsEnv = "COREKUBE_BENCH_SCALE_APISERVER_ARGS"
	// scaleAPIServerCgroupEnv names a memory cgroup's directory (v1 or
	// v2, made and limited by whoever runs the bench) that the API server
	// is moved into once started: a run under a memory limit that counts
	// the page cache too, as a container's does. The report gives the
	// cgroup's usage and peak.
	scaleAPIServerCgroupEnv = "COREKUBE_BENCH_SCALE_APISERVER_CGROUP"
	// scaleBinEnv names a corekube binary to use; unset, the benchmark
	// builds one from this module into a temporary directory.
	scaleBinEnv = "COREKUBE_BENCH_BIN"
)

// scaleNamespace holds the benchmark's pods.
const scaleNamespace = "scale-bench"

// scaleConfig is one run's size and timing.
type scaleConfig struct {
	nodes, pods, agents int
	settle, window      time.Duration
	churn               float64
	churnRate           float64 // pods a second, when churnDuration is not set
	churnDuration       time.Duration
	timeout             time.Duration
	createWorkers       int
	cpuRequest          string
	memoryRequest       string
	progressLogStep     time.Duration
	jsonPath            string
	profileDir          string
}

func scaleConfigFromEnv() (scaleConfig, error) {
	c := scaleConfig{
		nodes: 1000, pods: 30000,
		settle: 30 * time.Second, window: time.Minute, timeout: 60 * time.Minute,
		churn: 0.1, churnRate: 50,
		createWorkers: 16,
		// 30 pods of 100m and 64Mi fit on a node of the agent's default
		// capacity (4 CPUs, 16Gi, 110 pods): 40 would.
		cpuRequest: "100m", memoryRequest: "64Mi",
		progressLogStep: 10 * time.Second,
		jsonPath:        os.Getenv(scaleJSONEnv),
		profileDir:      os.Getenv(scaleProfileEnv),
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
	c.agents = (c.nodes + 999) / 1000
	intEnv(scaleAgentsEnv, &c.agents)
	durEnv(scaleSettleEnv, &c.settle)
	durEnv(scaleWindowEnv, &c.window)
	durEnv(scaleChurnDEnv, &c.churnDuration)
	durEnv(scaleTimeoutEnv, &c.timeout)
	if v := os.Getenv(scaleChurnEnv); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			errs = append(errs, fmt.Errorf("%s=%q: want a share between 0 and 1", scaleChurnEnv, v))
		}
		c.churn = f
	}
	if v := os.Getenv(scaleChurnRateEnv); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want pods a second, positive", scaleChurnRateEnv, v))
		}
		c.churnRate = f
	}
	if c.churnDuration == 0 && c.churnRate > 0 {
		n := int(c.churn * float64(c.pods))
		c.churnDuration = max(time.Second, time.Duration(float64(n)/c.churnRate*float64(time.Second)).Round(time.Second))
	}
	if c.window == 0 {
		errs = append(errs, fmt.Errorf("%s must be positive", scaleWindowEnv))
	}
	if c.agents > c.nodes {
		errs = append(errs, fmt.Errorf("%s=%d: more agents than the %d nodes", scaleAgentsEnv, c.agents, c.nodes))
	}
	if c.timeout == 0 {
		errs = append(errs, fmt.Errorf("%s must be positive", scaleTimeoutEnv))
	}
	return c, errors.Join(errs...)
}

// BenchmarkScaleSteadyState runs the cluster of the scale issue as
// separate processes of the real binary: `corekube apiserver` (embedded
// etcd), `corekube scheduler`, `corekube controllers` and AGENTS `corekube
// agent` processes sharing the nodes; creates the pods with 16 clients,
// waits until every pod is Running, lets the cluster settle, measures
// each process's CPU and memory over a window while a probe makes
// ClusterLoader2's API calls, replaces a share of the pods (churn) while
// measuring again, times a kubectl and an informer LIST of every pod, and
// checks that the cluster is whole. It reports the SLIs (API call latency
// from both sides, pod startup latency) per phase. It is heavy (minutes,
// at full size most of a 2-core machine), so it runs only when named:
// -bench ScaleSteadyState, never under -short or -bench '.'. Each op is
// one whole cluster; the run stops itself (every process killed) when
// COREKUBE_BENCH_SCALE_TIMEOUT has passed.
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
		// runScale prints each phase as it ends, and writes the JSON.
		res = runScale(b, bin, cfg, i+1)
		// The checks fail the run once its figures are out.
		for _, p := range res.Checks.Problems {
			b.Errorf("check at the end: %s", p)
		}
	}
	b.ReportMetric(0, "ns/op") // one op is a whole cluster: its time means nothing
	b.ReportMetric(res.NodesReadyS, "nodes-ready-s")
	b.ReportMetric(res.CreatedS, "create-s")
	b.ReportMetric(res.AllRunningS, "all-running-s")
	for _, p := range res.Steady.Procs {
		b.ReportMetric(p.CPUPercent, p.Name+"-cpu-%")
		b.ReportMetric(p.RSSMeanMiB, p.Name+"-rss-MiB")
		b.ReportMetric(p.HWMMiB, p.Name+"-peak-rss-MiB")
	}
	b.ReportMetric(res.Steady.ForeignPercent, "foreign-cpu-%")
	b.ReportMetric(res.EtcdMiB, "etcd-db-MiB")
	b.ReportMetric(res.EtcdInUseMiB, "etcd-in-use-MiB")
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
	return startProcEnv(b, dir, name, bin, nil, args...)
}

// startProcEnv is startProc with env added to the benchmark's environment.
func startProcEnv(b *testing.B, dir, name, bin string, env []string, args ...string) *proc {
	b.Helper()
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(p.log)
	if err != nil {
		b.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// Should the benchmark die (go test's -timeout, a signal), its
	// processes die with it rather than load the machine on their own.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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

// cluster is the processes of one run. The watchdog may kill them from
// its own goroutine, hence the lock.
type cluster struct {
	mu        sync.Mutex
	procs     []*proc // in start order
	apiserver *proc
}

// start starts a process of the cluster (startProc) and adds it.
func (c *cluster) start(b *testing.B, dir, name, bin string, args ...string) *proc {
	b.Helper()
	return c.add(startProc(b, dir, name, bin, args...))
}

// add makes p a process of the cluster.
func (c *cluster) add(p *proc) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
	return p
}

func (c *cluster) all() []*proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.procs)
}

// agents are the agent processes.
func (c *cluster) agents() []*proc {
	var out []*proc
	for _, p := range c.all() {
		if strings.HasPrefix(p.name, "agent") {
			out = append(out, p)
		}
	}
	return out
}

// stop stops the processes in the reverse order of their start, the
// server last.
func (c *cluster) stop(b *testing.B) {
	procs := c.all()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(b)
	}
}

// kill sends SIGKILL to every process, for the watchdog.
func (c *cluster) kill() {
	for _, p := range c.all() {
		_ = p.cmd.Process.Kill()
	}
}

// killAndWait kills every process and waits for their exits: the stop
// of a run whose deadline passed.
func (c *cluster) killAndWait() {
	c.kill()
	for _, p := range c.all() {
		<-p.done
	}
}

// check returns an error if any process has exited.
func (c *cluster) check() error {
	for _, p := range c.all() {
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}

// scaleResult is what one run measured; it is also the JSON written with
// COREKUBE_BENCH_SCALE_JSON.
type scaleResult struct {
	Nodes           int     `json:"nodes"`
	Pods            int     `json:"pods"`
	Agents          int     `json:"agents"`
	NodesReadyS     float64 `json:"nodes_ready_s"`
	CreatedS        float64 `json:"pods_created_s"`
	AllRunningS     float64 `json:"all_running_s"`
	CreatePerSecond float64 `json:"creates_per_s"`
	// Phases: "create" (the initial creates until all Running),
	// "steady" (the window, probe running, profiles taken before it),
	// "reads" (cluster-wide LISTs, kubectl and an informer reading every
	// pod) and "churn" (replacing a share of the pods until all Running
	// again).
	Phases []phaseResult `json:"phases"`
	// Steady and Churn are each process's CPU and memory over the
	// steady-state window and over the churn's pacing.
	Steady procsWindow  `json:"steady"`
	Churn  *procsWindow `json:"churn,omitempty"`
	Memory []memResult  `json:"memory"`
	// KubectlGetPodsS is `kubectl get pods -A` (pages of 500) at full
	// size; InformerSyncS a protobuf pod informer's initial LIST and sync.
	KubectlGetPodsS float64 `json:"kubectl_get_pods_all_s"`
	// KubectlUnpagedS is the same with --chunk-size=0: one LIST.
	KubectlUnpagedS float64 `json:"kubectl_get_pods_all_chunk_size_0_s"`
	InformerSyncS   float64 `json:"informer_sync_s"`
	InformerPods    int     `json:"informer_pods"`
	EtcdMiB         float64 `json:"etcd_db_mib"`
	// EtcdInUseMiB is the part of the db file etcd uses (its status's
	// DbSizeInUse: the live keys and the history since the last
	// compaction; the rest is free pages); EtcdKeys counts the keys by
	// resource ("pods", "events", ...), from the embedded etcd's socket.
	EtcdInUseMiB float64        `json:"etcd_db_in_use_mib,omitempty"`
	EtcdKeys     map[string]int `json:"etcd_keys,omitempty"`
	// EtcdLiveMiB is what the keys of each resource and their current
	// values add up to (no history, no bbolt pages): how full the file's
	// pages in use are.
	EtcdLiveMiB map[string]float64 `json:"etcd_live_mib,omitempty"`
	// EtcdDefragMiB is the db file after one defragmentation at the end
	// of the run, and DefragRSS the API server's memory just after it.
	EtcdDefragMiB float64     `json:"etcd_db_after_defrag_mib,omitempty"`
	DefragRSS     *procResult `json:"apiserver_after_defrag,omitempty"`
	// CgroupMiB and CgroupPeakMiB are the memory charged to the API
	// server's cgroup (COREKUBE_BENCH_SCALE_APISERVER_CGROUP) at the end
	// and at most: its RSS and the page cache it uses (etcd's files).
	CgroupMiB     float64 `json:"apiserver_cgroup_mib,omitempty"`
	CgroupPeakMiB float64 `json:"apiserver_cgroup_peak_mib,omitempty"`
	Checks        checks  `json:"checks"`
	// Done lists the parts of the run that completed ("nodes", "create",
	// "steady", "churn", "checks"); Stopped says why the run ended early
	// (its deadline, a failure), empty if it did not.
	Done    []string `json:"done"`
	Stopped string   `json:"stopped,omitempty"`
	// RSSAtEnd is each process's VmRSS and VmHWM when the run ended,
	// completed or not.
	RSSAtEnd []procResult `json:"rss_at_end,omitempty"`
}

// phaseResult is one phase's SLIs.
type phaseResult struct {
	Name      string       `json:"name"`
	DurationS float64      `json:"duration_s"`
	Client    []apiLatency `json:"client_api_latency"`
	Server    []apiLatency `json:"server_api_latency"`
	Startup   *startupSLI  `json:"pod_startup,omitempty"`
	// Partial: the run stopped (its deadline) before the phase ended;
	// the figures are what it measured until then.
	Partial bool `json:"partial,omitempty"`
}

// procsWindow is every process's CPU and memory over a window, and the
// machine's.
type procsWindow struct {
	WindowS            float64      `json:"window_s"`
	Procs              []procResult `json:"procs"`
	MachineBusyPercent float64      `json:"machine_busy_percent"`
	ForeignPercent     float64      `json:"foreign_percent"`
	// SelfCPUPercent and SelfRSSMiB are the benchmark process's own (of
	// one CPU; RSS at the end of the window): what runs in it, such as
	// the kubemark benchmark's API stand-in, is in neither Procs nor
	// ForeignPercent.
	SelfCPUPercent float64 `json:"self_cpu_percent"`
	SelfRSSMiB     float64 `json:"self_rss_mib"`
}

// procResult is one process's CPU and memory over a window.
type procResult struct {
	Name       string  `json:"name"`
	CPUPercent float64 `json:"cpu_percent"` // of one CPU
	RSSMeanMiB float64 `json:"rss_mean_mib"`
	RSSMaxMiB  float64 `json:"rss_max_mib"`
	HWMMiB     float64 `json:"peak_rss_mib"`
	// AnonMiB and FileMiB split the RSS at the end of the window
	// (smaps_rollup): heap, stacks and runtime versus mapped files (the
	// binary, etcd's bbolt mmap).
	AnonMiB float64 `json:"anon_mib"`
	FileMiB float64 `json:"file_mib"`
}

// memResult is one process's RSS at three points: before the agents
// started (BaseMiB; 0 for an agent), with every node Ready and no pod
// (IdleMiB), and at full size (FullMiB, the steady window's mean); per
// node is (idle-base)/nodes, per pod (full-idle)/pods, each over the
// nodes and pods the process carries (an agent: its share).
type memResult struct {
	Name       string  `json:"name"`
	BaseMiB    float64 `json:"base_mib"`
	IdleMiB    float64 `json:"idle_mib"`
	FullMiB    float64 `json:"full_mib"`
	PerNodeKiB float64 `json:"per_node_kib"`
	PerPodKiB  float64 `json:"per_pod_kib"`
}

// checks is the cluster's state at the end.
type checks struct {
	PodsRunning int `json:"pods_running"`
	PodsTotal   int `json:"pods_total"`
	NodesReady  int `json:"nodes_ready"`
	// TerminatedWatchers is apiserver_terminated_watchers_total: watchers
	// the server closed for falling behind.
	TerminatedWatchers float64 `json:"terminated_watchers"`
	// BenchWatchErrors counts the errors the bench's own informers' watches
	// ended with (a 410 Gone, a closed watch).
	BenchWatchErrors int `json:"bench_watch_errors"`
	// SampleConverged: an informer on one label group equals a
	// consistent LIST once writes stopped.
	SampleConverged bool `json:"sample_converged"`
	// ClosedWatchers counts the watchers closed for falling behind by
	// client (user) and cache, with the times of the first and the last,
	// from the API server's log.
	ClosedWatchers map[string]watcherCloses `json:"closed_watchers,omitempty"`
	// LaggedWatchers counts, the same way, the watchers that fell behind
	// their buffer and went on from the watch cache's window (not closed).
	LaggedWatchers map[string]watcherCloses `json:"lagged_watchers,omitempty"`
	Problems       []string                 `json:"problems,omitempty"`
	// Notes qualify the figures without failing the run.
	Notes []string `json:"notes,omitempty"`
}

func (r scaleResult) writeJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("scale results as JSON: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("scale results as JSON: %w", err)
	}
	return nil
}

// watchErrors counts the errors the bench's informers' watches ended with.
type watchErrors struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (w *watchErrors) handler(what string) cache.WatchErrorHandler {
	return func(_ *cache.Reflector, err error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.n++
		if len(w.first) < 5 {
			w.first = append(w.first, what+": "+err.Error())
		}
	}
}

func runScale(b *testing.B, bin string, cfg scaleConfig, run int) scaleResult {
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
	// The run's deadline: every wait below ends with ctx, which ends
	// scaleReserve(cfg.timeout) before cfg.timeout, so that what was
	// measured is printed and the processes stopped in time. Should
	// anything not return, the watchdog kills every process and exits at
	// cfg.timeout: a run never outlives it.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout-scaleReserve(cfg.timeout))
	defer cancel()
	watchdog := time.AfterFunc(cfg.timeout, func() {
		fmt.Fprintf(os.Stderr, "scale: the deadline of %v passed: killing every process and exiting\n", cfg.timeout)
		c.kill()
		os.Exit(2)
	})
	defer watchdog.Stop()
	// Agents, controllers, scheduler, then the server; past the deadline
	// there is no time for their graceful stops.
	defer func() {
		if ctx.Err() != nil {
			c.killAndWait()
			return
		}
		c.stop(b)
	}()
	res := scaleResult{Nodes: cfg.nodes, Pods: cfg.pods, Agents: cfg.agents}
	rep := &scaleReport{w: os.Stdout, cfg: cfg, res: &res, procs: c.all}
	rep.header(run)
	// fail reports what the run measured (the phase under way as
	// partial, each process's RSS, the summary), then fails.
	fail := func(format string, args ...any) {
		b.Helper()
		if ctx.Err() != nil {
			format += " (the run's deadline %s=%v less %v for the report passed: stopping every process)"
			args = append(args, scaleTimeoutEnv, cfg.timeout, scaleReserve(cfg.timeout))
		}
		rep.stopped(fmt.Sprintf(format, args...))
		b.Fatalf(format, args...)
	}

	c.apiserver = c.start(b, dir, "apiserver", bin, append([]string{"apiserver", "--data-dir", dataDir, "--write-kubeconfig", kubeconfig,
		"--listen", "127.0.0.1:0", "--profiling"}, strings.Fields(os.Getenv(scaleAPIServerArgsEnv))...)...)
	if cg := os.Getenv(scaleAPIServerCgroupEnv); cg != "" {
		if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(c.apiserver.pid())), 0o644); err != nil {
			b.Fatalf("move the API server into %s: %v", cg, err)
		}
	}
	client := waitServer(b, &c, kubeconfig)
	rep.client = client
	// No secure ports (other runs on the machine may hold kube's) but
	// free ones for their heap profiles when profiles are asked for.
	var comps *componentProfiling
	if cfg.profileDir != "" {
		comps = &componentProfiling{ports: map[string]string{}}
	}
	c.start(b, dir, "scheduler", bin, append([]string{"scheduler", "--kubeconfig", kubeconfig}, comps.args(b, "scheduler")...)...)
	c.start(b, dir, "controllers", bin, append([]string{"controllers", "--kubeconfig", kubeconfig}, comps.args(b, "controllers")...)...)

	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNamespace}}, metav1.CreateOptions{}); err != nil {
		fail("create namespace: %v", err)
	}
	// The bench's clients speak protobuf, as the components do.
	pclient, err := protobufClient(kubeconfig)
	if err != nil {
		b.Fatal(err)
	}

	// Informers count Ready nodes and Running pods, and see pods start
	// (pod startup latency's watch side). They run to the end: the
	// steady state carries their two watches.
	infCtx, stopInformers := context.WithCancel(ctx)
	var werrs watchErrors
	wclient, err := protobufWatchClient(kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(wclient, 0)
	nodeInf := factory.Core().V1().Nodes().Informer()
	_ = nodeInf.SetWatchErrorHandler(werrs.handler("nodes"))
	readyNodes := newCounter(nodeInf, func(obj any) bool {
		n, ok := obj.(*v1.Node)
		return ok && nodeReady(n)
	})
	podFactory := informers.NewSharedInformerFactoryWithOptions(wclient, 0, informers.WithNamespace(scaleNamespace),
		informers.WithTransform(keepStartupFields))
	podInf := podFactory.Core().V1().Pods().Informer()
	_ = podInf.SetWatchErrorHandler(werrs.handler("pods"))
	// The Running count is kept by the handler that records the startup
	// times, so that it never runs ahead of them.
	startup := newPodStartup()
	runningPods, err := watchStartup(podInf, startup)
	if err != nil {
		b.Fatal(err)
	}
	factory.Start(infCtx.Done())
	podFactory.Start(infCtx.Done())
	defer func() {
		stopInformers()
		factory.Shutdown()
		podFactory.Shutdown()
	}()

	base := rssOf(c.all())

	// The agents: node numbers first..first+n-1 each, the pod CIDRs from
	// a /8 (65,536 nodes of a /24; the agent's default /14 holds 1,024).
	start := time.Now()
	for k := range cfg.agents {
		first := 1 + k*cfg.nodes/cfg.agents
		n := (k+1)*cfg.nodes/cfg.agents - k*cfg.nodes/cfg.agents
		args := []string{"agent", "--kubeconfig", kubeconfig, "--first-node", strconv.Itoa(first), "--nodes", strconv.Itoa(n),
			"--pod-cidrs", "10.0.0.0/8"}
		if os.Getenv(scaleNodeIdentitiesEnv) == "1" {
			args = append(args, "--node-identities-ca-dir", filepath.Join(dataDir, "pki"))
		}
		args = append(args, strings.Fields(os.Getenv(scaleAgentArgsEnv))...)
		c.start(b, dir, fmt.Sprintf("agent-%d", k+1), bin, args...)
	}
	if err := readyNodes.wait(ctx, &c, "Ready nodes", cfg.nodes, cfg.progressLogStep); err != nil {
		fail("%v", err)
	}
	res.NodesReadyS = time.Since(start).Seconds()
	idle := rssOf(c.all())
	rep.nodesDone(base, idle)

	// Phase create: the pods, as fast as 16 clients go.
	m0, err := scrapeMetrics(ctx, client)
	if err != nil {
		fail("%v", err)
	}
	startup.arm()
	createRec := newLatencyRecorder()
	start = time.Now()
	rep.begin(func() phaseResult {
		return phaseResult{Name: "create", DurationS: time.Since(start).Seconds(), Client: createRec.summaries(),
			Server: rep.serverSince(m0), Startup: ptr.To(startup.result())}
	})
	// Halfway through, with a profile directory, a CPU profile of the
	// API server while it creates (the create phase's throughput).
	halfway := func() {}
	profileDone := make(chan struct{})
	if cfg.profileDir != "" {
		halfway = func() {
			go func() {
				defer close(profileDone)
				if err := saveCPUProfile(ctx, client, cfg.profileDir, "create", 30); err != nil {
					fmt.Fprintf(os.Stderr, "scale: %v\n", err)
				}
			}()
		}
	} else {
		close(profileDone)
	}
	if err := createPods(ctx, pclient, cfg, createRec, startup, halfway); err != nil {
		fail("%v", err)
	}
	res.CreatedS = time.Since(start).Seconds()
	res.CreatePerSecond = float64(cfg.pods) / res.CreatedS
	if err := runningPods.wait(ctx, &c, "Running pods", cfg.pods, cfg.progressLogStep); err != nil {
		fail("%v", err)
	}
	res.AllRunningS = time.Since(start).Seconds()
	<-profileDone
	m1, err := scrapeMetrics(ctx, client)
	if err != nil {
		fail("%v", err)
	}
	rep.phaseDone(phaseResult{Name: "create", DurationS: res.AllRunningS, Client: createRec.summaries(),
		Server: serverLatencies(diffHistograms(requestHistograms(m0), requestHistograms(m1))), Startup: ptr.To(startup.result())})

	fmt.Fprintf(os.Stderr, "scale: %d nodes Ready in %.1fs, %d pods created in %.1fs, all Running after %.1fs; settling %v, then measuring %v\n",
		cfg.nodes, res.NodesReadyS, cfg.pods, res.CreatedS, res.AllRunningS, cfg.settle, cfg.window)
	select {
	case <-time.After(cfg.settle):
	case <-ctx.Done():
		fail("settle: %v", ctx.Err())
	}
	if err := c.check(); err != nil {
		fail("%v", err)
	}

	// The convergence sample: one label group's informer, from now on.
	sample := informertest.Start(b, pclient, scaleNamespace, "bench-group=7")

	// Phase steady: the window, with the probe's calls.
	pods := cfg.pods // the pods are scale-00000 .. scale-<pods-1>, then the churn's
	pick := func() string { return scalePodName(rand.IntN(pods)) }
	steadyRec := newLatencyRecorder()
	m2, err := scrapeMetrics(ctx, client)
	if err != nil {
		fail("%v", err)
	}
	// The probe's period: a round of 4 calls 5 times a second, the
	// cluster-wide LISTs (of every pod only with clusterPods) every 10 s.
	runProbe := func(rec *latencyRecorder, clusterPods bool) (stop func()) {
		pctx, pcancel := context.WithCancel(ctx)
		p := &probe{client: pclient, namespace: scaleNamespace, pick: pick, nodes: cfg.nodes, rec: rec, period: 200 * time.Millisecond,
			listEvery: 50, clusterPods: clusterPods}
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.run(pctx)
		}()
		return func() {
			pcancel()
			<-done
		}
	}
	profiles := func(phase string) (wait func()) {
		if cfg.profileDir == "" {
			return func() {}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := comps.saveHeaps(ctx, cfg.profileDir, phase); err != nil {
				fmt.Fprintf(os.Stderr, "scale: %v\n", err)
			}
			if err := saveAgentProfiles(ctx, kubeconfig, c.agents(), cfg.profileDir, phase); err != nil {
				fmt.Fprintf(os.Stderr, "scale: %v\n", err)
			}
			if err := saveProfiles(ctx, client, cfg.profileDir, phase, 30); err != nil {
				fmt.Fprintf(os.Stderr, "scale: %v\n", err)
			}
		}()
		return func() { <-done }
	}
	if cfg.profileDir != "" {
		// The profiles come before the window, the probe running
		// unrecorded: taking them costs CPU (a forced GC in each agent for
		// its heap profile), which the window must not pay.
		fmt.Fprintf(os.Stderr, "scale: steady-state profiles\n")
		stopProbe := runProbe(newLatencyRecorder(), false)
		profiles("steady")()
		stopProbe()
		if m2, err = scrapeMetrics(ctx, client); err != nil {
			fail("%v", err)
		}
	}
	start = time.Now()
	rep.begin(func() phaseResult {
		return phaseResult{Name: "steady", DurationS: time.Since(start).Seconds(), Client: steadyRec.summaries(), Server: rep.serverSince(m2)}
	})
	stopProbe := runProbe(steadyRec, false)
	res.Steady, err = measure(ctx, c.all(), cfg.window)
	stopProbe()
	if err != nil {
		fail("steady state: %v", err)
	}
	if err := c.check(); err != nil {
		fail("%v", err)
	}
	m3, err := scrapeMetrics(ctx, client)
	if err != nil {
		fail("%v", err)
	}
	res.Memory = memoryFigures(cfg, c.all(), base, idle, res.Steady)
	steady := phaseResult{Name: "steady", DurationS: res.Steady.WindowS, Client: steadyRec.summaries(),
		Server: serverLatencies(diffHistograms(requestHistograms(m2), requestHistograms(m3)))}

	rep.phaseDone(steady)

	// Phase reads, at full size after the window: cluster-wide LISTs of
	// every pod (CL2's 30 s SLO), and what a user's kubectl and a new
	// controller's informer pay to read every pod.
	readsRec := newLatencyRecorder()
	start = time.Now()
	rep.begin(func() phaseResult {
		return phaseResult{Name: "reads", DurationS: time.Since(start).Seconds(), Client: readsRec.summaries(), Server: rep.serverSince(m3)}
	})
	lister := &probe{client: pclient, rec: readsRec}
	for range clusterListsTimed {
		lister.listAllPods(ctx)
	}
	d, err := timeKubectl(ctx, kubeconfig)
	if err != nil {
		fail("%v", err)
	}
	res.KubectlGetPodsS = d.Seconds()
	d, err = timeKubectl(ctx, kubeconfig, "--chunk-size=0")
	if err != nil {
		fail("%v", err)
	}
	res.KubectlUnpagedS = d.Seconds()
	d, n, err := timeInformerSync(ctx, kubeconfig)
	if err != nil {
		fail("%v", err)
	}
	res.InformerSyncS, res.InformerPods = d.Seconds(), n
	mReads, err := scrapeMetrics(ctx, client)
	if err != nil {
		fail("%v", err)
	}
	rep.phaseDone(phaseResult{Name: "reads", DurationS: time.Since(start).Seconds(), Client: readsRec.summaries(),
		Server: serverLatencies(diffHistograms(requestHistograms(m3), requestHistograms(mReads)))})

	// Phase churn: replace a share of the pods, paced, as ClusterLoader2's
	// load test does, measuring meanwhile; then wait for all Running.
	if n := int(cfg.churn * float64(cfg.pods)); n > 0 {
		victims := make([]string, 0, n)
		for i := range n {
			// Spread over the pods: every (pods/n)-th.
			victims = append(victims, scalePodName(i*cfg.pods/n))
		}
		fmt.Fprintf(os.Stderr, "scale: churn: replacing %d pods over %v\n", n, cfg.churnDuration)
		churnRec := newLatencyRecorder()
		m4, err := scrapeMetrics(ctx, client)
		if err != nil {
			fail("%v", err)
		}
		startup.arm()
		start = time.Now()
		rep.begin(func() phaseResult {
			return phaseResult{Name: "churn", DurationS: time.Since(start).Seconds(), Client: churnRec.summaries(),
				Server: rep.serverSince(m4), Startup: ptr.To(startup.result())}
		})
		stopProbe := runProbe(churnRec, true)
		waitProfiles := profiles("churn")
		churnErr := make(chan error, 1)
		go func() { churnErr <- churn(ctx, pclient, cfg, victims, cfg.pods, cfg.churnDuration, churnRec, startup) }()
		// A window cut by the deadline still holds what it sampled.
		w, merr := measure(ctx, c.all(), cfg.churnDuration)
		res.Churn = &w
		if err := <-churnErr; err != nil {
			stopProbe()
			fail("churn: %v", err)
		}
		if merr != nil {
			stopProbe()
			fail("churn: %v", merr)
		}
		pods = cfg.pods + n // the probe picks among the new ones too
		err = runningPods.wait(ctx, &c, "Running pods after the churn", cfg.pods, cfg.progressLogStep)
		if err == nil {
			err = waitStoreLen(ctx, podInf, cfg.pods)
		}
		waitProfiles()
		stopProbe()
		if err != nil {
			fail("churn: %v", err)
		}
		m5, err := scrapeMetrics(ctx, client)
		if err != nil {
			fail("%v", err)
		}
		rep.phaseDone(phaseResult{Name: "churn", DurationS: time.Since(start).Seconds(), Client: churnRec.summaries(),
			Server: serverLatencies(diffHistograms(requestHistograms(m4), requestHistograms(m5))), Startup: ptr.To(startup.result())})
	}

	// Correctness: every pod Running, every node Ready, no watcher closed
	// for falling behind, the sample informer converged.
	ch := &res.Checks
	ch.PodsRunning, ch.PodsTotal, ch.NodesReady = runningPods.count(), len(podInf.GetStore().ListKeys()), readyNodes.count()
	if ch.PodsRunning != cfg.pods || ch.PodsTotal != cfg.pods {
		ch.Problems = append(ch.Problems, fmt.Sprintf("%d pods Running of %d (want %d)", ch.PodsRunning, ch.PodsTotal, cfg.pods))
	}
	if n := runningPods.goneCount(); n > 0 {
		ch.Problems = append(ch.Problems, fmt.Sprintf("%d pods deleted by the cluster, not the bench (evicted: see the controllers' log)", n))
	}
	if ch.NodesReady != cfg.nodes {
		ch.Problems = append(ch.Problems, fmt.Sprintf("%d nodes Ready, want %d", ch.NodesReady, cfg.nodes))
	}
	if m, err := scrapeMetrics(ctx, client); err != nil {
		ch.Problems = append(ch.Problems, err.Error())
	} else {
		ch.TerminatedWatchers, _ = m.Value("apiserver_terminated_watchers_total")
		if ch.TerminatedWatchers != 0 {
			// Whose: the cluster's components must keep up; the bench's
			// own watches falling behind make its watch-observed times late.
			byClient, err := closedWatchers(c.apiserver.log)
			user, uerr := benchUser(ctx, client)
			switch {
			case err != nil || uerr != nil:
				ch.Problems = append(ch.Problems, fmt.Sprintf("apiserver_terminated_watchers_total %v: watchers closed for falling behind (whose: %v)",
					ch.TerminatedWatchers, errors.Join(err, uerr)))
			default:
				ch.ClosedWatchers = byClient
				own, cluster := splitClosedWatchers(byClient, user)
				if len(cluster) > 0 {
					ch.Problems = append(ch.Problems, fmt.Sprintf("apiserver_terminated_watchers_total %v: the cluster's watchers closed for falling behind: %s",
						ch.TerminatedWatchers, strings.Join(cluster, ", ")))
				}
				if len(own) > 0 {
					ch.Notes = append(ch.Notes, fmt.Sprintf("the bench's own watches (%s) were closed for falling behind: %s; its watch-observed times are late by as much",
						user, strings.Join(own, ", ")))
				}
			}
		}
	}
	if lagged, err := laggedWatchers(c.apiserver.log); err != nil {
		ch.Problems = append(ch.Problems, err.Error())
	} else if len(lagged) > 0 {
		ch.LaggedWatchers = lagged
		ch.Notes = append(ch.Notes, "watchers that fell behind their buffer and went on from the window: "+strings.Join(watcherLines(lagged), ", "))
	}
	werrs.mu.Lock()
	ch.BenchWatchErrors = werrs.n
	if werrs.n > 0 {
		ch.Problems = append(ch.Problems, fmt.Sprintf("the bench's watches ended with %d errors: %s", werrs.n, strings.Join(werrs.first, "; ")))
	}
	werrs.mu.Unlock()
	if diff := waitConverged(ctx, sample, pclient, 2*time.Minute); diff != "" {
		ch.Problems = append(ch.Problems, "sample informer: "+diff)
	} else {
		ch.SampleConverged = true
	}
	sample.CheckMonotonic(b)

	if err := c.check(); err != nil {
		fail("%v", err)
	}
	res.EtcdMiB = float64(etcdDBSize(dataDir)) / (1 << 20)
	if u, err := etcdUsage(ctx, c.apiserver.pid(), "pods", "events", "leases", "nodes"); err != nil {
		ch.Notes = append(ch.Notes, "etcd usage: "+err.Error())
	} else {
		res.EtcdInUseMiB, res.EtcdKeys, res.EtcdLiveMiB = float64(u.inUse)/(1<<20), u.keys, u.liveMiB
	}
	if cg := os.Getenv(scaleAPIServerCgroupEnv); cg != "" {
		if usage, peak, err := cgroupMemory(cg); err != nil {
			ch.Notes = append(ch.Notes, "API server's cgroup: "+err.Error())
		} else {
			res.CgroupMiB, res.CgroupPeakMiB = usage, peak
		}
	}
	if err := etcdDefragment(ctx, c.apiserver.pid()); err != nil {
		ch.Notes = append(ch.Notes, "etcd defragmentation: "+err.Error())
	} else {
		res.EtcdDefragMiB = float64(etcdDBSize(dataDir)) / (1 << 20)
		if anon, file, err := procRSSSplit(c.apiserver.pid()); err == nil {
			res.DefragRSS = &procResult{Name: "apiserver", RSSMeanMiB: anon + file, RSSMaxMiB: anon + file, AnonMiB: anon, FileMiB: file}
		}
	}
	for _, a := range c.agents() {
		fmt.Fprintf(os.Stderr, "scale: node identities %q; %s: %d sockets open, %d threads\n",
			os.Getenv(scaleNodeIdentitiesEnv), a.name, countSockets(a.pid()), countThreads(a.pid()))
	}
	rep.checksDone()
	return res
}

// waitStoreLen waits until inf holds n objects (the deleted pods gone).
// clusterListsTimed is how many cluster-wide LISTs of every pod the reads
// phase times.
const clusterListsTimed = 3

func waitStoreLen(ctx context.Context, inf cache.SharedIndexInformer, n int) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		got := len(inf.GetStore().ListKeys())
		if got == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods, want %d: %w", got, n, ctx.Err())
		case <-tick.C:
		}
	}
}

// waitConverged polls until the sample's store equals a consistent LIST,
// returning the last difference when timeout passes ("" once equal).
func waitConverged(ctx context.Context, sample *informertest.PodInformer, client kubernetes.Interface, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		diff, err := sample.Diff(ctx, client)
		if err == nil && diff == "" {
			return ""
		}
		if err != nil {
			last = err.Error()
		} else {
			last = diff
		}
		select {
		case <-ctx.Done():
			return last
		case <-tick.C:
		}
	}
}

// rssOf is each process's VmRSS in MiB now, by name (0 if unreadable).
func rssOf(procs []*proc) map[string]float64 {
	out := map[string]float64{}
	for _, p := range procs {
		if rss, _, err := procMemory(p.pid()); err == nil {
			out[p.name] = rss
		}
	}
	return out
}

// memoryFigures derives each process's per-node and per-pod memory.
func memoryFigures(cfg scaleConfig, procs []*proc, base, idle map[string]float64, steady procsWindow) []memResult {
	full := map[string]float64{}
	for _, p := range steady.Procs {
		full[p.Name] = p.RSSMeanMiB
	}
	var out []memResult
	for _, p := range procs {
		nodes, pods := float64(cfg.nodes), float64(cfg.pods)
		if strings.HasPrefix(p.name, "agent") {
			nodes /= float64(cfg.agents)
			pods /= float64(cfg.agents)
		}
		m := memResult{Name: p.name, BaseMiB: base[p.name], IdleMiB: idle[p.name], FullMiB: full[p.name]}
		m.PerNodeKiB = (m.IdleMiB - m.BaseMiB) * 1024 / nodes
		m.PerPodKiB = (m.FullMiB - m.IdleMiB) * 1024 / pods
		out = append(out, m)
	}
	return out
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
	// gone are the objects deleted by the cluster, not by the bench (pods
	// evicted from a node that stopped renewing its lease): wait counts
	// them as done, since nothing brings them back, and the checks report
	// them.
	gone map[string]bool
	// changed is signalled (without blocking) on every change of the count.
	changed chan struct{}
}

// newBareCounter is a counter its owner feeds with set.
func newBareCounter() *counter {
	return &counter{matches: map[string]bool{}, gone: map[string]bool{}, changed: make(chan struct{}, 1)}
}

func newCounter(inf cache.SharedIndexInformer, pred func(obj any) bool) *counter {
	c := newBareCounter()
	c.pred = pred
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

// markGone records key as deleted by the cluster.
func (c *counter) markGone(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.matches, key)
	c.gone[key] = true
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// goneCount is how many objects the cluster deleted.
func (c *counter) goneCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.gone)
}

// wait returns once the count reaches want, logging progress every step;
// it fails when ctx ends or a process of the cluster exits.
func (c *counter) wait(ctx context.Context, cl *cluster, what string, want int, step time.Duration) error {
	progress := time.NewTicker(step)
	defer progress.Stop()
	start := time.Now()
	for {
		if n := c.count() + c.goneCount(); n >= want {
			return nil
		}
		select {
		case <-c.changed:
		case <-progress.C:
			if err := cl.check(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "scale: %d/%d %s (%d deleted by the cluster) after %v\n", c.count(), want, what, c.goneCount(), time.Since(start).Round(time.Second))
		case <-ctx.Done():
			return fmt.Errorf("%d/%d %s when the deadline passed: %w", c.count(), want, what, ctx.Err())
		}
	}
}

// createPods creates cfg.pods pods with cfg.createWorkers clients, timing
// each create in rec and telling startup when it returned.
// createPods creates cfg.pods pods from cfg.createWorkers clients, and
// calls halfway once, when half of them have been asked for.
func createPods(ctx context.Context, client kubernetes.Interface, cfg scaleConfig, rec *latencyRecorder, startup *podStartup, halfway func()) error {
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
				if i == cfg.pods/2 {
					halfway()
				}
				start := time.Now()
				pod, err := client.CoreV1().Pods(scaleNamespace).Create(ctx, scalePod(i, cfg), metav1.CreateOptions{})
				rec.observe(callKey{"POST", "pods", "resource"}, start, err)
				if err == nil {
					startup.created(pod.Namespace+"/"+pod.Name, time.Now())
				} else if !apierrors.IsAlreadyExists(err) {
					cancel(fmt.Errorf("create pod %d: %w", i, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

func scalePodName(i int) string { return fmt.Sprintf("scale-%05d", i) }

// scalePod runs forever: an nginx container without a command. Its
// bench-group label puts it in one of scaleGroups groups (the probe's
// namespaced LIST selects one).
func scalePod(i int, cfg scaleConfig) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: scalePodName(i), Labels: map[string]string{"app": "scale", "bench-group": podGroup(i)}},
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
// much of it was someone else's. It is reusable by any harness that runs
// processes (proc). Should ctx end first, it returns the figures of the
// shorter window (WindowS says how long) with ctx's error.
func measure(ctx context.Context, procs []*proc, window time.Duration) (procsWindow, error) {
	var res procsWindow
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
			return res, err
		}
		samples[i].ticks = t
	}
	selfStart, err := procTicks(os.Getpid())
	if err != nil {
		return res, err
	}
	stat0, err := readProcStat()
	if err != nil {
		return res, err
	}
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var cut error
sampling:
	for time.Since(start) < window {
		select {
		case <-tick.C:
		case <-ctx.Done():
			cut = ctx.Err()
			break sampling
		}
		for i, p := range procs {
			rss, _, err := procMemory(p.pid())
			if err != nil {
				return res, err
			}
			samples[i].rssSum += rss
			samples[i].rssMax = max(samples[i].rssMax, rss)
			samples[i].n++
		}
	}
	elapsed := time.Since(start).Seconds()
	res.WindowS = elapsed
	stat1, err := readProcStat()
	if err != nil {
		return res, err
	}
	selfEnd, err := procTicks(os.Getpid())
	if err != nil {
		return res, err
	}
	ours := float64(selfEnd - selfStart)
	res.SelfCPUPercent = ours / clockTicks / elapsed * 100
	if res.SelfRSSMiB, _, err = procMemory(os.Getpid()); err != nil {
		return res, err
	}
	for i, p := range procs {
		t, err := procTicks(p.pid())
		if err != nil {
			return res, err
		}
		_, hwm, err := procMemory(p.pid())
		if err != nil {
			return res, err
		}
		anon, file, err := procRSSSplit(p.pid())
		if err != nil {
			return res, err
		}
		d := float64(t - samples[i].ticks)
		ours += d
		res.Procs = append(res.Procs, procResult{
			Name:       p.name,
			CPUPercent: d / clockTicks / elapsed * 100,
			RSSMeanMiB: samples[i].rssSum / float64(max(samples[i].n, 1)),
			RSSMaxMiB:  samples[i].rssMax,
			HWMMiB:     hwm,
			AnonMiB:    anon,
			FileMiB:    file,
		})
	}
	// utime and stime count in the same clock ticks (clockTicks, USER_HZ)
	// as /proc/stat.
	if total := float64(stat1.total - stat0.total); total > 0 {
		busy := float64(stat1.busy - stat0.busy)
		res.MachineBusyPercent = busy / total * 100
		res.ForeignPercent = (busy - ours) / total * 100
	}
	return res, cut
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

// etcdUse is what the embedded etcd holds: the db file's pages in use,
// and by resource the keys and the bytes of their keys and values.
type etcdUse struct {
	inUse   int64
	keys    map[string]int
	liveMiB map[string]float64
}

// etcdUsage asks the embedded etcd of the API server pid (its client
// socket) how much of its db file is in use and how many keys, of how
// many bytes, each of resources has (under the default --etcd-prefix,
// /registry). It reads every value, a page at a time.
func etcdUsage(ctx context.Context, pid int, resources ...string) (etcdUse, error) {
	c, err := embeddedEtcdClient(pid)
	if err != nil {
		return etcdUse{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	st, err := c.Status(ctx, c.Endpoints()[0])
	if err != nil {
		return etcdUse{}, fmt.Errorf("etcd status: %w", err)
	}
	u := etcdUse{inUse: st.DbSizeInUse, keys: map[string]int{}, liveMiB: map[string]float64{}}
	for _, r := range resources {
		prefix := "/registry/" + r + "/"
		end := clientv3.GetPrefixRangeEnd(prefix)
		var bytes int64
		for from := prefix; ; {
			resp, err := c.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(2000))
			if err != nil {
				return etcdUse{}, fmt.Errorf("read %s: %w", r, err)
			}
			for _, kv := range resp.Kvs {
				bytes += int64(len(kv.Key) + len(kv.Value))
			}
			u.keys[r] += len(resp.Kvs)
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
		u.liveMiB[r] = float64(bytes) / (1 << 20)
	}
	return u, nil
}

// etcdDefragment compacts the embedded etcd of the API server pid to its
// current revision and defragments it: what the db file would be with
// the live keys alone, packed. The run is over; no one needs the history.
func etcdDefragment(ctx context.Context, pid int) error {
	c, err := embeddedEtcdClient(pid)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	resp, err := c.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("revision: %w", err)
	}
	if _, err := c.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	_, err = c.Defragment(ctx, c.Endpoints()[0])
	return err
}

// cgroupMemory reads the memory charged to the cgroup at dir and its peak,
// in MiB, from cgroup v2's files or v1's.
func cgroupMemory(dir string) (usage, peak float64, err error) {
	read := func(names ...string) (float64, error) {
		var err error
		for _, n := range names {
			var data []byte
			if data, err = os.ReadFile(filepath.Join(dir, n)); err == nil {
				v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
				return float64(v) / (1 << 20), err
			}
		}
		return 0, err
	}
	if usage, err = read("memory.current", "memory.usage_in_bytes"); err != nil {
		return 0, 0, fmt.Errorf("cgroup memory: %w", err)
	}
	if peak, err = read("memory.peak", "memory.max_usage_in_bytes"); err != nil {
		return 0, 0, fmt.Errorf("cgroup memory peak: %w", err)
	}
	return usage, peak, nil
}

// embeddedEtcdClient is a client of the embedded etcd of the API server
// pid, over its unix socket.
func embeddedEtcdClient(pid int) (*clientv3.Client, error) {
	sock, err := unixSocketOf(pid, "/etcd.sock")
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + sock}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return c, nil
}

// unixSocketOf is the path of the unix socket pid listens on whose path
// ends in suffix (the embedded etcd's socket is in a private directory
// when the data directory's path is too long for one).
func unixSocketOf(pid int, suffix string) (string, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return "", err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil {
			if inode, ok := strings.CutPrefix(target, "socket:["); ok {
				inodes[strings.TrimSuffix(inode, "]")] = true
			}
		}
	}
	table, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return "", err
	}
	// Num RefCount Protocol Flags Type St Inode Path
	for _, line := range strings.Split(string(table), "\n") {
		f := strings.Fields(line)
		if len(f) == 8 && inodes[f[6]] && strings.HasSuffix(f[7], suffix) {
			return f[7], nil
		}
	}
	return "", fmt.Errorf("process %d listens on no unix socket *%s", pid, suffix)
}

// countSockets is how many sockets pid holds open (its connections to the
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
