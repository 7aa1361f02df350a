package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/corekube/corekube/test/metricstest"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/corekube/corekube/auth/user"
)

// collect is a Backend that keeps events.
type collect struct {
	mu     sync.Mutex
	events []*Event
}

func (c *collect) Process(ev *Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
}

func podAttrs(r *http.Request) Attributes {
	verb := map[string]string{http.MethodPost: "create", http.MethodGet: "get"}[r.Method]
	if r.URL.Query().Get("watch") == "true" {
		verb = "watch"
	}
	return Attributes{Verb: verb, ResourceRequest: true, Resource: "pods", Namespace: "ns", Name: "p"}
}

func serve(t *testing.T, h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	alice := &user.Info{Name: "alice", Groups: []string{"dev", user.AllAuthenticated}}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(user.WithUser(req.Context(), alice)))
	return rec
}

func TestFilterLevels(t *testing.T) {
	for _, level := range []Level{LevelNone, LevelMetadata, LevelRequest, LevelRequestResponse} {
		t.Run(string(level), func(t *testing.T) {
			b := &collect{}
			policy := &Policy{Rules: []PolicyRule{{Level: level}}}
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if string(body) != `{"kind":"Pod"}` {
					t.Errorf("handler read %q", body)
				}
				LogImpersonatedUser(r.Context(), &user.Info{Name: "bob"})
				AddAnnotation(r.Context(), "authorization.k8s.io/decision", "allow")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"kind":"Pod","metadata":{"name":"p"}}`))
			})
			h := WithAudit(&Config{Policy: policy, Backend: b, Attributes: podAttrs})(next)
			req := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/ns/pods?dryRun=All", strings.NewReader(`{"kind":"Pod"}`))
			req.Header.Set("User-Agent", "kubectl/v1.32")
			req.Header.Set("X-Forwarded-For", "10.0.0.1, 10.0.0.2")
			rec := serve(t, h, req)
			id := rec.Header().Get(HeaderAuditID)
			if id == "" || rec.Code != http.StatusCreated {
				t.Fatalf("audit id %q, code %d", id, rec.Code)
			}
			if level == LevelNone {
				if len(b.events) != 0 {
					t.Errorf("%d events at level None", len(b.events))
				}
				return
			}
			if len(b.events) != 2 || b.events[0].Stage != StageRequestReceived || b.events[1].Stage != StageResponseComplete {
				t.Fatalf("events %+v", b.events)
			}
			ev := b.events[1]
			if ev.AuditID != id || ev.Verb != "create" || ev.User.Username != "alice" || ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != "bob" ||
				ev.RequestURI != "/api/v1/namespaces/ns/pods?dryRun=All" || ev.UserAgent != "kubectl/v1.32" ||
				strings.Join(ev.SourceIPs, ",") != "10.0.0.1,10.0.0.2,192.0.2.1" || ev.ResponseStatus.Code != 201 ||
				ev.ObjectRef.Resource != "pods" || ev.ObjectRef.APIVersion != "v1" || ev.Annotations["authorization.k8s.io/decision"] != "allow" {
				t.Errorf("event %+v", ev)
			}
			if b.events[0].Annotations != nil {
				t.Errorf("the RequestReceived event got the later annotations: %v", b.events[0].Annotations)
			}
			if got, want := ev.RequestObject != nil, !level.Less(LevelRequest); got != want {
				t.Errorf("requestObject %s", ev.RequestObject)
			}
			if got, want := ev.ResponseObject != nil, level == LevelRequestResponse; got != want {
				t.Errorf("responseObject %s", ev.ResponseObject)
			}
		})
	}
}

func TestFilterErrorStatusAndOmittedStages(t *testing.T) {
	b := &collect{}
	policy := &Policy{OmitStages: []Stage{StageRequestReceived}, Rules: []PolicyRule{{Level: LevelMetadata}}}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"p\" is forbidden: no","reason":"Forbidden","details":{"name":"p","kind":"pods"},"code":403}`))
	})
	serve(t, WithAudit(&Config{Policy: policy, Backend: b, Attributes: podAttrs})(next), httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/pods/p", nil))
	if len(b.events) != 1 {
		t.Fatalf("%d events", len(b.events))
	}
	st := b.events[0].ResponseStatus
	if st.Code != 403 || st.Reason != "Forbidden" || st.Message != `pods "p" is forbidden: no` || st.Status != "Failure" || st.Details != nil {
		t.Errorf("responseStatus %+v", st)
	}
	if b.events[0].ResponseObject != nil {
		t.Error("responseObject at Metadata level")
	}
}

func TestFilterWatchStartsAndPanics(t *testing.T) {
	b := &collect{}
	policy := &Policy{Rules: []PolicyRule{{Level: LevelRequestResponse}}}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte(`{"type":"ADDED"}`))
	})
	serve(t, WithAudit(&Config{Policy: policy, Backend: b, Attributes: podAttrs})(next), httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/pods?watch=true", nil))
	var stages []string
	for _, ev := range b.events {
		stages = append(stages, string(ev.Stage))
	}
	if strings.Join(stages, ",") != "RequestReceived,ResponseStarted,ResponseComplete" || b.events[2].ResponseObject != nil {
		t.Errorf("watch stages %v, response %s", stages, b.events[2].ResponseObject)
	}

	b.events = nil
	boom := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic was swallowed")
			}
		}()
		serve(t, WithAudit(&Config{Policy: policy, Backend: b, Attributes: podAttrs})(boom), httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/pods/p", nil))
	}()
	if len(b.events) != 2 || b.events[1].Stage != StagePanic || b.events[1].ResponseStatus.Code != 500 {
		t.Errorf("panic events %+v", b.events)
	}
}

func TestClientAuditIDKeptWithoutPolicy(t *testing.T) {
	h := WithAudit(nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ID(r.Context()) != "mine" {
			t.Errorf("context audit id %q", ID(r.Context()))
		}
	}))
	req := httptest.NewRequest(http.MethodGet, "/version", nil)
	req.Header.Set(HeaderAuditID, "mine")
	if rec := serve(t, h, req); rec.Header().Get(HeaderAuditID) != "mine" {
		t.Errorf("Audit-Id %q", rec.Header().Get(HeaderAuditID))
	}
}

// TestLogBackendDropsWhenFull: Process never blocks; a full buffer drops
// and counts; Run writes what was queued as JSON lines and, once its
// context ends, what is left.
func TestLogBackendDropsWhenFull(t *testing.T) {
	var out bytes.Buffer
	b := NewLogBackend(&out, 2, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for i := 0; i < 5; i++ {
		b.Process(&Event{AuditID: string(rune('a' + i)), Kind: "Event"})
	}
	if b.Total() != 5 || b.Dropped() != 3 {
		t.Fatalf("total %d dropped %d", b.Total(), b.Dropped())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.Run(ctx)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("wrote %q", out.String())
	}
	var ev Event
	if err := json.Unmarshal([]byte(lines[1]), &ev); err != nil || ev.AuditID != "b" {
		t.Errorf("second line %q: %v", lines[1], err)
	}
	m := metricstest.Text(t, b)
	if !strings.Contains(m, "apiserver_audit_event_total 5\n") || !strings.Contains(m, `apiserver_audit_error_total{plugin="log"} 3`) {
		t.Errorf("metrics:\n%s", m)
	}
}
