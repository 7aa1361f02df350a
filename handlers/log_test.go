package handlers

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWriteErrorLogsThroughServerLogger: an internal error is logged
// through the logger WithLogger hands the request, not slog's default.
func TestWriteErrorLogsThroughServerLogger(t *testing.T) {
	var logged, global bytes.Buffer
	defaultLogger := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&global, nil)))
	t.Cleanup(func() { slog.SetDefault(defaultLogger) })

	log := slog.New(slog.NewTextHandler(&logged, nil))
	h := WithLogger(log)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, errors.New("disk on fire"))
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/pods", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("code %d, want 500", rec.Code)
	}
	if !strings.Contains(logged.String(), "disk on fire") || !strings.Contains(logged.String(), "path=/api/v1/pods") {
		t.Errorf("server logger got %q", logged.String())
	}
	if global.Len() != 0 {
		t.Errorf("slog's default logger got %q", global.String())
	}
}
