package bench

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/clientcmd"
)

// kubemark beside corekube's agents (issue 17): kube's own node simulator,
// the hollow node (k8s.io/kubernetes/cmd/kubemark --morph=kubelet, a real
// kubelet over a fake container runtime, built into bin/ by `make
// bench-kubemark`), one process per node as kube runs them, in the
// cluster of BenchmarkKwokVsAgent, measured the same way.
const (
	// kubemarkBinEnv names the kubemark binary; the benchmark fails
	// without it.
	kubemarkBinEnv = "COREKUBE_BENCH_KUBEMARK_BIN"
	// kubemarkModesEnv lists the simulators to run, one after the other:
	// "kubemark,agent" (the default), "kubemark" or "agent".
	kubemarkModesEnv = "COREKUBE_BENCH_KUBEMARK_MODES"
	// hollowProcPrefix names the hollow kubelets' processes (hollow-1..).
	hollowProcPrefix = "hollow-"
	// hollowPodCPU is the pods' CPU request in the kubemark comparison,
	// both modes: a hollow node has one CPU (kubemark's fake cAdvisor),
	// where bench-kwok's 100m would fit ten pods.
	hollowPodCPU = "10m"
)

// A hollow node's capacity (kubemark v1.32's fake cAdvisor and its
// --max-pods default) less the kubelet's default hard eviction threshold
// (memory.available<100Mi), which allocatable leaves out.
var (
	hollowAllocatableCPU    = resource.MustParse("1")
	hollowAllocatableMemory = resource.MustParse("3740Mi")
)

const hollowMaxPods = 110

// BenchmarkKubemarkVsAgent starts corekube's apiserver, scheduler and
// controllers as processes of bin/corekube, then simulates NODES nodes with
// kubemark's hollow kubelets or with corekube agents, and measures them as
// BenchmarkKwokVsAgent does: the simulator's CPU and RSS with the nodes
// alone and with PODS pods Running, pod startup latency for the bulk
// create and the latency pods. The pods request 10m and 64Mi (a hollow
// node has one CPU and 3840Mi), in both modes. A real kubelet needs five
// APIs corekube does not serve: the hollow kubelets talk to corekube
// through apiStandIn, which answers those in the benchmark's process.
// Fails when a hollow kubelet exits, nodes are never Ready, pods never
// Running, or a hollow kubelet meets an API neither serves. Heavy: it runs
// only when named (-bench KubemarkVsAgent), never under -short or make
// test.
func BenchmarkKubemarkVsAgent(b *testing.B) {
	skipShort(b)
	if !strings.Contains(flag.Lookup("test.bench").Value.String(), "Kubemark") {
		b.Skip("runs only when named: -bench KubemarkVsAgent")
	}
	cfg, err := scaleConfigFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	cfg.cpuRequest = hollowPodCPU
	kc, err := simConfigFromEnv(kubemarkModesEnv, []string{"kubemark", "agent"})
	if err != nil {
		b.Fatal(err)
	}
	if slices.Contains(kc.modes, "kubemark") {
		if err := hollowPodsFit(cfg, kc); err != nil {
			b.Fatal(err)
		}
	}
	runNodeSims(b, kc, cfg)
}

// hollowPodsFit fails when the run's pods, spread evenly, would not fit on
// the hollow nodes.
func hollowPodsFit(cfg scaleConfig, kc simConfig) error {
	cpu, err := resource.ParseQuantity(cfg.cpuRequest)
	if err != nil {
		return fmt.Errorf("cpu request %q: %w", cfg.cpuRequest, err)
	}
	mem, err := resource.ParseQuantity(cfg.memoryRequest)
	if err != nil {
		return fmt.Errorf("memory request %q: %w", cfg.memoryRequest, err)
	}
	fit := min(hollowMaxPods, int(hollowAllocatableCPU.MilliValue()/max(cpu.MilliValue(), 1)),
		int(hollowAllocatableMemory.Value()/max(mem.Value(), 1)))
	pods := cfg.pods + kc.latencyPods
	if per := (pods + cfg.nodes - 1) / cfg.nodes; per > fit {
		return fmt.Errorf("%d pods (%d latency pods included) on %d nodes is %d a node: a hollow node holds %d of %s CPU and %s memory",
			pods, kc.latencyPods, cfg.nodes, per, fit, cfg.cpuRequest, cfg.memoryRequest)
	}
	return nil
}

// hollowNodes is a kubemark run's hollow kubelets and their API stand-in.
type hollowNodes struct {
	standIn *apiStandIn
	procs   []*proc
	// sockets are the fake runtimes' sockets there were before the run:
	// kubemark makes one in /tmp per process and never removes it.
	sockets []string
}

// hollowSockets is where kubemark's fake container runtime listens
// (k8s.io/cri-client/pkg/fake: unix:///tmp/kubelet_remote_RAND.sock).
const hollowSockets = "/tmp/kubelet_remote_*.sock"

