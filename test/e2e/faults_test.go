package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/etcdcluster"
	"github.com/corekube/corekube/test/informertest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// faultRequestTimeout is the --request-timeout of the fault tests' server:
// short, so that the quorum loss is quick to judge.
const faultRequestTimeout = 3 * time.Second

// TestEtcdFaults runs `corekube apiserver` on a 3-member etcd cluster (real
// member processes) under a steady write load and two informers, and
// breaks etcd the ways a real cluster breaks:
//
//   - a follower is killed, then (after it is back) the leader: requests
//     go on succeeding within seconds;
//   - two of three members are killed (quorum lost): writes and
//     consistent reads fail with a 5xx within --request-timeout, nothing
//     hangs, /readyz fails at once while /livez stays ok;
//   - the members come back: everything recovers without touching
//     corekube.
//
// After each fault the informers converge to the server's state (judged
// with the load paused, see converge), and at the end no acknowledged
// create is missing. The figures are logged (FAULT lines) for
// docs/faults.md and BENCHMARKS.md.
func TestEtcdFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 etcd members and a corekube process")
	}
	cluster := etcdcluster.Start(t, 3, etcdcluster.Options{})
	dataDir := t.TempDir()
	p := startAPIServer(t, dataDir, freeAddr(t), "--etcd-servers", strings.Join(cluster.Endpoints(), ","),
		"--request-timeout", faultRequestTimeout.String())
	cfg, client := p.adminClient(t)
	rec := &informertest.Recorder{}
	informerClient, err := kubernetes.NewForConfig(rec.Config(cfg))
	if err != nil {
		t.Fatal(err)
	}
	const ns = "faults"
	createNamespace(t, client, ns)
	informers := []*informertest.PodInformer{
		informertest.Start(t, informerClient, ns, ""),
		informertest.Start(t, informerClient, ns, informertest.Selector),
	}
	load := startWriteLoad(t, client, ns, 3, 20*time.Millisecond)
	// converge judges the informers with the load paused. Under the load
	// (150 creates/s) a comparison cannot succeed reliably: Diff's
	// consistent LIST is one moment and its read of the informer's store
	// a later one, and every create the informer receives in between (the
	// LIST of thousands of pods takes tens to hundreds of milliseconds on
	// a loaded machine) shows up as an "extra" pod newer than the LIST's
	// resourceVersion. With 3,500 pods that gap never closes for 20s
	// (seen in `make test`: 91 extra pods, every one at a resourceVersion
	// above the LIST's, while etcd and the LIST kept advancing). The load
	// runs through every fault and recovery; only the judging is quiet.
	converge := func(what string) {
		t.Helper()
		load.pause()
		defer load.resume()
		for _, inf := range informers {
			took := inf.WaitConverged(t, client, 20*time.Second)
			inf.CheckMonotonic(t)
			t.Logf("%s: informer %s converged in %v", what, inf, took.Round(time.Millisecond))
		}
	}

	load.waitSuccesses(t, time.Now(), 30, 10*time.Second)

	// A member, then the leader: the cluster keeps its quorum.
	for _, fault := range []string{"follower killed", "leader killed"} {
		victim := etcdMember(t, cluster, fault == "leader killed")
		start := time.Now()
		victim.Kill()
		load.waitSuccesses(t, start, 30, 10*time.Second)
		end := time.Now()
		f := load.window(start, end)
		t.Logf("FAULT %s (%s): %s", fault, victim.Name, f)
		if f.recovery < 0 || f.recovery > 5*time.Second {
			t.Errorf("%s: requests did not succeed again within 5s: %s", fault, f)
		}
		checkNoHang(t, fault, f)
		converge(fault)
		if err := victim.Restart(); err != nil {
			t.Fatal(err)
		}
		waitMemberHealthy(t, cluster, victim)
	}

	// Quorum lost: two of three members gone.
	leader := etcdMember(t, cluster, true)
	var other *etcdcluster.Member
	for _, m := range cluster.Members() {
		if m != leader {
			other = m
			break
		}
	}
	lost := time.Now()
	leader.Kill()
	other.Kill()

	// /readyz fails at once (its etcd check is bounded by 2s), /livez
	// does not.
	code, body, took := p.get(t, "/readyz?verbose")
	if code != http.StatusInternalServerError || !strings.Contains(body, "[-]etcd failed: reason withheld\n") || took > 2500*time.Millisecond {
		t.Errorf("/readyz without quorum: %d in %v:\n%s", code, took, body)
	}
	t.Logf("FAULT quorum lost: /readyz answered %d in %v", code, took.Round(time.Millisecond))
	if code, body, took := p.get(t, "/livez"); code != http.StatusOK || took > time.Second {
		t.Errorf("/livez without quorum: %d %q in %v, want 200 at once", code, body, took)
	}
	// Writes and consistent reads fail within --request-timeout.
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/api/v1/namespaces/" + ns + "/pods", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"noquorum"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`},
		{"GET", "/api/v1/namespaces/" + ns + "/pods/w0-0", ""},
		{"GET", "/api/v1/namespaces/" + ns + "/pods", ""},
		{"DELETE", "/api/v1/namespaces/" + ns + "/pods/w0-0", ""},
	} {
		code, body, took := p.do(t, req.method, req.path, req.body)
		t.Logf("FAULT quorum lost: %s %s answered %d in %v: %s", req.method, req.path, code, took.Round(time.Millisecond), strings.TrimSpace(body))
		if code < 500 || took > faultRequestTimeout+time.Second {
			t.Errorf("%s %s without quorum: %d in %v, want a 5xx within %v: %s", req.method, req.path, code, took, faultRequestTimeout, body)
		}
	}
	// The load's requests failed the same way, none hung.
	load.waitFailures(t, lost, 5, 2*faultRequestTimeout)
	back := time.Now()
	f := load.window(lost, back)
	t.Logf("FAULT quorum lost for %v: %s", back.Sub(lost).Round(time.Millisecond), f)
	checkNoHang(t, "quorum lost", f)

	// Quorum back: corekube recovers by itself.
	for _, m := range []*etcdcluster.Member{leader, other} {
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	load.waitSuccesses(t, back, 30, 20*time.Second)
	recovered := time.Now()
	f = load.window(back, recovered)
	t.Logf("FAULT quorum back: %s", f)
	readyAfter := waitReady(t, p, back)
	t.Logf("FAULT quorum back: /readyz ok %v after the members restarted", readyAfter.Round(time.Millisecond))
	converge("quorum back")

	load.halt()
	all := load.window(time.Time{}, time.Now())
	n := checkNoneLost(t, client, ns, load.acked())
	for _, inf := range informers {
		inf.WaitConverged(t, client, 20*time.Second)
	}
	t.Logf("FAULT total: %d creates acknowledged, 0 lost; %s; informers relisted %d times, %d watches answered 410",
		n, all, rec.Lists("/pods"), rec.Expired())
}

