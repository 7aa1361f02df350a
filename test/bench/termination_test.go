package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/agent"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// Size of BenchmarkAgentTermination: pods spread over nodes (100 a node,
// within the default 110), each deleted with the grace period.
const (
	terminationPods  = 1000
	terminationNodes = 10
	// terminationGraceEnv overrides the grace period (default 10s).
	terminationGraceEnv = "COREKUBE_BENCH_TERMINATION_GRACE"
	// maxSyncsPerTerminatingPod bounds the syncs of one pod's termination
	// (3 are needed; status conflicts and PLEG events may add a few).
	maxSyncsPerTerminatingPod = 10
)

// BenchmarkAgentTermination guards the agent against busy waiting while
// pods terminate: 1,000 pods whose container is a shell (`sh -c 'sleep
// 600'`, which as PID 1 ignores SIGTERM, so each waits out its whole grace
// period before SIGKILL) run on 10 nodes of an in-process agent against a
// `corekube apiserver` process; all are deleted at once and the benchmark
// counts the agent's pod syncs and this process's CPU time (the agent,
// plus the client's deletes and one pod informer) until the last pod is
// gone, next to the same window with the pods idle. A waiting pod worker
// sleeps until its kill deadline or an event: a handful of syncs per pod,
// not one per moment. Each op is a whole run.
func BenchmarkAgentTermination(b *testing.B) {
	skipShort(b)
	grace := 10 * time.Second
	if v := os.Getenv(terminationGraceEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			b.Fatalf("%s=%q: want a duration of at least 1s", terminationGraceEnv, v)
		}
		grace = d
	}
	bin := corekubeBinary(b)
	var res terminationResult
	for i := range b.N {
		res = runTermination(b, bin, grace)
		fmt.Fprintf(os.Stdout, "agent termination run %d: %d pods on %d nodes, grace %v: gone after %v; %d pod syncs (%.1f a pod), agent process CPU %v (idle over the same time: %d syncs, %v); apiserver CPU %v\n",
			i+1, terminationPods, terminationNodes, grace, res.wall.Round(time.Millisecond), res.syncs, float64(res.syncs)/terminationPods,
			res.cpu.Round(time.Millisecond), res.idleSyncs, res.idleCPU.Round(time.Millisecond), res.apiserverCPU.Round(time.Millisecond))
	}
	b.ReportMetric(0, "ns/op") // one op is a whole run
	b.ReportMetric(res.wall.Seconds(), "gone-s")
	b.ReportMetric(float64(res.syncs)/terminationPods, "syncs/pod")
	b.ReportMetric(res.cpu.Seconds(), "agent-cpu-s")
	b.ReportMetric(res.idleCPU.Seconds(), "idle-agent-cpu-s")
	b.ReportMetric(float64(res.idleSyncs), "idle-syncs")
	b.ReportMetric(res.apiserverCPU.Seconds(), "apiserver-cpu-s")
}

// terminationResult is what one run measured.
type terminationResult struct {
	wall             time.Duration // from the deletes to the last pod gone
	syncs, idleSyncs uint64
	cpu, idleCPU     time.Duration // of this process
	apiserverCPU     time.Duration // during the termination
}

