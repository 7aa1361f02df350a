package main

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection"
)

// failingCheck is a health check that always fails with a reason that must
// not reach the (unauthenticated) response.
type failingCheck struct{}

func (failingCheck) Name() string              { return "leaderElection" }
func (failingCheck) Check(*http.Request) error { return errors.New("secret reason") }

func TestHealthHandlerChecks(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	get := func(h http.Handler, url string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
		return rec.Code, rec.Body.String()
	}

	// A standby (the adaptor has no elector yet, or one not leading)
	// passes, as kube's leaderElection check does.
	standby := leaderelection.NewLeaderHealthzAdaptor(leaderHealthTimeout)
	h := healthHandler("healthz", log, standby)
	if code, body := get(h, "/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(h, "/healthz?verbose"); code != http.StatusOK || body != "[+]ping ok\n[+]leaderElection ok\nhealthz check passed\n" {
		t.Errorf("/healthz?verbose: %d %q", code, body)
	}

	// A failing check: 500, every line, the reason withheld.
	h = healthHandler("livez", log, failingCheck{})
	want := "[+]ping ok\n[-]leaderElection failed: reason withheld\nlivez check failed\n"
	for _, url := range []string{"/livez", "/livez?verbose"} {
		if code, body := get(h, url); code != http.StatusInternalServerError || body != want {
			t.Errorf("%s: %d %q, want 500 %q", url, code, body, want)
		}
	}
	if leaderHealthTimeout != 20*time.Second {
		t.Errorf("leaderHealthTimeout = %v, want kube's 20s", leaderHealthTimeout)
	}
}
