// Package informertest runs real client-go pod informers against a corekube
// server and checks what they saw: that their stores converge exactly to the
// server's state, and that no event handler ever saw an object's
// resourceVersion go backwards. It also has a concurrent workload (Churn)
// and a transport that records the requests a client makes (Recorder).
package informertest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// PodInformer is one SharedInformerFactory's pod informer in one namespace,
// optionally with a label selector, and what its handlers saw.
type PodInformer struct {
	namespace string
	selector  string
	informer  cache.SharedIndexInformer

	mu       sync.Mutex
	lastRV   map[string]int64 // by name: the newest resourceVersion a handler saw
	problems []string
	added    int
	updated  int
	deleted  int
}

// Counts is how many times each handler ran.
type Counts struct{ Added, Updated, Deleted int }

// Start starts a pod informer (no resync) on namespace with selector ("" for
// all pods) and waits until it has synced. It stops when the test ends.
func Start(tb testing.TB, client kubernetes.Interface, namespace, selector string) *PodInformer {
	tb.Helper()
	p := &PodInformer{namespace: namespace, selector: selector, lastRV: map[string]int64{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	p.informer = factory.Core().V1().Pods().Informer()
	if _, err := p.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { p.saw("ADD", obj, false) },
		UpdateFunc: func(old, obj any) {
			if o, n := rvOf(old), rvOf(obj); n < o {
				p.problem("UPDATE %s: resourceVersion %d after %d", nameOf(obj), n, o)
			}
			p.saw("UPDATE", obj, false)
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				// The last state the informer knew: not newer than it.
				p.saw("DELETE", t.Obj, false)
				return
			}
			p.saw("DELETE", obj, true)
		},
	}); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.Start(ctx.Done())
	syncCtx, cancelSync := context.WithTimeout(ctx, 15*time.Second)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), p.informer.HasSynced) {
		tb.Fatalf("informer %s did not sync within 15s", p)
	}
	return p
}

func (p *PodInformer) String() string {
	if p.selector == "" {
		return "pods in " + p.namespace
	}
	return fmt.Sprintf("pods in %s with %s", p.namespace, p.selector)
}

// saw records one handler call. A watch's DELETED is a change of its own
// (a delete, or a label change out of the selector), so it carries a newer
// resourceVersion than anything seen before; ADD and UPDATE may repeat the
// newest (a relist replays the current state).
func (p *PodInformer) saw(what string, obj any, strictlyNewer bool) {
	name, rv := nameOf(obj), rvOf(obj)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch what {
	case "ADD":
		p.added++
	case "UPDATE":
		p.updated++
	case "DELETE":
		p.deleted++
	}
	last, seen := p.lastRV[name]
	if rv < 0 {
		p.problems = append(p.problems, fmt.Sprintf("%s %s: resourceVersion not a number", what, name))
		return
	}
	if seen && (rv < last || strictlyNewer && rv == last) {
		p.problems = append(p.problems, fmt.Sprintf("%s %s: resourceVersion %d after %d", what, name, rv, last))
	}
	p.lastRV[name] = max(last, rv)
}

func (p *PodInformer) problem(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.problems = append(p.problems, fmt.Sprintf(format, args...))
}

// Counts returns how many times each handler ran so far.
func (p *PodInformer) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Counts{Added: p.added, Updated: p.updated, Deleted: p.deleted}
}

// CheckMonotonic fails the test if a handler ever saw an object's
// resourceVersion go backwards.
func (p *PodInformer) CheckMonotonic(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.problems) > 0 {
		n := min(len(p.problems), 20)
		tb.Errorf("informer %s: %d resourceVersions went backwards, first %d:\n%s", p, len(p.problems), n, strings.Join(p.problems[:n], "\n"))
	}
}

// podState is what convergence compares.
type podState struct {
	RV       string
	Labels   map[string]string
	Image    string
	NodeName string
	Deleting bool
}

