package bench

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/corekube/corekube/test/metricstest"
)

// The scale harness's arithmetic, checked without a cluster: these run
// under plain go test.

func TestHistogramQuantileAsPrometheus(t *testing.T) {
	const before = `# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",component="apiserver",group="",version="v1",dry_run="",le="0.1"} 5
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",component="apiserver",group="",version="v1",dry_run="",le="0.5"} 5
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",component="apiserver",group="",version="v1",dry_run="",le="1"} 5
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",component="apiserver",group="",version="v1",dry_run="",le="+Inf"} 5
apiserver_request_duration_seconds_sum{verb="GET",resource="pods",subresource="",scope="resource",component="apiserver",group="",version="v1",dry_run=""} 0.2
apiserver_request_duration_seconds_count{verb="GET",resource="pods",subresource="",scope="resource",component="apiserver",group="",version="v1",dry_run=""} 5
`
	// After: 10 more under 0.1, 20 in (0.1,0.5], 10 in (0.5,1], 10 above
	// 1; a WATCH series, which is left out.
	const after = `# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",component="apiserver",group="",version="v1",dry_run="",le="0.1"} 15
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",component="apiserver",group="",version="v1",dry_run="",le="0.5"} 35
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",component="apiserver",group="",version="v1",dry_run="",le="1"} 45
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",component="apiserver",group="",version="v1",dry_run="",le="+Inf"} 55
apiserver_request_duration_seconds_sum{verb="GET",resource="pods",subresource="",scope="resource",component="apiserver",group="",version="v1",dry_run=""} 20
apiserver_request_duration_seconds_count{verb="GET",resource="pods",subresource="",scope="resource",component="apiserver",group="",version="v1",dry_run=""} 55
apiserver_request_duration_seconds_bucket{verb="WATCH",resource="pods",subresource="",scope="namespace",component="apiserver",group="",version="v1",dry_run="",le="0.1"} 0
apiserver_request_duration_seconds_bucket{verb="WATCH",resource="pods",subresource="",scope="namespace",component="apiserver",group="",version="v1",dry_run="",le="0.5"} 0
apiserver_request_duration_seconds_bucket{verb="WATCH",resource="pods",subresource="",scope="namespace",component="apiserver",group="",version="v1",dry_run="",le="1"} 0
apiserver_request_duration_seconds_bucket{verb="WATCH",resource="pods",subresource="",scope="namespace",component="apiserver",group="",version="v1",dry_run="",le="+Inf"} 3
apiserver_request_duration_seconds_sum{verb="WATCH",resource="pods",subresource="",scope="namespace",component="apiserver",group="",version="v1",dry_run=""} 900
apiserver_request_duration_seconds_count{verb="WATCH",resource="pods",subresource="",scope="namespace",component="apiserver",group="",version="v1",dry_run=""} 3
`
	parse := func(s string) metricstest.Families {
		fs, err := metricstest.Parse(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	d := diffHistograms(requestHistograms(parse(before)), requestHistograms(parse(after)))
	if len(d) != 1 {
		t.Fatalf("got %d kinds of calls, want GET pods alone: %v", len(d), d)
	}
	h := d[callKey{"GET", "pods", "resource"}]
	if h == nil || h.count != 50 {
		t.Fatalf("GET pods: %+v, want 50 requests", h)
	}
	for _, c := range []struct{ q, want float64 }{
		{0.1, 0.05}, // rank 5 of the 10 under 0.1: 0.1*5/10
		{0.5, 0.4},  // rank 25: 0.1 + 0.4*(25-10)/20
		{0.7, 0.75}, // rank 35: 0.5 + 0.5*(35-30)/10
		{0.85, 1},   // rank 42.5, beyond 40: in +Inf, the highest finite bound
		{0.99, 1},   // in +Inf: the highest finite bound
	} {
		if got := h.quantile(c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
}

func TestSummarizeLatencyNearestRank(t *testing.T) {
	var ds []float64
	for i := 100; i >= 1; i-- {
		ds = append(ds, float64(i)/1000) // 1..100 ms, unsorted
	}
	s := summarizeLatency(ds)
	if s.Count != 100 || s.P50ms != 50 || s.P90ms != 90 || s.P99ms != 99 {
		t.Errorf("got %+v, want 100 calls at 50/90/99 ms", s)
	}
	if (summarizeLatency(nil) != latencySummary{}) {
		t.Error("no calls should summarize to zero")
	}
}

// A run stopped in the middle of a phase reports that phase as partial,
// the parts before it, and the summary, on the writer and in the JSON.
func TestScaleReportStoppedMidPhase(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "scale.json")
	cfg := scaleConfig{nodes: 10, pods: 100, agents: 1, churn: 0.1, jsonPath: jsonPath}
	res := scaleResult{Nodes: 10, Pods: 100, Agents: 1, NodesReadyS: 1.5}
	var out strings.Builder
	rep := &scaleReport{w: &out, cfg: cfg, res: &res, procs: func() []*proc { return nil }}
	rep.nodesDone(nil, nil)
	rep.phaseDone(phaseResult{Name: "create", DurationS: 3, Client: []apiLatency{
		{Verb: "POST", Resource: "pods", Scope: "resource", latencySummary: latencySummary{Count: 100, P50ms: 5, P90ms: 9, P99ms: 12}},
	}})
	startup := newPodStartup()
	startup.arm()
	startup.created("ns/a", time.Now())
	rep.begin(func() phaseResult {
		return phaseResult{Name: "churn", DurationS: 7, Startup: ptr.To(startup.result())}
	})
	rep.stopped("the deadline passed")

	text := out.String()
	for _, want := range []string{
		"[nodes] 10 nodes Ready after 1.5s",
		"[create] over 3.0s",
		"[churn] PARTIAL (stopped before its end) over 7.0s",
		"0 pods Running, 1 created but not seen Running",
		"scale run STOPPED: the deadline passed",
		"[summary] 10 nodes, 100 pods: stopped early; done: nodes, create",
		"churn (partial) 7.0s",
		"worst client p99 mutating 12 ms (POST pods)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var got scaleResult
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Phases) != 2 || got.Phases[1].Name != "churn" || !got.Phases[1].Partial || got.Phases[0].Partial {
		t.Errorf("JSON phases %+v, want create then a partial churn", got.Phases)
	}
	if got.Stopped != "the deadline passed" || !slices.Equal(got.Done, []string{"nodes", "create"}) {
		t.Errorf("JSON stopped %q done %v", got.Stopped, got.Done)
	}
}
