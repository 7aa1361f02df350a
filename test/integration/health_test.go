package integration

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	etcdstore "github.com/corekube/corekube/storage/etcd"
	"github.com/corekube/corekube/test/metricstest"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHealthEndpoints(t *testing.T) {
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		r := doRaw(t, "GET", path, nil)
		if r.Code != 200 || string(r.Body) != "ok" {
			t.Errorf("%s: %d %q, want 200 ok", path, r.Code, r.Body)
		}
		if ct := r.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", path, ct)
		}
	}
	r := doRaw(t, "GET", "/readyz?verbose", nil)
	if r.Code != 200 || !containsAll(string(r.Body), "[+]ping ok\n", "[+]etcd ok\n") || !strings.HasSuffix(string(r.Body), "readyz check passed\n") {
		t.Errorf("/readyz?verbose: %d %q", r.Code, r.Body)
	}
}

// TestHealthChecksListed: ?verbose lists kube's checks in kube-apiserver
// v1.32's order (reference readyz-verbose.http, restricted to the checks
// corekube has); each check answers alone; ?exclude= skips one.
func TestHealthChecksListed(t *testing.T) {
	hooks := []string{
		"poststarthook/start-apiserver-admission-initializer",
		"poststarthook/generic-apiserver-start-informers",
		"poststarthook/priority-and-fairness-config-consumer",
		"poststarthook/priority-and-fairness-filter",
		"poststarthook/start-system-namespaces-controller",
		"poststarthook/start-kube-apiserver-identity-lease-controller",
		"poststarthook/start-kube-apiserver-identity-lease-garbage-collector",
		"poststarthook/rbac/bootstrap-roles",
		"poststarthook/scheduling/bootstrap-system-priority-classes",
		"poststarthook/priority-and-fairness-config-producer",
		"poststarthook/bootstrap-controller",
	}
	report := func(kind string, checks ...string) string {
		var b strings.Builder
		for _, c := range checks {
			b.WriteString("[+]" + c + " ok\n")
		}
		return b.String() + kind + " check passed\n"
	}
	want := map[string]string{
		"readyz":  report("readyz", slices.Concat([]string{"ping", "log", "etcd", "etcd-readiness", "informer-sync"}, hooks, []string{"shutdown"})...),
		"healthz": report("healthz", slices.Concat([]string{"ping", "log", "etcd"}, hooks)...),
		"livez":   report("livez", slices.Concat([]string{"ping", "log"}, hooks)...),
	}
	for kind, body := range want {
		if r := doRaw(t, "GET", "/"+kind+"?verbose", nil); r.Code != 200 || string(r.Body) != body {
			t.Errorf("/%s?verbose: %d\n%s\nwant\n%s", kind, r.Code, r.Body, body)
		}
	}
	for _, check := range []string{"log", "etcd-readiness", "poststarthook/rbac/bootstrap-roles", "poststarthook/bootstrap-controller"} {
		if r := doRaw(t, "GET", "/readyz/"+check, nil); r.Code != 200 || string(r.Body) != "ok" {
			t.Errorf("/readyz/%s: %d %q", check, r.Code, r.Body)
		}
	}
	r := doRaw(t, "GET", "/readyz?verbose&exclude=etcd-readiness&exclude=poststarthook/rbac/bootstrap-roles", nil)
	if r.Code != 200 || !containsAll(string(r.Body), "[+]etcd ok\n[+]etcd-readiness excluded: ok\n", "[+]poststarthook/rbac/bootstrap-roles excluded: ok\n") {
		t.Errorf("/readyz?verbose with exclusions: %d\n%s", r.Code, r.Body)
	}
	// kube's component SLIs of the checks just run.
	slis := metricstest.Scrape(t, testserver.HTTPClient(), srv.URL()+"/metrics/slis")
	for _, kind := range []string{"readyz", "livez", "healthz"} {
		if v, ok := slis.Value("kubernetes_healthcheck", "name", "poststarthook/rbac/bootstrap-roles", "type", kind); !ok || v != 1 {
			t.Errorf("kubernetes_healthcheck{name=poststarthook/rbac/bootstrap-roles,type=%s} = %v, %v; series %q", kind, v, ok, slis.Series("kubernetes_healthcheck"))
		}
	}
	if v, ok := slis.Value("kubernetes_healthchecks_total", "name", "etcd-readiness", "type", "readyz", "status", "success"); !ok || v < 1 {
		t.Errorf("kubernetes_healthchecks_total{name=etcd-readiness,type=readyz,status=success} = %v, %v", v, ok)
	}
}

func TestVersion(t *testing.T) {
	r := doRaw(t, "GET", "/version", nil)
	if r.Code != 200 || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/version: %d %s", r.Code, r.Header.Get("Content-Type"))
	}
	var got map[string]any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	// The same keys as kube's answer (reference version.json).
	want := []string{"buildDate", "compiler", "gitCommit", "gitTreeState", "gitVersion", "goVersion", "major", "minor", "platform"}
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	gv, _ := got["gitVersion"].(string)
	if got["major"] != "1" || got["minor"] != "32" || !strings.HasPrefix(gv, "v1.32.") || !strings.Contains(gv, "corekube") {
		t.Errorf("version %v, want 1.32, gitVersion v1.32.x with a corekube suffix", got)
	}
	// client-go's discovery reads it.
	info, err := cs.Discovery().ServerVersion()
	if err != nil || info.GitVersion != gv {
		t.Errorf("ServerVersion: %v %+v", err, info)
	}
}

