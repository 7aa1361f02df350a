package handlers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/corekube/corekube/watch/rawproto"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// watch streams events as kube does: over JSON one event per line, over
// protobuf one length-prefixed frame per event (protobuf.go); chunked,
// flushed whenever no further event is ready.
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
	// As kube, the stream encoding is negotiated once the watch is set
	// up: YAML, which a GET may answer in, has none (406).
	n, err := negotiateStream(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	contentType := "application/json"
	if n.media == mediaProtobuf {
		contentType = protobufMediaType + ";stream=watch"
	}
	flusher, _ := q.w.(http.Flusher)
	q.w.Header().Set("Content-Type", contentType)
	q.w.Header().Set("Cache-Control", "no-cache, private")
	q.w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	// Plain JSON and plain protobuf (no Table or metadata form) reuse the
	// cache's encodings of each object: one encoding per revision however
	// many watchers; only the event around it is written per watcher.
	plain := n.target == nil
	blueprint := &listBlueprint{q: q, n: n}
	kind := q.gvk()
	envelope := rawproto.Envelope{APIVersion: kind.GroupVersion().String(), Kind: kind.Kind}
	// counted measures what the JSON encoder writes of an event that has
	// no cached encoding, for the event size metric.
	counted := &countingWriter{w: q.w}
	enc := json.NewEncoder(counted)
	var line, object []byte
	for {
		ev, ok := events.Next()
		if !ok {
			return
		}
		// Asked only for a plain watch: a protobuf encoding is computed
		// (and kept) on first use, which a metadata watch has no use for.
		var data []byte
		var size int // of the object's encoding, for the metrics
		cached := false
		if plain {
			switch n.media {
			case mediaProtobuf:
				object, cached = ev.AppendProtobuf(object[:0])
				data = object
			case mediaJSON:
				data, cached = ev.JSON()
			}
		}
		if cached {
			if n.media == mediaProtobuf {
				line = envelope.AppendWatchFrame(line[:0], string(ev.Type), data)
			} else {
				line = append(append(append(append(line[:0], `{"type":"`...), ev.Type...), `","object":`...), data...)
				line = append(line, "}\n"...)
			}
			size = len(data)
			_, err = q.w.Write(line)
		} else {
			obj, derr := ev.Decoded()
			if derr == nil {
				obj = fixup(obj)
				if ev.Type == watch.Bookmark {
					derr = blueprint.set(obj)
				}
			}
			if derr == nil && n.media == mediaProtobuf {
				object, line, derr = appendProtobufEvent(object[:0], line[:0], ev.Type, obj, kind.GroupVersion())
			}
			if derr != nil {
				// The server's fault, not the client's: the client
				// watches again and meets the object in its LIST.
				loggerFrom(q.ctx()).Error("encode watch event", "path", q.r.URL.Path, "err", derr)
				return
			}
			if n.media == mediaProtobuf {
				size = len(object)
				_, err = q.w.Write(line)
			} else {
				// The whole event's size: the object's alone is not known.
				counted.n = 0
				err = enc.Encode(watchEvent{Type: ev.Type, Object: obj})
				size = counted.n
			}
		}
		// Counted as kube counts: every event sent, sent whole or not.
		events.Sent(ev, size, cached, n.media == mediaProtobuf)
		if err != nil {
			loggerFrom(q.ctx()).Debug("watch client went away", "path", q.r.URL.Path, "err", err)
			return
		}
		// As kube: flush only when no other event is ready, so that a
		// burst leaves in few writes.
		if flusher != nil && !events.Ready() {
			flusher.Flush()
		}
	}
}

// appendProtobufEvent encodes obj into object and the frame of the event
// carrying it into frame, reusing both buffers.
func appendProtobufEvent(object, frame []byte, typ watch.EventType, obj runtime.Object, gv schema.GroupVersion) ([]byte, []byte, error) {
	kind, err := kindOf(obj, gv)
	if err != nil {
		return object, frame, err
	}
	if object, err = appendProtobuf(object, obj, kind); err != nil {
		return object, frame, err
	}
	frame, err = appendWatchFrame(frame, typ, object)
	return object, frame, err
}

// listBlueprint re-encodes the initial-events-list-blueprint annotation of
// the bookmark that ends a watch-list's initial events in the watch's
// encoding, as kube's watchListTransformer does: client-go decodes it
// with the stream's decoder, so a protobuf client needs it in protobuf, and
// a metadata watch gets a PartialObjectMetadataList. The registry writes
// it as the resource's list in JSON, which plain JSON watches keep.
type listBlueprint struct {
	q       *request
	n       negotiation
	encoded string // base64, once computed
}

// set replaces obj's blueprint annotation, if it has one.
func (b *listBlueprint) set(obj runtime.Object) error {
	if b.n.media == mediaJSON && (b.n.target == nil || b.n.target.Kind == "Table") {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil // not an object with metadata: nothing to replace
	}
	if _, ok := m.GetAnnotations()[metav1.InitialEventsListBlueprintAnnotationKey]; !ok {
		return nil
	}
	if b.encoded == "" {
		if b.encoded, err = b.encode(); err != nil {
			return fmt.Errorf("encode the initial events list blueprint: %w", err)
		}
	}
	// The map may be shared with the object the bookmark was made from
	// (PartialObjectMetadata copies it by reference).
	annotations := maps.Clone(m.GetAnnotations())
	annotations[metav1.InitialEventsListBlueprintAnnotationKey] = b.encoded
	m.SetAnnotations(annotations)
	return nil
}

func (b *listBlueprint) encode() (string, error) {
	info := b.q.store.Info()
	list := b.q.store.Strategy().NewList()
	list.GetObjectKind().SetGroupVersionKind(info.GroupVersion().WithKind(info.ListKind))
	if t := b.n.target; t != nil && t.Kind == "PartialObjectMetadata" {
		var err error
		if list, err = asPartialObjectMetadataList(list, t.GroupVersion()); err != nil {
			return "", err
		}
	}
	var data []byte
	var err error
	if b.n.media == mediaProtobuf {
		data, err = encodeProtobuf(list, info.GroupVersion())
	} else if data, err = json.Marshal(list); err == nil {
		data = append(data, '\n') // kube's JSON encoder ends with one
	}
	return base64.StdEncoding.EncodeToString(data), err
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}
