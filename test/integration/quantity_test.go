package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// quantityDeadline is what a write with an absurd quantity may take: it is
// milliseconds; kube-apiserver v1.32 computes 10^exponent in its pod
// validation and QoS (minutes for 1e100000000).
const quantityDeadline = 2 * time.Second

// TestHugeQuantities: pods and nodes whose resource quantities have
// exponents of a hundred thousand or a hundred million are answered in
// milliseconds: created when kube's validation accepts them (their
// canonical form read back), a 422 with kube's message when it refuses
// them (negative, request above limit), and a 400 for the few strings whose
// mere parsing would take minutes (more than 18 digits, or below a nano,
// with an exponent beyond ±1000).
func TestHugeQuantities(t *testing.T) {
	ns := newNamespace(t)
	podBody := func(name, resources string) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q},"spec":{"containers":[{"name":"c","image":"busybox","resources":%s}]}}`, name, resources))
	}
	tests := []struct {
		name      string
		resources string
		code      int
		message   string // a part of it
	}{
		{"cpu-request-1e8", `{"requests":{"cpu":"1e100000000"}}`, 201, ""},
		{"cpu-request-1e5", `{"requests":{"cpu":"1e100000"}}`, 201, ""},
		{"memory-request-1e8", `{"requests":{"memory":"1e100000000"}}`, 201, ""},
		{"memory-request-1e5", `{"requests":{"memory":"1e100000"}}`, 201, ""},
		{"cpu-limit-1e8", `{"limits":{"cpu":"1e100000000"}}`, 201, ""},
		{"memory-limit-1e5", `{"limits":{"memory":"1e100000"}}`, 201, ""},
		{"request-below-huge-limit", `{"requests":{"cpu":"1","memory":"1Gi"},"limits":{"cpu":"1e100000000","memory":"1e100000"}}`, 201, ""},
		{"guaranteed-huge", `{"requests":{"cpu":"1e100000000","memory":"1e100000"},"limits":{"cpu":"1e100000000","memory":"1e100000"}}`, 201, ""},
		{"extended-huge", `{"requests":{"example.com/foo":"1e100000000"},"limits":{"example.com/foo":"1e100000000"}}`, 201, ""},
		{"request-above-limit", `{"requests":{"cpu":"1e100000000"},"limits":{"cpu":"1"}}`, 422,
			`spec.containers[0].resources.requests: Invalid value: "10e99999999": must be less than or equal to cpu limit of 1`},
		{"negative", `{"requests":{"cpu":"-1e100000000"}}`, 422,
			`spec.containers[0].resources.requests[cpu]: Invalid value: "-10e99999999": must be greater than or equal to 0`},
		{"many-digits", `{"requests":{"cpu":"1234567890123456789e100000000"}}`, 400, `spec.containers[0].resources.requests.cpu: quantity "1234567890123456789e100000000" is out of range`},
		{"below-nano", `{"limits":{"memory":"1e-100000000"}}`, 400, `spec.containers[0].resources.limits.memory: quantity "1e-100000000" is out of range`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ToLower(tc.name)
			start := time.Now()
			resp := doRaw(t, "POST", "/api/v1/namespaces/"+ns+"/pods", podBody(name, tc.resources))
			took := time.Since(start)
			t.Logf("%s: %d in %v", tc.resources, resp.Code, took.Round(time.Microsecond))
			if took > quantityDeadline {
				t.Errorf("took %v", took)
			}
			var st struct{ Message string }
			_ = json.Unmarshal(resp.Body, &st)
			if resp.Code != tc.code || !strings.Contains(st.Message, tc.message) {
				t.Fatalf("%d %s\nwant %d with %q", resp.Code, resp.Body, tc.code, tc.message)
			}
			if tc.code != 201 {
				return
			}
			start = time.Now()
			got := doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods/"+name, nil)
			if got.Code != 200 || time.Since(start) > quantityDeadline {
				t.Fatalf("GET: %d after %v", got.Code, time.Since(start))
			}
			var pod struct {
				Status struct{ QOSClass string } `json:"status"`
			}
			if err := json.Unmarshal(got.Body, &pod); err != nil || pod.Status.QOSClass == "" {
				t.Errorf("pod read back: %v %s", err, got.Body)
			}
		})
	}

	// A patch and a server-side apply bringing a costly quantity are
	// refused the same way; a strategic merge patch with a huge one is fine.
	t.Run("patches", func(t *testing.T) {
		base := "/api/v1/namespaces/" + ns + "/pods/cpu-request-1e5"
		for _, p := range []struct {
			contentType, body string
			code              int
		}{
			{"application/merge-patch+json", `{"spec":{"containers":[{"name":"c","image":"busybox","resources":{"requests":{"cpu":"1e-100000000"}}}]}}`, 400},
			{"application/strategic-merge-patch+json", `{"metadata":{"annotations":{"note":"1e-100000000"}}}`, 200},
			{"application/apply-patch+yaml", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"cpu-request-1e5"},"spec":{"containers":[{"name":"c","image":"busybox","resources":{"requests":{"cpu":"1.0000000000000000001e-100000000"}}}]}}`, 400},
		} {
			start := time.Now()
			path := base
			if strings.Contains(p.contentType, "apply") {
				path += "?fieldManager=test&force=true"
			}
			resp := doRaw(t, "PATCH", path, []byte(p.body), "Content-Type", p.contentType)
			if took := time.Since(start); took > quantityDeadline {
				t.Errorf("%s: took %v", p.contentType, took)
			}
			if resp.Code != p.code {
				t.Errorf("%s %s: %d %s, want %d", p.contentType, p.body, resp.Code, resp.Body, p.code)
			}
		}
	})

	t.Run("node-capacity", func(t *testing.T) {
		for _, n := range []struct {
			name, capacity string
			code           int
		}{
			{"qty-huge-node", `{"cpu":"1e100000000","memory":"1e100000","pods":"1e100000000"}`, 201},
			{"qty-negative-node", `{"cpu":"-1e100000000"}`, 422},
			{"qty-costly-node", `{"memory":"12345678901234567890e100000"}`, 400},
		} {
			start := time.Now()
			body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q},"status":{"capacity":%s,"allocatable":%s}}`, n.name, n.capacity, n.capacity)
			resp := doRaw(t, "POST", "/api/v1/nodes", []byte(body))
			if took := time.Since(start); took > quantityDeadline {
				t.Errorf("%s: took %v", n.name, took)
			}
			if resp.Code != n.code {
				t.Errorf("%s: %d %s, want %d", n.name, resp.Code, resp.Body, n.code)
			}
			if resp.Code == 201 {
				t.Cleanup(func() { doRaw(t, "DELETE", "/api/v1/nodes/"+n.name, nil) })
			}
		}
	})
}
