package bench

// The load of the scale benchmark beyond the initial creates: the probe
// loop of API calls whose latency is measured (ClusterLoader2's API
// responsiveness), the churn phase of its load test, the timed kubectl
// and informer LISTs at full size, and the apiserver's profiles.

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// scaleGroups is how many label groups (bench-group=N) the pods fall in:
// the probe's namespaced LIST selects one group, a few pods at any size.
const scaleGroups = 1000

func podGroup(i int) string { return strconv.Itoa(i % scaleGroups) }

// protobufClient is a client of kubeconfig speaking protobuf, as the
// controllers and the scheduler do, without a client-side rate limit.
func protobufClient(kubeconfig string) (kubernetes.Interface, error) {
	return newProtobufClient(kubeconfig, false)
}

// protobufWatchClient is protobufClient on a connection of its own, as a
// component's informers have: the bench's watches then do not share one
// HTTP/2 connection (and the server's writer for it) with its 16 create
// clients and the probe's LISTs of every pod.
func protobufWatchClient(kubeconfig string) (kubernetes.Interface, error) {
	return newProtobufClient(kubeconfig, true)
}

func newProtobufClient(kubeconfig string, ownConnection bool) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	if ownConnection {
		// client-go shares a transport between configs alike, unless
		// they dial by themselves.
		rc.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	rc.QPS = -1
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", kubeconfig, err)
	}
	return client, nil
}

// probe makes ClusterLoader2-like API calls in a loop until ctx ends,
// recording their latencies in rec: every round (period apart) a GET of a
// random pod, a LIST of one label group in the namespace, a PATCH of a
// pod's label and a GET of a random node; every listEvery rounds a LIST of
// all nodes and, with clusterPods, a cluster-wide LIST of all pods (CL2's
// LIST SLO is 30 s, and a LIST of every pod is the heaviest call a cluster
// answers: at 150,000 pods its decoding alone keeps a core of the bench
// busy for most of a minute, which is why the steady window leaves it to
// the reads phase).
type probe struct {
	client      kubernetes.Interface
	namespace   string
	pick        func() string // the name of a pod, likely existing
	nodes       int
	rec         *latencyRecorder
	period      time.Duration
	listEvery   int
	clusterPods bool
}

func (p *probe) run(ctx context.Context) {
	tick := time.NewTicker(p.period)
	defer tick.Stop()
	for round := 0; ; round++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p.round(ctx, round)
	}
}

func (p *probe) round(ctx context.Context, round int) {
	pods := p.client.CoreV1().Pods(p.namespace)
	if name := p.pick(); name != "" {
		start := time.Now()
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		p.done(ctx, callKey{"GET", "pods", "resource"}, start, err)

		start = time.Now()
		patch := fmt.Sprintf(`{"metadata":{"labels":{"bench-probe":"%d"}}}`, round)
		_, err = pods.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		p.done(ctx, callKey{"PATCH", "pods", "resource"}, start, err)
	}
	start := time.Now()
	_, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "bench-group=" + strconv.Itoa(rand.IntN(scaleGroups))})
	p.done(ctx, callKey{"LIST", "pods", "namespace"}, start, err)

	start = time.Now()
	_, err = p.client.CoreV1().Nodes().Get(ctx, "node-"+strconv.Itoa(1+rand.IntN(p.nodes)), metav1.GetOptions{})
	p.done(ctx, callKey{"GET", "nodes", "resource"}, start, err)

	if round%p.listEvery == 0 {
		start = time.Now()
		_, err = p.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		p.done(ctx, callKey{"LIST", "nodes", "cluster"}, start, err)
		if p.clusterPods {
			p.listAllPods(ctx)
		}
	}
}

// listAllPods is a cluster-wide LIST of every pod, recorded.
func (p *probe) listAllPods(ctx context.Context) {
	start := time.Now()
	_, err := p.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	p.done(ctx, callKey{"LIST", "pods", "cluster"}, start, err)
}

// done records a call unless the probe was stopped in the middle of it;
// a pod deleted by the churn since it was picked is not a failure.
func (p *probe) done(ctx context.Context, k callKey, start time.Time, err error) {
	if ctx.Err() != nil || apierrors.IsNotFound(err) {
		return
	}
	p.rec.observe(k, start, err)
}

// churn deletes n of the existing pods and creates n new ones, paced
// evenly over d, as ClusterLoader2's load test replaces its pods. The new
// pods are numbered from next; their creates are timed in rec and their
// returns fed to startup.
func churn(ctx context.Context, client kubernetes.Interface, cfg scaleConfig, victims []string, next int, d time.Duration, rec *latencyRecorder, startup *podStartup) error {
	n := len(victims)
	if n == 0 {
		return nil
	}
	interval := d / time.Duration(n)
	tick := time.NewTicker(max(interval, time.Millisecond))
	defer tick.Stop()
	pods := client.CoreV1().Pods(scaleNamespace)
	// The calls run on a few workers, so that one slow call does not
	// hold back the pace.
	type job struct {
		victim string
		i      int
	}
	jobs := make(chan job)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				startup.deletes(scaleNamespace + "/" + j.victim)
				start := time.Now()
				err := pods.Delete(ctx, j.victim, metav1.DeleteOptions{})
				rec.observe(callKey{"DELETE", "pods", "resource"}, start, err)
				if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
					select {
					case errc <- fmt.Errorf("churn: delete %s: %w", j.victim, err):
					default:
					}
				}
				pod := scalePod(j.i, cfg)
				start = time.Now()
				_, err = pods.Create(ctx, pod, metav1.CreateOptions{})
				rec.observe(callKey{"POST", "pods", "resource"}, start, err)
				if err == nil {
					startup.created(scaleNamespace+"/"+pod.Name, time.Now())
				} else if ctx.Err() == nil {
					select {
					case errc <- fmt.Errorf("churn: create %s: %w", pod.Name, err):
					default:
					}
				}
			}
		}()
	}
	var err error
