package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/corekube/corekube/agent/runtime"
	"k8s.io/utils/clock"
)

// Bounds of the log kept per container, as the kubelet's log rotation
// (containerLogMaxSize) bounds it on disk: the oldest lines go first.
const (
	maxLogLines = 1000
	maxLogBytes = 256 << 10
	// maxLineBytes splits longer lines into partial ones, as CRI runtimes
	// split lines of more than 16 KiB.
	maxLineBytes = 16 << 10
)

// LogLine is one line a container wrote, newline included, or the part of
// a line that one write ended without a newline (a partial line).
type LogLine struct {
	Time time.Time
	Text string
}

// logBuffer is a container's log: its newest lines within maxLogLines and
// maxLogBytes. Lines are numbered from the first the container ever wrote,
// so that a follower keeps its place while old lines are dropped.
type logBuffer struct {
	lines []LogLine // lines[start:] are kept; the rest awaits compaction
	start int
	first uint64 // number of lines[start]
	bytes int    // of the kept lines
	// changed is closed when a line is added or the container exits or is
	// removed; nil while no follower waits, so that writes cost nothing
	// extra when no one follows.
	changed chan struct{}
}

// write appends what a container wrote at one instant, split in lines.
func (b *logBuffer) write(at time.Time, text string) {
	for text != "" {
		n := len(text)
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			n = i + 1
		}
		n = min(n, maxLineBytes)
		b.append(LogLine{Time: at, Text: text[:n]})
		text = text[n:]
	}
	b.notify()
}

func (b *logBuffer) append(l LogLine) {
	b.lines = append(b.lines, l)
	b.bytes += len(l.Text)
	for len(b.lines)-b.start > maxLogLines || b.bytes > maxLogBytes {
		b.bytes -= len(b.lines[b.start].Text)
		b.lines[b.start] = LogLine{}
		b.start++
		b.first++
	}
	// Compact once the dropped head outweighs the kept lines, so that
	// dropping stays amortized O(1) per line.
	if b.start > 64 && b.start > len(b.lines)/2 {
		n := copy(b.lines, b.lines[b.start:])
		clear(b.lines[n:])
		b.lines, b.start = b.lines[:n], 0
	}
}

// kept returns the kept lines (not a copy).
func (b *logBuffer) kept() []LogLine { return b.lines[b.start:] }

// end is the number the next line will have.
func (b *logBuffer) end() uint64 { return b.first + uint64(len(b.lines)-b.start) }

// from copies the lines numbered next and later (the oldest kept one if
// next was dropped) and returns the number after the last.
func (b *logBuffer) from(next uint64) ([]LogLine, uint64) {
	next = max(next, b.first)
	kept := b.kept()[next-b.first:]
	return append([]LogLine(nil), kept...), b.end()
}

// waiter returns a channel closed at the next change.
func (b *logBuffer) waiter() <-chan struct{} {
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

func (b *logBuffer) notify() {
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// errLimitReached ends a read at LimitBytes; it is not a failure.
var errLimitReached = errors.New("log limit reached")

// logFormatter renders lines as ReadLogs writes them.
type logFormatter struct {
	opts   runtime.LogOptions
	remain int64 // bytes left under LimitBytes
	// midLine: the last line written was partial, so the next one
	// continues it and takes no timestamp.
	midLine bool
	buf     []byte
}

// format appends lines to f.buf and reports errLimitReached when they hit
// LimitBytes (the output is then cut there).
func (f *logFormatter) format(lines []LogLine) error {
	for _, l := range lines {
		if !f.opts.Since.IsZero() && l.Time.Before(f.opts.Since) {
			continue
		}
		mark := len(f.buf)
		if f.opts.Timestamps && !f.midLine {
			f.buf = l.Time.UTC().AppendFormat(f.buf, runtime.TimestampFormat)
			f.buf = append(f.buf, ' ')
		}
		f.buf = append(f.buf, l.Text...)
		f.midLine = !strings.HasSuffix(l.Text, "\n")
		if f.opts.LimitBytes > 0 {
			if n := int64(len(f.buf) - mark); n >= f.remain {
				f.buf = f.buf[:mark+int(f.remain)]
				f.remain = 0
				return errLimitReached
			}
			f.remain -= int64(len(f.buf) - mark)
		}
	}
	return nil
}

// ReadLogs writes the container's log to w as opts says, following it
// until the container exits or is removed when opts.Follow.
//
// Containers produce output only when advanced to the current time, which
// listing does; a follower therefore also advances its container itself,
// on a timer set at the container's next scheduled change (the end of a
// sleep, a due kill), so that lines arrive when they are written rather
// than at the next relist. Between those it waits for other callers'
// advances to notify it, never polling.
func (r *Runtime) ReadLogs(ctx context.Context, id string, opts runtime.LogOptions, w io.Writer) error {
	r.mu.Lock()
	c, err := r.lookup(id)
	if err != nil {
		r.mu.Unlock()
		return err
	}
	c.advance(r.clock.Now())
	next := c.logs.first
	if opts.TailLines != nil {
		tail := uint64(max(0, *opts.TailLines))
		if end := c.logs.end(); end-c.logs.first > tail {
			next = end - tail
		}
	}
	r.mu.Unlock()

	// Commit the caller's response before the first line, which may be
	// long in coming when following.
	if _, err := w.Write(nil); err != nil {
		return fmt.Errorf("logs of %s: %w", id, err)
	}
	f := &logFormatter{opts: opts, remain: opts.LimitBytes}
	for {
		r.mu.Lock()
		if !c.removed {
			c.advance(r.clock.Now())
		}
		var lines []LogLine
		lines, next = c.logs.from(next)
		done := c.exited || c.removed
		var changed <-chan struct{}
		var wake time.Time
		if opts.Follow && !done {
			changed, wake = c.logs.waiter(), c.nextChange()
		}
		r.mu.Unlock()

		f.buf = f.buf[:0]
		limitErr := f.format(lines)
		if len(f.buf) > 0 {
			if _, err := w.Write(f.buf); err != nil {
				return fmt.Errorf("logs of %s: %w", id, err)
			}
		}
		if limitErr != nil || !opts.Follow || done {
			return nil
		}
		if err := r.waitChange(ctx, changed, wake); err != nil {
			return err
		}
	}
}

// waitChange waits for changed to close, the clock to reach wake (when
// not zero and the clock has timers), or ctx to end.
func (r *Runtime) waitChange(ctx context.Context, changed <-chan struct{}, wake time.Time) error {
	var timeout <-chan time.Time
	if cl, ok := r.clock.(clock.Clock); ok && !wake.IsZero() {
		// At least a millisecond: a wake-up due now that advancing does not
		// move must not spin.
		t := cl.NewTimer(max(time.Millisecond, wake.Sub(cl.Now())))
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-timeout:
	}
	return nil
}
