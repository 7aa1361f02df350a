package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
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
	"k8s.io/apimachinery/pkg/util/wait"
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
	srv := testserver.StartMemory(t)
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

// TestScalePreemption measures the time to preempt in a full cluster of
// COREKUBE_SCALE_NODES nodes (1,000), each running two pods of priority 0
// that use all its cpu: COREKUBE_SCALE_PREEMPTORS pods (20) of priority
// 1000 come one at a time; for each, the time until it is nominated (the
// decision, the victim's DisruptionTarget and deletion, its own status)
// and, once the test finished its victim's deletion as a kubelet would,
// until it is bound. It runs only when COREKUBE_SCALE is set:
//
//	COREKUBE_SCALE=1 go test -run TestScalePreemption -v -timeout 30m ./controllers/scheduler/
func TestScalePreemption(t *testing.T) {
	if os.Getenv("COREKUBE_SCALE") == "" {
		t.Skip("set COREKUBE_SCALE=1 to run")
	}
	numNodes, numPreemptors := envInt("COREKUBE_SCALE_NODES", 1000), envInt("COREKUBE_SCALE_PREEMPTORS", 20)
	srv := testserver.StartMemory(t)
	c := srv.Client
	ctx := context.Background()
	parallel(t, numNodes, 32, func(i int) error {
		_, err := registerNode(c, fmt.Sprintf("node-%04d", i), "2", "8Gi", "110")
		return err
	})
	parallel(t, 2*numNodes, 32, func(i int) error {
		_, err := c.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("low-%05d", i), Namespace: ns},
			Spec: v1.PodSpec{NodeName: fmt.Sprintf("node-%04d", i%numNodes), Containers: []v1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: mustQuantity("1")}},
			}}},
		}, metav1.CreateOptions{})
		return err
	})
	startScheduler(t, srv, fastConfig())

	var nominate, bind []time.Duration
	prio := int32(1000)
	for i := range numPreemptors {
		name := fmt.Sprintf("high-%03d", i)
		start := time.Now()
		createPod(t, c, name, func(p *v1.Pod) { p.Spec.Priority = &prio }, requests("1", ""))
		var node string
		err := wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, testserver.WaitTimeout, true, func(ctx context.Context) (bool, error) {
			p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			node = p.Status.NominatedNodeName
			return node != "", nil
		})
		if err != nil {
			t.Fatalf("%s not nominated: %v", name, err)
		}
		nominate = append(nominate, time.Since(start))
		victims, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, v := range victims.Items {
			if v.DeletionTimestamp != nil {
				n++
				finishDeletion(t, c, v.Name)
			}
		}
		if n != 1 {
			t.Fatalf("%s: %d victims on %s, want 1", name, n, node)
		}
		start = time.Now()
		if p := waitBound(t, c, name); p.Spec.NodeName != node {
			t.Fatalf("%s bound to %s, nominated %s", name, p.Spec.NodeName, node)
		}
		bind = append(bind, time.Since(start))
	}
	slices.Sort(nominate)
	slices.Sort(bind)
	t.Logf("%d preemptions on %d full nodes: create to nominated median %v max %v; victim gone to bound median %v max %v",
		numPreemptors, numNodes, nominate[len(nominate)/2].Round(time.Millisecond), nominate[len(nominate)-1].Round(time.Millisecond),
		bind[len(bind)/2].Round(time.Millisecond), bind[len(bind)-1].Round(time.Millisecond))
}
