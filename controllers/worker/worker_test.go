package worker

import (
	"context"
	"errors"
	"github.com/corekube/corekube/test/logbuf"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fastQueue retries almost at once, so that the tests do not wait for
// the default back-off.
func fastQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLoopOutcomes: each outcome of a sync leads to the queue operation
// a controller expects.
func TestLoopOutcomes(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name string
		// sync is called with the attempt number (1 for the first).
		sync func(attempt int) (Result, error)
		// wantAttempts is how many syncs happen before the item settles.
		wantAttempts int
		wantFailures []string // what OnError saw
		wantLog      string   // a substring of the logs
	}{
		{name: "success is synced once", wantAttempts: 1,
			sync: func(int) (Result, error) { return Result{}, nil }},
		{name: "an error is retried rate-limited until it succeeds", wantAttempts: 3, wantFailures: []string{"boom", "boom"},
			sync: func(n int) (Result, error) {
				if n < 3 {
					return Result{}, errBoom
				}
				return Result{}, nil
			}},
		{name: "a panic is logged with the item and retried", wantAttempts: 2, wantLog: "item=key",
			sync: func(n int) (Result, error) {
				if n == 1 {
					panic("kaboom")
				}
				return Result{}, nil
			}},
		{name: "After requeues a successful item", wantAttempts: 2,
			sync: func(n int) (Result, error) {
				if n == 1 {
					return After(time.Millisecond), nil
				}
				return Result{}, nil
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs logbuf.Buffer
			var attempts atomic.Int32
			var mu sync.Mutex
			var failures []string
			q := fastQueue()
			l := &Loop[string]{Name: "test", Queue: q, Workers: 2, Log: slog.New(slog.NewTextHandler(&logs, nil)),
				Sync: func(_ context.Context, item string) (Result, error) {
					return tc.sync(int(attempts.Add(1)))
				},
				OnError: func(item string, err error) {
					mu.Lock()
					defer mu.Unlock()
					failures = append(failures, err.Error())
				}}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			if err := l.Start(ctx, &wg); err != nil {
				t.Fatal(err)
			}
			defer func() { cancel(); wg.Wait() }()
			q.Add("key")
			waitFor(t, "the attempts", func() bool { return int(attempts.Load()) >= tc.wantAttempts })
			// Settled: nothing queued, nothing being processed, no
			// failures remembered.
			waitFor(t, "the queue to settle", func() bool { return q.Len() == 0 && q.NumRequeues("key") == 0 })
			if got := int(attempts.Load()); got != tc.wantAttempts {
				t.Errorf("attempts %d, want %d", got, tc.wantAttempts)
			}
			mu.Lock()
			if strings.Join(failures, ",") != strings.Join(tc.wantFailures, ",") {
				t.Errorf("failures %q, want %q", failures, tc.wantFailures)
			}
			mu.Unlock()
			if tc.wantLog != "" {
				out := logs.String()
				for _, want := range []string{tc.wantLog, "panic=kaboom", "stack=", "worker_test.go"} {
					if !strings.Contains(out, want) {
						t.Errorf("log lacks %q:\n%s", want, out)
					}
				}
			}
		})
	}
}

