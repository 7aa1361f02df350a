package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/etcdcluster"
	"github.com/corekube/corekube/test/metricstest"
	"github.com/corekube/corekube/test/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestSecureServingFlags: `scheduler` and `controllers` have kube's
// serving flags with kube's ports.
func TestSecureServingFlags(t *testing.T) {
	for _, tc := range []struct {
		name, port string
	}{{"scheduler", "10259"}, {"controllers", "10257"}} {
		sub, _, err := newRootCommand().Find([]string{tc.name})
		if err != nil {
			t.Fatal(err)
		}
		for flag, def := range map[string]string{
			"secure-port": tc.port, "bind-address": "0.0.0.0", "tls-cert-file": "", "tls-private-key-file": "",
			"client-ca-file": "", "authentication-kubeconfig": "", "authorization-kubeconfig": "",
			"authorization-always-allow-paths": "[/healthz,/readyz,/livez]", "profiling": "true",
		} {
			f := sub.Flags().Lookup(flag)
			if f == nil {
				t.Errorf("%s: no --%s", tc.name, flag)
			} else if f.DefValue != def {
				t.Errorf("%s --%s: default %q, want %q", tc.name, flag, f.DefValue, def)
			}
		}
	}
}

// TestProcessesServeMetrics runs a real `corekube scheduler` and
// `corekube controllers` on free secure ports: health is served to
// anyone; /metrics is authenticated (client certificate, or a token
// through a TokenReview) and authorized through a SubjectAccessReview;
// the scheduler's metrics count what it did and the controllers' show
// their workqueues.
func TestProcessesServeMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and two processes")
	}
	srv := testserver.Start(t)
	c := srv.Client
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, testserver.CA(), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(name, user string) string {
		kubeconfig := filepath.Join(dir, name+".kubeconfig")
		if err := writeKubeconfig(kubeconfig, userConfig(t, srv, user)); err != nil {
			t.Fatal(err)
		}
		addr := etcdcluster.FreeAddr(t)
		port := addr[strings.LastIndex(addr, ":")+1:]
		startProcess(t, name, "--kubeconfig", kubeconfig, "--leader-elect=false",
			"--bind-address=127.0.0.1", "--secure-port="+port, "--client-ca-file="+caFile)
		return "https://" + addr
	}
	scheduler := start("scheduler", "system:kube-scheduler")
	controllers := start("controllers", "system:kube-controller-manager")

	// The server's certificate is the in-memory self-signed one.
	insecure := &tls.Config{InsecureSkipVerify: true}
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: insecure}}
	admin, err := testserver.IssueClient("metrics-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	adminCert, err := admin.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	adminTLS := insecure.Clone()
	adminTLS.Certificates = []tls.Certificate{adminCert}
	adminClient := &http.Client{Transport: &http.Transport{TLSClientConfig: adminTLS}}
	t.Cleanup(anonymous.CloseIdleConnections)
	t.Cleanup(adminClient.CloseIdleConnections)

	get := func(client *http.Client, url, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// Up: /healthz answers anyone.
	for _, base := range []string{scheduler, controllers} {
		var code int
		var body string
		if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			code, body = get(anonymous, base+"/healthz", "")
			return code == http.StatusOK, nil
		}); err != nil {
			t.Fatalf("%s/healthz: %d %s", base, code, body)
		}
		if body != "ok" {
			t.Errorf("%s/healthz = %q", base, body)
		}
		if code, body := get(anonymous, base+"/livez", ""); code != http.StatusOK || body != "ok" {
			t.Errorf("%s/livez: %d %q", base, code, body)
		}
		if code, body := get(anonymous, base+"/readyz?verbose", ""); code != http.StatusOK || !strings.Contains(body, "[+]ping ok") {
			t.Errorf("%s/readyz?verbose: %d %q", base, code, body)
		}
	}

	// A second scheduler on the port the first serves on fails to start,
	// as kube's does.
	kubeconfig := filepath.Join(dir, "scheduler.kubeconfig")
	busy := startProcess(t, "scheduler", "--kubeconfig", kubeconfig, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+scheduler[strings.LastIndex(scheduler, ":")+1:])
	if err := busy.wait(t, 20*time.Second); err == nil || !strings.Contains(busy.stderr.String(), "address already in use") {
		t.Errorf("a scheduler on a busy port: exit %v, stderr:\n%s", err, busy.stderr.String())
	}

	// /metrics: system:anonymous is refused by the SubjectAccessReview,
	// a token the API server does not know is unauthenticated.
	if code, body := get(anonymous, scheduler+"/metrics", ""); code != http.StatusForbidden || !strings.Contains(body, `User \"system:anonymous\" cannot get path \"/metrics\"`) {
		t.Errorf("anonymous /metrics: %d %s", code, body)
	}
	if code, _ := get(anonymous, scheduler+"/metrics", "not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("/metrics with a bad token: %d, want 401", code)
	}
	// A ServiceAccount token: authenticated by a TokenReview, forbidden
	// until bound to system:monitoring.
	ctx := context.Background()
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, "prometheus", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{scheduler, controllers} {
		for _, path := range []string{"/metrics", "/debug/pprof/heap"} {
			if code, body := get(anonymous, base+path, tr.Status.Token); code != http.StatusForbidden || !strings.Contains(body, "system:serviceaccount:default:prometheus") {
				t.Errorf("unbound service account %s%s: %d %s", base, path, code, body)
			}
		}
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:monitoring"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: "default"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var code int
	var body string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		code, body = get(anonymous, scheduler+"/metrics", tr.Status.Token)
		return code == http.StatusOK, nil
	}); err != nil {
		t.Errorf("bound service account /metrics: %d %.300s", code, body)
	}

	// The scheduler's metrics after two placements, scraped with the
	// admin's client certificate (--client-ca-file).
	readyNode(t, c, "n1")
	createBoundPod(t, c, "p1")
	createBoundPod(t, c, "p2")
	var fs metricstest.Families
	var last string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		fs = metricstest.Scrape(t, adminClient, scheduler+"/metrics")
		v, _ := fs.Value("scheduler_schedule_attempts_total", "result", "scheduled", "profile", "default-scheduler")
		last = fmt.Sprint(fs.Series("scheduler_schedule_attempts_total"), v)
		return v == 2, nil
	}); err != nil {
		t.Fatalf("scheduler_schedule_attempts_total{result=scheduled}: %s, want 2", last)
	}
	for _, name := range []string{"scheduler_pending_pods", "scheduler_scheduling_attempt_duration_seconds",
		"scheduler_pod_scheduling_sli_duration_seconds", "go_goroutines", "process_start_time_seconds"} {
		if fs[name] == nil {
			t.Errorf("scheduler /metrics lacks %s", name)
		}
	}

	// --profiling (on by default): Go's profiles behind the same
	// authorization as /metrics.
	// Anonymous callers and the monitoring ServiceAccount (system:monitoring
	// has /metrics, not the profiles, as kube's) are refused on both.
	for _, base := range []string{scheduler, controllers} {
		if code, body := get(anonymous, base+"/debug/pprof/heap", ""); code != http.StatusForbidden || !strings.Contains(body, `cannot get path \"/debug/pprof/heap\"`) {
			t.Errorf("anonymous %s/debug/pprof/heap: %d %.300s", base, code, body)
		}
		if code, body := get(anonymous, base+"/debug/pprof/profile?seconds=1", tr.Status.Token); code != http.StatusForbidden || !strings.Contains(body, "system:serviceaccount:default:prometheus") {
			t.Errorf("system:monitoring %s/debug/pprof/profile: %d %.300s", base, code, body)
		}
	}
	if code, body := get(anonymous, controllers+"/metrics", ""); code != http.StatusForbidden || !strings.Contains(body, `User \"system:anonymous\" cannot get path \"/metrics\"`) {
		t.Errorf("anonymous controllers /metrics: %d %.300s", code, body)
	}
	for _, base := range []string{scheduler, controllers} {
		code, body := get(adminClient, base+"/debug/pprof/heap?debug=1", "")
		if code != http.StatusOK || !strings.Contains(body, "heap profile:") {
			t.Errorf("%s/debug/pprof/heap?debug=1: %d %.300s", base, code, body)
		}
		if code, body := get(adminClient, base+"/debug/pprof/", ""); code != http.StatusOK || !strings.Contains(body, "goroutine") {
			t.Errorf("%s/debug/pprof/: %d %.300s", base, code, body)
		}
	}

	// The controllers' workqueues: the ServiceAccounts controller has
	// synced every namespace.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		fs = metricstest.Scrape(t, adminClient, controllers+"/metrics")
		v, _ := fs.Value("workqueue_adds_total", "name", "serviceaccount")
		return v > 0, nil
	}); err != nil {
		t.Fatalf("workqueue_adds_total{name=serviceaccount} never counted: %v", fs.Series("workqueue_adds_total"))
	}
	for _, q := range []string{"namespace", "node_lifecycle_controller", "disruption", "certificate"} {
		if _, ok := fs.Value("workqueue_depth", "name", q); !ok {
			t.Errorf("no workqueue_depth{name=%q}: %v", q, fs.Series("workqueue_depth"))
		}
	}
}
