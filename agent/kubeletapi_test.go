package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubelet waits until the agent's kubelet API listens.
func (e *env) kubelet() *kubeletServer {
	e.t.Helper()
	select {
	case <-e.agent.kubeletReady:
		return e.agent.kubelet
	case <-time.After(10 * time.Second):
		e.t.Fatal("the kubelet API does not listen")
		return nil
	}
}

// kubeletGet sends GET path to the agent's kubelet API as the admin.
func (e *env) kubeletGet(ctx context.Context, path string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.kubelet().url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := testserver.AdminKubeletHTTPClient().Do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

// kubeletGetText returns the status code and body of GET path.
func (e *env) kubeletGetText(path string) (int, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp := e.kubeletGet(ctx, path)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// waitNodeEndpoint waits until the Node advertises the agent's kubelet API:
// its Hostname address the listener's host, its kubelet port the
// listener's, and no kubelet-endpoint annotation (the API server never
// follows one).
func (e *env) waitNodeEndpoint(name string) *v1.Node {
	e.t.Helper()
	var node *v1.Node
	want := e.kubelet()
	e.poll(10*time.Second, "node "+name+" advertising "+want.url, func(ctx context.Context) (bool, error) {
		n, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = n
		_, annotated := n.Annotations[KubeletEndpointAnnotation]
		return !annotated && n.Status.DaemonEndpoints.KubeletEndpoint.Port == want.port &&
			slices.Contains(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: "127.0.0.1"}), nil
	})
	return node
}

func TestKubeletEndpointAdvertised(t *testing.T) {
	testserver.SkipShort(t) // a server and node agents: slow
	s := testserver.StartMemory(t)
	e := &env{t: t, client: s.Client}
	// A Node an earlier agent registered, with the annotation the API
	// server no longer follows: the agent adopts it and drops it.
	old := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Annotations: map[string]string{KubeletEndpointAnnotation: "http://192.0.2.1:1"}}}
	if _, err := s.Client.CoreV1().Nodes().Create(t.Context(), old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := e.startAgent(s.Config, fastConfig(2))
	for _, name := range []string{"node-1", "node-2"} {
		e.waitNodeEndpoint(name)
	}
	first := e.kubelet()
	u, err := url.Parse(first.url)
	if err != nil || u.Scheme != "https" || u.Hostname() != "127.0.0.1" || u.Port() != strconv.Itoa(int(first.port)) || first.port == 0 {
		t.Fatalf("advertised %q, port %d", first.url, first.port)
	}
	if code, body := e.kubeletGetText("/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	stop()

	// A new process listens on another port: registration moves the port
	// at once.
	stop = e.startAgent(s.Config, fastConfig(2))
	defer stop()
	if e.kubelet().url == first.url {
		t.Skip("the new agent got the same port")
	}
	for _, name := range []string{"node-1", "node-2"} {
		e.waitNodeEndpoint(name)
	}
}

func TestKubeletListenValidation(t *testing.T) {
	for _, tc := range []struct {
		listen, advertise, want, err string
	}{
		{listen: "0.0.0.0:10250", err: "every interface"},
		{listen: ":10250", err: "every interface"},
		{listen: "[::]:0", err: "every interface"},
		{listen: "nope", err: "kubelet listen address"},
		{listen: "0.0.0.0:0", advertise: "http://x", err: "want a host name or an IP address"},
		{listen: "0.0.0.0:0", advertise: "node.example", want: "node.example"},
		{listen: "0.0.0.0:0", advertise: "::1", want: "::1"},
		{listen: "localhost:0", want: "localhost"},
		{listen: "127.0.0.1:0", want: "127.0.0.1"},
	} {
		cfg, err := Config{KubeletListen: tc.listen, KubeletAdvertiseHost: tc.advertise}.complete()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s %s: %v", tc.listen, tc.advertise, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s %s: error %v, want %q", tc.listen, tc.advertise, err, tc.err)
		case tc.err == "" && cfg.KubeletAdvertiseHost != tc.want:
			t.Errorf("%s %s: advertised host %q, want %q", tc.listen, tc.advertise, cfg.KubeletAdvertiseHost, tc.want)
		}
	}
}

