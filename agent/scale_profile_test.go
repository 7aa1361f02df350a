package agent

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestScaleProfile measures the agent's memory at steady state, not a test
// (`make bench-scale` measures the agent as its own process; this one
// profiles it):
// with COREKUBE_AGENT_PROFILE_KUBECONFIG set (a server with nothing bound to
// node-1...), it runs an agent in this process with
// COREKUBE_AGENT_SCALE_NODES nodes (default 300), creates
// COREKUBE_AGENT_SCALE_PODS pods bound round-robin to them (default 9000),
// waits until they all run and COREKUBE_AGENT_PROFILE_SETTLE (default 30s)
// more, then logs the heap and goroutine figures and writes a heap profile
// to COREKUBE_AGENT_PROFILE_OUT (default agent-heap.pprof):
//
//	corekube apiserver --data-dir /tmp/d --write-kubeconfig /tmp/kc --listen 127.0.0.1:0 &
//	COREKUBE_AGENT_PROFILE_KUBECONFIG=/tmp/kc go test -run TestScaleProfile -v -timeout 30m ./agent/
//	go tool pprof -sample_index=inuse_space -top agent-heap.pprof
func TestScaleProfile(t *testing.T) {
	kubeconfig := os.Getenv("COREKUBE_AGENT_PROFILE_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("COREKUBE_AGENT_PROFILE_KUBECONFIG not set")
	}
	envInt := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
			return v
		}
		return def
	}
	pods, nodes := envInt("COREKUBE_AGENT_SCALE_PODS", 9000), envInt("COREKUBE_AGENT_SCALE_NODES", 300)
	settle := 30 * time.Second
	if d, err := time.ParseDuration(os.Getenv("COREKUBE_AGENT_PROFILE_SETTLE")); err == nil {
		settle = d
	}
	out := os.Getenv("COREKUBE_AGENT_PROFILE_OUT")
	if out == "" {
		out = "agent-heap.pprof"
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS = -1
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	runtime.MemProfileRate = 4096
	goroutines0 := runtime.NumGoroutine()
	cfg := Config{Nodes: nodes, Logger: testserver.Logger()}
	a, err := New(rc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	ns := "scale"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Logf("namespace: %v", err)
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= pods {
					return
				}
				pod := &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Labels: map[string]string{"app": "scale"}},
					Spec: v1.PodSpec{
						NodeName:   fmt.Sprintf("node-%d", i%nodes+1),
						Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
					},
				}
				if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					t.Errorf("create %s: %v", pod.Name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d pods created in %v", pods, time.Since(start))
	for {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running", ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		n := len(list.Items)
		list = nil
		t.Logf("%v: %d/%d running", time.Since(start).Round(time.Second), n, pods)
		if n >= pods {
			break
		}
		time.Sleep(5 * time.Second)
	}
	time.Sleep(settle)
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("steady state: HeapInuse %.1f MiB, HeapAlloc %.1f MiB, StackInuse %.1f MiB, Sys %.1f MiB, goroutines %d (before the agent %d)",
		mib(ms.HeapInuse), mib(ms.HeapAlloc), mib(ms.StackInuse), mib(ms.Sys), runtime.NumGoroutine(), goroutines0)
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatal(err)
	}
	if gf, err := os.Create(out + ".goroutines"); err == nil {
		_ = pprof.Lookup("goroutine").WriteTo(gf, 1)
		gf.Close()
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