// startHollowNodes starts the stand-in in front of the API server of
// kubeconfig and n hollow kubelets (hollow-node-1..n) talking to it, each
// with a kubelet port of its own and no read-only port, on kubemark's fake
// image service (the host has no containerd).
func startHollowNodes(b *testing.B, c *cluster, dir, bin, kubeconfig string, n int) *hollowNodes {
	b.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	h := &hollowNodes{}
	h.sockets, _ = filepath.Glob(hollowSockets)
	if h.standIn, err = newAPIStandIn(rc); err != nil {
		b.Fatal(err)
	}
	hollowKubeconfig := filepath.Join(dir, "kubeconfig-hollow")
	if err := h.standIn.writeKubeconfig(hollowKubeconfig); err != nil {
		b.Fatal(err)
	}
	ports, err := kubeletPorts(n)
	if err != nil {
		b.Fatal(err)
	}
	for i, port := range ports {
		h.procs = append(h.procs, c.add(startProc(b, dir, hollowProcPrefix+strconv.Itoa(i+1), bin,
			"--morph=kubelet", fmt.Sprintf("--name=hollow-node-%d", i+1), "--kubeconfig="+hollowKubeconfig,
			"--kubelet-port="+strconv.Itoa(port), "--kubelet-read-only-port=0", "--use-host-image-service=false")))
	}
	return h
}

// kubeletPorts returns n TCP ports free on every address, from 20250 up:
// below the kernel's ephemeral range, so that no connection takes one
// between this check and the kubelet's bind.
func kubeletPorts(n int) ([]int, error) {
	var ports []int
	for port := 20250; len(ports) < n; port++ {
		if port >= 32768 {
			return nil, fmt.Errorf("%d free kubelet ports from 20250: found %d", n, len(ports))
		}
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ln.Close()
		ports = append(ports, port)
	}
	return ports, nil
}

// hollowRootDirLine is kubemark's log line naming the kubelet's root
// directory, which it makes in /tmp and never removes.
var hollowRootDirLine = regexp.MustCompile(`Using (/tmp/hollow-kubelet\.[0-9]+) as root dir for hollow-kubelet`)

// cleanup stops the stand-in and removes what the hollow kubelets left in
// /tmp: their root directories (named in their logs) and the sockets of
// their fake runtimes made during the run. The processes are stopped.
func (h *hollowNodes) cleanup(b *testing.B) {
	if h.standIn != nil {
		h.standIn.Close()
	}
	for _, p := range h.procs {
		data, err := os.ReadFile(p.log)
		if err != nil {
			continue
		}
		if m := hollowRootDirLine.FindSubmatch(data); m != nil {
			if err := os.RemoveAll(string(m[1])); err != nil {
				b.Logf("kubemark: %v", err)
			}
		}
	}
	after, _ := filepath.Glob(hollowSockets)
	for _, s := range after {
		if !slices.Contains(h.sockets, s) {
			_ = os.Remove(s)
		}
	}
}

// klogLine is a klog line: its severity and message (file:line kept).
var klogLine = regexp.MustCompile(`^([EWF])\d{4} [0-9:.]+ +\d+ (.*)$`)

// hollowMasks make the hollow kubelets' messages comparable: node and pod
// names, UIDs, then any number.
var hollowMasks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`hollow-node-\d+`), "hollow-node-N"},
	{regexp.MustCompile(`(scale|latency)-\d{5}`), "$1-N"},
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "UID"},
	{regexp.MustCompile(`\d+`), "N"},
}

// missingAPI is what client-go says of a resource the server does not
// serve: a hollow kubelet needs an API neither corekube nor the stand-in
// answers.
const missingAPI = "the server could not find the requested resource"

// problems returns the hollow kubelets' errors and warnings, all processes
// together (hollowProblems); it fails b when one is missingAPI. The first
// process's log is kept in the temporary directory for a look at the rest.
func (h *hollowNodes) problems(b *testing.B, cfg scaleConfig) []string {
	logs := make([]string, 0, len(h.procs))
	for _, p := range h.procs {
		logs = append(logs, p.log)
	}
	out, missing, err := hollowProblems(logs)
	if err != nil {
		b.Error(err)
	}
	if len(missing) > 0 {
		b.Error("hollow kubelets met APIs neither corekube nor the stand-in serves:\n" + strings.Join(missing, "\n"))
	}
	if len(h.procs) > 0 {
		if data, err := os.ReadFile(h.procs[0].log); err == nil {
			kept := filepath.Join(os.TempDir(), fmt.Sprintf("corekube-bench-kubemark-%d-hollow-1.log", cfg.nodes))
			if err := os.WriteFile(kept, data, 0o644); err == nil {
				fmt.Fprintf(os.Stderr, "kubemark: the first hollow kubelet's log is kept in %s\n", kept)
			}
		}
	}
	return out
}

// hollowProblems reads the klog errors and warnings of the logs, each kind
// once (hollowMasks) with its count, most frequent first; missing are
// those saying missingAPI.
func hollowProblems(logs []string) (out, missing []string, err error) {
	counts := map[string]int{}
	var errs []error
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("hollow kubelet log: %w", err))
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			m := klogLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			msg := m[2]
			for _, mask := range hollowMasks {
				msg = mask.re.ReplaceAllString(msg, mask.with)
			}
			if len(msg) > 300 {
				msg = msg[:300]
			}
			counts[m[1]+" "+msg]++
		}
	}
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	out = make([]string, 0, len(keys))
	for _, k := range keys {
		l := fmt.Sprintf("%dx %s", counts[k], k)
		out = append(out, l)
		if strings.Contains(k, missingAPI) {
			missing = append(missing, l)
		}
	}
	return out, missing, errors.Join(errs...)
}
