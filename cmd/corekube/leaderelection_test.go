package main

import (
	"context"
	"errors"
	"k8s.io/client-go/util/retry"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// leadingLog is a slog.Handler that counts the "leading" messages
// runElected logs when a candidate gains the lease.
type leadingLog struct {
	mu      sync.Mutex
	leading []string
	synced  []string // identities that logged "caches synced"
}

func (h *leadingLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *leadingLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *leadingLog) WithGroup(string) slog.Handler            { return h }

func (h *leadingLog) Handle(_ context.Context, r slog.Record) error {
	var into *[]string
	switch r.Message {
	case "leading":
		into = &h.leading
	case "caches synced":
		into = &h.synced
	default:
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "identity" {
			h.mu.Lock()
			*into = append(*into, a.Value.String())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// waitSynced reports whether id logged "caches synced" within 10 s.
func (h *leadingLog) waitSynced(id string) bool {
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.Contains(h.synced, id), nil
	})
	return err == nil
}

func (h *leadingLog) identities() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.leading...)
}

// waitIdentities returns the identities once at least n have logged
// leading (or after 10 s): a candidate logs it just after it took the
// lease, so the lease can name it an instant earlier.
func (h *leadingLog) waitIdentities(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	_ = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = h.identities()
		return len(got) >= n, nil
	})
	return got
}

// candidate is one process's worth of runElected.
type candidate struct {
	id   string
	stop context.CancelFunc // SIGTERM
	done chan error
}

// fastElection is the test's lease timing: kube's shape, shorter.
func fastElection(name string) leaderElection {
	return leaderElection{enabled: true, leaseDuration: 2 * time.Second, renewDeadline: time.Second,
		retryPeriod: 250 * time.Millisecond, resourceLock: "leases", namespace: "kube-system", name: name}
}

func startCandidate(t *testing.T, electCfg, loopsCfg *rest.Config, set loopSet, o leaderElection, id string, log *slog.Logger) *candidate {
	t.Helper()
	loops, err := newLoops(loopsCfg, set, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{id: id, stop: cancel, done: make(chan error, 1)}
	go func() { c.done <- runElected(ctx, electCfg, o, id, loops, log) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			t.Errorf("candidate %s still running 30s after its context ended", id)
		}
	})
	return c
}

// wait is the candidate's result, within d.
func (c *candidate) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-c.done:
		c.done <- err // for the cleanup
		return err
	case <-time.After(d):
		t.Fatalf("candidate %s did not return within %v", c.id, d)
		return nil
	}
}

// userConfig is srv's config as user name (a client certificate of the
// test CA), so that the bootstrap RBAC policy applies.
func userConfig(t *testing.T, srv *testserver.Server, name string) *rest.Config {
	t.Helper()
	pair, err := testserver.IssueClient(name)
	if err != nil {
		t.Fatal(err)
	}
	c := rest.CopyConfig(srv.Config)
	c.BearerToken, c.CertData, c.KeyData = "", pair.CertPEM, pair.KeyPEM
	return c
}

// waitHolder polls the lease until its holder is one of ids, within d.
func waitHolder(t *testing.T, c kubernetes.Interface, name string, d time.Duration, ids ...string) string {
	t.Helper()
	var holder string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, d, true, func(ctx context.Context) (bool, error) {
		lease, err := c.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		holder = ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		for _, id := range ids {
			if holder == id {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("lease kube-system/%s: holder %q after %v, want one of %v", name, holder, d, ids)
	}
	return holder
}

func readyNode(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	node, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")}
	now := metav1.Now()
	node.Status = v1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []v1.NodeCondition{{
		Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now,
	}}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createBoundPod(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var node string
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s not bound: %v", name, err)
	}
}

// scheduledEvents counts the Scheduled events of pod name.
// takeLease makes holder the holder of the Lease kube-system/name for an
// hour, as a successor would after a partition. The leader renews every
// few hundred milliseconds: an overwrite that loses that race (409) is
// retried on the newer lease.
func takeLease(t *testing.T, c kubernetes.Interface, name, holder string) {
	t.Helper()
	ctx, leases := context.Background(), c.CoordinationV1().Leases("kube-system")
	hour := int32(3600)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NowMicro()
		lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = &holder, &hour, &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("take the lease %s: %v", name, err)
	}
}

func scheduledEvents(t *testing.T, c kubernetes.Interface, name string) int {
	t.Helper()
	evs, err := c.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",reason=Scheduled"})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs.Items)
}

