// Package trace records where one API request's time goes, as kube's
// utiltrace does for its slow requests: the server starts a Trace per
// request and carries it in the request's context, the filters, handlers
// and registry mark their steps on it, and the server logs the steps of a
// request that took long. A step is one atomic store into a fixed array:
// no allocation and no lock, so the steps are marked on every request
// and the decision to log is taken at its end. Every function is safe on
// a nil Trace (a context without one), so callers need no check.
//
// It sits under storage, the bottom of the dependency order, because every
// layer above (server filters, handlers, registry, admission webhooks)
// marks steps on it.
//
// The Trace also carries what the request metrics need from below the
// filters: whether a handler served the request (kube counts only those),
// whether flow control rejected it or the timeout filter cut it, and the
// time spent waiting on things the SLI latency leaves out (admission
// webhooks, the flow-control queue).
package trace

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// Step names one point of a request's life. The names are kube's trace
// messages where kube has one.
type Step uint8

// The steps, in the order a write goes through them.
const (
	stepNone Step = iota
	Authenticated
	Authorized
	// Decoded: the request body was read and decoded.
	Decoded
	// StorageWrite: admission and validation passed, the object goes to
	// etcd.
	StorageWrite
	// StorageWritten: etcd answered the write.
	StorageWritten
	// StorageRead: a get or list asks the watch cache or etcd.
	StorageRead
	// StorageReadDone: the read answered.
	StorageReadDone
	// ResponseWritten: the answer is encoded and written (the time since
	// the previous step is the encoding's).
	ResponseWritten
	numSteps
)

var stepNames = [numSteps]string{
	stepNone:        "",
	Authenticated:   "Authenticated",
	Authorized:      "Authorized",
	Decoded:         "limitedReadBody and decode succeeded",
	StorageWrite:    "About to store object in database",
	StorageWritten:  "Object stored in database",
	StorageRead:     "About to read from storage",
	StorageReadDone: "Read from storage done",
	ResponseWritten: "Writing http response done",
}

func (s Step) String() string {
	if s < numSteps {
		return stepNames[s]
	}
	return fmt.Sprintf("step %d", s)
}

// maxSteps bounds the steps one request records; more (a write retried
// on conflicts) are dropped: the first ones tell where the time went.
const maxSteps = 16

// stepShift packs a step's kind above its offset from the start, in
// nanoseconds (2^56 ns is two years).
const stepShift = 56

// Trace is the record of one request. The zero value is not usable:
// Start one.
type Trace struct {
	start time.Time
	n     atomic.Int32
	// steps hold kind<<stepShift | nanoseconds since start; 0 is a slot
	// reserved but not yet written (or not at all).
	steps [maxSteps]atomic.Int64
	// excluded is the time, in nanoseconds, the request waited on what
	// the SLI latency does not count.
	excluded atomic.Int64
	flags    atomic.Uint32
	// onServed runs once when a handler takes the request (Served).
	onServed func()
	// user is the authenticated user's name, for the request's log line:
	// written by authentication, which may still run after a timed-out
	// request was logged.
	user atomic.Pointer[string]
}

// Flags a request's trace carries for the request metrics.
const (
	flagServed uint32 = 1 << iota
	flagAuthorized
	flagRejected
	flagTimedOut
)

// Start makes t the trace of a request that arrived at start.
func (t *Trace) Start(start time.Time) { t.start = start }

// StartTime is when the request arrived.
func (t *Trace) StartTime() time.Time { return t.start }

// Mark records that the request reached step s now.
func (t *Trace) Mark(s Step) {
	if t == nil {
		return
	}
	if s == Authorized {
		t.flags.Or(flagAuthorized)
	}
	i := t.n.Add(1) - 1
	if i >= maxSteps {
		return
	}
	t.steps[i].Store(int64(s)<<stepShift | int64(time.Since(t.start)))
}

// SetUser records the name of the user authentication found. name points
// into the user's own record (no copy on the request's path) and must not
// change.
func (t *Trace) SetUser(name *string) {
	if t != nil {
		t.user.Store(name)
	}
}