func TestContainerLogs(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	done := simplePod("done", v1.RestartPolicyNever, "sh", "-c", "echo hello; echo world")
	e.runPod(done, "node-1")
	e.waitPod(done, 10*time.Second, "Succeeded", phaseIs(v1.PodSucceeded))

	ts := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z `
	for _, tc := range []struct {
		query string
		want  string // a regexp of the whole body
	}{
		{"", "hello\nworld\n"},
		{"?tailLines=1", "world\n"},
		{"?tailLines=0", ""},
		{"?limitBytes=3", "hel"},
		{"?timestamps=true", ts + "hello\n" + ts + "world\n"},
		{"?sinceSeconds=3600&follow=false", "hello\nworld\n"},
		{"?sinceTime=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), ""},
		// Following a terminated container: its log, then the end.
		{"?follow=true", "hello\nworld\n"},
	} {
		code, body := e.kubeletGetText("/containerLogs/default/done/main" + tc.query)
		if code != http.StatusOK || !regexp.MustCompile(`^`+tc.want+`$`).MatchString(body) {
			t.Errorf("%s: %d %q, want %q", tc.query, code, body, tc.want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := e.kubeletGet(ctx, "/containerLogs/default/done/main")
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain" {
		t.Errorf("Content-Type %q", ct)
	}
}

func TestContainerLogsPrevious(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	pod := simplePod("crasher", v1.RestartPolicyAlways, "sh", "-c", "echo run; date; exit 1")
	e.runPod(pod, "node-1")
	e.waitPod(pod, 20*time.Second, "restarted", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 1 && cs[0].LastTerminationState.Terminated != nil
	})
	// The runtime's own record of that instance, as the response must
	// render it; the agent may have restarted the container again since
	// the status was read, so retry until both agree on the instance.
	rt := e.agent.byName["node-1"].runtime
	e.poll(20*time.Second, "the previous instance's log", func(ctx context.Context) (bool, error) {
		p, err := e.client.CoreV1().Pods("default").Get(ctx, "crasher", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
		if last == nil {
			return false, errors.New("no last state")
		}
		lines, err := rt.Logs(last.ContainerID)
		if err != nil {
			return false, err
		}
		var want strings.Builder
		for _, l := range lines {
			fmt.Fprintf(&want, "%s %s", l.Time.UTC().Format(runtime.TimestampFormat), l.Text)
		}
		code, body := e.kubeletGetText("/containerLogs/default/crasher/main?previous=true&timestamps=true")
		if code != http.StatusOK {
			return false, fmt.Errorf("previous: %d %q", code, body)
		}
		if !strings.Contains(body, " run\n") || body != want.String() {
			return false, fmt.Errorf("previous: %q, runtime has %q of %s", body, want.String(), last.ContainerID)
		}
		return true, nil
	})
	// The current instance (running, or terminated, or waiting in
	// back-off with the last state) has a log too.
	if code, body := e.kubeletGetText("/containerLogs/default/crasher/main"); code != http.StatusOK || !strings.HasPrefix(body, "run\n") {
		t.Errorf("current: %d %q", code, body)
	}
}

func TestContainerLogsErrors(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	fresh := simplePod("fresh", v1.RestartPolicyAlways)
	e.runPod(fresh, "node-1")
	e.waitPod(fresh, 10*time.Second, "Running", phaseIs(v1.PodRunning))

	initializing := simplePod("initializing", v1.RestartPolicyAlways)
	initializing.Spec.InitContainers = []v1.Container{{Name: "wait", Image: "busybox", Command: []string{"sleep", "3600"}}}
	e.runPod(initializing, "node-1")
	e.waitPod(initializing, 10*time.Second, "main waiting on PodInitializing", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "PodInitializing"
	})

	pull := simplePod("pull", v1.RestartPolicyAlways)
	pull.Spec.Containers[0].Image = "busybox:doesnotexist"
	e.runPod(pull, "node-1")
	e.waitPod(pull, 10*time.Second, "image pull failing", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && (cs[0].State.Waiting.Reason == "ErrImagePull" || cs[0].State.Waiting.Reason == "ImagePullBackOff")
	})

	for _, tc := range []struct {
		path string
		code int
		body string // or, for pull, a regexp
	}{
		{"/containerLogs/default/nope/main", 404, "pod \"nope\" does not exist\n"},
		{"/containerLogs/other/fresh/main", 404, "pod \"fresh\" does not exist\n"},
		{"/containerLogs/default/fresh/other", 404, "container \"other\" not found in pod \"fresh\"\n"},
		{"/containerLogs/default/fresh/main?previous=true", 400, `previous terminated container "main" in pod "fresh" not found`},
		{"/containerLogs/default/initializing/main", 400, `container "main" in pod "initializing" is waiting to start: PodInitializing`},
		{"/containerLogs/default/pull/main", 400, `container "main" in pod "pull" is waiting to start: (image can't be pulled|trying and failing to pull image)`},
		{"/containerLogs/default/fresh/main?tailLines=-1", 400, `invalid tailLines -1: must be greater than or equal to 0`},
		{"/containerLogs/default/fresh/main?tailLines=x", 400, `invalid tailLines "x": must be an integer`},
		{"/containerLogs/default/fresh/main?sinceSeconds=0", 400, `invalid sinceSeconds 0: must be greater than or equal to 1`},
		{"/containerLogs/default/fresh/main?limitBytes=0", 400, `invalid limitBytes 0: must be greater than or equal to 1`},
		{"/containerLogs/default/fresh/main?sinceTime=yesterday", 400, `invalid sinceTime "yesterday": must be an RFC 3339 time`},
		{"/containerLogs/default/fresh/main?follow=maybe", 400, `invalid follow "maybe": must be true or false`},
		{"/containerLogs/default/fresh/main?sinceSeconds=5&sinceTime=2025-01-01T00:00:00Z", 400, `at most one of sinceTime or sinceSeconds may be specified`},
	} {
		code, body := e.kubeletGetText(tc.path)
		if code != tc.code || !regexp.MustCompile("^"+tc.body+"$").MatchString(body) {
			t.Errorf("%s: %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
		}
	}
}

func TestValidateContainerLogStatus(t *testing.T) {
	term := func(id string) *v1.ContainerStateTerminated { return &v1.ContainerStateTerminated{ContainerID: id} }
	for _, tc := range []struct {
		name     string
		cs       v1.ContainerStatus
		previous bool
		id, err  string
	}{
		{name: "running", cs: v1.ContainerStatus{ContainerID: "sim://a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}, id: "sim://a"},
		{name: "terminated", cs: v1.ContainerStatus{State: v1.ContainerState{Terminated: term("sim://a")}}, id: "sim://a"},
		{name: "terminated without ID, last state", cs: v1.ContainerStatus{State: v1.ContainerState{Terminated: term("")}, LastTerminationState: v1.ContainerState{Terminated: term("sim://b")}}, id: "sim://b"},
		{name: "terminated without any ID", cs: v1.ContainerStatus{State: v1.ContainerState{Terminated: term("")}}, err: `container "c" in pod "p" is terminated`},
		{name: "waiting after a crash", cs: v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, LastTerminationState: v1.ContainerState{Terminated: term("sim://b")}}, id: "sim://b"},
		{name: "last state without ID", cs: v1.ContainerStatus{LastTerminationState: v1.ContainerState{Terminated: term("")}}, err: `container "c" in pod "p" is terminated`},
		{name: "previous", previous: true, cs: v1.ContainerStatus{ContainerID: "sim://a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}, LastTerminationState: v1.ContainerState{Terminated: term("sim://b")}}, id: "sim://b"},
		{name: "no previous", previous: true, cs: v1.ContainerStatus{ContainerID: "sim://a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}, err: `previous terminated container "c" in pod "p" not found`},
		{name: "ErrImagePull", cs: v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ErrImagePull"}}}, err: `container "c" in pod "p" is waiting to start: image can't be pulled`},
		{name: "ImagePullBackOff", cs: v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}, err: `container "c" in pod "p" is waiting to start: trying and failing to pull image`},
		{name: "ContainerCreating", cs: v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}, err: `container "c" in pod "p" is waiting to start: ContainerCreating`},
		{name: "no state", cs: v1.ContainerStatus{}, err: `container "c" in pod "p" is waiting to start - no logs yet`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cs.Name = "c"
			for _, st := range []v1.PodStatus{{ContainerStatuses: []v1.ContainerStatus{tc.cs}}, {InitContainerStatuses: []v1.ContainerStatus{tc.cs}}} {
				id, err := validateContainerLogStatus("p", &st, "c", tc.previous)
				if id != tc.id || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
					t.Errorf("got %q, %v; want %q, %q", id, err, tc.id, tc.err)
				}
			}
		})
	}
	if _, err := validateContainerLogStatus("p", &v1.PodStatus{}, "c", false); err == nil || err.Error() != `container "c" in pod "p" is not available` {
		t.Errorf("no status: %v", err)
	}
}

// TestContainerLogsFollow: a line written after the request arrives while
// the response is open, and the response ends when the container exits.
func TestContainerLogsFollow(t *testing.T) {
	e := start(t, fastConfig(1))
	e.waitNodeReady("node-1")
	pod := simplePod("talker", v1.RestartPolicyNever, "sh", "-c", "echo a; sleep 2; echo b")
	e.runPod(pod, "node-1")
	e.waitPod(pod, 10*time.Second, "Running", phaseIs(v1.PodRunning))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp := e.kubeletGet(ctx, "/containerLogs/default/talker/main?follow=true")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	r := bufio.NewReader(resp.Body)
	for _, want := range []string{"a\n", "b\n"} {
		line, err := r.ReadString('\n')
		if err != nil || line != want {
			t.Fatalf("read %q, %v; want %q", line, err, want)
		}
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Fatalf("after the exit: %q, %v", rest, err)
	}
}

// TestKubeletAPIStopsWithAgent: a followed stream ends when the agent
// stops, and Run returns only after the server is down.
func TestKubeletAPIStopsWithAgent(t *testing.T) {
	testserver.SkipShort(t) // a server and node agents: slow
	s := testserver.StartMemory(t)
	e := &env{t: t, client: s.Client}
	stop := e.startAgent(s.Config, fastConfig(1))
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	e.waitNodeReady("node-1")
	pod := simplePod("forever", v1.RestartPolicyAlways, "sh", "-c", "echo up; sleep 3600")
	e.runPod(pod, "node-1")
	e.waitPod(pod, 10*time.Second, "Running", phaseIs(v1.PodRunning))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp := e.kubeletGet(ctx, "/containerLogs/default/forever/main?follow=true")
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	url := e.kubelet().url
	stop()
	stopped = true
	if _, err := io.ReadAll(r); err != nil && ctx.Err() != nil {
		t.Fatalf("stream still open after the agent stopped: %v", err)
	}
	if resp, err := testserver.AdminKubeletHTTPClient().Get(url + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("kubelet API still serving after Run returned")
	}
}

// TestStatusViewWhileWriting: while a pods/status write is in flight the
// kubelet API reads the status being written, so a client that saw the
// write's watch event does not find the agent behind it.
func TestStatusViewWhileWriting(t *testing.T) {
	w := newPodWorker("u", nil)
	w.setPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "5"}, Status: v1.PodStatus{Phase: v1.PodPending}}, true)
	running := v1.PodStatus{Phase: v1.PodRunning}
	w.setWriting(&running)
	if pod, _ := w.statusView(); pod.Status.Phase != v1.PodRunning || pod.Name != "p" {
		t.Errorf("during the write: %q %q, want p Running", pod.Name, pod.Status.Phase)
	}
	if pod, _ := w.snapshot(); pod.Status.Phase != v1.PodPending {
		t.Errorf("the worker's own pod changed to %q", pod.Status.Phase)
	}
	w.setWriting(nil)
	if pod, _ := w.statusView(); pod.Status.Phase != v1.PodPending {
		t.Errorf("after a failed write: %q, want the last written Pending", pod.Status.Phase)
	}
}

