package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/agent/runtime"
)

// readLogs reads the whole log (not following).
func readLogs(t *testing.T, r *Runtime, id string, opts runtime.LogOptions) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.ReadLogs(context.Background(), id, opts, &b); err != nil {
		t.Fatalf("ReadLogs: %v", err)
	}
	return b.String()
}

func TestReadLogs(t *testing.T) {
	r, clk := setup(t)
	// Three lines at 0s, 1s and 2s, then a partial line and its end at 3s
	// (one write), then a partial line at 4s; exits at 4s.
	id := start(t, r, []string{"sh", "-c", `echo one; sleep 1; echo two; sleep 1; echo three; sleep 1; printf 'four-a'; printf 'four-b\n'; sleep 1; printf 'five'`}, 0)
	clk.Step(10 * time.Second)
	ts := func(d time.Duration) string { return t0.Add(d).Format(runtime.TimestampFormat) }
	tests := []struct {
		name string
		opts runtime.LogOptions
		want string
	}{
		{name: "all", want: "one\ntwo\nthree\nfour-afour-b\nfive"},
		{name: "tail 2", opts: runtime.LogOptions{TailLines: ptr[int64](2)}, want: "four-b\nfive"},
		{name: "tail 0", opts: runtime.LogOptions{TailLines: ptr[int64](0)}, want: ""},
		{name: "tail more than kept", opts: runtime.LogOptions{TailLines: ptr[int64](100)}, want: "one\ntwo\nthree\nfour-afour-b\nfive"},
		{name: "since", opts: runtime.LogOptions{Since: t0.Add(2 * time.Second)}, want: "three\nfour-afour-b\nfive"},
		{name: "since between lines", opts: runtime.LogOptions{Since: t0.Add(1500 * time.Millisecond)}, want: "three\nfour-afour-b\nfive"},
		{name: "since and tail", opts: runtime.LogOptions{Since: t0.Add(time.Second), TailLines: ptr[int64](4)}, want: "three\nfour-afour-b\nfive"},
		{name: "limitBytes cuts a line", opts: runtime.LogOptions{LimitBytes: 6}, want: "one\ntw"},
		{name: "limitBytes on a line end", opts: runtime.LogOptions{LimitBytes: 4}, want: "one\n"},
		{name: "limitBytes beyond the log", opts: runtime.LogOptions{LimitBytes: 1000}, want: "one\ntwo\nthree\nfour-afour-b\nfive"},
		{
			name: "timestamps, once per line",
			opts: runtime.LogOptions{Timestamps: true, TailLines: ptr[int64](4)},
			want: ts(2*time.Second) + " three\n" + ts(3*time.Second) + " four-afour-b\n" + ts(4*time.Second) + " five",
		},
		{
			name: "timestamps count in limitBytes",
			opts: runtime.LogOptions{Timestamps: true, LimitBytes: 37},
			want: ts(0) + " one\n20",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := readLogs(t, r, id, tc.opts); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if got := ts(time.Second); got != "2025-01-01T00:00:01.000000000Z" {
		t.Errorf("timestamp format: %q", got)
	}
	if err := r.ReadLogs(context.Background(), "sim://nope", runtime.LogOptions{}, &bytes.Buffer{}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("unknown container: %v", err)
	}
}

func TestLogBounds(t *testing.T) {
	// 1,500 lines of 10 bytes: the oldest 500 go (line bound).
	var b logBuffer
	for i := range 1500 {
		b.write(t0, fmt.Sprintf("line %04d\n", i))
	}
	if k := b.kept(); len(k) != maxLogLines || k[0].Text != "line 0500\n" || b.end() != 1500 {
		t.Fatalf("kept %d lines from %q, end %d", len(k), k[0].Text, b.end())
	}
	// Lines of 1 KiB: the byte bound holds first.
	long := strings.Repeat("x", 1023) + "\n"
	for range 400 {
		b.write(t0, long)
	}
	if b.bytes > maxLogBytes || len(b.kept()) != maxLogBytes/1024 || b.kept()[0].Text != long {
		t.Fatalf("kept %d lines, %d bytes", len(b.kept()), b.bytes)
	}
	// A line longer than maxLineBytes is split.
	var c logBuffer
	c.write(t0, strings.Repeat("y", maxLineBytes+5)+"\n")
	if k := c.kept(); len(k) != 2 || len(k[0].Text) != maxLineBytes || k[1].Text != "yyyyy\n" {
		t.Fatalf("split into %d lines", len(k))
	}
}

// chanWriter hands each write to a channel.
type chanWriter chan string

func (w chanWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		w <- string(p)
	}
	return len(p), nil
}

// follow runs ReadLogs with Follow in a goroutine; the channels carry the
// output and the result.
func follow(ctx context.Context, r *Runtime, id string, opts runtime.LogOptions) (chanWriter, chan error) {
	out, done := make(chanWriter, 100), make(chan error, 1)
	opts.Follow = true
	go func() { done <- r.ReadLogs(ctx, id, opts, out) }()
	return out, done
}

func expectOutput(t *testing.T, out chanWriter, want string) {
	t.Helper()
	var got string
	timeout := time.After(10 * time.Second)
	for got != want {
		select {
		case s := <-out:
			got += s
			if !strings.HasPrefix(want, got) {
				t.Fatalf("got %q, want %q", got, want)
			}
		case <-timeout:
			t.Fatalf("got %q, still waiting for %q", got, want)
		}
	}
}

func expectDone(t *testing.T, done chan error, want error) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, want) {
			t.Fatalf("ReadLogs returned %v, want %v", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadLogs still following")
	}
}

