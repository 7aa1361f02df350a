package handlers

import (
	"context"
	"errors"
	"io"
	"net/http"
)

// ResourceStreamer is what a Getter returns to answer with a stream of
// bytes rather than an encoded object (pods/log), as kube's
// rest.ResourceStreamer. It is a runtime.Object too, so that Get keeps one
// signature for both kinds of answer, as in kube.
type ResourceStreamer interface {
	// InputStream opens the stream, bound to ctx (the request's). A nil
	// stream and no error means there is nothing to stream: 204. flush asks
	// for every chunk to reach the client at once (kubectl logs -f);
	// contentType is the answer's Content-Type.
	InputStream(ctx context.Context) (stream io.ReadCloser, flush bool, contentType string, err error)
}

// getSubresource serves GET on a Getter subresource. As in kube's
// GetResourceWithOptions, the Accept header is checked first (406), then
// the Getter decodes its options and acts.
func (q *request) getSubresource(g Getter) {
	if !q.acceptable() {
		return
	}
	out, err := g.Get(q.ctx(), q.info.Namespace, q.info.Name, q.r.URL.Query())
	if err != nil {
		q.fail(err)
		return
	}
	if s, ok := out.(ResourceStreamer); ok {
		writeStream(q.w, q.r, http.StatusOK, s)
		return
	}
	writeObject(q.w, q.r, http.StatusOK, out)
}

// writeStream answers what s streams, as kube's StreamObject: an error
// opening it is a Status, nothing to stream is 204 No Content, anything
// else is copied until it ends or the client goes (the request's context
// then ends the stream's source too).
func writeStream(w http.ResponseWriter, r *http.Request, code int, s ResourceStreamer) {
	in, flush, contentType, err := s.InputStream(r.Context())
	if err != nil {
		WriteError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-cache, private")
	if in == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	defer in.Close()
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(code)
	rc := http.NewResponseController(w)
	// The headers go now: a follower learns that the stream is open before
	// its first line, which may be long in coming.
	_ = rc.Flush()
	var dst io.Writer = w
	if flush {
		dst = flushWriter{w: w, rc: rc}
	}
	if _, err := io.Copy(dst, in); err != nil && !errors.Is(err, context.Canceled) {
		// The answer has begun: all that is left is to stop.
		loggerFrom(r.Context()).Debug("stream ended early", "path", r.URL.Path, "err", err)
	}
}

// flushWriter flushes after every write, so that each chunk read from the
// source reaches the client at once (kube's flushwriter).
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	if err := f.rc.Flush(); err != nil {
		return n, err
	}
	return n, nil
}
