package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childResult is what one child process measured.
type childResult struct {
	// Ready is when testserver.Start returned (wall clock, for the
	// parent's exec-to-ready figure); ReadyMS how long the call took.
	Ready   time.Time `json:"ready"`
	ReadyMS float64   `json:"readyMS"`
	// RSS (VmRSS) and live Go heap after start plus idleWait, and after
	// creating memPods pods plus idleWait.
	IdleRSSKiB      int64   `json:"idleRSSKiB"`
	IdleHeapKiB     int64   `json:"idleHeapKiB"`
	PodsRSSKiB      int64   `json:"podsRSSKiB"`
	PodsHeapKiB     int64   `json:"podsHeapKiB"`
	PeakRSSKiB      int64   `json:"peakRSSKiB"`
	CreatesPerSec   float64 `json:"createsPerSec"`
	GoroutinesIdle  int     `json:"goroutinesIdle"`
	GoroutinesAfter int     `json:"goroutinesAfter"`
	// Where the RSS after the pods goes, read when RSS is (before the
	// collection that measures the live heap): HeapInuse (live objects
	// plus garbage not yet collected), HeapIdle-HeapReleased (free spans
	// the runtime has not returned to the OS), StackInuse, and the
	// runtime's other memory (Sys minus heap and stacks).
	PodsHeapInuseKiB  int64 `json:"podsHeapInuseKiB"`
	PodsHeapRetainKiB int64 `json:"podsHeapRetainKiB"`
	PodsStackKiB      int64 `json:"podsStackKiB"`
	PodsRuntimeKiB    int64 `json:"podsRuntimeKiB"`
	PodsNextGCKiB     int64 `json:"podsNextGCKiB"`
	// PodsRSSFileKiB is the file-backed part of the RSS (RssFile: the
	// binary's pages and etcd's memory-mapped bbolt file).
	PodsRSSFileKiB int64 `json:"podsRSSFileKiB"`
	// PodsRSSBboltKiB is the part of it that is etcd's bbolt file.
	PodsRSSBboltKiB int64 `json:"podsRSSBboltKiB"`
	// ProtobufListMS and ProtobufListAgainMS time the protobuf LISTs of
	// the pods (with startupProtobufListEnv): the first computes every
	// pod's protobuf encoding, the second reuses them.
	ProtobufListMS      float64 `json:"protobufListMS,omitempty"`
	ProtobufListAgainMS float64 `json:"protobufListAgainMS,omitempty"`
}

// startupProfileEnv, when set to a directory, makes each BenchmarkStartup
// process write its heap profile there after the pods are created
// (heap-startup-<pid>.pprof), taken after a collection.
const startupProfileEnv = "COREKUBE_BENCH_STARTUP_PROFILE_DIR"

// startupProtobufListEnv, when set to 1, makes each BenchmarkStartup
// process LIST its 5,000 pods once in protobuf (as a protobuf informer's
// first LIST) after creating them, so that the RSS after the pods includes
// the watch cache's protobuf encodings.
const startupProtobufListEnv = "COREKUBE_BENCH_STARTUP_PROTOBUF_LIST"

const (
	childMode     = "startup-memory"
	childPrefix   = "BENCH-CHILD-RESULT "
	memPods       = 5000
	idleWait      = time.Second
	memNamespace  = "bench-memory"
	childDeadline = 2 * time.Minute
)

// BenchmarkStartup runs, per op, a fresh process (this test binary,
// re-executed) that starts a server on an empty directory
// (testserver.Start: embedded etcd + API server on 127.0.0.1:0) and
// reports how long Start took until ready, its RSS idle, and its RSS after
// creating 5,000 pods over HTTP (16 clients). RSS is VmRSS of that one
// process: the test binary, the API server and the embedded etcd
// together. The metrics are medians over the b.N processes; the benchmark
// log lists every run.
func BenchmarkStartup(b *testing.B) {
	skipShort(b)
	stopLazyServer() // nothing else running in this process while we measure
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var runs []childResult
	var execToReady []float64
	b.ResetTimer()
	for range b.N {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+childMode)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("child: %v\n%s%s", err, stdout.String(), stderr.String())
		}
		r, err := parseChild(stdout.Bytes())
		if err != nil {
			b.Fatalf("child: %v\n%s%s", err, stdout.String(), stderr.String())
		}
		runs = append(runs, r)
		execToReady = append(execToReady, ms(r.Ready.Sub(t0)))
	}
	b.StopTimer()
	// Medians: one slow start (a busy machine) should not move the figure.
	med := func(f func(r childResult) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return median(v)
	}
	mib := func(kib int64) float64 { return float64(kib) / 1024 }
	b.ReportMetric(med(func(r childResult) float64 { return r.ReadyMS }), "ready-ms")
	b.ReportMetric(median(execToReady), "exec-to-ready-ms")
	b.ReportMetric(med(func(r childResult) float64 { return mib(r.IdleRSSKiB) }), "idle-rss-MiB")
	b.ReportMetric(med(func(r childResult) float64 { return mib(r.IdleHeapKiB) }), "idle-heap-MiB")
	b.ReportMetric(med(func(r childResult) float64 { return mib(r.PodsRSSKiB) }), "5000pods-rss-MiB")
	b.ReportMetric(med(func(r childResult) float64 { return mib(r.PodsHeapKiB) }), "5000pods-heap-MiB")
	b.ReportMetric(med(func(r childResult) float64 { return mib(r.PeakRSSKiB) }), "peak-rss-MiB")
	for i, r := range runs {
		b.Logf("b.N=%d, process %d: ready %.1f ms (exec to ready %.1f ms), RSS idle %.1f MiB, after %d pods %.1f MiB (peak %.1f MiB), live heap %.1f / %.1f MiB, %.0f creates/s, goroutines %d / %d",
			b.N, i+1, r.ReadyMS, execToReady[i], mib(r.IdleRSSKiB), memPods, mib(r.PodsRSSKiB), mib(r.PeakRSSKiB),
			mib(r.IdleHeapKiB), mib(r.PodsHeapKiB), r.CreatesPerSec, r.GoroutinesIdle, r.GoroutinesAfter)
		if r.ProtobufListMS > 0 {
			b.Logf("  protobuf LIST of the %d pods: first %.1f ms, again %.1f ms", memPods, r.ProtobufListMS, r.ProtobufListAgainMS)
		}
		b.Logf("  after %d pods: heap in use %.1f MiB (live %.1f, the rest garbage), free heap not returned %.1f MiB, stacks %.1f MiB, runtime other %.1f MiB, GC goal %.1f MiB; file-backed RSS %.1f MiB (bbolt %.1f MiB)",
			memPods, mib(r.PodsHeapInuseKiB), mib(r.PodsHeapKiB), mib(r.PodsHeapRetainKiB), mib(r.PodsStackKiB), mib(r.PodsRuntimeKiB), mib(r.PodsNextGCKiB), mib(r.PodsRSSFileKiB), mib(r.PodsRSSBboltKiB))
	}
}

