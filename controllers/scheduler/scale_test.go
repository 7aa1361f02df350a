package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// TestScale places COREKUBE_SCALE_PODS pods (30,000) on COREKUBE_SCALE_NODES
// nodes (1,000) with the server in the same process, and reports how long
// it took and the CPU both used. It runs only when COREKUBE_SCALE is set:
//
//	COREKUBE_SCALE=1 go test -run TestScale -v -timeout 30m ./controllers/scheduler/
//
// The nodes are in three zones; with COREKUBE_SCALE_SPREAD=1 every pod
// carries kube's usual spreading: a zone constraint (maxSkew 1,
// DoNotSchedule) and a hostname one (ScheduleAnyway) over its app label.
func TestScale(t *testing.T) {
	if os.Getenv("COREKUBE_SCALE") == "" {
		t.Skip("set COREKUBE_SCALE=1 to run")
	}
	numNodes, numPods := envInt("COREKUBE_SCALE_NODES", 1000), envInt("COREKUBE_SCALE_PODS", 30000)
	srv := testserver.Start(t)
	c := srv.Client
	ctx := context.Background()
	parallel(t, numNodes, 32, func(i int) error {
		_, err := registerNode(c, fmt.Sprintf("node-%04d", i), "32", "128Gi", "110", withLabels(v1.LabelTopologyZone, fmt.Sprintf("zone-%d", i%3)))
		return err
	})
	cfg := fastConfig()
	cfg.InitialBackoff, cfg.MaxBackoff = time.Second, 10*time.Second
	startScheduler(t, srv, cfg)

	// Count bindings from a watch of bound pods.
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermNotEqualSelector("spec.nodeName", "").String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var bound atomic.Int64
	allBound := make(chan struct{})
	go func() {
		seen := map[string]bool{}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				name := ev.Object.(*v1.Pod).Name
				if !seen[name] {
					seen[name] = true
					if bound.Add(1) == int64(numPods) {
						close(allBound)
					}
				}
			}
		}
	}()

	spread := os.Getenv("COREKUBE_SCALE_SPREAD") != ""
	cpu0, start := cpuTime(), time.Now()
	parallel(t, numPods, 32, func(i int) error {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Namespace: ns},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}
		if spread {
			app := fmt.Sprintf("app-%d", i%10)
			pod.Labels = map[string]string{"app": app}
			sel := &metav1.LabelSelector{MatchLabels: pod.Labels}
			pod.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: sel},
				{MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.ScheduleAnyway, LabelSelector: sel},
			}
		}
		_, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	created := time.Since(start)
	select {
	case <-allBound:
	case <-time.After(20 * time.Minute):
		t.Fatalf("only %d of %d pods bound", bound.Load(), numPods)
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("spreading %v: %d pods on %d nodes: created in %v, all bound after %v (%.0f pods/s); process CPU %v (%.2f cores); heap %d MiB",
		spread, numPods, numNodes, created.Round(time.Millisecond), elapsed.Round(time.Millisecond), float64(numPods)/elapsed.Seconds(),
		cpu.Round(time.Millisecond), cpu.Seconds()/elapsed.Seconds(), ms.HeapAlloc>>20)
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// parallel runs f for 0..n-1 on workers goroutines.
func parallel(t *testing.T, n, workers int, f func(int) error) {
	t.Helper()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	var firstErr atomic.Value
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		t.Fatal(err)
	}
}