// TestFollowWokenByListing: a line written when a relist advances the
// container reaches the follower; the follow ends when the container exits.
func TestFollowWokenByListing(t *testing.T) {
	r, clk := setup(t)
	id := start(t, r, []string{"sh", "-c", "echo a; sleep 1; echo b; sleep 1; echo c"}, 0)
	out, done := follow(context.Background(), r, id, runtime.LogOptions{})
	expectOutput(t, out, "a\n")
	clk.Step(time.Second)
	if _, err := r.ListPods(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectOutput(t, out, "b\n")
	clk.Step(time.Second)
	if _, err := r.ListPods(context.Background()); err != nil {
		t.Fatal(err)
	}
	expectOutput(t, out, "c\n")
	expectDone(t, done, nil)
}

// TestFollowOwnTimer: without any listing, the follower advances the
// container at its next scheduled change.
func TestFollowOwnTimer(t *testing.T) {
	r, clk := setup(t)
	id := start(t, r, []string{"sh", "-c", "echo a; sleep 1; echo b"}, 0)
	out, done := follow(context.Background(), r, id, runtime.LogOptions{Timestamps: true})
	expectOutput(t, out, t0.Format(runtime.TimestampFormat)+" a\n")
	waitForTimer(t, clk)
	clk.Step(time.Second)
	expectOutput(t, out, t0.Add(time.Second).Format(runtime.TimestampFormat)+" b\n")
	expectDone(t, done, nil)
}

// waitForTimer waits until the follower has set its timer on the fake
// clock.
func waitForTimer(t *testing.T, clk interface{ HasWaiters() bool }) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("follower set no timer")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFollowTailZeroAndLimit(t *testing.T) {
	r, clk := setup(t)
	id := start(t, r, []string{"sh", "-c", "echo old; sleep 1; echo new; sleep 1; echo more; sleep 3600"}, 0)
	// tailLines=0: only what comes from now on.
	out, done := follow(context.Background(), r, id, runtime.LogOptions{TailLines: ptr[int64](0), LimitBytes: 6})
	waitForTimer(t, clk)
	clk.Step(time.Second)
	expectOutput(t, out, "new\n")
	waitForTimer(t, clk)
	clk.Step(time.Second)
	// The limit ends the follow although the container runs on.
	expectOutput(t, out, "mo")
	expectDone(t, done, nil)
}

func TestFollowEnds(t *testing.T) {
	t.Run("context canceled", func(t *testing.T) {
		r, _ := setup(t)
		id := start(t, r, []string{"sh", "-c", "echo a; sleep 3600"}, 0)
		ctx, cancel := context.WithCancel(context.Background())
		out, done := follow(ctx, r, id, runtime.LogOptions{})
		expectOutput(t, out, "a\n")
		cancel()
		expectDone(t, done, context.Canceled)
	})
	t.Run("container stopped", func(t *testing.T) {
		r, _ := setup(t)
		id := start(t, r, nil, 0) // a server: ends on SIGTERM
		out, done := follow(context.Background(), r, id, runtime.LogOptions{})
		if err := r.StopContainer(context.Background(), id, runtime.StopOptions{Timeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
		expectDone(t, done, nil)
		if len(out) != 0 {
			t.Errorf("unexpected output %q", <-out)
		}
	})
	t.Run("pod removed", func(t *testing.T) {
		r, _ := setup(t)
		id := start(t, r, []string{"sh", "-c", "echo a; sleep 3600"}, 0)
		out, done := follow(context.Background(), r, id, runtime.LogOptions{})
		expectOutput(t, out, "a\n")
		if err := r.RemovePod(context.Background(), "u1"); err != nil {
			t.Fatal(err)
		}
		expectDone(t, done, nil)
	})
	t.Run("exited container", func(t *testing.T) {
		r, _ := setup(t)
		id := start(t, r, []string{"sh", "-c", "echo a; exit 3"}, 0)
		out, done := follow(context.Background(), r, id, runtime.LogOptions{})
		expectOutput(t, out, "a\n")
		expectDone(t, done, nil)
	})
}

// TestPreviousInstanceLogKept: the log of an exited container stays while
// the runtime keeps the container, beside its successor's.
func TestPreviousInstanceLogKept(t *testing.T) {
	r, clk := setup(t)
	first := start(t, r, []string{"sh", "-c", "echo run 1; exit 1"}, 0)
	clk.Step(time.Second)
	second := start(t, r, []string{"sh", "-c", "echo run 2; sleep 3600"}, 0)
	if got := readLogs(t, r, first, runtime.LogOptions{}); got != "run 1\n" {
		t.Errorf("first instance: %q", got)
	}
	if got := readLogs(t, r, second, runtime.LogOptions{}); got != "run 2\n" {
		t.Errorf("second instance: %q", got)
	}
	if err := r.RemoveContainer(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadLogs(context.Background(), first, runtime.LogOptions{}, &bytes.Buffer{}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("removed container: %v", err)
	}
}