func runTermination(b *testing.B, bin string, grace time.Duration) terminationResult {
	b.Helper()
	dir, err := os.MkdirTemp("", "corekube-bench-termination-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	var c cluster
	defer c.stop(b)
	c.apiserver = startProc(b, dir, "apiserver", bin, "apiserver", "--data-dir", filepath.Join(dir, "etcd"), "--write-kubeconfig", kubeconfig, "--listen", "127.0.0.1:0")
	client := waitServer(b, &c, kubeconfig)
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	rc.QPS = -1

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	a, err := agent.New(rc, agent.Config{
		Nodes: terminationNodes, DisableEvents: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Run(agentCtx) }()
	defer func() {
		stopAgent()
		if err := <-agentDone; err != nil {
			b.Errorf("agent: %v", err)
		}
	}()

	const ns = "termination-bench"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create namespace: %v", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	running := newCounter(factory.Core().V1().Pods().Informer(), func(obj any) bool {
		p, ok := obj.(*v1.Pod)
		return ok && p.Status.Phase == v1.PodRunning
	})
	present := newCounter(factory.Core().V1().Pods().Informer(), func(any) bool { return true })
	infCtx, stopInformers := context.WithCancel(ctx)
	defer func() {
		stopInformers()
		factory.Shutdown()
	}()
	factory.Start(infCtx.Done())

	// Pods bound by name (no scheduler), 100 a node.
	err = parallel(16, terminationPods, func(i int) error {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("term-%04d", i)},
			Spec: v1.PodSpec{
				NodeName:                      fmt.Sprintf("%s-%d", agent.DefaultNodeNamePrefix, 1+i%terminationNodes),
				TerminationGracePeriodSeconds: ptr.To(int64(grace / time.Second)),
				Containers:                    []v1.Container{{Name: "sh", Image: "busybox:1.36", Command: []string{"sh", "-c", "sleep 600"}}},
			},
		}
		_, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatalf("create pods: %v", err)
	}
	if err := running.wait(ctx, &c, "Running pods", terminationPods, 10*time.Second); err != nil {
		b.Fatal(err)
	}

	var res terminationResult
	// Idle, for comparison: the same time with the pods just running.
	syncs0, cpu0 := a.PodSyncs(), selfCPU()
	select {
	case <-time.After(grace):
	case <-ctx.Done():
		b.Fatal(ctx.Err())
	}
	res.idleSyncs, res.idleCPU = a.PodSyncs()-syncs0, selfCPU()-cpu0

	api0, err := procTicks(c.apiserver.pid())
	if err != nil {
		b.Fatal(err)
	}
	syncs0, cpu0 = a.PodSyncs(), selfCPU()
	start := time.Now()
	err = parallel(16, terminationPods, func(i int) error {
		return client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("term-%04d", i), metav1.DeleteOptions{})
	})
	if err != nil {
		b.Fatalf("delete pods: %v", err)
	}
	if err := present.waitAtMost(ctx, &c, "pods left", 0, 10*time.Second); err != nil {
		b.Fatal(err)
	}
	res.wall = time.Since(start)
	res.syncs, res.cpu = a.PodSyncs()-syncs0, selfCPU()-cpu0
	api1, err := procTicks(c.apiserver.pid())
	if err != nil {
		b.Fatal(err)
	}
	res.apiserverCPU = time.Duration(float64(api1-api0) / clockTicks * float64(time.Second))
	// Not a timing: a count. The waiting pods cost three syncs each (the
	// deletion, the kill at the deadline, the removal); a worker that
	// spins through the grace period costs tens to thousands.
	if perPod := float64(res.syncs) / terminationPods; perPod > maxSyncsPerTerminatingPod {
		b.Errorf("%.1f pod syncs per terminating pod (at most %d expected): the agent busy-waits through the grace period", perPod, maxSyncsPerTerminatingPod)
	}
	if res.wall < grace {
		b.Errorf("pods gone after %v, before their grace period of %v: the shell did not wait out SIGTERM", res.wall, grace)
	}
	return res
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first
// error.
func parallel(workers, n int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  int
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil
				mu.Unlock()
				if i >= n || stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// waitAtMost returns once the count has fallen to want, logging progress
// every step; it fails when ctx ends or a process of the cluster exits.
func (c *counter) waitAtMost(ctx context.Context, cl *cluster, what string, want int, step time.Duration) error {
	progress := time.NewTicker(step)
	defer progress.Stop()
	start := time.Now()
	for {
		if n := c.count(); n <= want {
			return nil
		}
		select {
		case <-c.changed:
		case <-progress.C:
			if err := cl.check(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "termination: %d %s after %v\n", c.count(), what, time.Since(start).Round(time.Second))
		case <-ctx.Done():
			return fmt.Errorf("%d %s when the deadline passed: %w", c.count(), what, ctx.Err())
		}
	}
}
