package pleg

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeRuntime returns whatever the test last set.
type fakeRuntime struct {
	pods []runtime.Pod
	err  error
}

func (f *fakeRuntime) ListPods(context.Context) ([]runtime.Pod, error) { return f.pods, f.err }

// pod builds a pod from "id=state" pairs.
func pod(uid string, containers ...string) runtime.Pod {
	p := runtime.Pod{ID: types.UID(uid)}
	for _, c := range containers {
		id, state, _ := strings.Cut(c, "=")
		p.Containers = append(p.Containers, runtime.Container{ID: id, State: runtime.ContainerState(state)})
	}
	return p
}

func drain(ch chan *PodLifecycleEvent) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, string(e.ID)+"/"+e.Data+"/"+string(e.Type))
		default:
			sort.Strings(out)
			return out
		}
	}
}

func TestRelist(t *testing.T) {
	// Each step is one relist; want are the events it sends (sorted).
	type step struct {
		pods []runtime.Pod
		want []string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "start, die, remove", steps: []step{
			{pods: []runtime.Pod{pod("p1", "c1=running")}, want: []string{"p1/c1/ContainerStarted"}},
			{pods: []runtime.Pod{pod("p1", "c1=running")}, want: nil},
			{pods: []runtime.Pod{pod("p1", "c1=exited")}, want: []string{"p1/c1/ContainerDied"}},
			{pods: []runtime.Pod{pod("p1")}, want: []string{"p1/c1/ContainerRemoved"}},
			{pods: nil, want: nil},
		}},
		{name: "running container vanishes: died and removed", steps: []step{
			{pods: []runtime.Pod{pod("p1", "c1=running")}, want: []string{"p1/c1/ContainerStarted"}},
			{pods: nil, want: []string{"p1/c1/ContainerDied", "p1/c1/ContainerRemoved"}},
		}},
		{name: "created is unknown: ContainerChanged filtered out", steps: []step{
			{pods: []runtime.Pod{pod("p1", "c1=created")}, want: nil},
			{pods: []runtime.Pod{pod("p1", "c1=running")}, want: []string{"p1/c1/ContainerStarted"}},
			{pods: []runtime.Pod{pod("p1", "c1=unknown")}, want: nil},
		}},
		{name: "exited at first sight", steps: []step{
			{pods: []runtime.Pod{pod("p1", "c1=exited")}, want: []string{"p1/c1/ContainerDied"}},
		}},
		{name: "restart: new container started, old one removed", steps: []step{
			{pods: []runtime.Pod{pod("p1", "c1=running")}, want: []string{"p1/c1/ContainerStarted"}},
			{pods: []runtime.Pod{pod("p1", "c1=exited")}, want: []string{"p1/c1/ContainerDied"}},
			{pods: []runtime.Pod{pod("p1", "c1=exited", "c2=running")}, want: []string{"p1/c2/ContainerStarted"}},
			{pods: []runtime.Pod{pod("p1", "c2=running")}, want: []string{"p1/c1/ContainerRemoved"}},
		}},
		{name: "two pods independent", steps: []step{
			{pods: []runtime.Pod{pod("p1", "a=running"), pod("p2", "b=running")}, want: []string{"p1/a/ContainerStarted", "p2/b/ContainerStarted"}},
			{pods: []runtime.Pod{pod("p1", "a=running"), pod("p2", "b=exited")}, want: []string{"p2/b/ContainerDied"}},
			{pods: []runtime.Pod{pod("p1", "a=exited")}, want: []string{"p1/a/ContainerDied", "p2/b/ContainerRemoved"}},
		}},
		{name: "missed a whole lifetime between relists", steps: []step{
			{pods: []runtime.Pod{pod("p1")}, want: nil},
			{pods: []runtime.Pod{pod("p1", "c1=exited")}, want: []string{"p1/c1/ContainerDied"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := &fakeRuntime{}
			clk := clocktesting.NewFakeClock(time.Now())
			g := New(rt, Options{Clock: clk})
			for i, s := range tc.steps {
				rt.pods = s.pods
				g.Relist(context.Background())
				if got := drain(g.Watch()); !reflect.DeepEqual(got, s.want) {
					t.Fatalf("step %d: events %v, want %v", i, got, s.want)
				}
				// The listing is let go of between relists (it holds
				// every pod of the node).
				if g.pods != nil {
					t.Fatalf("step %d: the runtime's listing is kept after the relist", i)
				}
			}
			if len(g.podRecords) > len(tc.steps[len(tc.steps)-1].pods) {
				t.Errorf("%d pod records kept for %d pods", len(g.podRecords), len(tc.steps[len(tc.steps)-1].pods))
			}
		})
	}
}

func TestGenerateEvents(t *testing.T) {
	states := []plegContainerState{plegContainerRunning, plegContainerExited, plegContainerUnknown, plegContainerNonExistent}
	want := map[[2]plegContainerState][]PodLifeCycleEventType{
		{plegContainerNonExistent, plegContainerRunning}: {ContainerStarted},
		{plegContainerExited, plegContainerRunning}:      {ContainerStarted},
		{plegContainerUnknown, plegContainerRunning}:     {ContainerStarted},
		{plegContainerNonExistent, plegContainerExited}:  {ContainerDied},
		{plegContainerRunning, plegContainerExited}:      {ContainerDied},
		{plegContainerUnknown, plegContainerExited}:      {ContainerDied},
		{plegContainerRunning, plegContainerUnknown}:     {ContainerChanged},
		{plegContainerExited, plegContainerUnknown}:      {ContainerChanged},
		{plegContainerNonExistent, plegContainerUnknown}: {ContainerChanged},
		{plegContainerExited, plegContainerNonExistent}:  {ContainerRemoved},
		{plegContainerRunning, plegContainerNonExistent}: {ContainerDied, ContainerRemoved},
		{plegContainerUnknown, plegContainerNonExistent}: {ContainerDied, ContainerRemoved},
	}
	for _, from := range states {
		for _, to := range states {
			var got []PodLifeCycleEventType
			for _, e := range generateEvents("p", "c", from, to) {
				got = append(got, e.Type)
			}
			if w := want[[2]plegContainerState{from, to}]; !reflect.DeepEqual(got, w) {
				t.Errorf("%s → %s: %v, want %v", from, to, got, w)
			}
		}
	}
}

func TestHealthy(t *testing.T) {
	rt := &fakeRuntime{}
	clk := clocktesting.NewFakeClock(time.Now())
	g := New(rt, Options{Clock: clk})
	if ok, err := g.Healthy(); ok || err == nil || err.Error() != "pleg has yet to be successful" {
		t.Fatalf("before any relist: %v %v", ok, err)
	}
	g.Relist(context.Background())
	if ok, err := g.Healthy(); !ok || err != nil {
		t.Fatalf("after relist: %v %v", ok, err)
	}
	rt.err = errors.New("runtime down")
	clk.Step(3 * time.Minute)
	g.Relist(context.Background()) // fails: relist time stays
	if ok, _ := g.Healthy(); !ok {
		t.Fatal("unhealthy at exactly the threshold")
	}
	clk.Step(time.Second)
	ok, err := g.Healthy()
	if ok || err == nil || err.Error() != "pleg was last seen active 3m1s ago; threshold is 3m0s" {
		t.Fatalf("past the threshold: %v %v", ok, err)
	}
	rt.err = nil
	g.Relist(context.Background())
	if ok, _ := g.Healthy(); !ok {
		t.Fatal("not healthy again after a good relist")
	}
}

func TestChannelFullDropsEvents(t *testing.T) {
	rt := &fakeRuntime{pods: []runtime.Pod{pod("p1", "a=running", "b=running")}}
	ch := make(chan *PodLifecycleEvent, 1)
	g := New(rt, Options{Events: ch, Clock: clocktesting.NewFakeClock(time.Now())})
	g.Relist(context.Background()) // must not block
	if got := len(drain(ch)); got != 1 {
		t.Fatalf("%d events through a channel of 1", got)
	}
}

func TestRun(t *testing.T) {
	rt := &fakeRuntime{pods: []runtime.Pod{pod("p1", "a=running")}}
	clk := clocktesting.NewFakeClock(time.Now())
	g := New(rt, Options{Clock: clk, RelistPeriod: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- g.Run(ctx) }()
	if e := <-g.Watch(); e.Type != ContainerStarted {
		t.Fatalf("first event %v", e.Type)
	}
	// Poll (with a deadline) until the loop waits on its ticker, then tick.
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Run never waited on its ticker")
		}
		time.Sleep(time.Millisecond)
	}
	rt2 := []runtime.Pod{pod("p1", "a=exited")}
	g.mu.Lock()
	rt.pods = rt2
	g.mu.Unlock()
	clk.Step(time.Second)
	if e := <-g.Watch(); e.Type != ContainerDied {
		t.Fatalf("second event %v", e.Type)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestCountsAndMetrics: each successful relist counts the pods with a
// running sandbox and the containers by state (a state shown from the
// first relist that saw it, at 0 later); the relists' duration is observed
// every time, the interval from the second on (in the PLEG's clock),
// discarded events are counted; a failed relist counts nothing.
func TestCountsAndMetrics(t *testing.T) {
	withSandbox := func(p runtime.Pod) runtime.Pod { p.SandboxReady = true; return p }
	rt := &fakeRuntime{pods: []runtime.Pod{
		withSandbox(pod("p1", "a=running", "b=exited")),
		withSandbox(pod("p2", "c=running")),
		pod("p3", "d=exited"), // sandbox stopped
	}}
	clk := clocktesting.NewFakeClock(time.Now())
	m := &Metrics{
		RelistDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "d"}),
		RelistInterval: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "i"}),
		DiscardEvents:  prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}),
	}
	g := New(rt, Options{Clock: clk, Metrics: m, Events: make(chan *PodLifecycleEvent, 2), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if c := g.Counts(); c != (Counts{}) {
		t.Fatalf("counts before a relist: %+v", c)
	}
	g.Relist(context.Background())
	// 4 events (a, b, c, d) into a channel of 2.
	var discarded dto.Metric
	if err := m.DiscardEvents.Write(&discarded); err != nil {
		t.Fatal(err)
	}
	if got := discarded.Counter.GetValue(); got != 2 {
		t.Errorf("discarded events %v, want 2", got)
	}
	drain(g.Watch())
	// created, running, exited, unknown
	want := Counts{RunningPods: 2, Containers: [4]int{0, 2, 2, 0}, Seen: [4]bool{false, true, true, false}}
	if c := g.Counts(); c != want {
		t.Fatalf("counts %+v, want %+v", c, want)
	}
	clk.Step(2 * time.Second)
	rt.pods = []runtime.Pod{withSandbox(pod("p1", "a=created"))}
	g.Relist(context.Background())
	want = Counts{RunningPods: 1, Containers: [4]int{1, 0, 0, 0}, Seen: [4]bool{true, true, true, false}}
	if c := g.Counts(); c != want {
		t.Fatalf("counts %+v, want %+v", c, want)
	}
	rt.err = errors.New("runtime down")
	g.Relist(context.Background())
	if c := g.Counts(); c != want {
		t.Fatalf("a failed relist changed the counts: %+v", c)
	}

	hist := func(o prometheus.Observer) *dto.Histogram {
		var out dto.Metric
		if err := o.(prometheus.Metric).Write(&out); err != nil {
			t.Fatal(err)
		}
		return out.Histogram
	}
	if n := hist(m.RelistDuration).GetSampleCount(); n != 3 {
		t.Errorf("relist durations observed %d times, want 3", n)
	}
	// The second relist, 2s after the first; the failed one, 2s after the
	// second success (the clock did not move).
	if h := hist(m.RelistInterval); h.GetSampleCount() != 2 || h.GetSampleSum() != 2 {
		t.Errorf("relist intervals: %d observed, sum %v; want 2, 2s", h.GetSampleCount(), h.GetSampleSum())
	}
}