// etcdMember returns the cluster's leader, or a running follower.
func etcdMember(t *testing.T, c *etcdcluster.Cluster, leader bool) *etcdcluster.Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	client, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for _, m := range c.Members() {
		if !m.Running() {
			continue
		}
		st, err := client.Status(ctx, m.ClientURL)
		if err != nil {
			t.Fatalf("status of etcd member %s: %v", m.Name, err)
		}
		if (st.Leader == st.Header.MemberId) == leader {
			return m
		}
	}
	t.Fatalf("no etcd member is the leader=%v\n%s", leader, c.Logs())
	return nil
}

// waitMemberHealthy waits until a restarted member serves again.
func waitMemberHealthy(t *testing.T, c *etcdcluster.Cluster, m *etcdcluster.Member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := m.WaitHealthy(ctx); err != nil {
		t.Fatalf("%v\n%s", err, c.Logs())
	}
}

// checkNoHang fails the test if a request in f took much longer than the
// server's --request-timeout.
func checkNoHang(t *testing.T, what string, f windowFigures) {
	t.Helper()
	// The server answers at the deadline; the slack is for a loaded
	// machine's client side (150 requests in flight).
	if f.slowest > faultRequestTimeout+2*time.Second {
		t.Errorf("%s: a request took %v, more than --request-timeout %v", what, f.slowest, faultRequestTimeout)
	}
}

// waitFailures waits until n creates sent after since failed.
func (l *writeLoad) waitFailures(t *testing.T, since time.Time, n int, within time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, within, true, func(context.Context) (bool, error) {
		got := 0
		for _, r := range l.snapshot() {
			if !r.ok() && !r.start.Before(since) {
				got++
			}
		}
		return got >= n, nil
	})
	if err != nil {
		t.Fatalf("fewer than %d creates failed within %v: %s", n, within, l.window(since, time.Now()))
	}
}

// waitReady waits until p's /readyz says ok and returns how long after
// since that was.
func waitReady(t *testing.T, p *process, since time.Time) time.Duration {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		code, _, _ := p.get(t, "/readyz")
		return code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("/readyz not ok: %v", err)
	}
	return time.Since(since)
}

// get is do for a GET.
func (p *process) get(t *testing.T, path string) (int, string, time.Duration) {
	t.Helper()
	return p.do(t, "GET", path, "")
}

// do sends one request as the admin and returns the answer and how long it
// took; a request that hangs fails the test.
func (p *process) do(t *testing.T, method, path, body string) (int, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hangLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := p.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v (after %v)", method, path, err, time.Since(start))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, string(data), time.Since(start)
}
