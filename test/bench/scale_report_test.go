package bench

// The scale benchmark's report: each part of a run is printed (and the
// JSON file rewritten) as soon as it ends, so that a run stopped by its
// deadline, at full size after most of an hour, still reports what it
// measured: the phase under way marked partial, each process's RSS, and
// a summary of what completed.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/corekube/corekube/test/metricstest"
)

// scaleReserve is the part of a run's deadline kept for its report and
// its processes' stops: a minute, or a quarter of a short run.
func scaleReserve(timeout time.Duration) time.Duration {
	return min(time.Minute, timeout/4)
}

// scaleReport writes a run's results as its parts end. It is used from
// the run's goroutine alone.
type scaleReport struct {
	w     io.Writer
	cfg   scaleConfig
	res   *scaleResult
	procs func() []*proc
	// client reads the apiserver's metrics for a partial phase.
	client kubernetes.Interface
	// partial, while a phase runs, returns what it measured so far.
	partial func() phaseResult
}

func (r *scaleReport) header(run int) {
	cfg := r.cfg
	fmt.Fprintf(r.w, "\nscale run %d: %d nodes (%d agent processes), %d pods (%s cpu, %s memory each), %d create clients; deadline %v (%v of it kept for the report)\n",
		run, cfg.nodes, cfg.agents, cfg.pods, cfg.cpuRequest, cfg.memoryRequest, cfg.createWorkers, cfg.timeout, scaleReserve(cfg.timeout))
}

// done records a completed part and rewrites the JSON file.
func (r *scaleReport) done(part string) {
	r.res.Done = append(r.res.Done, part)
	r.flush()
}

// flush writes the results so far to the JSON file, if one is asked for.
func (r *scaleReport) flush() {
	if r.cfg.jsonPath == "" {
		return
	}
	if err := r.res.writeJSON(r.cfg.jsonPath); err != nil {
		fmt.Fprintf(os.Stderr, "scale: %v\n", err)
	}
}

// nodesDone reports the nodes Ready and each process's RSS before the
// agents (base) and with the nodes alone (idle).
func (r *scaleReport) nodesDone(base, idle map[string]float64) {
	fmt.Fprintf(r.w, "[nodes] %d nodes Ready after %.1fs\n", r.cfg.nodes, r.res.NodesReadyS)
	fmt.Fprintf(r.w, "  RSS before the agents (base) and with every node Ready, no pod (idle)\n")
	fmt.Fprintf(r.w, "    %-12s %9s %9s %13s\n", "process", "base MiB", "idle MiB", "KiB per node")
	for _, p := range r.procs() {
		nodes := float64(r.cfg.nodes)
		if strings.HasPrefix(p.name, "agent") {
			nodes /= float64(r.cfg.agents)
		}
		fmt.Fprintf(r.w, "    %-12s %9.0f %9.0f %13.1f\n", p.name, base[p.name], idle[p.name], (idle[p.name]-base[p.name])*1024/nodes)
	}
	r.done("nodes")
}

// begin marks a phase under way; partial returns what it measured so far.
func (r *scaleReport) begin(partial func() phaseResult) { r.partial = partial }

// serverSince is the server-side latencies since the scrape m0, for a
// partial phase: the run's context may be over, so it has its own.
func (r *scaleReport) serverSince(m0 metricstest.Families) []apiLatency {
	if r.client == nil || m0 == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	m, err := scrapeMetrics(ctx, r.client)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scale: partial phase: %v\n", err)
		return nil
	}
	return serverLatencies(diffHistograms(requestHistograms(m0), requestHistograms(m)))
}

// phaseDone records a completed phase and prints it.
func (r *scaleReport) phaseDone(ph phaseResult) {
	r.partial = nil
	r.res.Phases = append(r.res.Phases, ph)
	r.printPhase(ph)
	r.done(ph.Name)
}

