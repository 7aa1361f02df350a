package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/test/informertest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v1 "k8s.io/api/core/v1"
)

// startAPIServer runs `corekube apiserver` on addr, with its certificates
// and admin kubeconfig in dataDir, and more flags (--etcd-servers, or none
// for an embedded etcd in dataDir).
func startAPIServer(t *testing.T, dataDir, addr string, args ...string) *process {
	t.Helper()
	return startProcess(t, dataDir, addr, append([]string{"apiserver", "--listen", addr, "--data-dir", dataDir,
		"--write-kubeconfig", filepath.Join(dataDir, "kubeconfig")}, args...)...)
}

// adminClient is a clientset with p's admin kubeconfig, unthrottled.
func (p *process) adminClient(t *testing.T) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(p.dataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS = -1
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, client
}

// createNamespace creates ns and waits for its default ServiceAccount,
// which pods need (the ServiceAccount admission plugin).
func createNamespace(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := client.CoreV1().Namespaces().Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("no default ServiceAccount in %s: %v", ns, err)
	}
}

// writeResult is one create of a write load.
type writeResult struct {
	name       string
	start, end time.Time
	// code is the HTTP status of the answer (0: no answer).
	code int
	err  error
}

func (r writeResult) ok() bool { return r.err == nil }

// hangLimit is how long a request of a load may take before the test
// counts it as hung (no request may outlive the server's timeout by
// much).
const hangLimit = 15 * time.Second

// writeLoad creates pods at a steady rate and keeps every answer: which
// creates were acknowledged (2xx), which failed and how fast. Each create
// is sent on time whether or not the ones before it were answered, so a
// stuck request does not hold up the next (the way many independent
// clients behave).
type writeLoad struct {
	mu      sync.Mutex
	results []writeResult
	// paused: the senders skip their ticks (pause, resume).
	paused bool
	// inflight counts the creates sent and not yet answered.
	inflight sync.WaitGroup

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// startWriteLoad starts a load on the pods of ns: writers senders, each
// sending a create every pace. It stops by halt, at the latest when the
// test ends.
func startWriteLoad(t *testing.T, client kubernetes.Interface, ns string, writers int, pace time.Duration) *writeLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &writeLoad{stop: cancel}
	for i := range writers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tick := time.NewTicker(pace)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				l.mu.Lock()
				if l.paused {
					l.mu.Unlock()
					continue
				}
				l.inflight.Add(1)
				l.mu.Unlock()
				l.wg.Add(1)
				go func() {
					defer l.wg.Done()
					defer l.inflight.Done()
					l.create(ctx, client, ns, fmt.Sprintf("w%d-%d", i, n), n%2 == 0)
				}()
			}
		}()
	}
	t.Cleanup(l.halt)
	return l
}

// create sends one create and records its answer.
func (l *writeLoad) create(ctx context.Context, client kubernetes.Interface, ns, name string, selected bool) {
	rctx, cancel := context.WithTimeout(ctx, hangLimit)
	defer cancel()
	start := time.Now()
	_, err := client.CoreV1().Pods(ns).Create(rctx, informertest.NewPod(name, selected), metav1.CreateOptions{})
	if err != nil && ctx.Err() != nil {
		return // halted mid-request: no answer to judge
	}
	r := writeResult{name: name, start: start, end: time.Now(), err: err}
	var status apierrors.APIStatus
	switch {
	case err == nil:
		r.code = 201
	case errors.As(err, &status):
		r.code = int(status.Status().Code)
	}
	l.mu.Lock()
	l.results = append(l.results, r)
	l.mu.Unlock()
}

// pause stops sending creates and waits until every create sent has been
// answered (a create answered 504 may still commit a moment later: a
// check that follows must poll). resume sends again.
func (l *writeLoad) pause() {
	l.mu.Lock()
	l.paused = true
	l.mu.Unlock()
	l.inflight.Wait()
}

// resume undoes pause.
func (l *writeLoad) resume() {
	l.mu.Lock()
	l.paused = false
	l.mu.Unlock()
}

// halt stops the load and waits for its goroutines.
func (l *writeLoad) halt() {
	l.stop()
	l.wg.Wait()
}

// snapshot returns the results so far.
func (l *writeLoad) snapshot() []writeResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]writeResult(nil), l.results...)
}

// acked returns the names of the acknowledged creates.
func (l *writeLoad) acked() []string {
	var names []string
	for _, r := range l.snapshot() {
		if r.ok() {
			names = append(names, r.name)
		}
	}
	sort.Strings(names)
	return names
}

// waitSuccesses waits until n creates sent after since succeeded, and
// fails the test after within.
func (l *writeLoad) waitSuccesses(t *testing.T, since time.Time, n int, within time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, within, true, func(context.Context) (bool, error) {
		got := 0
		for _, r := range l.snapshot() {
			if r.ok() && !r.start.Before(since) {
				got++
			}
		}
		return got >= n, nil
	})
	if err != nil {
		t.Fatalf("fewer than %d creates succeeded within %v of %s: %s", n, within, since.Format(time.StampMilli), l.window(since, time.Now()))
	}
}

// windowFigures describe the load's answers in a window of time.
type windowFigures struct {
	// requests answered in the window, and how many failed.
	requests, failed int
	// recovery is how long after the window's start the first create
	// sent in it succeeded (-1: none did, or the window has no start).
	recovery time.Duration
	// slowest is the longest time a request answered in the window took.
	slowest time.Duration
	// codes counts the failures by HTTP status (0: no answer); messages
	// has one error message of each.
	codes    map[int]int
	messages map[int]string
}

func (f windowFigures) String() string {
	s := fmt.Sprintf("%d requests, %d failed %v, slowest answer %v", f.requests, f.failed, f.codes, f.slowest.Round(time.Millisecond))
	if f.recovery >= 0 {
		s += fmt.Sprintf(", first success of a request sent after the start %v after it", f.recovery.Round(time.Millisecond))
	}
	for _, code := range slices.Sorted(maps.Keys(f.messages)) {
		s += fmt.Sprintf("; %d: %q", code, f.messages[code])
	}
	return s
}

// window computes the figures of the answers received in [from, to).
func (l *writeLoad) window(from, to time.Time) windowFigures {
	f := windowFigures{recovery: -1, codes: map[int]int{}, messages: map[int]string{}}
	var first time.Time
	for _, r := range l.snapshot() {
		if r.end.Before(from) || !r.end.Before(to) {
			continue
		}
		f.requests++
		f.slowest = max(f.slowest, r.end.Sub(r.start))
		if !r.ok() {
			f.failed++
			f.codes[r.code]++
			f.messages[r.code] = r.err.Error()
			continue
		}
		if !r.start.Before(from) && (first.IsZero() || r.end.Before(first)) {
			first = r.end
		}
	}
	if !first.IsZero() && !from.IsZero() {
		f.recovery = first.Sub(from)
	}
	return f
}

// checkNoneLost fails the test unless every acknowledged create of the
// load is in the server's pods of ns, and returns how many were checked.
func checkNoneLost(t *testing.T, client kubernetes.Interface, ns string, acked []string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list the pods after the fault: %v", err)
	}
	have := map[string]bool{}
	for _, p := range list.Items {
		have[p.Name] = true
	}
	var lost []string
	for _, name := range acked {
		if !have[name] {
			lost = append(lost, name)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d acknowledged creates lost: %v", len(lost), len(acked), lost[:min(len(lost), 20)])
	}
	return len(acked)
}