// median returns the median of v.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func parseChild(out []byte) (childResult, error) {
	var r childResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), childPrefix); ok {
			return r, json.Unmarshal([]byte(line), &r)
		}
	}
	return r, fmt.Errorf("no %q line in the child's output", strings.TrimSpace(childPrefix))
}

// runChild is the child process: it measures and prints one childResult.
func runChild(mode string) int {
	if mode == watchChildMode { // watch_test.go
		return runWatchChild()
	}
	if mode != childMode {
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childEnv, mode)
		return 2
	}
	r, err := measureChild()
	runCleanups()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	data, _ := json.Marshal(r)
	fmt.Printf("%s%s\n", childPrefix, data)
	return 0
}

func measureChild() (childResult, error) {
	var r childResult
	go func() {
		time.Sleep(childDeadline)
		fmt.Fprintln(os.Stderr, "child: deadline exceeded")
		os.Exit(3)
	}()

	t0 := time.Now()
	srv, err := startServer(newProcTB())
	if err != nil {
		return r, err
	}
	r.Ready = time.Now()
	r.ReadyMS = ms(r.Ready.Sub(t0))

	time.Sleep(idleWait)
	if r.IdleRSSKiB, _, err = procStatus(); err != nil {
		return r, err
	}
	r.IdleHeapKiB = liveHeapKiB()
	r.GoroutinesIdle = runtime.NumGoroutine()

	client := newClient()
	defer client.CloseIdleConnections()
	if err := createNamespace(client, srv.URL(), memNamespace); err != nil {
		return r, err
	}
	_, bodies := podBodies("mem", memPods, func(int) string { return "web" })
	url := srv.URL() + "/api/v1/namespaces/" + memNamespace + "/pods"
	ctx := context.Background()
	_, wall, err := runPool(concurrency, len(bodies), func(i int) error {
		return post(ctx, client, url, bodies[i], http.StatusCreated)
	})
	if err != nil {
		return r, err
	}
	r.CreatesPerSec = float64(len(bodies)) / wall.Seconds()
	bodies = nil
	if os.Getenv(startupProtobufListEnv) == "1" {
		for _, took := range []*float64{&r.ProtobufListMS, &r.ProtobufListAgainMS} {
			t := time.Now()
			if _, err := getAccept(client, url, protobufAccept); err != nil {
				return r, err
			}
			*took = ms(time.Since(t))
		}
	}
	client.CloseIdleConnections()

	time.Sleep(idleWait)
	if r.PodsRSSKiB, r.PeakRSSKiB, err = procStatus(); err != nil {
		return r, err
	}
	r.PodsRSSFileKiB, _ = procStatusField("RssFile")
	r.PodsRSSBboltKiB, _ = mappedRSSKiB("/member/snap/db")
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	r.PodsHeapInuseKiB = int64(m.HeapInuse / 1024)
	r.PodsHeapRetainKiB = int64((m.HeapIdle - m.HeapReleased) / 1024)
	r.PodsStackKiB = int64(m.StackInuse / 1024)
	r.PodsRuntimeKiB = int64((m.Sys - m.HeapSys - m.StackSys) / 1024)
	r.PodsNextGCKiB = int64(m.NextGC / 1024)
	r.PodsHeapKiB = liveHeapKiB()
	if dir := os.Getenv(startupProfileEnv); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-startup-%d.pprof", os.Getpid())))
		if err != nil {
			return r, err
		}
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return r, err
		}
	}
	r.GoroutinesAfter = runtime.NumGoroutine()
	return r, nil
}

// procStatus reads VmRSS and VmHWM (peak RSS) from /proc/self/status.
func procStatus() (rss, peak int64, err error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/self/status %s: %w", k, err)
		}
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			peak = n
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("no VmRSS in /proc/self/status")
	}
	return rss, peak, nil
}

// procStatusField reads one "<name>: <n> kB" line of /proc/self/status.
func procStatusField(name string) (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", name)
}

// mappedRSSKiB sums the Rss of the mappings of files whose path ends in
// suffix (/proc/self/smaps).
func mappedRSSKiB(suffix string) (int64, error) {
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	var total int64
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			in = len(f) >= 6 && strings.HasSuffix(f[5], suffix)
		case in && len(f) == 3 && f[0] == "Rss:":
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, err
			}
			total += n
		}
	}
	return total, nil
}

// liveHeapKiB is the Go heap still reachable after a collection, taken
// after RSS has been read (the collection does not change RSS at once).
func liveHeapKiB() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc / 1024)
}
