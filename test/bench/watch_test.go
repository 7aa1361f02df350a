package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
)

// The watch benchmark: watchWatchers watches on pods, held open over HTTP
// (GET ...?watch=1, one connection each) while a paced writer creates
// watchRate pods a second for watchDuration.
//
// The mix, by watcher index w:
//   - [0, 500): labelSelector app=app-<w%10> (a tenth of the pods each), half
//     on the namespace, half across namespaces (/api/v1/pods);
//   - [500, 900): node agents, fieldSelector spec.nodeName=node-<w-500>
//     across namespaces (the watch cache's indexed path): pod i is bound to
//     node-<i%400>, so each sees 5 of the 2,000 pods;
//   - [900, 1000): no selector (controllers, informers), half namespaced.
//
// That is 500×200 + 400×5 + 100×2,000 = 302,000 deliveries per run.
const (
	watchWatchers      = 1000
	watchLabelWatchers = 500
	watchNodeWatchers  = 400 // the remaining 100 select nothing
	watchApps          = 10
	watchRate          = 200 // creates per second
	watchDuration      = 10 * time.Second
	watchPods          = watchRate * int(watchDuration/time.Second)
	watchWriters       = 8  // the writer's concurrency (it is paced, open loop)
	watchOpeners       = 32 // watches opened concurrently
	watchNamespace     = "bench-watch"
	watchDrainTimeout  = 30 * time.Second
	watchChildDeadline = 3 * time.Minute

	watchChildMode = "watch-clients"
	watchURLEnv    = "COREKUBE_BENCH_WATCH_URL"
	watchRunEnv    = "COREKUBE_BENCH_WATCH_RUN"
	// watchProfileEnv, when set to a directory, makes BenchmarkWatchers
	// write the server's heap and goroutine profiles there once the
	// watches are open (heap-<run>.pprof, goroutines-<run>.txt).
	watchProfileEnv = "COREKUBE_BENCH_WATCH_PROFILE_DIR"

	watchReadyPrefix  = "WATCH-READY "
	watchResultPrefix = "WATCH-RESULT "
)

var watchRunSeq atomic.Int64

// watchSpec is one watcher: what it asks for and which pods it must see.
type watchSpec struct {
	class string // "label", "node" or "all"
	path  string // relative to the server's URL
	query string // the selector, URL-encoded, or ""
	match func(pod int) bool
}

func watchAppName(i int) string  { return "app-" + strconv.Itoa(i) }
func watchNodeName(i int) string { return "node-" + strconv.Itoa(i) }

func watchSpecFor(w int) watchSpec {
	nsPath := "/api/v1/namespaces/" + watchNamespace + "/pods"
	path := func(half int) string {
		if half%2 == 0 {
			return nsPath
		}
		return "/api/v1/pods"
	}
	switch {
	case w < watchLabelWatchers:
		app := w % watchApps
		return watchSpec{"label", path(w / watchApps), "labelSelector=" + url.QueryEscape("app="+watchAppName(app)),
			func(p int) bool { return p%watchApps == app }}
	case w < watchLabelWatchers+watchNodeWatchers:
		node := w - watchLabelWatchers
		return watchSpec{"node", "/api/v1/pods", "fieldSelector=" + url.QueryEscape("spec.nodeName="+watchNodeName(node)),
			func(p int) bool { return p%watchNodeWatchers == node }}
	default:
		return watchSpec{"all", path(w), "", func(int) bool { return true }}
	}
}

// watchPodBody is podBody bound to node: pod i carries app=app-<i%10> and
// spec.nodeName=node-<i%400>.
func watchPodBody(name string, i int) []byte {
	var pod v1.Pod
	if err := json.Unmarshal(podBody(name, watchAppName(i%watchApps)), &pod); err != nil {
		panic(err)
	}
	pod.Spec.NodeName = watchNodeName(i % watchNodeWatchers)
	data, err := json.Marshal(&pod)
	if err != nil {
		panic(err)
	}
	return data
}

// latSummary summarizes latencies in milliseconds.
type latSummary struct {
	N                        int
	P50, P90, P99, P999, Max float64
}