// printPhase writes one phase: its own figures, then its SLIs.
func (r *scaleReport) printPhase(ph phaseResult) {
	w, res, cfg := r.w, r.res, r.cfg
	mark := ""
	if ph.Partial {
		mark = " PARTIAL (stopped before its end)"
	}
	fmt.Fprintf(w, "[%s]%s over %.1fs\n", ph.Name, mark, ph.DurationS)
	switch ph.Name {
	case "create":
		if !ph.Partial {
			fmt.Fprintf(w, "  pods created in %.1fs (%.0f/s); all Running %.1fs after the first create\n",
				res.CreatedS, res.CreatePerSecond, res.AllRunningS)
		}
	case "steady":
		if len(res.Steady.Procs) > 0 {
			printWindow(w, fmt.Sprintf("steady state (%v after all Running, probe running)", cfg.settle), res.Steady)
		}
		if len(res.Memory) > 0 {
			fmt.Fprintf(w, "  memory: RSS before the agents (base), all nodes Ready without pods (idle), at full size (steady mean)\n")
			fmt.Fprintf(w, "    %-12s %9s %9s %9s %13s %12s\n", "process", "base MiB", "idle MiB", "full MiB", "KiB per node", "KiB per pod")
			for _, m := range res.Memory {
				fmt.Fprintf(w, "    %-12s %9.0f %9.0f %9.0f %13.1f %12.2f\n", m.Name, m.BaseMiB, m.IdleMiB, m.FullMiB, m.PerNodeKiB, m.PerPodKiB)
			}
		}
	case "reads":
		if !ph.Partial {
			fmt.Fprintf(w, "  at full size: kubectl get pods -A %.2fs (--chunk-size=0: %.2fs); a protobuf pod informer's initial LIST+sync %.2fs (%d pods)\n",
				res.KubectlGetPodsS, res.KubectlUnpagedS, res.InformerSyncS, res.InformerPods)
		}
	case "churn":
		if res.Churn != nil {
			printWindow(w, fmt.Sprintf("churn (%.0f%% of the pods replaced over %v)", cfg.churn*100, cfg.churnDuration), *res.Churn)
		}
	}
	printLatencies(w, "API call latency, client side", ph.Client)
	printLatencies(w, "API call latency, server side (apiserver_request_duration_seconds, histogram_quantile)", ph.Server)
	if ph.Startup != nil {
		printStartup(w, "pod startup latency", *ph.Startup)
	}
}

// printWindow writes each process's CPU and memory over a window.
func printWindow(w io.Writer, title string, pw procsWindow) {
	fmt.Fprintf(w, "  %s over %.0fs; CPU %% of one CPU\n", title, pw.WindowS)
	fmt.Fprintf(w, "    %-12s %8s %14s %13s %14s %9s %9s\n", "process", "CPU %", "RSS mean MiB", "RSS max MiB", "peak RSS MiB", "anon MiB", "file MiB")
	for _, p := range pw.Procs {
		fmt.Fprintf(w, "    %-12s %8.1f %14.0f %13.0f %14.0f %9.0f %9.0f\n", p.Name, p.CPUPercent, p.RSSMeanMiB, p.RSSMaxMiB, p.HWMMiB, p.AnonMiB, p.FileMiB)
	}
	fmt.Fprintf(w, "    machine busy %.1f%% of all CPUs, of which not ours %.1f%%\n", pw.MachineBusyPercent, pw.ForeignPercent)
}

// checksDone reports the correctness checks and ends the run's report.
func (r *scaleReport) checksDone() {
	ch := r.res.Checks
	fmt.Fprintf(r.w, "[checks] %d/%d pods Running, %d nodes Ready, terminated watchers %v, bench watch errors %d, sample informer converged %v; etcd db file %.0f MiB (%.0f in use; keys %v)\n",
		ch.PodsRunning, ch.PodsTotal, ch.NodesReady, ch.TerminatedWatchers, ch.BenchWatchErrors, ch.SampleConverged, r.res.EtcdMiB, r.res.EtcdInUseMiB, r.res.EtcdKeys)
	if r.res.EtcdLiveMiB != nil {
		fmt.Fprintf(r.w, "  etcd live keys and values (MiB) %v; db file after compacting to the current revision and defragmenting %.0f MiB\n", r.res.EtcdLiveMiB, r.res.EtcdDefragMiB)
	}
	if r.res.CgroupPeakMiB > 0 {
		fmt.Fprintf(r.w, "  API server's cgroup: %.0f MiB charged, at most %.0f MiB\n", r.res.CgroupMiB, r.res.CgroupPeakMiB)
	}
	if p := r.res.DefragRSS; p != nil {
		fmt.Fprintf(r.w, "  API server after the defragmentation: RSS %.0f MiB (anon %.0f, file %.0f)\n", p.RSSMeanMiB, p.AnonMiB, p.FileMiB)
	}
	for _, p := range ch.Problems {
		fmt.Fprintf(r.w, "  PROBLEM: %s\n", p)
	}
	for _, n := range ch.Notes {
		fmt.Fprintf(r.w, "  NOTE: %s\n", n)
	}
	r.res.Done = append(r.res.Done, "checks")
	r.end()
}