// TestHealthReportsEtcdOutage runs a server on an etcd of its own, stops
// that etcd, and checks that /readyz and /healthz fail while /livez stays
// ok.
func TestHealthReportsEtcdOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	etcd, err := etcdstore.StartEmbedded(ctx, etcdstore.EmbeddedConfig{Dir: t.TempDir(), UnsafeNoFsync: true, Logger: testserver.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	c, err := testserver.NewConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c.EtcdServers, c.ShutdownTimeout = etcd.Endpoints(), 2*time.Second
	s, err := server.Start(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Logf("shutdown: %v", err)
		}
	}()
	if r := doRawURL(t, s.URL(), "GET", "/readyz", nil); r.Code != 200 {
		t.Fatalf("/readyz with etcd up: %d %s", r.Code, r.Body)
	}
	if err := etcd.Close(); err != nil {
		t.Fatal(err)
	}
	// Each failing check waits for the etcd health timeout (2s): keep the
	// number of requests low.
	var ready rawResponse
	eventually(t, 30*time.Second, "/readyz to fail", func(context.Context) (bool, error) {
		ready = doRawURL(t, s.URL(), "GET", "/readyz", nil)
		return ready.Code == 500, nil
	})
	healthz := doRawURL(t, s.URL(), "GET", "/healthz", nil)
	for path, r := range map[string]rawResponse{"/readyz": ready, "/healthz": healthz} {
		if r.Code != 500 || !strings.Contains(string(r.Body), "[-]etcd failed: reason withheld\n") || !strings.Contains(string(r.Body), "check failed") {
			t.Errorf("%s with etcd down: %d %q", path, r.Code, r.Body)
		}
	}
	// Both etcd checks fail on one read bounded by 2s (the whole report by
	// 3s): the answer comes quickly rather than hanging on the dead etcd.
	start := time.Now()
	ready = doRawURL(t, s.URL(), "GET", "/readyz?verbose", nil)
	if took := time.Since(start); took > 2900*time.Millisecond {
		t.Errorf("/readyz with etcd down took %v, want one 2s read (two would take 3s, the report's bound)", took)
	} else {
		t.Logf("/readyz with etcd down answered in %v", took)
	}
	if ready.Code != 500 || !strings.Contains(string(ready.Body), "[-]etcd failed: reason withheld\n[-]etcd-readiness failed: reason withheld\n") ||
		!strings.HasSuffix(string(ready.Body), "readyz check failed\n") {
		t.Errorf("/readyz?verbose with etcd down: %d\n%s", ready.Code, ready.Body)
	}
	if r := doRawURL(t, s.URL(), "GET", "/readyz/etcd-readiness", nil); r.Code != 500 || !strings.HasPrefix(string(r.Body), "internal server error: ") {
		t.Errorf("/readyz/etcd-readiness with etcd down: %d %q", r.Code, r.Body)
	}
	if r := doRawURL(t, s.URL(), "GET", "/livez", nil); r.Code != 200 {
		t.Errorf("/livez with etcd down: %d %s", r.Code, r.Body)
	}
}

// TestRestartKeepsData stops a server and starts another on the same data
// directory.
func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	first := testserver.StartInDir(t, dir)
	ctx := t.Context()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}
	if _, err := first.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := first.Client.CoreV1().Pods("kept").Create(ctx, newPod("p", map[string]string{"a": "b"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := first.Client.CoreV1().Nodes().Create(ctx, newNode("kept-node", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first.Stop(t)

	second := testserver.StartInDir(t, dir)
	got, err := second.Client.CoreV1().Pods("kept").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod after restart: %v", err)
	}
	if got.UID != pod.UID || got.ResourceVersion != pod.ResourceVersion || got.Labels["a"] != "b" {
		t.Errorf("pod after restart: uid %s rv %s labels %v, want uid %s rv %s", got.UID, got.ResourceVersion, got.Labels, pod.UID, pod.ResourceVersion)
	}
	n, err := second.Client.CoreV1().Nodes().Get(ctx, "kept-node", metav1.GetOptions{})
	if err != nil || n.UID != node.UID {
		t.Errorf("node after restart: %v", err)
	}
	// System namespaces are not duplicated or reset; new writes go on
	// from the old revisions.
	list, err := second.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "namespaces after restart", names(t, list), "default", "kept", "kube-node-lease", "kube-public", "kube-system")
	got.Labels["c"] = "d"
	updated, err := second.Client.CoreV1().Pods("kept").Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if newRV, oldRV := mustInt(t, updated.ResourceVersion), mustInt(t, pod.ResourceVersion); newRV <= oldRV {
		t.Errorf("resourceVersion after restart %s not after %s", updated.ResourceVersion, pod.ResourceVersion)
	}
}

func mustInt(t testing.TB, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not an integer: %v", s, err)
	}
	return n
}