func summarize(lat []time.Duration) latSummary {
	slices.Sort(lat)
	s := latSummary{N: len(lat)}
	if len(lat) == 0 {
		return s
	}
	s.P50, s.P90, s.P99 = ms(percentile(lat, 50)), ms(percentile(lat, 90)), ms(percentile(lat, 99))
	s.P999, s.Max = ms(percentile(lat, 99.9)), ms(lat[len(lat)-1])
	return s
}

func (s latSummary) String() string {
	return fmt.Sprintf("p50 %.2f p90 %.2f p99 %.2f p99.9 %.2f max %.2f ms (n=%d)", s.P50, s.P90, s.P99, s.P999, s.Max, s.N)
}

// watchChildResult is what the client process measured.
type watchChildResult struct {
	OpenMS             float64 // opening all watches (each: until its 200 and headers arrived)
	OpenP50MS, OpenP99 float64
	Expected           int64
	Delivered          int64
	ClosedEarly        int64    // streams that ended before the client closed them
	Unexpected         int64    // ERROR, MODIFIED, DELETED events, unparseable lines
	Duplicates         int64    // a pod delivered twice to one watcher
	Missing            int64    // expected deliveries that never came
	Problems           []string // the first few of the above
	Negative           int64    // deliveries that arrived before their create returned
	Writes             int
	WriteErrors        int
	WriteSeconds       float64 // first create sent to last create returned
	MaxSendLagMS       float64 // how late a create was sent against its schedule
	Create             latSummary
	Delivery           latSummary            // from the create returning
	DeliveryFromSend   latSummary            // from the create being sent
	ByClass            map[string]latSummary // from the create returning
	DrainMS            float64               // last create returned → last delivery
	CPUSeconds         float64               // the client process, GO to the end
}

