// Package flowcontrol is API Priority and Fairness as kube-apiserver v1.32
// has it, without k8s.io/apiserver: every request (but the long-running
// non-watch ones) is classified by the FlowSchemas in matchingPrecedence
// order to a priority level and a flow (by user or namespace), takes seats
// of its level's share of the server's concurrency
// (--max-requests-inflight + --max-mutating-requests-inflight, split by
// nominalConcurrencyShares), waiting in a shuffle-sharded queue with fair
// queuing between flows when none are free, or gets 429 with Retry-After
// when its level rejects or its queue is full or it waited too long. The
// exempt level is not limited. LISTs (and watches asking for initial
// events) take seats in proportion to the objects they walk, as kube's
// work estimator.
// See Controller for what differs from kube.
package flowcontrol

import (
	"math"
	"net/http"
	"strconv"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/storage/trace"
)

// Work estimator settings, kube's DefaultWorkEstimatorConfig.
const (
	objectsPerSeat = 100
	maxSeats       = 10
)

// Handler is the filter: it runs after authentication and impersonation
// (it classifies the user the request acts as) and before authorization,
// as kube's handler chain.
func (c *Controller) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri, ok := handlers.RequestInfoFrom(r.Context())
		u, uok := user.From(r.Context())
		// Long-running requests are served outside flow control, as
		// kube's, except watches: they hold seats while they start.
		if !ok || !uok || (ri.Verb != "watch" && ri.LongRunning()) {
			next.ServeHTTP(w, r)
			return
		}
		s := c.classify(u, ri)
		lvl := s.level
		if s.uid != "" {
			w.Header().Set(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID, s.uid)
		}
		if lvl.uid != "" {
			w.Header().Set(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID, lvl.uid)
		}
		if lvl.exempt {
			next.ServeHTTP(w, r)
			return
		}
		wait := c.waitLimit
		if d, ok := r.Context().Deadline(); ok {
			wait = min(wait, time.Until(d))
		}
		queued := time.Now()
		t, reason := lvl.acquire(r.Context(), s.flowOf(u, ri), c.seats(r, ri), wait)
		// The SLI latency leaves out the time in the queue.
		tr := trace.From(r.Context())
		tr.Exclude(time.Since(queued))
		if t == nil {
			tr.Rejected()
			c.rejections.add(s.name, lvl.name, reason)
			c.tooManyRequests(w, lvl)
			return
		}
		defer t.release()
		if ri.Verb == "watch" {
			// A watch holds its seats only until it is set up, which its
			// first write (the 200 and headers) shows.
			w = &watchInit{ResponseWriter: w, release: t.release}
		}
		next.ServeHTTP(w, r)
	})
}

// tooManyRequests answers kube's 429: its Retry-After and its plain-text
// body (kube's tooManyRequests writes with http.Error, not a Status).
func (c *Controller) tooManyRequests(w http.ResponseWriter, lvl *level) {
	lvl.mu.Lock()
	retry := lvl.retry.record(time.Now())
	lvl.mu.Unlock()
	c.rejected.Add(1)
	w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
	http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
}

// seats is kube's work estimate: one seat, but a LIST (or a watch that
// asks for its initial events) walks the objects it may return, a seat
// per 100 (at most 10): all the stored ones when served from the watch
// cache, twice the limit for a page read from etcd, the stored ones plus
// the limit for a filtered page. A LIST of one name (a metadata.name
// field selector) takes one seat.
func (c *Controller) seats(r *http.Request, ri *handlers.RequestInfo) int {
	if !ri.IsResourceRequest || (ri.Verb != "list" && ri.Verb != "watch") || ri.Name != "" || c.count == nil {
		return 1
	}
	q := r.URL.Query()
	if ri.Verb == "watch" && q.Get("sendInitialEvents") != "true" {
		return 1
	}
	stored := c.count(ri.APIGroup, ri.Resource)
	if stored <= 0 {
		return 1
	}
	estimate := stored
	if ri.Verb == "list" {
		limit, _ := strconv.ParseInt(q.Get("limit"), 10, 64)
		rv := q.Get("resourceVersion")
		fromCache := !(q.Get("continue") != "" || (limit > 0 && rv != "0") ||
			q.Get("resourceVersionMatch") == string(metav1.ResourceVersionMatchExact))
		pageLimit := stored
		if limit > 0 && limit < stored {
			pageLimit = limit
		}
		switch {
		case fromCache:
		case ri.FieldSelector != "" || ri.LabelSelector != "":
			estimate = stored + pageLimit
		default:
			estimate = 2 * pageLimit
		}
	}
	return int(min(max(int64(math.Ceil(float64(estimate)/objectsPerSeat)), 1), maxSeats))
}

// watchInit releases a watch's seats on its first write.
type watchInit struct {
	http.ResponseWriter
	release func()
}

func (w *watchInit) WriteHeader(code int) {
	w.release()
	w.ResponseWriter.WriteHeader(code)
}

func (w *watchInit) Write(b []byte) (int, error) {
	w.release()
	return w.ResponseWriter.Write(b)
}

// Flush lets the watch stream.
func (w *watchInit) Flush() {
	w.release()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *watchInit) Unwrap() http.ResponseWriter { return w.ResponseWriter }
