package handlers

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// minWatchTimeout is kube's --min-request-timeout: a watch without
// timeoutSeconds lasts between one and two times this, so that clients
// spread their reconnects.
const minWatchTimeout = 30 * time.Minute

// watchEvent is the wire form of one event.
type watchEvent struct {
	Type   watch.EventType `json:"type"`
	Object any             `json:"object"`
}

// watch streams events as kube does over JSON: chunked, one event per
// line, flushed whenever no further event is ready.
func (q *request) watch(opts *metainternalversion.ListOptions) {
	timeout := minWatchTimeout + time.Duration(rand.Int64N(int64(minWatchTimeout)))
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(q.ctx(), timeout)
	defer cancel()
	events, err := q.store.Watch(ctx, q.info.Namespace, opts)
	if err != nil {
		q.fail(err)
		return
	}
	defer events.Stop()
	fixup, err := q.watchTransform()
	if err != nil {
		q.fail(err)
		return
	}
	flusher, _ := q.w.(http.Flusher)
	q.w.Header().Set("Content-Type", "application/json")
	q.w.Header().Set("Cache-Control", "no-cache, private")
	q.w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	// Plain JSON (no Table or metadata form) reuses the cache's encoding of
	// each object: one encoding per revision however many watchers.
	t, err := q.transformer()
	plain := err == nil && t == nil
	enc := json.NewEncoder(q.w)
	var line []byte
	for {
		ev, ok := events.Next()
		if !ok {
			return
		}
		if data, ok := ev.JSON(); plain && ok {
			line = append(append(append(append(line[:0], `{"type":"`...), ev.Type...), `","object":`...), data...)
			_, err = q.w.Write(append(line, "}\n"...))
		} else {
			var obj runtime.Object
			if obj, err = ev.Decoded(); err == nil {
				err = enc.Encode(watchEvent{Type: ev.Type, Object: fixup(obj)})
			}
		}
		if err != nil {
			slog.Debug("watch client went away", "path", q.r.URL.Path, "err", err)
			return
		}
		// As kube: flush only when no other event is ready, so that a
		// burst leaves in few writes.
		if flusher != nil && !events.Ready() {
			flusher.Flush()
		}
	}
}