// BenchmarkWatchers: 1,000 concurrent watches on pods over HTTP while 200
// pods a second are created for 10 s (see the mix above). One op is one
// whole run on a fresh server; run it with -benchtime 1x -count N.
//
// The API server (testserver: embedded etcd without fsync) runs in this
// process; the watch clients and the writer run in a child process (this
// test binary, re-executed), so that the memory and goroutine figures are
// the server's alone: heap, stacks, RSS and goroutines are measured in this
// process after a collection, before the watches open and once they are
// open, and the difference is divided by 1,000. Delivery latency is
// measured in the child on one clock: for every event at every watcher,
// the time from its create request returning to the writer to the event's
// line arriving (it can be negative: the event may overtake the response).
func BenchmarkWatchers(b *testing.B) {
	skipShort(b)
	stopLazyServer() // nothing else running in this process while we measure
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var runs []watchRun
	b.ResetTimer()
	for range b.N {
		r, err := runWatchScenario(exe)
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, r)
	}
	b.StopTimer()
	med := func(f func(r watchRun) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return median(v)
	}
	b.ReportMetric(med(func(r watchRun) float64 { return r.Child.Delivery.P50 }), "p50-ms")
	b.ReportMetric(med(func(r watchRun) float64 { return r.Child.Delivery.P99 }), "p99-ms")
	b.ReportMetric(med(func(r watchRun) float64 { return r.Child.Delivery.Max }), "max-ms")
	b.ReportMetric(med(func(r watchRun) float64 { return float64(r.Child.Delivered) }), "events")
	b.ReportMetric(med(func(r watchRun) float64 { return float64(r.closedEarly()) }), "closed-early")
	b.ReportMetric(med(func(r watchRun) float64 {
		return r.perWatcherKiB(func(m serverMem) int64 { return int64(m.HeapInuse) })
	}), "heap-KiB/watcher")
	b.ReportMetric(med(func(r watchRun) float64 {
		return r.perWatcherKiB(func(m serverMem) int64 { return int64(m.StackInuse) })
	}), "stack-KiB/watcher")
	b.ReportMetric(med(func(r watchRun) float64 { return r.perWatcherKiB(func(m serverMem) int64 { return m.RSSKiB * 1024 }) }), "rss-KiB/watcher")
	b.ReportMetric(med(func(r watchRun) float64 {
		return float64(r.Open.Goroutines-r.Base.Goroutines) / watchWatchers
	}), "goroutines/watcher")
	b.ReportMetric(med(func(r watchRun) float64 { return float64(r.Child.Writes) / r.Child.WriteSeconds }), "writes/s")
	b.ReportMetric(med(func(r watchRun) float64 { return r.ServerCPUPct }), "server-cpu-%")
	b.ReportMetric(med(func(r watchRun) float64 { return r.ForeignCPUPct }), "foreign-cpu-%")
	for i, r := range runs {
		c := r.Child
		b.Logf("b.N=%d, run %d: %d/%d deliveries, closed early %d (client) + %d (server: slow watchers), unexpected %d, duplicates %d, missing %d, %d negative; %v",
			b.N, i+1, c.Delivered, c.Expected, c.ClosedEarly, r.SlowClosed, c.Unexpected, c.Duplicates, c.Missing, c.Negative, c.Problems)
		b.Logf("  delivery from create returned: %v; from create sent: %v; drain %.1f ms", c.Delivery, c.DeliveryFromSend, c.DrainMS)
		for _, class := range []string{"label", "node", "all"} {
			b.Logf("  %-5s watchers: %v", class, c.ByClass[class])
		}
		b.Logf("  writes: %d in %.2f s (%.1f/s, %d errors, max send lag %.1f ms), create %v", c.Writes, c.WriteSeconds, float64(c.Writes)/c.WriteSeconds, c.WriteErrors, c.MaxSendLagMS, c.Create)
		b.Logf("  opening %d watches: %.0f ms (each: p50 %.1f, p99 %.1f ms)", watchWatchers, c.OpenMS, c.OpenP50MS, c.OpenP99)
		b.Logf("  server before / watches open / after the writes: heap in use %.1f / %.1f / %.1f MiB, live heap %.1f / %.1f / %.1f MiB, stacks %.1f / %.1f / %.1f MiB, RSS %.1f / %.1f / %.1f MiB (peak during the writes %.1f), goroutines %d / %d / %d, %d left over after the clients went",
			mibU(r.Base.HeapInuse), mibU(r.Open.HeapInuse), mibU(r.After.HeapInuse),
			mibU(r.Base.HeapAlloc), mibU(r.Open.HeapAlloc), mibU(r.After.HeapAlloc),
			mibU(r.Base.StackInuse), mibU(r.Open.StackInuse), mibU(r.After.StackInuse),
			float64(r.Base.RSSKiB)/1024, float64(r.Open.RSSKiB)/1024, float64(r.After.RSSKiB)/1024, float64(r.PeakRSSKiB)/1024,
			r.Base.Goroutines, r.Open.Goroutines, r.After.Goroutines, r.LeftoverGoroutines)
		b.Logf("  CPU during the writes: server %.2f s (%.0f%% of the machine, %.1f µs per delivery), clients %.2f s, others %.1f%% of the machine",
			r.ServerCPUSeconds, r.ServerCPUPct, r.ServerCPUSeconds*1e6/float64(max(c.Delivered, 1)), c.CPUSeconds, r.ForeignCPUPct)
	}
}

func mibU(v uint64) float64 { return float64(v) / (1 << 20) }

// serverMem is the server process's memory after a collection.
type serverMem struct {
	HeapInuse, HeapAlloc, StackInuse uint64
	RSSKiB                           int64
	Goroutines                       int
}

func measureServer() serverMem {
	// FreeOSMemory collects and returns freed pages to the OS, so that RSS
	// is not inflated by what an earlier run of this process left resident.
	debug.FreeOSMemory()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	rss, _, _ := procStatus()
	return serverMem{HeapInuse: m.HeapInuse, HeapAlloc: m.HeapAlloc, StackInuse: m.StackInuse, RSSKiB: rss, Goroutines: runtime.NumGoroutine()}
}

// watchRun is one run: the server's side and the child's result.
type watchRun struct {
	Base, Open, After  serverMem
	PeakRSSKiB         int64
	LeftoverGoroutines int
	SlowClosed         int64 // watchers the server closed for falling behind
	CacheRestarts      int64
	ServerCPUSeconds   float64
	ServerCPUPct       float64 // of the machine's CPU time during the writes
	ForeignCPUPct      float64 // other processes' share of it
	Child              watchChildResult
}

func (r watchRun) closedEarly() int64 { return r.Child.ClosedEarly + r.SlowClosed }

func (r watchRun) perWatcherKiB(f func(serverMem) int64) float64 {
	return float64(f(r.Open)-f(r.Base)) / 1024 / watchWatchers
}