func stateOf(pod *v1.Pod) podState {
	s := podState{RV: pod.ResourceVersion, Labels: pod.Labels, NodeName: pod.Spec.NodeName, Deleting: pod.DeletionTimestamp != nil}
	if len(pod.Spec.Containers) > 0 {
		s.Image = pod.Spec.Containers[0].Image
	}
	return s
}

// Diff compares the informer's store with the server's state (a
// consistent list through client) and describes the differences; "" means
// equal. The list is read first and the store after it, so writes must
// have stopped: one in between makes the informer look ahead of the
// server (an extra pod, or a newer resourceVersion).
func (p *PodInformer) Diff(ctx context.Context, client kubernetes.Interface) (string, error) {
	list, err := client.CoreV1().Pods(p.namespace).List(ctx, metav1.ListOptions{LabelSelector: p.selector})
	if err != nil {
		return "", err
	}
	server := map[string]podState{}
	for i := range list.Items {
		server[list.Items[i].Name] = stateOf(&list.Items[i])
	}
	local := map[string]podState{}
	for _, obj := range p.informer.GetStore().List() {
		pod := obj.(*v1.Pod)
		if pod.Namespace != p.namespace {
			return fmt.Sprintf("pod %s/%s from another namespace in the store", pod.Namespace, pod.Name), nil
		}
		local[pod.Name] = stateOf(pod)
	}
	var diffs []string
	for _, name := range slices.Sorted(maps.Keys(server)) {
		want := server[name]
		got, ok := local[name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("missing %s (rv %s)", name, want.RV))
		case !equal(got, want):
			diffs = append(diffs, fmt.Sprintf("%s: informer %+v, server %+v", name, got, want))
		}
	}
	listRV, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
	newer := 0
	for _, name := range slices.Sorted(maps.Keys(local)) {
		if _, ok := server[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("extra %s (rv %s)", name, local[name].RV))
			if rv, err := strconv.ParseInt(local[name].RV, 10, 64); err == nil && rv > listRV {
				newer++
			}
		}
	}
	if len(diffs) == 0 {
		return "", nil
	}
	// Extra pods newer than the list are what a write between the LIST
	// and the read of the store leaves: say so, for the reader of a
	// failure.
	return fmt.Sprintf("%d differences (server has %d pods at rv %s, informer %d; %d extra pods newer than the list, written after it): %s",
		len(diffs), len(server), list.ResourceVersion, len(local), newer, strings.Join(diffs[:min(len(diffs), 10)], "; ")), nil
}

func equal(a, b podState) bool {
	return a.RV == b.RV && maps.Equal(a.Labels, b.Labels) && a.Image == b.Image && a.NodeName == b.NodeName && a.Deleting == b.Deleting
}

// CheckConverged fails the test unless the store equals the server's
// state now.
func (p *PodInformer) CheckConverged(tb testing.TB, client kubernetes.Interface) {
	tb.Helper()
	diff, err := p.Diff(context.Background(), client)
	if err != nil {
		tb.Fatal(err)
	}
	if diff != "" {
		tb.Errorf("informer %s differs from the server: %s", p, diff)
	}
}

// WaitConverged polls until the store equals the server's state, failing
// the test when timeout passes first. It returns how long that took.
func (p *PodInformer) WaitConverged(tb testing.TB, client kubernetes.Interface, timeout time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		diff, err := p.Diff(ctx, client)
		if err != nil {
			// The server may be restarting; keep polling.
			last = err.Error()
			return false, nil
		}
		last = diff
		return diff == "", nil
	})
	if err != nil {
		tb.Fatalf("informer %s did not converge within %v: %s", p, timeout, last)
	}
	return time.Since(start)
}

// rvOf is an object's resourceVersion as a number, -1 when it is not one.
func rvOf(obj any) int64 {
	m, ok := obj.(metav1.Object)
	if !ok {
		return -1
	}
	rv, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil {
		return -1
	}
	return rv
}

func nameOf(obj any) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetName()
	}
	return fmt.Sprintf("%T", obj)
}