// User is the name SetUser recorded.
func (t *Trace) User() string {
	if t == nil {
		return ""
	}
	if p := t.user.Load(); p != nil {
		return *p
	}
	return ""
}

// IsAuthorized reports whether the request reached the Authorized step.
func (t *Trace) IsAuthorized() bool { return t != nil && t.flags.Load()&flagAuthorized != 0 }

// Exclude adds d to the time the SLI latency leaves out.
func (t *Trace) Exclude(d time.Duration) {
	if t == nil || d <= 0 {
		return
	}
	t.excluded.Add(int64(d))
}

// Excluded is the time Exclude added up.
func (t *Trace) Excluded() time.Duration {
	if t == nil {
		return 0
	}
	return time.Duration(t.excluded.Load())
}

// OnServed sets what Served runs: the server's count of the long-running
// requests being served. Set it before the request goes to the handlers.
func (t *Trace) OnServed(fn func()) { t.onServed = fn }

// Served records that a handler took the request: kube counts the
// requests its REST handlers (and a few others) serve.
func (t *Trace) Served() {
	if t == nil {
		return
	}
	if old := t.flags.Or(flagServed); old&flagServed == 0 && t.onServed != nil {
		t.onServed()
	}
}

// IsServed reports whether Served was called.
func (t *Trace) IsServed() bool { return t != nil && t.flags.Load()&flagServed != 0 }

// Rejected records that flow control refused the request (its 429).
func (t *Trace) Rejected() {
	if t != nil {
		t.flags.Or(flagRejected)
	}
}

// IsRejected reports whether Rejected was called.
func (t *Trace) IsRejected() bool { return t != nil && t.flags.Load()&flagRejected != 0 }

// TimedOut records that the timeout filter answered its 504 (or cut the
// stream) because the request's deadline passed.
func (t *Trace) TimedOut() {
	if t != nil {
		t.flags.Or(flagTimedOut)
	}
}

// IsTimedOut reports whether TimedOut was called.
func (t *Trace) IsTimedOut() bool { return t != nil && t.flags.Load()&flagTimedOut != 0 }

type contextKey struct{}

// ContextKey is the key WithTrace stores under, for a server whose own
// context node carries the trace (saving a context.WithValue on every
// request).
var ContextKey any = contextKey{}

// WithTrace returns ctx carrying t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, contextKey{}, t)
}

// From returns the trace ctx carries, nil if none (which every method
// accepts).
func From(ctx context.Context) *Trace {
	t, _ := ctx.Value(contextKey{}).(*Trace)
	return t
}

// Mark records step s on the trace ctx carries, if any.
func Mark(ctx context.Context, s Step) { From(ctx).Mark(s) }

// Format writes the trace as kube's utiltrace logs a long one: a header
// line with the request's fields and total time, a line per step with
// the time since the previous one, and an END line. id tells the lines
// of one trace apart in an interleaved log.
func (t *Trace) Format(id uint64, name, fields string, total time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Trace[%d]: %q %s (%s) (total time: %dms):", id, name, fields,
		t.start.Format("02-Jan-2006 15:04:05.000"), total.Milliseconds())
	last := time.Duration(0)
	n := min(int(t.n.Load()), maxSteps)
	for i := 0; i < n; i++ {
		v := t.steps[i].Load()
		if v == 0 {
			// Reserved by a step still being written (the handler of a
			// timed-out request goes on): not part of this record.
			continue
		}
		s, at := Step(v>>stepShift), time.Duration(v&(1<<stepShift-1))
		fmt.Fprintf(&b, "\nTrace[%d]: ---%q %dms (%s)", id, s.String(), (at - last).Milliseconds(),
			t.start.Add(at).Format("15:04:05.000"))
		last = at
	}
	fmt.Fprintf(&b, "\nTrace[%d]: [%s] [%s] END", id, total, total-last)
	return b.String()
}