// logCounter is the server's logger: it counts the watch cache's messages
// about closed watchers and restarts, and discards everything.
type logCounter struct{ slow, restarts atomic.Int64 }

func (l *logCounter) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelInfo
}
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	switch r.Message {
	case "closing a watcher that fell behind":
		l.slow.Add(1)
	case "watch cache restarting":
		l.restarts.Add(1)
	}
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }

func runWatchScenario(exe string) (r watchRun, err error) {
	defer recoverFatal(&err)
	run := watchRunSeq.Add(1)
	tb := newProcTB()
	defer func() {
		tb.runCleanups()
		runtime.GC()
	}()
	logs := &logCounter{}
	srv := testserver.StartWith(tb, tb.TempDir(), func(cfg *server.Config) { cfg.Logger = slog.New(logs) }).Server
	client := newClient()
	if err := createNamespace(client, srv.URL(), watchNamespace); err != nil {
		return r, err
	}
	client.CloseIdleConnections()
	time.Sleep(time.Second)
	r.Base = measureServer()

	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), testserver.ChildEnv()...), childEnv+"="+watchChildMode, watchURLEnv+"="+srv.URL(), watchRunEnv+"="+strconv.FormatInt(run, 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return r, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return r, err
	}
	if err := cmd.Start(); err != nil {
		return r, err
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20) // grows as needed: not charged to the watchers
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	defer func() { // the child must be gone before the server stops
		_ = cmd.Process.Kill()
		for range lines {
		}
	}()
	childErr := func(what string) error {
		return fmt.Errorf("watch child: %s\n%s", what, stderr.String())
	}
	expect := func(prefix string, timeout time.Duration, v any) error {
		deadline := time.After(timeout)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					return childErr("exited before " + strings.TrimSpace(prefix))
				}
				if rest, ok := strings.CutPrefix(line, prefix); ok {
					return json.Unmarshal([]byte(rest), v)
				}
				fmt.Println(line)
			case <-deadline:
				return childErr("no " + strings.TrimSpace(prefix) + " in time")
			}
		}
	}

	var ready struct{}
	if err := expect(watchReadyPrefix, time.Minute, &ready); err != nil {
		return r, err
	}
	time.Sleep(500 * time.Millisecond)
	r.Open = measureServer()
	if dir := os.Getenv(watchProfileEnv); dir != "" {
		if err := writeWatchProfiles(dir, run); err != nil {
			return r, err
		}
	}

	stat0, err := readProcStat()
	if err != nil {
		return r, err
	}
	cpu0 := selfCPU()
	stopSampling := samplePeakRSS(&r.PeakRSSKiB)
	if _, err := io.WriteString(stdin, "GO\n"); err != nil {
		return r, err
	}
	if err := expect(watchResultPrefix, watchDuration+watchDrainTimeout+time.Minute, &r.Child); err != nil {
		return r, err
	}
	stopSampling()
	r.ServerCPUSeconds = (selfCPU() - cpu0).Seconds()
	if stat1, err := readProcStat(); err == nil {
		busy, total := stat1.busy-stat0.busy, stat1.total-stat0.total
		if total > 0 {
			r.ServerCPUPct = 100 * r.ServerCPUSeconds * clockTicks / float64(total)
			r.ForeignCPUPct = 100 * (float64(busy) - (r.ServerCPUSeconds+r.Child.CPUSeconds)*clockTicks) / float64(total)
		}
	}
	r.After = measureServer()

	if _, err := io.WriteString(stdin, "CLOSE\n"); err != nil {
		return r, err
	}
	stdin.Close()
	for range lines {
	}
	if err := <-exited; err != nil {
		return r, childErr(err.Error())
	}
	// Every watch's goroutines should go once its connection has closed.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r.LeftoverGoroutines = runtime.NumGoroutine() - r.Base.Goroutines
		if r.LeftoverGoroutines <= 0 || time.Now().After(deadline) {
			break
		}
	}
	r.SlowClosed, r.CacheRestarts = logs.slow.Load(), logs.restarts.Load()
	if r.CacheRestarts > 0 {
		return r, fmt.Errorf("the watch cache restarted %d times during the run", r.CacheRestarts)
	}
	return r, nil
}

