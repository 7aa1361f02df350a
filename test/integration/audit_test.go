package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/server/audit"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// auditPolicy: health checks not at all, namespaces with their bodies,
// everything else at Metadata without RequestReceived.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["namespaces"]
- level: Metadata
  omitStages: ["RequestReceived"]
`

// TestAuditLog: a server with --audit-policy-file and --audit-log-path
// writes kube's audit events: the Audit-Id header names them, levels and
// omitted stages follow the policy, the impersonated user and the
// authorization decision are recorded.
func TestAuditLog(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit", "audit.log")
	s := testserver.StartWith(t, filepath.Join(dir, "data"), func(c *server.Config) {
		c.AuditPolicyFile, c.AuditLogPath = policy, logPath
	})
	ctx := t.Context()

	// A namespace (RequestResponse), a pod in it (Metadata), a health check
	// (None).
	var nsAuditID string
	nsClientCfg := rest.CopyConfig(s.Config)
	nsClientCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && r.Method == http.MethodPost {
				nsAuditID = resp.Header.Get(audit.HeaderAuditID)
			}
			return resp, err
		})
	}
	nsClient := kubernetes.NewForConfigOrDie(nsClientCfg)
	if _, err := nsClient.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "audited"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if nsAuditID == "" {
		t.Fatal("no Audit-Id header on the namespace create")
	}
	if _, err := s.Client.CoreV1().Pods("audited").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if resp, err := testserver.HTTPClient().Get(s.URL() + "/readyz"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	// Impersonation, and a request authorization refuses.
	imp := rest.CopyConfig(s.Config)
	imp.Impersonate.UserName = "eve"
	if _, err := kubernetes.NewForConfigOrDie(imp).CoreV1().Pods("audited").List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("eve may list pods without any role")
	}

	// A request authentication refuses is audited too.
	req, err := http.NewRequest("GET", s.URL()+"/api/v1/namespaces/audited/pods", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer not-a-token")
	resp, err := testserver.AnonymousHTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	unauthorizedID := resp.Header.Get(audit.HeaderAuditID)
	if resp.StatusCode != 401 || unauthorizedID == "" {
		t.Fatalf("bad token: %d, Audit-Id %q", resp.StatusCode, unauthorizedID)
	}

	type event = audit.Event
	var events []event
	eventually(t, 10*time.Second, "the audit events", func(context.Context) (bool, error) {
		data, err := os.ReadFile(logPath)
		if err != nil {
			return false, nil
		}
		events = events[:0]
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("audit line %q: %v", sc.Text(), err)
			}
			events = append(events, ev)
		}
		// The last two requests' events are there (the log is written in
		// the order of the requests).
		impersonated, unauthorized := false, false
		for _, ev := range events {
			impersonated = impersonated || ev.ImpersonatedUser != nil && ev.Stage == audit.StageResponseComplete
			unauthorized = unauthorized || ev.AuditID == unauthorizedID
		}
		return impersonated && unauthorized, nil
	})

	byID := map[string][]event{}
	for _, ev := range events {
		if ev.RequestURI == "/readyz" {
			t.Errorf("a health check was audited despite level None: %+v", ev)
		}
		byID[ev.AuditID] = append(byID[ev.AuditID], ev)
	}
	nsEvents := byID[nsAuditID]
	if len(nsEvents) != 2 || nsEvents[0].Stage != audit.StageRequestReceived || nsEvents[1].Stage != audit.StageResponseComplete {
		t.Fatalf("namespace create events: %+v", nsEvents)
	}
	done := nsEvents[1]
	if done.Level != audit.LevelRequestResponse || done.Verb != "create" || done.ObjectRef == nil || done.ObjectRef.Resource != "namespaces" ||
		done.User.Username != server.AdminUser || done.ResponseStatus == nil || done.ResponseStatus.Code != 201 ||
		!bytes.Contains(done.RequestObject, []byte(`"audited"`)) || !bytes.Contains(done.ResponseObject, []byte(`"uid"`)) ||
		done.Annotations["authorization.k8s.io/decision"] != "allow" {
		t.Errorf("namespace create, ResponseComplete: %+v", done)
	}

	var pod, denied *event
	for i := range events {
		ev := &events[i]
		switch {
		case ev.ObjectRef != nil && ev.ObjectRef.Resource == "pods" && ev.Verb == "create":
			pod = ev
		case ev.ImpersonatedUser != nil:
			denied = ev
		}
	}
	if pod == nil || pod.Level != audit.LevelMetadata || pod.Stage != audit.StageResponseComplete || pod.RequestObject != nil ||
		pod.ObjectRef.Namespace != "audited" || pod.ObjectRef.APIVersion != "v1" {
		t.Errorf("pod create at Metadata without RequestReceived: %+v", pod)
	}
	for _, ev := range byID[pod.AuditID] {
		if ev.Stage == audit.StageRequestReceived {
			t.Error("RequestReceived written although the rule omits it")
		}
	}
	if denied == nil || denied.ImpersonatedUser.Username != "eve" || denied.User.Username != server.AdminUser ||
		denied.ResponseStatus == nil || denied.ResponseStatus.Code != 403 || denied.Annotations["authorization.k8s.io/decision"] != "forbid" {
		t.Errorf("impersonated, forbidden list: %+v", denied)
	}

	if ev := byID[unauthorizedID]; len(ev) != 1 || ev[0].Stage != audit.StageResponseStarted || ev[0].ResponseStatus.Code != 401 ||
		ev[0].ResponseStatus.Message != "Authentication failed, attempted: bearer" || ev[0].User.Username != "" {
		t.Errorf("failed authentication: %+v", ev)
	}

	// The backend's counters are on /metrics.
	resp, err = testserver.HTTPClient().Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body.Bytes(), []byte("apiserver_audit_event_total ")) || !bytes.Contains(body.Bytes(), []byte(`apiserver_audit_error_total{plugin="log"} 0`)) {
		t.Errorf("/metrics has no audit counters:\n%s", body.String())
	}
}
