package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// runMainEnv makes the test binary run corekube's main instead of the
// tests, so that a test starts real `corekube scheduler` processes
// without building bin/corekube.
const runMainEnv = "COREKUBE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// schedulerProcess is a `corekube scheduler` (or other command) child
// process.
type schedulerProcess struct {
	cmd    *exec.Cmd
	stderr *testserver.SyncBuffer
	exited chan struct{}
	err    error
}

// startSchedulerProcess starts a `corekube scheduler` with short leader
// election durations and no secure port: several run on one machine.
func startSchedulerProcess(t *testing.T, kubeconfig string) *schedulerProcess {
	t.Helper()
	return startProcess(t, "scheduler", "--kubeconfig", kubeconfig, "--secure-port=0",
		"--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=1s", "--leader-elect-retry-period=250ms")
}

// startProcess starts `corekube args...` (this test binary running
// main), killed when the test ends.
func startProcess(t *testing.T, args ...string) *schedulerProcess {
	t.Helper()
	p := &schedulerProcess{stderr: &testserver.SyncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), runMainEnv+"=1")
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("scheduler %d stderr:\n%s", p.cmd.Process.Pid, p.stderr.String())
		}
	})
	return p
}

// wait is the process's exit error, within d.
func (p *schedulerProcess) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		t.Fatalf("scheduler %d still running after %v", p.cmd.Process.Pid, d)
		return nil
	}
}

// leaseHolder is the holder of kube-system/name ("" when released or
// missing).
func leaseHolder(c kubernetes.Interface, name string) string {
	lease, err := c.CoordinationV1().Leases("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// leaderAmong polls until the lease's holder is one of procs (each logs
// its identity when it starts to campaign) and returns it.
func leaderAmong(t *testing.T, c kubernetes.Interface, d time.Duration, procs ...*schedulerProcess) *schedulerProcess {
	t.Helper()
	var leader *schedulerProcess
	var holder string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, d, true, func(context.Context) (bool, error) {
		holder = leaseHolder(c, "kube-scheduler")
		if holder == "" {
			return false, nil
		}
		for _, p := range procs {
			if strings.Contains(p.stderr.String(), "identity="+holder) {
				leader = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("lease kube-system/kube-scheduler held by %q after %v, not by one of the expected processes", holder, d)
	}
	return leader
}

// TestLeaderElectionProcesses runs real `corekube scheduler` processes
// (as system:kube-scheduler, kube's election flags, short durations):
// one leads and binds; SIGKILL of the leader hands over once the lease
// expires; SIGTERM releases the lease for an at-once takeover and exits
// 0; a lost lease exits 1 with "leaderelection lost"; no pod is bound
// twice.
func TestLeaderElectionProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and scheduler processes")
	}
	srv := testserver.Start(t)
	c := srv.Client
	readyNode(t, c, "n1")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(kubeconfig, userConfig(t, srv, "system:kube-scheduler")); err != nil {
		t.Fatal(err)
	}
	const leaseDuration = 2 * time.Second

	a, b := startSchedulerProcess(t, kubeconfig), startSchedulerProcess(t, kubeconfig)
	first := leaderAmong(t, c, 20*time.Second, a, b)
	createBoundPod(t, c, "q1")
	second := a
	if first == a {
		second = b
	}

	// SIGKILL: no release; the other takes over once the lease expired.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	first.wait(t, 10*time.Second)
	if got := leaderAmong(t, c, 10*time.Second, second); got != second {
		t.Fatalf("leader after SIGKILL: not the other process")
	}
	t.Logf("takeover %v after SIGKILL (lease duration %v)", time.Since(killed), leaseDuration)
	waitLeaderEvent(t, c, leaseHolder(c, "kube-scheduler")+" became leader")
	createBoundPod(t, c, "q2")

	// SIGTERM: the leader releases its lease and exits 0; a third
	// process takes over at its next retry, within the lease duration.
	third := startSchedulerProcess(t, kubeconfig)
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(third.stderr.String(), "attempting to acquire leader lease"), nil
	}); err != nil {
		t.Fatal("third scheduler never campaigned")
	}
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.wait(t, 10*time.Second); err != nil {
		t.Fatalf("scheduler after SIGTERM: %v, want exit 0", err)
	}
	released := time.Now()
	leaderAmong(t, c, 10*time.Second, third)
	if d := time.Since(released); d >= leaseDuration {
		t.Errorf("takeover %v after a clean stop, want within the lease duration %v (the lease released)", d, leaseDuration)
	}
	createBoundPod(t, c, "q3")

	// Lost lease: another holder takes it; the leader exits 1.
	takeLease(t, c, "kube-scheduler", "intruder")
	var exit *exec.ExitError
	if err := third.wait(t, 10*time.Second); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("scheduler after losing its lease: %v, want exit status 1", err)
	}
	if !strings.Contains(third.stderr.String(), "leaderelection lost") {
		t.Errorf("stderr lacks %q:\n%s", "leaderelection lost", third.stderr.String())
	}

	// No pod was bound twice: at most one Scheduled event each. (At
	// least one is not certain: a leader killed or stopped right after a
	// binding may not have flushed its event; createBoundPod saw each
	// pod bound.)
	for _, pod := range []string{"q1", "q2", "q3"} {
		if n := scheduledEvents(t, c, pod); n > 1 {
			t.Errorf("%s: %d Scheduled events, want at most 1", pod, n)
		}
	}
}