// writeWatchProfiles writes the server's heap profile and its goroutines
// (grouped by stack) once the watches are open.
func writeWatchProfiles(dir string, run int64) error {
	for _, p := range []struct {
		name, file string
		debug      int
	}{{"heap", fmt.Sprintf("heap-%d.pprof", run), 0}, {"goroutine", fmt.Sprintf("goroutines-%d.txt", run), 1}} {
		f, err := os.Create(filepath.Join(dir, p.file))
		if err != nil {
			return err
		}
		err = pprof.Lookup(p.name).WriteTo(f, p.debug)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// samplePeakRSS records the highest VmRSS seen every 100 ms until stopped
// (VmHWM would include the process's earlier runs).
func samplePeakRSS(peak *int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, _, err := procStatus(); err == nil && rss > *peak {
				*peak = rss
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// clockTicks is USER_HZ, the unit of /proc/stat.
const clockTicks = 100

type procStat struct{ busy, total int64 }

// readProcStat reads the machine's CPU time, all CPUs, from /proc/stat.
func readProcStat() (procStat, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return procStat{}, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return procStat{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var s procStat
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return procStat{}, err
		}
		if i >= 8 { // guest time is already in user
			break
		}
		s.total += n
		if i != 3 && i != 4 { // idle, iowait
			s.busy += n
		}
	}
	return s, nil
}

// selfCPU is the user and system CPU time of this process so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runWatchChild is the client process of BenchmarkWatchers: it opens the
// watches, prints watchReadyPrefix, waits for "GO", creates the pods,
// waits for the deliveries, prints watchResultPrefix and the result, and
// closes the watches on "CLOSE".
func runWatchChild() int {
	go func() {
		time.Sleep(watchChildDeadline)
		fmt.Fprintln(os.Stderr, "watch child: deadline exceeded")
		os.Exit(3)
	}()
	in := bufio.NewScanner(os.Stdin)
	await := func(cmd string) error {
		if !in.Scan() {
			return fmt.Errorf("stdin closed before %q: %v", cmd, in.Err())
		}
		if got := in.Text(); got != cmd {
			return fmt.Errorf("got %q on stdin, want %q", got, cmd)
		}
		return nil
	}
	if err := watchChild(os.Getenv(watchURLEnv), os.Getenv(watchRunEnv), await); err != nil {
		fmt.Fprintln(os.Stderr, "watch child:", err)
		return 1
	}
	return 0
}

// benchWatcher is one watch of the child.
type benchWatcher struct {
	spec     watchSpec
	expected int

	mu       sync.Mutex
	arrivals []arrival // in arrival order
	seen     []bool    // by pod
	problems []string
	unexpect int64
	dups     int64
	closed   bool // ended before the client closed it
}

type arrival struct {
	pod int32
	at  time.Duration // since the child's epoch
}

func (w *benchWatcher) problem(format string, args ...any) {
	if len(w.problems) < 3 {
		w.problems = append(w.problems, fmt.Sprintf(format, args...))
	}
}

var nameField = []byte(`"metadata":{"name":"`)

// read consumes the watch's stream, one event per line, and records when
// each pod's event arrived.
func (w *benchWatcher) read(ctx context.Context, body io.ReadCloser, epoch time.Time, prefix []byte, delivered *atomic.Int64) {
	defer body.Close()
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		at := time.Since(epoch)
		if err != nil {
			if ctx.Err() == nil {
				w.mu.Lock()
				w.closed = true
				w.problem("%s watch ended: %v", w.spec.class, err)
				w.mu.Unlock()
			}
			return
		}
		typ, ok := bytes.CutPrefix(line, []byte(`{"type":"`))
		if ok {
			typ, _, ok = bytes.Cut(typ, []byte{'"'})
		}
		if ok && string(typ) == "BOOKMARK" {
			continue
		}
		var pod int
		if ok && string(typ) == "ADDED" {
			ok = false
			if i := bytes.Index(line, nameField); i >= 0 {
				name, _, _ := bytes.Cut(line[i+len(nameField):], []byte{'"'})
				if rest, found := bytes.CutPrefix(name, prefix); found {
					n, err := strconv.Atoi(string(rest))
					pod, ok = n, err == nil && n >= 0 && n < watchPods
				}
			}
		}
		w.mu.Lock()
		switch {
		case !ok:
			w.unexpect++
			w.problem("%s watch: unexpected line %.200q", w.spec.class, line)
		case w.seen[pod]:
			w.dups++
			w.problem("%s watch: pod %d twice", w.spec.class, pod)
		case !w.spec.match(pod):
			w.unexpect++
			w.problem("%s watch: pod %d does not match", w.spec.class, pod)
		default:
			w.seen[pod] = true
			w.arrivals = append(w.arrivals, arrival{pod: int32(pod), at: at})
			delivered.Add(1)
		}
		w.mu.Unlock()
	}
}

func watchChild(base, run string, await func(string) error) error {
	if base == "" || run == "" {
		return errors.New(watchURLEnv + " and " + watchRunEnv + " must be set")
	}
	epoch := time.Now()
	prefix := "w" + run + "-"
	names := make([]string, watchPods)
	bodies := make([][]byte, watchPods)
	for i := range watchPods {
		names[i] = fmt.Sprintf("%s%05d", prefix, i)
		bodies[i] = watchPodBody(names[i], i)
	}

	// The resourceVersion to watch from, as an informer lists first.
	writer := newClient()
	resp, err := writer.Get(base + "/api/v1/namespaces/" + watchNamespace + "/pods?limit=1")
	if err != nil {
		return err
	}
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || list.Metadata.ResourceVersion == "" {
		return fmt.Errorf("list: %d, %v", resp.StatusCode, err)
	}

	// Open the watches, one connection each.
	watchClient := &http.Client{Transport: &http.Transport{
		Proxy:              nil,
		DialContext:        (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		DisableCompression: true,
		TLSClientConfig:    testTLSConfig(),
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		readers   sync.WaitGroup
		delivered atomic.Int64
		expected  int64
	)
	watchers := make([]*benchWatcher, watchWatchers)
	for i := range watchers {
		w := &benchWatcher{spec: watchSpecFor(i), seen: make([]bool, watchPods)}
		for p := range watchPods {
			if w.spec.match(p) {
				w.expected++
			}
		}
		w.arrivals = make([]arrival, 0, w.expected)
		expected += int64(w.expected)
		watchers[i] = w
	}
	openLat, openWall, err := runPool(watchOpeners, watchWatchers, func(i int) error {
		w := watchers[i]
		u := base + w.spec.path + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=1800&resourceVersion=" + list.Metadata.ResourceVersion
		if w.spec.query != "" {
			u += "&" + w.spec.query
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := watchClient.Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			resp.Body.Close()
			return fmt.Errorf("GET %s: %d: %s", u, resp.StatusCode, msg)
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			w.read(ctx, resp.Body, epoch, []byte(prefix), &delivered)
		}()
		return nil
	})
	if err != nil {
		return err
	}
	res := watchChildResult{
		OpenMS: ms(openWall), OpenP50MS: ms(percentile(openLat, 50)), OpenP99: ms(percentile(openLat, 99)),
		Expected: expected, Writes: watchPods,
	}
	// The writer's connections, before the clock starts.
	var warm sync.WaitGroup
	for range watchWriters {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if resp, err := writer.Get(base + "/healthz"); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	warm.Wait()
	fmt.Printf("%s{}\n", watchReadyPrefix)
	if err := await("GO"); err != nil {
		return err
	}
	cpu0 := selfCPU()

	// The writer: pod i is due at start + i/rate, handed to one of
	// watchWriters workers (open loop: a slow create does not delay the
	// next ones).
	sent := make([]time.Duration, watchPods)
	returned := make([]time.Duration, watchPods)
	due := make([]time.Duration, watchPods)
	jobs := make(chan int, watchPods)
	var (
		workers    sync.WaitGroup
		writeErrMu sync.Mutex
		writeErrs  []string
	)
	createURL := base + "/api/v1/namespaces/" + watchNamespace + "/pods"
	for range watchWriters {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := range jobs {
				sent[i] = time.Since(epoch)
				err := post(context.Background(), writer, createURL, bodies[i], http.StatusCreated)
				returned[i] = time.Since(epoch)
				if err != nil {
					writeErrMu.Lock()
					writeErrs = append(writeErrs, err.Error())
					writeErrMu.Unlock()
				}
			}
		}()
	}
	start := time.Since(epoch) + time.Millisecond
	interval := time.Second / watchRate
	for i := range watchPods {
		due[i] = start + time.Duration(i)*interval
		if d := due[i] - time.Since(epoch); d > 0 {
			time.Sleep(d)
		}
		jobs <- i
	}
	close(jobs)
	workers.Wait()
	lastReturn := slices.Max(returned)
	res.WriteErrors = len(writeErrs)
	if len(writeErrs) > 0 {
		res.Problems = append(res.Problems, writeErrs[:min(3, len(writeErrs))]...)
	}
	res.WriteSeconds = (lastReturn - sent[0]).Seconds()
	createLat := make([]time.Duration, watchPods)
	for i := range watchPods {
		createLat[i] = returned[i] - sent[i]
		res.MaxSendLagMS = max(res.MaxSendLagMS, ms(sent[i]-due[i]))
	}
	res.Create = summarize(createLat)

	// Wait for every delivery (or give up).
	want := expected - int64(res.WriteErrors)*int64(watchWatchers) // an upper bound is fine: we time out
	for deadline := time.Now().Add(watchDrainTimeout); delivered.Load() < want && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	res.CPUSeconds = (selfCPU() - cpu0).Seconds()

	var (
		all, fromSend []time.Duration
		byClass       = map[string][]time.Duration{}
		last          time.Duration
	)
	for _, w := range watchers {
		w.mu.Lock()
		for _, a := range w.arrivals {
			d := a.at - returned[a.pod]
			all = append(all, d)
			byClass[w.spec.class] = append(byClass[w.spec.class], d)
			fromSend = append(fromSend, a.at-sent[a.pod])
			if d < 0 {
				res.Negative++
			}
			last = max(last, a.at)
		}
		res.Delivered += int64(len(w.arrivals))
		res.Missing += int64(w.expected - len(w.arrivals))
		res.Unexpected += w.unexpect
		res.Duplicates += w.dups
		if w.closed {
			res.ClosedEarly++
		}
		if len(res.Problems) < 6 {
			res.Problems = append(res.Problems, w.problems...)
		}
		w.mu.Unlock()
	}
	res.Delivery, res.DeliveryFromSend = summarize(all), summarize(fromSend)
	res.ByClass = map[string]latSummary{}
	for class, lat := range byClass {
		res.ByClass[class] = summarize(lat)
	}
	res.DrainMS = ms(last - lastReturn)
	data, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Printf("%s%s\n", watchResultPrefix, data)

	if err := await("CLOSE"); err != nil {
		return err
	}
	cancel()
	readers.Wait()
	return nil
}

// BenchmarkListCacheVsEtcd compares a LIST of the 10,000 pods of the list
// fixture (and of the 1,000 of them labelled app=selected) served by the
// watch cache with the same LIST served by etcd: resourceVersion unset (a
// consistent read: the cache once it has caught up with etcd's current
// revision, as BenchmarkPodList does), resourceVersion=0 (the cache as it
// is), and resourceVersionMatch=Exact at the fixture's revision, which
// the cache cannot serve (as with a continue token, the store then reads
// etcd and decodes every item). One op is one LIST.
func BenchmarkListCacheVsEtcd(b *testing.B) {
	skipShort(b)
	srv := listServer.get(b)
	ns := srv.URL() + "/api/v1/namespaces/list-10k/pods"
	client := newClient()
	resp, err := client.Get(ns + "?limit=1")
	if err != nil {
		b.Fatal(err)
	}
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || list.Metadata.ResourceVersion == "" {
		b.Fatalf("list: %v, %q", err, list.Metadata.ResourceVersion)
	}
	exact := "resourceVersionMatch=Exact&resourceVersion=" + list.Metadata.ResourceVersion
	const selected = "labelSelector=app%3Dselected"
	for _, c := range []struct {
		name  string
		url   string
		items int
	}{
		{"cache", ns, 10000},
		{"cache-rv0", ns + "?resourceVersion=0", 10000},
		{"etcd", ns + "?" + exact, 10000},
		{"cache-selector1000", ns + "?" + selected, 1000},
		{"etcd-selector1000", ns + "?" + exact + "&" + selected, 1000},
	} {
		b.Run(c.name, func(b *testing.B) { benchList(b, c.url, c.items) })
	}
}