// TestLeaderElection runs two candidates of `corekube scheduler` and of
// `corekube controllers` on one server, as the users kube runs them as
// (the bootstrap RBAC policy must let them take their leases): one leads,
// a clean stop hands over at once, a lost lease stops the loops and
// returns errLeaderElectionLost (the process exits non-zero).
func TestLeaderElection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and four candidates")
	}
	srv := testserver.StartMemory(t)
	c := srv.Client

	t.Run("scheduler", func(t *testing.T) {
		readyNode(t, c, "n1")
		cfg := userConfig(t, srv, "system:kube-scheduler")
		o := fastElection("kube-scheduler")
		var logs leadingLog
		log := slog.New(&logs)
		cands := map[string]*candidate{}
		for _, id := range []string{"host_a", "host_b"} {
			cands[id] = startCandidate(t, cfg, cfg, schedulerLoop, o, id, log)
		}
		first := waitHolder(t, c, "kube-scheduler", 10*time.Second, "host_a", "host_b")
		createBoundPod(t, c, "p1")
		waitLeaderEvent(t, c, first+" became leader")
		if got := logs.waitIdentities(t, 1); len(got) != 1 || got[0] != first {
			t.Fatalf("leading: %v, want only %s (the lease's holder)", got, first)
		}

		// SIGTERM: the loops stop, the lease is released, the other
		// takes over at its next retry, well within the lease duration.
		second := "host_a"
		if first == "host_a" {
			second = "host_b"
		}
		// The standby has its caches already, as kube-scheduler's.
		if !logs.waitSynced(second) {
			t.Errorf("standby %s never synced its caches while %s led", second, first)
		}
		if got := logs.identities(); len(got) != 1 {
			t.Errorf("leading: %v while %s is the standby", got, second)
		}
		cands[first].stop()
		if err := cands[first].wait(t, 10*time.Second); err != nil {
			t.Fatalf("%s after SIGTERM: %v, want nil", first, err)
		}
		stopped := time.Now()
		waitHolder(t, c, "kube-scheduler", 10*time.Second, second)
		if d := time.Since(stopped); d >= o.leaseDuration {
			t.Errorf("%s took over %v after %s released, want within the lease duration %v", second, d, first, o.leaseDuration)
		}
		createBoundPod(t, c, "p2")
		if got := logs.waitIdentities(t, 2); len(got) != 2 || got[1] != second {
			t.Fatalf("leading: %v, want %s then %s", got, first, second)
		}

		// Another holder takes the lease (as a successor would after a
		// partition): the leader cannot renew, stops and fails.
		takeLease(t, c, "kube-scheduler", "intruder")
		if err := cands[second].wait(t, 10*time.Second); !errors.Is(err, errLeaderElectionLost) {
			t.Fatalf("%s after losing its lease: %v, want %v", second, err, errLeaderElectionLost)
		}

		// No pod was bound twice: at most one Scheduled event each (a
		// leader stopped right after a binding may not have flushed its
		// event; createBoundPod saw each pod bound).
		for _, pod := range []string{"p1", "p2"} {
			if n := scheduledEvents(t, c, pod); n > 1 {
				t.Errorf("%s: %d Scheduled events, want at most 1", pod, n)
			}
		}
	})

	t.Run("controllers", func(t *testing.T) {
		// The controllers' loops run as the admin (corekube's controllers
		// have no per-controller accounts); the election as kube's user.
		electCfg := userConfig(t, srv, "system:kube-controller-manager")
		o := fastElection("kube-controller-manager")
		var logs leadingLog
		log := slog.New(&logs)
		cands := map[string]*candidate{}
		for _, id := range []string{"host_a", "host_b"} {
			cands[id] = startCandidate(t, electCfg, srv.Config, namespaceLoop|controllerLoops, o, id, log)
		}
		first := waitHolder(t, c, "kube-controller-manager", 10*time.Second, "host_a", "host_b")
		if got := logs.waitIdentities(t, 1); len(got) != 1 || got[0] != first {
			t.Fatalf("leading: %v, want only %s (the lease's holder)", got, first)
		}
		second := "host_a"
		if first == "host_a" {
			second = "host_b"
		}
		cands[first].stop()
		if err := cands[first].wait(t, 10*time.Second); err != nil {
			t.Fatalf("%s after SIGTERM: %v, want nil", first, err)
		}
		waitHolder(t, c, "kube-controller-manager", 10*time.Second, second)
		if got := logs.waitIdentities(t, 2); len(got) != 2 || got[1] != second {
			t.Fatalf("leading: %v, want %s then %s", got, first, second)
		}
	})
}

// waitLeaderEvent polls for the LeaderElection event with message msg on
// a Lease in kube-system, as kube's components record.
func waitLeaderEvent(t *testing.T, c kubernetes.Interface, msg string) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := c.CoreV1().Events("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "reason=LeaderElection"})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, ev := range evs.Items {
			seen = append(seen, ev.InvolvedObject.Kind+" "+ev.Message)
			if ev.Message == msg && ev.InvolvedObject.Kind == "Lease" && ev.Type == v1.EventTypeNormal {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no LeaderElection event %q on a Lease: %v (seen %v)", msg, err, seen)
	}
}