// TestLoopStopsWithContext: when ctx ends, every worker returns (even one
// in the middle of a sync, once the sync returns) and Run returns.
func TestLoopStopsWithContext(t *testing.T) {
	q := fastQueue()
	var running atomic.Int32
	l := &Loop[string]{Name: "test", Queue: q, Workers: 4, Log: quiet(),
		Sync: func(ctx context.Context, _ string) (Result, error) {
			running.Add(1)
			<-ctx.Done()
			return Result{}, ctx.Err()
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	q.Add("a")
	q.Add("b")
	waitFor(t, "two syncs to run", func() bool { return running.Load() == 2 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	if !q.ShuttingDown() {
		t.Error("the queue was not shut down")
	}
	// An error once ctx ended is not retried.
	if n := q.NumRequeues("a"); n != 0 {
		t.Errorf("a was requeued %d times after ctx ended", n)
	}
}

// TestStartTwice: a Loop and a Once refuse a second start.
func TestStartTwice(t *testing.T) {
	l := &Loop[string]{Name: "test", Queue: fastQueue(), Log: quiet(),
		Sync: func(context.Context, string) (Result, error) { return Result{}, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if err := l.Start(ctx, &wg); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(ctx, &wg); !errors.Is(err, ErrStarted) || err.Error() != "test: already started" {
		t.Errorf("second Start: %v", err)
	}
	if err := l.Run(ctx); !errors.Is(err, ErrStarted) {
		t.Errorf("Run after Start: %v", err)
	}
	cancel()
	wg.Wait()

	var o Once
	if err := o.Start("scheduler"); err != nil {
		t.Fatal(err)
	}
	if err := o.Start("scheduler"); err == nil || err.Error() != "scheduler: already started" {
		t.Errorf("second Once.Start: %v", err)
	}
}

// TestEvery: f runs at once, then each period within the jitter bounds
// measured from the end of the previous call; a panic does not stop it;
// ctx ends it.
func TestEvery(t *testing.T) {
	const period = time.Minute
	tests := []struct {
		name   string
		jitter float64
	}{
		{"no jitter", 0},
		{"10% jitter", 0.1},
		{"100% jitter", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Unix(0, 0))
			calls := make(chan time.Time, 100)
			var n atomic.Int32
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				Every(ctx, clk, quiet(), "test", period, tc.jitter, func(context.Context) {
					calls <- clk.Now()
					if n.Add(1) == 2 {
						panic("second call panics")
					}
				})
			}()
			last := <-calls
			if !last.Equal(time.Unix(0, 0)) {
				t.Fatalf("first call at %v, want at once", last)
			}
			for i := 0; i < 5; i++ {
				// Step one second at a time until the next call; it must
				// come no sooner than period and no later than
				// period*(1+jitter).
				maxWait := time.Duration(float64(period) * (1 + tc.jitter))
				var got time.Time
			step:
				for {
					waitFor(t, "the timer", clk.HasWaiters)
					clk.Step(time.Second)
					select {
					case got = <-calls:
						break step
					default:
					}
					if clk.Since(last) > maxWait+time.Second {
						t.Fatalf("call %d not made within %v", i+2, maxWait)
					}
				}
				if d := got.Sub(last); d < period || d > maxWait {
					t.Errorf("call %d after %v, want within [%v, %v]", i+2, d, period, maxWait)
				}
				last = got
			}
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Every did not return after ctx ended")
			}
		})
	}
}

// TestTick: f runs once per period on the ticker, not at once; a panic
// does not stop it; ctx ends it.
func TestTick(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	calls := make(chan time.Time, 100)
	var n atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Tick(ctx, clk, quiet(), "test", time.Minute, func(context.Context) {
			calls <- clk.Now()
			if n.Add(1) == 1 {
				panic("first call panics")
			}
		})
	}()
	waitFor(t, "the ticker", clk.HasWaiters)
	select {
	case c := <-calls:
		t.Fatalf("called at %v before a period passed", c)
	default:
	}
	for i := 1; i <= 3; i++ {
		clk.Step(time.Minute)
		select {
		case c := <-calls:
			if want := time.Unix(0, 0).Add(time.Duration(i) * time.Minute); !c.Equal(want) {
				t.Errorf("call %d at %v, want %v", i, c, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d not made", i)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Tick did not return after ctx ended")
	}
}

// TestRecover: a panic is logged with the item and onPanic called; no
// panic calls nothing.
func TestRecover(t *testing.T) {
	var logs logbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	called := 0
	func() {
		defer Recover(log, "scheduler", "ns/pod", func() { called++ })
	}()
	if called != 0 || logs.String() != "" {
		t.Fatalf("without a panic: called %d, logs %q", called, logs.String())
	}
	func() {
		defer Recover(log, "scheduler", "ns/pod", func() { called++ })
		panic("bad")
	}()
	if called != 1 {
		t.Errorf("onPanic called %d times", called)
	}
	for _, want := range []string{"loop=scheduler", "item=ns/pod", "panic=bad", "stack="} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q: %s", want, logs.String())
		}
	}
}

// TestOnceRun checks the frame Run gives a Start: body's error is
// returned, and by then body's context has ended, shutDown has run and
// the goroutines body started have returned; a second Run is refused.
func TestOnceRun(t *testing.T) {
	var o Once
	boom := errors.New("boom")
	var shutDowns atomic.Int32
	var goroutineDone atomic.Bool
	var bodyCtx context.Context
	err := o.Run(context.Background(), "test component", func() { shutDowns.Add(1) }, func(ctx context.Context, wg *sync.WaitGroup) error {
		bodyCtx = ctx
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ctx.Done() // returns only once Run cancels ctx
			goroutineDone.Store(true)
		}()
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want body's error", err)
	}
	if bodyCtx.Err() == nil {
		t.Error("body's context has not ended after Run returned")
	}
	if got := shutDowns.Load(); got != 1 {
		t.Errorf("shutDown ran %d times, want 1", got)
	}
	if !goroutineDone.Load() {
		t.Error("a goroutine body started had not returned when Run did")
	}

	ran := false
	err = o.Run(context.Background(), "test component", func() {}, func(context.Context, *sync.WaitGroup) error {
		ran = true
		return nil
	})
	if !errors.Is(err, ErrStarted) || !strings.Contains(err.Error(), "test component") || ran {
		t.Errorf("second Run = %v (body ran: %v), want ErrStarted naming the component and no body", err, ran)
	}
}