// stopped reports a run that ends early (why): the phase under way as
// partial, then each process's RSS and the summary.
func (r *scaleReport) stopped(why string) {
	r.res.Stopped = why
	fmt.Fprintf(r.w, "\nscale run STOPPED: %s\n", why)
	if r.partial != nil {
		ph := r.partial()
		ph.Partial = true
		r.partial = nil
		r.res.Phases = append(r.res.Phases, ph)
		r.printPhase(ph)
	}
	r.end()
}

// end writes each process's RSS now and the summary, and the JSON.
func (r *scaleReport) end() {
	w, res := r.w, r.res
	res.RSSAtEnd = res.RSSAtEnd[:0]
	fmt.Fprintf(w, "[rss] each process at the end of the run\n")
	fmt.Fprintf(w, "    %-12s %9s %14s\n", "process", "RSS MiB", "peak RSS MiB")
	for _, p := range r.procs() {
		rss, hwm, err := procMemory(p.pid())
		if err != nil {
			fmt.Fprintf(w, "    %-12s %v\n", p.name, err)
			continue
		}
		res.RSSAtEnd = append(res.RSSAtEnd, procResult{Name: p.name, RSSMeanMiB: rss, RSSMaxMiB: rss, HWMMiB: hwm})
		fmt.Fprintf(w, "    %-12s %9.0f %14.0f\n", p.name, rss, hwm)
	}
	r.summary()
	r.flush()
}

// summary writes one line per completed part, the headline figures.
func (r *scaleReport) summary() {
	w, res, cfg := r.w, r.res, r.cfg
	status := "completed"
	if res.Stopped != "" {
		status = "stopped early"
	}
	fmt.Fprintf(w, "[summary] %d nodes, %d pods: %s; done: %s\n", cfg.nodes, cfg.pods, status, strings.Join(res.Done, ", "))
	if res.NodesReadyS > 0 {
		fmt.Fprintf(w, "  nodes Ready %.1fs\n", res.NodesReadyS)
	}
	for _, ph := range res.Phases {
		mark := ""
		if ph.Partial {
			mark = " (partial)"
		}
		fmt.Fprintf(w, "  %s%s %.1fs:", ph.Name, mark, ph.DurationS)
		if ph.Name == "create" && !ph.Partial {
			fmt.Fprintf(w, " created %.1fs (%.0f/s), all Running %.1fs;", res.CreatedS, res.CreatePerSecond, res.AllRunningS)
		}
		if ph.Startup != nil {
			fmt.Fprintf(w, " pod_startup p99 %.0f ms (%d pods, %d not Running);", ph.Startup.PodStartup.P99ms, ph.Startup.Pods, ph.Startup.NotRunning)
		}
		// The SLO families: mutating calls, single reads, LISTs.
		var mut, get, list apiLatency
		for _, l := range ph.Client {
			switch l.Verb {
			case "GET":
				get = maxP99(get, l)
			case "LIST":
				list = maxP99(list, l)
			default:
				mut = maxP99(mut, l)
			}
		}
		for _, l := range []struct {
			what string
			l    apiLatency
		}{{"mutating", mut}, {"read", get}, {"list", list}} {
			if l.l.Count > 0 {
				fmt.Fprintf(w, " worst client p99 %s %.0f ms (%s %s);", l.what, l.l.P99ms, l.l.Verb, l.l.Resource)
			}
		}
		fmt.Fprintln(w)
	}
	if res.KubectlGetPodsS > 0 {
		fmt.Fprintf(w, "  kubectl get pods -A %.2fs; informer LIST+sync %.2fs\n", res.KubectlGetPodsS, res.InformerSyncS)
	}
	fmt.Fprintln(w)
}

func maxP99(a, b apiLatency) apiLatency {
	if b.P99ms > a.P99ms || a.Count == 0 {
		return b
	}
	return a
}
