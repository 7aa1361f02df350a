package integration

import (
	"bufio"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/metricstest"
	"github.com/corekube/corekube/test/testserver"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRequestMetricsAndLogs makes a known sequence of requests against a
// server of its own (the shared one serves other tests' pods meanwhile)
// and checks kube's request metrics move by exactly what each request
// adds, the long-running gauge while a watch is open, the inflight gauges
// back at rest, the request lines (-v 3), no trace for fast requests and
// the trace of a slow one: a create a mutating webhook holds until the
// webhook call's own 1s timeout (failurePolicy Ignore), which the SLI
// latency leaves out.
func TestRequestMetricsAndLogs(t *testing.T) {
	logs := &testserver.SyncBuffer{}
	ts := testserver.StartWith(t, t.TempDir(), func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		c.Verbosity = 3
	})
	client := testserver.HTTPClient()
	base := ts.Server.URL()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// Pods need the namespace's default ServiceAccount (the controller's).
	pollUntil(t, ctx, "the default ServiceAccount", func() bool {
		_, err := ts.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})

	do := func(method, path, contentType, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	scrape := func() metricstest.Families { return metricstest.Scrape(t, client, base+"/metrics") }
	value := func(fs metricstest.Families, name string, labels ...string) float64 {
		v, _ := fs.Value(name, labels...)
		return v
	}

	const podPath = "/api/v1/namespaces/default/pods"
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"metrics"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
	type want struct {
		verb, scope, code, dryRun string
	}
	steps := []struct {
		name               string
		method, path, ct   string
		body               string
		code               int
		counted            want
		durationCount      float64 // samples the request adds to its duration series
		sizeCount          float64 // samples it adds to apiserver_response_sizes
		subresourceHealthz bool
	}{
		{"create", "POST", podPath, "application/json", pod, 201, want{"POST", "resource", "201", ""}, 1, 0, false},
		{"create dry run", "POST", podPath + "?dryRun=All", "application/json", strings.Replace(pod, `"metrics"`, `"metrics-dry"`, 1), 201, want{"POST", "resource", "201", "All"}, 1, 0, false},
		{"get", "GET", podPath + "/metrics", "", "", 200, want{"GET", "resource", "200", ""}, 1, 1, false},
		{"get missing", "GET", podPath + "/missing", "", "", 404, want{"GET", "resource", "404", ""}, 1, 1, false},
		{"list", "GET", podPath, "", "", 200, want{"LIST", "namespace", "200", ""}, 1, 1, false},
		{"apply", "PATCH", podPath + "/metrics?fieldManager=test&force=true", "application/apply-patch+yaml",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"metrics","labels":{"a":"b"}}}`, 200, want{"APPLY", "resource", "200", ""}, 1, 0, false},
		{"merge patch", "PATCH", podPath + "/metrics", "application/merge-patch+json", `{"metadata":{"labels":{"c":"d"}}}`, 200, want{"PATCH", "resource", "200", ""}, 1, 0, false},
		{"delete", "DELETE", podPath + "/metrics", "", "", 200, want{"DELETE", "resource", "200", ""}, 1, 0, false},
		{"delete missing", "DELETE", podPath + "/metrics-missing", "", "", 404, want{"DELETE", "resource", "404", ""}, 1, 0, false},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			labels := []string{"verb", st.counted.verb, "dry_run", st.counted.dryRun, "group", "", "version", "v1",
				"resource", "pods", "subresource", "", "scope", st.counted.scope, "component", "apiserver"}
			before := scrape()
			resp := do(st.method, st.path, st.ct, st.body)
			if resp.StatusCode != st.code {
				t.Fatalf("%s %s = %d, want %d", st.method, st.path, resp.StatusCode, st.code)
			}
			after := scrape()
			total := append(append([]string{}, labels...), "code", st.counted.code)
			if d := value(after, "apiserver_request_total", total...) - value(before, "apiserver_request_total", total...); d != 1 {
				t.Errorf("apiserver_request_total%v moved by %v, want 1; series: %v", total, d, after.Series("apiserver_request_total"))
			}
			// Nothing else about pods moved (no other verb or code).
			if d := value(after, "apiserver_request_total", "resource", "pods") - value(before, "apiserver_request_total", "resource", "pods"); d != 1 {
				t.Errorf("apiserver_request_total{resource=pods} moved by %v, want 1", d)
			}
			if d := value(after, "apiserver_request_duration_seconds", labels...) - value(before, "apiserver_request_duration_seconds", labels...); d != st.durationCount {
				t.Errorf("apiserver_request_duration_seconds%v count moved by %v, want %v", labels, d, st.durationCount)
			}
			sli := []string{"verb", st.counted.verb, "resource", "pods", "scope", st.counted.scope}
			if d := value(after, "apiserver_request_sli_duration_seconds", sli...) - value(before, "apiserver_request_sli_duration_seconds", sli...); d != 1 {
				t.Errorf("apiserver_request_sli_duration_seconds%v count moved by %v, want 1", sli, d)
			}
			if d := value(after, "apiserver_response_sizes", sli...) - value(before, "apiserver_response_sizes", sli...); d != st.sizeCount {
				t.Errorf("apiserver_response_sizes%v count moved by %v, want %v", sli, d, st.sizeCount)
			}
			// The request line, at info level with -v 3, and (the
			// threshold being 1ns) its trace.
			id := resp.Header.Get("Audit-Id")
			line := findLine(logs.String(), "msg=HTTP", "audit-ID="+id)
			if line == "" || !strings.Contains(line, "verb="+st.method) || !strings.Contains(line, "resp="+st.counted.code) || !strings.Contains(line, "user=kubernetes-admin") {
				t.Errorf("no request line like kube's httplog for %s (audit ID %s): %q", st.name, id, line)
			}
			if line := findLine(logs.String(), `msg="Trace[`, "audit-id:"+id); line != "" {
				t.Errorf("a fast request (%s) was traced as slow:\n%s", st.name, line)
			}
		})
	}

	t.Run("slow create is traced", func(t *testing.T) {
		release := make(chan struct{})
		var once sync.Once
		called := make(chan struct{})
		hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(called) })
			// Held until the API server's call gives up (its 1s timeout).
			select {
			case <-r.Context().Done():
			case <-release:
			}
			http.Error(w, "too late", http.StatusServiceUnavailable)
		}))
		defer hook.Close()
		defer close(release)
		url := hook.URL + "/slow"
		none, ignore, timeout := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Ignore, int32(1)
		_, err := ts.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "slow"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: "slow.corekube.test", FailurePolicy: &ignore, TimeoutSeconds: &timeout, SideEffects: &none,
				AdmissionReviewVersions: []string{"v1"},
				ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url,
					CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})},
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}},
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"slow": "yes"}},
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = ts.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), "slow", metav1.DeleteOptions{})
		}()
		post := []string{"verb", "POST", "resource", "pods", "scope", "resource", "dry_run", ""}
		// Creates until one is held (the configuration takes effect
		// through a watch).
		var resp *http.Response
		var before metricstest.Families
		for i := 0; ; i++ {
			before = scrape()
			body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"slow-%d","labels":{"slow":"yes"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`, i)
			resp = do("POST", podPath, "application/json", body)
			if resp.StatusCode != 201 {
				t.Fatalf("create = %d", resp.StatusCode)
			}
			select {
			case <-called:
			case <-ctx.Done():
				t.Fatal("the webhook was never called")
			default:
				continue
			}
			break
		}
		after := scrape()
		duration := sum(after, "apiserver_request_duration_seconds", post...) - sum(before, "apiserver_request_duration_seconds", post...)
		sli := sum(after, "apiserver_request_sli_duration_seconds", post...) - sum(before, "apiserver_request_sli_duration_seconds", post...)
		if duration < 1 || sli > duration-0.9 {
			t.Errorf("held create: duration %.3fs, SLI duration %.3fs; want over 1s and the webhook's second left out of the SLI", duration, sli)
		}
		line := findLine(logs.String(), `msg="Trace[`, "audit-id:"+resp.Header.Get("Audit-Id"))
		for _, step := range []string{
			`\"Create\" audit-id:`, "resource:pods,scope:resource,url:/api/v1/namespaces/default/pods", "(total time: ",
			`---\"Authenticated\"`, `---\"Authorized\"`, `---\"limitedReadBody and decode succeeded\"`,
			`---\"Object stored in database\"`, `---\"Writing http response done\"`, "] END",
		} {
			if !strings.Contains(line, step) {
				t.Errorf("trace lacks %s:\n%s", step, line)
			}
		}
		// The second went to admission, before the write.
		if !regexp.MustCompile(`---\\"About to store object in database\\" [1-9]\d{3,}ms`).MatchString(line) {
			t.Errorf("trace does not show the webhook's second before the write:\n%s", line)
		}
		if !regexp.MustCompile(`^time=\S+ level=INFO msg="Trace\[(\d+)\]: .*\\nTrace\[(\d+)\]: ---`).MatchString(line) {
			t.Errorf("trace lines are not kube's Trace[id] lines at info level:\n%s", line)
		}
	})

	t.Run("non-resource", func(t *testing.T) {
		before := scrape()
		if resp := do("GET", "/healthz", "", ""); resp.StatusCode != 200 {
			t.Fatalf("/healthz = %d", resp.StatusCode)
		}
		do("GET", "/version", "", "")
		after := scrape()
		health := []string{"verb", "GET", "subresource", "/healthz", "component", "", "scope", "", "code", "200"}
		if d := value(after, "apiserver_request_total", health...) - value(before, "apiserver_request_total", health...); d != 1 {
			t.Errorf("apiserver_request_total%v moved by %v, want 1", health, d)
		}
		if _, ok := after.Value("apiserver_request_total", "subresource", "/version"); ok {
			t.Errorf("/version counted; kube does not instrument it")
		}
		if _, ok := after.Value("apiserver_request_total", "subresource", "/metrics"); ok {
			t.Errorf("/metrics counted; kube does not instrument it")
		}
	})

	t.Run("unauthenticated is not counted", func(t *testing.T) {
		before := scrape()
		resp, err := testserver.AnonymousHTTPClient().Get(base + podPath)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 && resp.StatusCode != 401 {
			t.Fatalf("anonymous list = %d", resp.StatusCode)
		}
		after := scrape()
		if d := value(after, "apiserver_request_total", "resource", "pods") - value(before, "apiserver_request_total", "resource", "pods"); d != 0 {
			t.Errorf("a refused request moved apiserver_request_total{resource=pods} by %v; kube counts what its handlers serve", d)
		}
	})

	t.Run("watch", func(t *testing.T) {
		watch := []string{"verb", "WATCH", "resource", "pods", "scope", "namespace", "group", "", "version", "v1", "subresource", "", "component", "apiserver"}
		before := scrape()
		wctx, stop := context.WithCancel(ctx)
		req, err := http.NewRequestWithContext(wctx, "GET", base+podPath+"?watch=true", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("watch = %d", resp.StatusCode)
		}
		pollUntil(t, ctx, "the watch in apiserver_longrunning_requests", func() bool {
			return value(scrape(), "apiserver_longrunning_requests", watch...) == 1
		})
		stop()
		resp.Body.Close()
		total := append(append([]string{}, watch...), "code", "200")
		pollUntil(t, ctx, "the ended watch counted", func() bool {
			after := scrape()
			return value(after, "apiserver_longrunning_requests", watch...) == 0 &&
				value(after, "apiserver_request_total", total...)-value(before, "apiserver_request_total", total...) == 1
		})
		after := scrape()
		if d := value(after, "apiserver_request_duration_seconds", watch...) - value(before, "apiserver_request_duration_seconds", watch...); d != 1 {
			t.Errorf("the watch's duration: count moved by %v, want 1", d)
		}
		// A watch is long-running: no trace, however long it ran.
		if line := findLine(logs.String(), `msg="Trace[`, "url:"+podPath, "verb:GET"); strings.Contains(line, "watch") {
			t.Errorf("a watch was traced as slow:\n%s", line)
		}
	})

	t.Run("inflight counts a write", func(t *testing.T) {
		// The write's second's high-water mark is published at the next
		// tick and shown for a whole second.
		if resp := do("POST", podPath, "application/json", strings.Replace(pod, `"metrics"`, `"metrics-inflight"`, 1)); resp.StatusCode != 201 {
			t.Fatalf("create = %d", resp.StatusCode)
		}
		pollUntil(t, ctx, "the write in apiserver_current_inflight_requests{request_kind=mutating}", func() bool {
			v, _ := scrape().Value("apiserver_current_inflight_requests", "request_kind", "mutating")
			return v >= 1
		})
	})

	t.Run("inflight back to rest", func(t *testing.T) {
		// The gauges are each second's high-water mark (kube's); the scrape
		// itself is a read-only request executing.
		pollUntil(t, ctx, "inflight gauges at rest", func() bool {
			fs := scrape()
			ro, okRO := fs.Value("apiserver_current_inflight_requests", "request_kind", "readOnly")
			mu, okMU := fs.Value("apiserver_current_inflight_requests", "request_kind", "mutating")
			return okRO && okMU && mu == 0 && ro <= 1
		})
	})
}

// sum is the sample sum of the histogram series of name whose labels
// include labels.
func sum(fs metricstest.Families, name string, labels ...string) float64 {
	var total float64
	f := fs[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		total += m.GetHistogram().GetSampleSum()
	}
	return total
}

// findLine returns the first log line that contains every part.
func findLine(logs string, parts ...string) string {
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
next:
	for sc.Scan() {
		for _, p := range parts {
			if !strings.Contains(sc.Text(), p) {
				continue next
			}
		}
		return sc.Text()
	}
	return ""
}

// pollUntil polls cond until it holds or ctx ends.
func pollUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