loop:
	for k, v := range victims {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		case err = <-errc:
			break loop
		case <-tick.C:
		}
		select {
		case jobs <- job{victim: v, i: next + k}:
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return err
}

// timeKubectl runs `kubectl get pods -A` (its default: pages of 500)
// with its output thrown away and returns how long it took.
func timeKubectl(ctx context.Context, kubeconfig string, extra ...string) (time.Duration, error) {
	kubectl := "/usr/bin/kubectl"
	if _, err := os.Stat(kubectl); err != nil {
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			return 0, fmt.Errorf("kubectl: %w", err)
		}
	}
	args := append([]string{"--kubeconfig", kubeconfig, "get", "pods", "-A"}, extra...)
	cmd := exec.CommandContext(ctx, kubectl, args...)
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	cmd.Stdout = devnull
	start := time.Now()
	out, err := func() ([]byte, error) {
		var stderr limitedBuffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		return stderr.b, err
	}()
	if err != nil {
		return 0, fmt.Errorf("kubectl get pods -A: %w: %s", err, out)
	}
	return time.Since(start), nil
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// timeInformerSync starts a pod informer on all namespaces over protobuf
// (as the controllers' shared informers) and returns how long its initial
// LIST and sync took and how many pods it holds; it is stopped after.
func timeInformerSync(ctx context.Context, kubeconfig string) (time.Duration, int, error) {
	client, err := protobufClient(kubeconfig)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	inf := factory.Core().V1().Pods().Informer()
	start := time.Now()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return 0, 0, fmt.Errorf("pod informer did not sync: %w", ctx.Err())
	}
	return time.Since(start), len(inf.GetStore().ListKeys()), nil
}

// saveProfiles writes the apiserver's heap profile and a CPU profile of
// seconds to dir/<phase>-heap.pb.gz and dir/<phase>-cpu.pb.gz. The
// scheduler, controllers and agents serve no /debug/pprof.
func saveProfiles(ctx context.Context, client kubernetes.Interface, dir, phase string, seconds int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("profiles: %w", err)
	}
	rest := client.Discovery().RESTClient()
	heap, err := rest.Get().AbsPath("/debug/pprof/heap").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("heap profile (%s): %w", phase, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "apiserver-"+phase+"-heap.pb.gz"), heap, 0o644); err != nil {
		return err
	}
	return saveCPUProfile(ctx, client, dir, phase, seconds)
}

// saveCPUProfile saves a CPU profile of the API server over seconds.
func saveCPUProfile(ctx context.Context, client kubernetes.Interface, dir, phase string, seconds int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("profiles: %w", err)
	}
	cpu, err := client.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("cpu profile (%s): %w", phase, err)
	}
	return os.WriteFile(filepath.Join(dir, "apiserver-"+phase+"-cpu.pb.gz"), cpu, 0o644)
}

// componentProfiling is, with a profile directory, where the scheduler and
// the controllers serve /debug/pprof/: each gets --secure-port on a free
// loopback port (found here, so a port taken meanwhile fails its start),
// and saveHeaps fetches their heap profiles. Without a directory they serve nothing, as before: other
// runs on the machine may hold kube's ports.
type componentProfiling struct {
	ports map[string]string // by process name
}

// args are the serving flags of the process name.
func (cp *componentProfiling) args(b interface{ Fatal(...any) }, name string) []string {
	if cp == nil {
		return []string{"--secure-port=0"}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cp.ports[name] = port
	// The heap profile is served to anyone on the loopback port (the
	// admin kubeconfig's client certificate is not one these processes
	// verify without a --client-ca-file).
	return []string{"--bind-address=127.0.0.1", "--secure-port=" + port,
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/debug/pprof/heap"}
}

// saveHeaps writes each component's heap profile to dir as
// NAME-PHASE-heap.pb.gz.
func (cp *componentProfiling) saveHeaps(ctx context.Context, dir, phase string) error {
	if cp == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("component profiles: %w", err)
	}
	// The components serve a self-signed certificate.
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for name, port := range cp.ports {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+port+"/debug/pprof/heap", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("%s heap profile (%s): %w", name, phase, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s heap profile (%s): %d %v %.200s", name, phase, resp.StatusCode, err, body)
		}
		if err := os.WriteFile(filepath.Join(dir, name+"-"+phase+"-heap.pb.gz"), body, 0o644); err != nil {
			return err
		}
	}
	return nil
}
