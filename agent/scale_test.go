package agent

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestScaleLoad is a load generator for measuring the agent at scale, not a
// test: with COREKUBE_AGENT_SCALE_KUBECONFIG set it creates
// COREKUBE_AGENT_SCALE_PODS pods (default 30000) bound round-robin to
// COREKUBE_AGENT_SCALE_NODES nodes named node-1... (default 1000) in the
// namespace "scale", and waits until all of them run. Run the server and
// `corekube agent --nodes N` as separate processes to measure each:
//
//	COREKUBE_AGENT_SCALE_KUBECONFIG=data/kubeconfig go test -run TestScaleLoad -v -timeout 30m ./agent/
func TestScaleLoad(t *testing.T) {
	kubeconfig := os.Getenv("COREKUBE_AGENT_SCALE_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("COREKUBE_AGENT_SCALE_KUBECONFIG not set")
	}
	envInt := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
			return v
		}
		return def
	}
	pods, nodes := envInt("COREKUBE_AGENT_SCALE_PODS", 30000), envInt("COREKUBE_AGENT_SCALE_NODES", 1000)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS = -1
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := "scale"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Logf("namespace: %v", err)
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
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
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: %d/%d running", time.Since(start).Round(time.Second), len(list.Items), pods)
		if len(list.Items) >= pods {
			return
		}
		time.Sleep(5 * time.Second)
	}
}