// TestKubeletProfilingHandler: the kubelet API serves Go's profiles at
// /debug/pprof/ as the kubelet's profiling handler does (to whoever may
// nodes/proxy), and not when Config.DisableProfiling is set.
func TestKubeletProfilingHandler(t *testing.T) {
	testserver.SkipShort(t) // a server and node agents: slow
	s := testserver.StartMemory(t)
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("disabled=%v", disabled), func(t *testing.T) {
			e := &env{t: t, client: s.Client}
			cfg := fastConfig(1)
			cfg.DisableProfiling = disabled
			stop := e.startAgent(s.Config, cfg)
			defer stop()
			for path, want := range map[string]string{
				"/debug/pprof/":                  "goroutine",
				"/debug/pprof/heap?debug=1":      "heap profile:",
				"/debug/pprof/cmdline":           "",
				"/debug/pprof/goroutine?debug=1": "goroutine profile:",
			} {
				code, body := e.kubeletGetText(path)
				if disabled {
					if code != http.StatusNotFound {
						t.Errorf("GET %s with profiling off: %d, want 404", path, code)
					}
					continue
				}
				if code != http.StatusOK || !strings.Contains(body, want) {
					t.Errorf("GET %s: %d, body %.200q; want 200 with %q", path, code, body, want)
				}
			}
			// /metrics is served either way.
			if code, _ := e.kubeletGetText("/metrics"); code != http.StatusOK {
				t.Errorf("/metrics: %d", code)
			}
		})
	}
}
