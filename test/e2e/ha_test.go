package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corekube/corekube/test/etcdcluster"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// apiserverProcess is a running `corekube apiserver`.
type apiserverProcess struct {
	name       string
	url        string
	kubeconfig string
	log        string
	cmd        *exec.Cmd
	exited     chan error
	// config is the admin's client config from the kubeconfig the server
	// wrote, and client a clientset on it.
	config *rest.Config
	client kubernetes.Interface
}

// startAPIServers starts one `corekube apiserver` per name at once (so that
// they race to create the shared PKI on a first start), each with args and
// its own --listen and --write-kubeconfig, and waits until every one
// answers /readyz with ok.
func startAPIServers(t *testing.T, names []string, args ...string) []*apiserverProcess {
	t.Helper()
	dir := t.TempDir()
	var out []*apiserverProcess
	for _, name := range names {
		addr := freeAddr(t)
		p := &apiserverProcess{name: name, url: "https://" + addr, kubeconfig: filepath.Join(dir, name+".kubeconfig"),
			log: filepath.Join(dir, name+".log"), exited: make(chan error, 1)}
		logFile, err := os.Create(p.log)
		if err != nil {
			t.Fatal(err)
		}
		p.cmd = exec.Command(binary, append([]string{"apiserver", "--listen", addr, "--write-kubeconfig", p.kubeconfig}, args...)...)
		p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			p.exited <- p.cmd.Wait()
			logFile.Close()
		}()
		t.Cleanup(func() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(20 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.exited
			}
			if t.Failed() {
				data, _ := os.ReadFile(p.log)
				t.Logf("corekube apiserver %s output:\n%s", p.name, data)
			}
		})
		out = append(out, p)
	}
	start := time.Now()
	for _, p := range out {
		p.waitReady(t)
	}
	t.Logf("%d API servers ready in %v", len(out), time.Since(start))
	return out
}

// waitReady polls the server's /readyz with its kubeconfig's credentials.
func (p *apiserverProcess) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var httpClient *http.Client
	for {
		if httpClient == nil {
			if cfg, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig); err == nil {
				if httpClient, err = rest.HTTPClientFor(cfg); err == nil {
					p.config = cfg
				}
			}
		}
		if httpClient != nil {
			resp, err := httpClient.Get(p.url + "/readyz")
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && string(body) == "ok" {
					break
				}
			}
		}
		select {
		case err := <-p.exited:
			data, _ := os.ReadFile(p.log)
			t.Fatalf("apiserver %s exited before it was ready: %v\n%s", p.name, err, data)
		default:
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(p.log)
			t.Fatalf("apiserver %s not ready after 60s:\n%s", p.name, data)
		}
		time.Sleep(50 * time.Millisecond) // polling another process's readiness
	}
	var err error
	if p.client, err = kubernetes.NewForConfig(p.config); err != nil {
		t.Fatal(err)
	}
}

