package handlers

import (
	"net/http/httptest"
	"slices"
	"testing"
)

// TestAddWarningOnce: the same warning twice is one header, as kube's
// recorder answers it; different ones are kept in order.
func TestAddWarningOnce(t *testing.T) {
	w := httptest.NewRecorder()
	addWarning(w, `would violate PodSecurity "restricted:latest": x`)
	addWarning(w, "other")
	addWarning(w, `would violate PodSecurity "restricted:latest": x`)
	want := []string{`299 - "would violate PodSecurity \"restricted:latest\": x"`, `299 - "other"`}
	if got := w.Header().Values("Warning"); !slices.Equal(got, want) {
		t.Errorf("Warning headers %q, want %q", got, want)
	}
}
