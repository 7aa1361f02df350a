package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/corekube/corekube/test/informertest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestInformersSurviveSIGKILL: client-go informers (built from the
// kubeconfig `corekube up` writes), one for a namespace's pods and one with
// a label selector, keep running while the server is killed with SIGKILL
// and restarted on the same data and address; after concurrent writes
// before and after the kill they hold exactly the server's pods, and no
// handler ever saw an object's resourceVersion go backwards.
func TestInformersSurviveSIGKILL(t *testing.T) {
	dataDir := t.TempDir()
	p := startUp(t, dataDir)
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS = -1
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The informers' requests are recorded, to report how they recovered.
	rec := &informertest.Recorder{}
	informerClient, err := kubernetes.NewForConfig(rec.Config(cfg))
	if err != nil {
		t.Fatal(err)
	}
	const ns = "informers"
	if _, err := client.CoreV1().Namespaces().Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	informers := []*informertest.PodInformer{
		informertest.Start(t, informerClient, ns, ""),
		informertest.Start(t, informerClient, ns, informertest.Selector),
	}
	churn := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		start := time.Now()
		res := informertest.Churn(ctx, client, ns, informertest.ChurnOptions{Workers: 16, Ops: 300, Names: 30, Seed: uint64(start.UnixNano())})
		t.Logf("300 operations from 16 goroutines in %v: %s", time.Since(start).Round(time.Millisecond), res)
		res.Check(t)
	}

	churn()
	for _, inf := range informers {
		inf.WaitConverged(t, client, 15*time.Second)
	}
	lists := rec.Lists("/pods")

	killed := time.Now()
	p = p.kill()
	churn()
	for _, inf := range informers {
		inf.WaitConverged(t, client, 15*time.Second)
		inf.CheckMonotonic(t)
		t.Logf("informer %s converged %v after the SIGKILL; handlers ran %+v", inf, time.Since(killed).Round(time.Millisecond), inf.Counts())
	}
	t.Logf("after the restart: %d relists, %d watches answered 410 Expired", rec.Lists("/pods")-lists, rec.Expired())
	p.stop()
}