// TestHAAPIServers runs two API servers on one 3-member etcd cluster (over
// TLS with client certificates) and one --data-dir, and checks that they
// serve one cluster: what is written through one is read, listed and
// watched through the other with comparable resourceVersions, credentials
// from one work on the other, each keeps its identity lease, and etcd is
// compacted once per interval for both.
func TestHAAPIServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three etcd members and three API servers")
	}
	etcd := etcdcluster.Start(t, 3, etcdcluster.Options{TLS: true})
	files := etcd.TLS()
	const interval = time.Second
	etcdArgs := []string{"--etcd-servers", strings.Join(etcd.Endpoints(), ","),
		"--etcd-cafile", files.CAFile, "--etcd-certfile", files.CertFile, "--etcd-keyfile", files.KeyFile}
	dataDir := t.TempDir()
	servers := startAPIServers(t, []string{"a", "b"}, append(slices.Clone(etcdArgs),
		"--data-dir", dataDir, "--etcd-compaction-interval", interval.String())...)
	a, b := servers[0], servers[1]
	raw := etcdClient(t, etcd)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("shared PKI and kubeconfigs", func(t *testing.T) {
		for _, p := range servers {
			if p.config.Host != p.url {
				t.Errorf("%s's kubeconfig points at %s, want %s", p.name, p.config.Host, p.url)
			}
		}
		if string(a.config.CAData) != string(b.config.CAData) {
			t.Error("the servers' kubeconfigs trust different CAs")
		}
		// Each kubeconfig's CA and client certificate work on the other
		// server: one CA signs both serving certificates and both admins.
		for _, pair := range [][2]*apiserverProcess{{a, b}, {b, a}} {
			cfg := rest.CopyConfig(pair[0].config)
			cfg.Host = pair[1].url
			cs := kubernetes.NewForConfigOrDie(cfg)
			if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
				t.Errorf("%s's kubeconfig on %s: %v", pair[0].name, pair[1].name, err)
			}
		}
		for _, f := range []string{"ca.crt", "ca.key", "sa.key", "apiserver.crt", "admin.crt"} {
			if _, err := os.Stat(filepath.Join(dataDir, "pki", f)); err != nil {
				t.Errorf("data dir: %v", err)
			}
		}
		if _, err := os.Stat(filepath.Join(dataDir, "member")); err == nil {
			t.Error("the data dir holds an etcd member with --etcd-servers set")
		}
	})

	ns := "ha"
	if _, err := a.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("read, list and watch through the other server", func(t *testing.T) {
		holder := "0"
		created, err := a.client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		createdRV := mustRV(t, created.ResourceVersion)
		// Consistent reads on B see A's write at once: no waiting for B's
		// watch cache.
		got, err := b.client.CoordinationV1().Leases(ns).Get(ctx, "l", metav1.GetOptions{})
		if err != nil || got.UID != created.UID || got.ResourceVersion != created.ResourceVersion {
			t.Fatalf("GET through b: %v %+v, want %s at %s", err, got.ObjectMeta, created.UID, created.ResourceVersion)
		}
		list, err := b.client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 || list.Items[0].UID != created.UID {
			t.Fatalf("LIST through b: %v %+v", err, list)
		}
		if rv := mustRV(t, list.ResourceVersion); rv < createdRV {
			t.Errorf("b's list is at resourceVersion %d, older than a's create at %d", rv, createdRV)
		}

		// A watch on B from A's resourceVersion gets every later change,
		// in order, with no gap.
		w, err := b.client.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var want []string
		cur := created
		for i := 1; i <= 3; i++ {
			holder := strconv.Itoa(i)
			cur.Spec.HolderIdentity = &holder
			if cur, err = a.client.CoordinationV1().Leases(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			want = append(want, "MODIFIED "+cur.ResourceVersion)
		}
		if err := a.client.CoordinationV1().Leases(ns).Delete(ctx, "l", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var seen []string
		last := createdRV
		timeout := time.After(30 * time.Second)
		for len(seen) < len(want)+1 {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("watch on b ended after %v", seen)
				}
				obj, isLease := ev.Object.(*coordinationv1.Lease)
				if !isLease {
					t.Fatalf("watch on b: %s %T %+v", ev.Type, ev.Object, ev.Object)
				}
				rv := mustRV(t, obj.ResourceVersion)
				if rv <= last {
					t.Errorf("watch on b: %s at %d after %d", ev.Type, rv, last)
				}
				last = rv
				if ev.Type == watch.Deleted {
					seen = append(seen, "DELETED")
				} else {
					seen = append(seen, string(ev.Type)+" "+obj.ResourceVersion)
				}
			case <-timeout:
				t.Fatalf("watch on b: got %v, want %v then DELETED", seen, want)
			}
		}
		if !slices.Equal(seen, append(want, "DELETED")) {
			t.Errorf("watch on b: got %v, want %v then DELETED", seen, want)
		}
	})

	t.Run("built-in PriorityClasses, and a class from one admits pods on the other", func(t *testing.T) {
		// Both servers started at once and each ensured the built-ins.
		for _, p := range servers {
			for _, name := range []string{"system-node-critical", "system-cluster-critical"} {
				if _, err := p.client.SchedulingV1().PriorityClasses().Get(ctx, name, metav1.GetOptions{}); err != nil {
					t.Errorf("%s: %s: %v", p.name, name, err)
				}
			}
		}
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "ha-high"}, Value: 500}
		if _, err := a.client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "prio"}, Spec: v1.PodSpec{PriorityClassName: "ha-high",
			Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
		// b's admission finds a class it has not seen through its watch yet
		// (its cache misses go to etcd). The pod needs the namespace's
		// default ServiceAccount, which no controller makes here.
		if _, err := b.client.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		got, err := b.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Priority == nil || *got.Spec.Priority != 500 {
			t.Errorf("priority %v, want 500", got.Spec.Priority)
		}
	})

	t.Run("ServiceAccount token from one works on the other", func(t *testing.T) {
		sa, err := a.client.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := a.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range servers {
			cfg := &rest.Config{Host: p.url, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: p.config.CAData}}
			review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err != nil {
				t.Errorf("a's token on %s: %v", p.name, err)
				continue
			}
			if want := "system:serviceaccount:" + ns + ":robot"; review.Status.UserInfo.Username != want {
				t.Errorf("a's token on %s is %q, want %q", p.name, review.Status.UserInfo.Username, want)
			}
		}
	})

	t.Run("identity leases", func(t *testing.T) {
		hostname, err := os.Hostname()
		if err != nil {
			t.Fatal(err)
		}
		var leases []coordinationv1.Lease
		deadline := time.Now().Add(30 * time.Second)
		for {
			list, err := b.client.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver"})
			if err != nil {
				t.Fatal(err)
			}
			if leases = list.Items; len(leases) >= 2 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond) // polling for the servers' first renewals
		}
		if len(leases) != 2 {
			t.Fatalf("%d identity leases, want 2: %+v", len(leases), leases)
		}
		if leases[0].Name == leases[1].Name {
			t.Errorf("both servers hold lease %s", leases[0].Name)
		}
		for _, l := range leases {
			s := l.Spec
			if !strings.HasPrefix(l.Name, "apiserver-") || len(l.Name) != len("apiserver-")+26 ||
				l.Labels["kubernetes.io/hostname"] != hostname ||
				s.HolderIdentity == nil || !strings.HasPrefix(*s.HolderIdentity, l.Name+"_") ||
				s.LeaseDurationSeconds == nil || *s.LeaseDurationSeconds != 3600 ||
				s.RenewTime == nil || time.Since(s.RenewTime.Time) > time.Minute {
				t.Errorf("identity lease %s: labels %v, spec %+v", l.Name, l.Labels, s)
			}
		}
	})

	t.Run("compaction keeps an interval of history, one server a round", func(t *testing.T) {
		first := compactRound(t, ctx, raw)
		start := time.Now()
		early, err := raw.Get(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		// The revision current at start is compacted once a round's target
		// is newer: a revision seen at least an interval after start.
		for {
			_, err := raw.Get(ctx, "x", clientv3.WithRev(early.Header.Revision))
			if err != nil && strings.Contains(err.Error(), "compacted") {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("revision %d never compacted in 30s (interval %v)", early.Header.Revision, interval)
			}
			time.Sleep(50 * time.Millisecond) // polling etcd, which the test does not watch
		}
		elapsed := time.Since(start)
		if elapsed < interval {
			t.Errorf("revision %d compacted %v after it was current: less than the %v interval of history", early.Header.Revision, elapsed, interval)
		}
		// Each server tries a round five times an interval and a round is
		// claimed by one of them; two servers compacting on their own
		// would claim twice as many.
		rounds := compactRound(t, ctx, raw) - first
		if max := int64(5*elapsed/interval) + 2; rounds > max {
			t.Errorf("%d compaction rounds in %v with a %v interval: more than five per interval (at most %d)", rounds, elapsed, interval, max)
		}
		t.Logf("revision %d compacted after %v; %d rounds (interval %v, two servers)", early.Header.Revision, elapsed, rounds, interval)
	})

	t.Run("etcd prefix", func(t *testing.T) {
		// Objects live under /registry as kube's.
		resp, err := raw.Get(ctx, "/registry/namespaces/"+ns)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("etcd key /registry/namespaces/%s: %v %v", ns, err, resp)
		}
		// A second cluster on the same etcd under another prefix sees none
		// of the first's objects, and the first none of its.
		other := startAPIServers(t, []string{"other"}, append(slices.Clone(etcdArgs),
			"--data-dir", t.TempDir(), "--etcd-prefix", "/cluster2", "--etcd-compaction-interval", "0")...)[0]
		if _, err := other.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace %s of the first cluster in the second: %v", ns, err)
		}
		if _, err := other.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only2"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.client.CoreV1().Namespaces().Get(ctx, "only2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace of the second cluster in the first: %v", err)
		}
		resp, err = raw.Get(ctx, "/cluster2/namespaces/only2")
		if err != nil || len(resp.Kvs) != 1 {
			t.Errorf("etcd key /cluster2/namespaces/only2: %v %v", err, resp)
		}
	})

	// Every `corekube apiserver` runs the namespace and ServiceAccount
	// controllers: two of each work on one cluster without fighting.
	t.Run("namespace lifecycle with both servers' controllers", func(t *testing.T) {
		if _, err := a.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Errorf("default ServiceAccount of %s: %v", ns, err)
		}
		if err := b.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := a.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("namespace %s still there 30s after its deletion", ns)
			}
			time.Sleep(50 * time.Millisecond) // polling the namespace controllers' work
		}
	})
}

// mustRV parses a resourceVersion.
func mustRV(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}

// compactRound is the version of kube's compact_rev_key: the number of
// compaction rounds run on the etcd.
func compactRound(t *testing.T, ctx context.Context, c *clientv3.Client) int64 {
	t.Helper()
	resp, err := c.Get(ctx, "compact_rev_key")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	return resp.Kvs[0].Version
}

// etcdClient is a client of the cluster with its TLS client certificate.
func etcdClient(t *testing.T, c *etcdcluster.Cluster) *clientv3.Client {
	t.Helper()
	files := c.TLS()
	pair, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(files.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal(errors.New("no CA certificate in " + files.CAFile))
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}})
	if err != nil {
		t.Fatal(fmt.Errorf("etcd client: %w", err))
	}
	t.Cleanup(func() { client.Close() })
	return client
}
