package informertest

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// Request is one request a Recorder saw.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Status int // 0 when the request failed before a response
}

// Watch reports whether the request is a watch.
func (r Request) Watch() bool {
	w := r.Query.Get("watch")
	return w == "true" || w == "1"
}

// Recorder records the requests of the clients built from its configs,
// counts the watch streams that carried a 410 Expired ERROR event, and can
// cut those clients off the server for a while (Pause, Resume).
type Recorder struct {
	mu       sync.Mutex
	requests []Request
	expired  int
	paused   chan struct{} // while paused; Resume closes it
	open     map[*watchBody]struct{}
}

// Config returns a copy of cfg whose clients report to r.
func (r *Recorder) Config(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			r.mu.Lock()
			paused := r.paused
			r.mu.Unlock()
			if paused != nil {
				select {
				case <-paused:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			rec := Request{Method: req.Method, Path: req.URL.Path, Query: req.URL.Query()}
			resp, err := rt.RoundTrip(req)
			if resp != nil {
				rec.Status = resp.StatusCode
				if rec.Watch() {
					resp.Body = r.watching(resp.Body)
				}
			}
			r.mu.Lock()
			r.requests = append(r.requests, rec)
			r.mu.Unlock()
			return resp, err
		})
	}
	return c
}

// Pause ends the open watch streams (as a server closing them cleanly
// would) and holds new requests until Resume: the clients are cut off
// without failing, so client-go does not back off.
func (r *Recorder) Pause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paused == nil {
		r.paused = make(chan struct{})
	}
	for b := range r.open {
		b.cut()
	}
}

// Resume lets the held requests through.
func (r *Recorder) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paused != nil {
		close(r.paused)
		r.paused = nil
	}
}

// Requests returns the requests so far whose path ends with suffix.
func (r *Recorder) Requests(suffix string) []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Request
	for _, req := range r.requests {
		if strings.HasSuffix(req.Path, suffix) {
			out = append(out, req)
		}
	}
	return out
}

// Lists counts the plain (non-watch) GETs so far whose path ends with
// suffix.
func (r *Recorder) Lists(suffix string) int {
	n := 0
	for _, req := range r.Requests(suffix) {
		if req.Method == http.MethodGet && !req.Watch() {
			n++
		}
	}
	return n
}

// WatchLists counts the watch-list requests (sendInitialEvents=true) so
// far whose path ends with suffix.
func (r *Recorder) WatchLists(suffix string) int {
	n := 0
	for _, req := range r.Requests(suffix) {
		if req.Watch() && req.Query.Get("sendInitialEvents") == "true" {
			n++
		}
	}
	return n
}

// Expired counts the watch streams that carried a 410 Expired event.
func (r *Recorder) Expired() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.expired
}

func (r *Recorder) watching(body io.ReadCloser) io.ReadCloser {
	b := &watchBody{ReadCloser: body, r: r}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open == nil {
		r.open = map[*watchBody]struct{}{}
	}
	r.open[b] = struct{}{}
	return b
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// expiredMarkers are how a 410 Expired Status's reason reads in a watch
// event: JSON, and protobuf (field 3 of Status, length 7), which client-go's
// typed clients ask for.
var expiredMarkers = [][]byte{[]byte(`"reason":"Expired"`), []byte("\x22\x07Expired")}

// watchBody is a watch stream's body: it reports, once, a stream in which
// an expired marker appears (even across reads), and ends with io.EOF when cut.
type watchBody struct {
	io.ReadCloser
	r     *Recorder
	tail  []byte
	found bool
	isCut atomic.Bool
}

func (b *watchBody) Read(p []byte) (int, error) {
	if b.isCut.Load() {
		return 0, io.EOF
	}
	n, err := b.ReadCloser.Read(p)
	if b.isCut.Load() {
		// Cut while this Read waited (the Close runs asynchronously): what
		// it got may come from writes made after the cut, which a cut
		// client must not see.
		return 0, io.EOF
	}
	if n > 0 && !b.found {
		buf := append(b.tail, p[:n]...)
		keep := 0
		for _, marker := range expiredMarkers {
			if bytes.Contains(buf, marker) && !b.found {
				b.found = true
				b.r.mu.Lock()
				b.r.expired++
				b.r.mu.Unlock()
			}
			keep = max(keep, len(marker)-1)
		}
		keep = min(len(buf), keep)
		b.tail = append(b.tail[:0:0], buf[len(buf)-keep:]...)
	}
	return n, err
}

// cut ends the stream: a blocked Read returns io.EOF. b.r.mu is held.
func (b *watchBody) cut() {
	b.isCut.Store(true)
	delete(b.r.open, b)
	go b.ReadCloser.Close()
}

func (b *watchBody) Close() error {
	b.r.mu.Lock()
	delete(b.r.open, b)
	b.r.mu.Unlock()
	return b.ReadCloser.Close()
}
