package e2e

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corekube/corekube/test/etcdcluster"
	"github.com/corekube/corekube/test/informertest"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestGracefulShutdown sends SIGTERM to a `corekube apiserver` with
// --shutdown-delay-duration 2s while a watch is open and a create is in
// flight (held by a validating webhook), and checks kube's sequence:
// /readyz fails at once ([-]shutdown failed) while requests are still
// served; after the delay the server stops accepting connections and ends
// the watch cleanly (a plain end of stream); the create in flight
// finishes; the process exits 0.
func TestGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a corekube process")
	}
	const delay = 2 * time.Second
	addr := freeAddr(t)
	p := startAPIServer(t, t.TempDir(), addr, "--shutdown-delay-duration", delay.String())
	_, client := p.adminClient(t)
	const ns = "shutdown"
	createNamespace(t, client, ns)

	// A webhook that holds the creates of pods labelled hold=yes until
	// released, and lets probes through at once.
	arrived, release := make(chan string, 10), make(chan struct{})
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		name := review.Request.Name
		arrived <- name
		if strings.HasPrefix(name, "held") {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	defer hook.Close()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	url := hook.URL
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(20)
	_, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hold"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "hold.corekube.test",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"hold": "yes"}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holdPod := func(name string) error {
		pod := informertest.NewPod(name, true)
		pod.Labels["hold"] = "yes"
		_, err := client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
		return err
	}
	// The webhook takes effect once the server's watch of its
	// configuration saw it: probe until a create reaches it.
	probes := 0
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		probes++
		if err := holdPod(fmt.Sprintf("probe-%d", probes)); err != nil {
			return false, err
		}
		select {
		case <-arrived:
			return true, nil
		default:
			return false, nil
		}
	})
	if err != nil {
		t.Fatalf("the webhook never saw a create: %v", err)
	}

	// A watch, read raw, to see how its stream ends.
	watchCtx, cancelWatch := context.WithCancel(t.Context())
	defer cancelWatch()
	req, _ := http.NewRequestWithContext(watchCtx, "GET", p.url+"/api/v1/namespaces/"+ns+"/pods?watch=1", nil)
	resp, err := p.http.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %v %v", err, resp)
	}
	watchEnded := make(chan error, 1)
	go func() {
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var ev map[string]any
			if err := dec.Decode(&ev); err != nil {
				watchEnded <- err
				return
			}
		}
	}()

	// A create in flight, held by the webhook.
	created := make(chan error, 1)
	go func() { created <- holdPod("held") }()
	select {
	case name := <-arrived:
		if name != "held" {
			t.Fatalf("the webhook saw %q, want held", name)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the held create never reached the webhook")
	}

	sigterm := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// /readyz fails at once; everything else is still served.
	var notReady time.Duration
	err = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, delay, true, func(context.Context) (bool, error) {
		code, body, _ := p.get(t, "/readyz?verbose")
		if code == http.StatusInternalServerError {
			if !strings.Contains(body, "[-]shutdown failed: reason withheld\n") || !strings.HasSuffix(body, "readyz check failed\n") {
				t.Errorf("/readyz?verbose while shutting down:\n%s", body)
			}
			notReady = time.Since(sigterm)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("/readyz did not fail within the shutdown delay: %v", err)
	}
	for _, path := range []string{"/livez", "/api/v1/namespaces/" + ns} {
		if code, body, _ := p.get(t, path); code != http.StatusOK {
			t.Errorf("GET %s during the shutdown delay: %d %s", path, code, body)
		}
	}
	if d := time.Since(sigterm); d < delay {
		select {
		case err := <-watchEnded:
			t.Errorf("the watch ended %v after SIGTERM, within the shutdown delay: %v", d, err)
		default:
		}
	}

	// After the delay, no new connection is accepted.
	var closed time.Duration
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, delay+10*time.Second, true, func(context.Context) (bool, error) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			closed = time.Since(sigterm)
			return true, nil
		}
		c.Close()
		return false, nil
	})
	if err != nil {
		t.Fatalf("still accepting connections: %v", err)
	}
	if closed < delay {
		t.Errorf("stopped accepting connections %v after SIGTERM, before the %v delay", closed, delay)
	}
	// The watch ends as a stream ends, not cut.
	select {
	case err := <-watchEnded:
		if !errors.Is(err, io.EOF) {
			t.Errorf("the watch ended with %v, want a clean end of stream (EOF)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end after the server stopped accepting connections")
	}
	watchEnd := time.Since(sigterm)

	// The create in flight is still served to its end, and then the
	// process exits 0.
	select {
	case err := <-created:
		t.Fatalf("the held create ended before the webhook answered: %v", err)
	case err := <-p.exited:
		t.Fatalf("corekube exited with a request in flight: %v", err)
	default:
	}
	released = true
	close(release)
	if err := <-created; err != nil {
		t.Errorf("the create in flight at SIGTERM failed: %v", err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("corekube exited with %v after SIGTERM, want 0\n%s", err, p.logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("corekube did not exit within 15s of the last request\n%s", p.logs.String())
	}
	t.Logf("SHUTDOWN after SIGTERM: /readyz failing in %v, connections refused after %v (delay %v), watch ended cleanly after %v, exit 0 after %v",
		notReady.Round(time.Millisecond), closed.Round(time.Millisecond), delay, watchEnd.Round(time.Millisecond), time.Since(sigterm).Round(time.Millisecond))
	if _, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{}); err == nil {
		t.Error("the server still answers after it exited")
	}
}

// TestCrashSafety kills `corekube apiserver` with SIGKILL three times in
// the middle of a write load from several clients, on its embedded etcd
// and on an external cluster, restarts it each time, and checks that
// every create that was answered 2xx is there.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("starts corekube processes and an etcd cluster")
	}
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"embedded etcd", func(*testing.T) []string { return nil }},
		{"external etcd", func(t *testing.T) []string {
			cluster := etcdcluster.Start(t, 3, etcdcluster.Options{Fsync: true})
			return []string{"--etcd-servers", strings.Join(cluster.Endpoints(), ",")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startAPIServer(t, t.TempDir(), freeAddr(t), tc.args(t)...)
			_, client := p.adminClient(t)
			const ns = "crash"
			createNamespace(t, client, ns)
			load := startWriteLoad(t, client, ns, 4, 20*time.Millisecond)
			load.waitSuccesses(t, time.Now(), 50, 10*time.Second)
			for range 3 {
				killed := time.Now()
				p = p.kill()
				restarted := time.Now()
				load.waitSuccesses(t, restarted, 50, 15*time.Second)
				t.Logf("CRASH SIGKILL: back in %v; %s", restarted.Sub(killed).Round(time.Millisecond), load.window(killed, time.Now()))
			}
			load.halt()
			n := checkNoneLost(t, client, ns, load.acked())
			t.Logf("CRASH %s: %d creates acknowledged across 3 SIGKILLs, 0 lost; %s", tc.name, n, load.window(time.Time{}, time.Now()))
			p.stop()
		})
	}
}

// TestSecondSignalExits: a second SIGTERM during a graceful shutdown (here
// a minute of --shutdown-delay-duration) exits at once with status 1, as
// kube-apiserver does.
func TestSecondSignalExits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a corekube process")
	}
	p := startAPIServer(t, t.TempDir(), freeAddr(t), "--shutdown-delay-duration", "1m")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The first signal was handled once /readyz fails.
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		code, _, _ := p.get(t, "/readyz")
		return code == http.StatusInternalServerError, nil
	})
	if err != nil {
		t.Fatalf("/readyz did not fail after SIGTERM: %v", err)
	}
	second := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("exited with %v after the second SIGTERM, want status 1", err)
		}
		t.Logf("exited %v after the second SIGTERM", time.Since(second).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10s after the second SIGTERM")
	}
}
