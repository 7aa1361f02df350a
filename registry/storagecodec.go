package registry

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/corekube/corekube/watch/rawjson"
	"github.com/corekube/corekube/watch/rawproto"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// Storage media types (kube-apiserver's --storage-media-type).
const (
	// MediaTypeProtobuf stores objects as kube does by default: the magic
	// "k8s\x00", then a runtime.Unknown naming the object's apiVersion and
	// kind and carrying its protobuf message. ~60% of the JSON's size for a
	// pod, which is what etcd keeps in memory, in its log and in its file.
	MediaTypeProtobuf = "application/vnd.kubernetes.protobuf"
	// MediaTypeJSON stores objects as JSON.
	MediaTypeJSON = "application/json"
)

// storageCodec is the valueConverter between the Store's
// encoding (JSON: what the update path decodes, compares and splices) and
// the one in storage. The watch cache reads storage below it and keeps
// protobuf values as they are, making their JSON with messageJSON. It writes protobuf, or
// JSON when so configured, and reads both whatever it writes, as kube's
// storage does: a data directory written as JSON (by an older corekube, or
// with --storage-media-type=application/json) stays readable, and each
// object is rewritten in the configured form at its next write.
type storageCodec struct {
	protobuf bool
	// newObject returns an empty object of the stored type; kind is its
	// name, which every stored envelope must carry.
	newObject func() runtime.Object
	kind      string
	// toProto and toJSON transcode between the JSON and the protobuf
	// message without decoding them; nil when the type has none.
	toProto *rawproto.Transcoder
	toJSON  *rawproto.JSONTranscoder
}

// CheckStorageMediaType reports whether mediaType is one a Store can write.
func CheckStorageMediaType(mediaType string) error {
	switch mediaType {
	case "", MediaTypeProtobuf, MediaTypeJSON:
		return nil
	}
	return fmt.Errorf("unsupported storage media type %q (supported: %s, %s)", mediaType, MediaTypeProtobuf, MediaTypeJSON)
}

// newStorageCodec returns the codec of objects of newObject's type (a
// pointer to a struct), which writes mediaType (CheckStorageMediaType; ""
// is protobuf, kube's default). A type without a protobuf form is written
// as JSON, as kube writes custom resources.
func newStorageCodec(newObject func() runtime.Object, mediaType string) *storageCodec {
	t := reflect.TypeOf(newObject()).Elem()
	c := &storageCodec{newObject: newObject, kind: t.Name()}
	if _, ok := newObject().(protoUnmarshaler); !ok {
		return c
	}
	// Read whatever is written: protobuf values may be there either way.
	c.toJSON, _ = rawproto.NewJSONTranscoder(t)
	if mediaType == MediaTypeJSON {
		return c
	}
	c.protobuf = true
	c.toProto, _ = rawproto.NewTranscoder(t)
	return c
}

// protoUnmarshaler is the protobuf decoding gogo-protobuf generates for the
// k8s.io/api types.
type protoUnmarshaler interface {
	Unmarshal(data []byte) error
}

// ToStorage encodes the JSON the Store writes (kind and apiVersion first,
// no resourceVersion) in the stored form.
func (c *storageCodec) ToStorage(value []byte) ([]byte, error) {
	if !c.protobuf {
		return value, nil
	}
	env, err := envelopeOf(value)
	if err != nil {
		return nil, err
	}
	if c.toProto != nil {
		buf := protoBuffers.Get().(*[]byte)
		msg, err := c.toProto.Append((*buf)[:0], value)
		if err == nil {
			stored := env.Append(make([]byte, 0, env.Size(len(msg))), msg)
			*buf = msg
			if cap(msg) <= 1<<20 {
				protoBuffers.Put(buf)
			}
			return stored, nil
		}
		protoBuffers.Put(buf)
		// What the transcoder does not expect is decoded and marshalled,
		// which also reports malformed input as encoding/json does.
	}
	obj := c.newObject()
	if err := json.Unmarshal(value, obj); err != nil {
		return nil, fmt.Errorf("encode %s as protobuf: %w", c.kind, err)
	}
	m, ok := obj.(protoMarshaler)
	if !ok {
		return nil, fmt.Errorf("encode %s as protobuf: %T has no protobuf form", c.kind, obj)
	}
	msg, err := m.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encode %s as protobuf: %w", c.kind, err)
	}
	return env.Append(make([]byte, 0, env.Size(len(msg))), msg), nil
}

// FromStorage returns the Store's JSON of a stored value, protobuf or JSON.
func (c *storageCodec) FromStorage(stored []byte) ([]byte, error) {
	if !rawproto.IsEnveloped(stored) {
		return stored, nil // JSON, the Store's own encoding
	}
	env, msg, err := rawproto.ParseEnvelope(stored)
	if err != nil {
		return nil, err
	}
	// JSON is ~1.7 times the message: one allocation, nearly always.
	return c.messageJSON(make([]byte, 0, len(msg)*2), env, msg)
}

// messageJSON appends to dst the JSON of msg, a stored object's protobuf
// message, enveloped in env: encoding/json's bytes for the decoded
// object, with env's apiVersion and kind (and whatever resourceVersion
// msg carries: none as stored, the revision's in the watch cache, which
// keeps stored messages and makes their JSON with this,
// watch.Config.MessageJSON). An envelope of another kind is an error.
func (c *storageCodec) messageJSON(dst []byte, env rawproto.Envelope, msg []byte) ([]byte, error) {
	if env.Kind != c.kind {
		return dst, fmt.Errorf("stored object is a %s (%s), not a %s", env.Kind, env.APIVersion, c.kind)
	}
	if c.toJSON != nil {
		if data, err := c.toJSON.AppendJSON(dst, msg, env.APIVersion, env.Kind); err == nil {
			return data, nil
		}
		// What the transcoder does not expect is decoded and marshalled,
		// which also reports a damaged message as gogo does.
	}
	obj := c.newObject()
	u, ok := obj.(protoUnmarshaler)
	if !ok {
		return dst, fmt.Errorf("decode %s: %T has no protobuf form", c.kind, obj)
	}
	if err := u.Unmarshal(msg); err != nil {
		return dst, fmt.Errorf("decode %s from protobuf: %w", c.kind, err)
	}
	typeMeta(obj, env)
	data, err := MarshalJSON(obj)
	if err != nil {
		return dst, fmt.Errorf("encode %s as JSON: %w", c.kind, err)
	}
	return append(dst, data...), nil
}

// typeMeta sets obj's apiVersion and kind to the envelope's.
func typeMeta(obj runtime.Object, env rawproto.Envelope) {
	kind := obj.GetObjectKind()
	gvk := kind.GroupVersionKind()
	gvk.Kind = env.Kind
	if gv, err := schema.ParseGroupVersion(env.APIVersion); err == nil {
		gvk.Group, gvk.Version = gv.Group, gv.Version
	}
	kind.SetGroupVersionKind(gvk)
}

// envelopeOf reads the apiVersion and kind of the Store's JSON, the first
// two members as encode writes them.
func envelopeOf(value []byte) (rawproto.Envelope, error) {
	var env rawproto.Envelope
	it := rawjson.NewObject(value)
	for (env.Kind == "" || env.APIVersion == "") && it.Next() {
		var err error
		switch string(it.Key()) {
		case "kind":
			env.Kind, err = rawjson.String(it.Value())
		case "apiVersion":
			env.APIVersion, err = rawjson.String(it.Value())
		}
		if err != nil {
			return env, fmt.Errorf("encode as protobuf: %s: %w", it.Key(), err)
		}
	}
	if err := it.Err(); err != nil {
		return env, fmt.Errorf("encode as protobuf: %w", err)
	}
	if env.Kind == "" || env.APIVersion == "" {
		return env, fmt.Errorf("encode as protobuf: the object names no kind or apiVersion")
	}
	return env, nil
}

// protoBuffers are scratch buffers for ToStorage's transcoding: the message
// is written in one and copied into the envelope at its exact size.
var protoBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// StoredJSON returns the JSON a Store reads from a stored value of any
// built-in type, protobuf or JSON, for what looks into storage from
// outside a Store (tests, tools).
func StoredJSON(stored []byte) ([]byte, error) {
	if !rawproto.IsEnveloped(stored) {
		return stored, nil
	}
	env, _, err := rawproto.ParseEnvelope(stored)
	if err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(env.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("stored object: %w", err)
	}
	obj, err := scheme.Scheme.New(gv.WithKind(env.Kind))
	if err != nil {
		return nil, fmt.Errorf("stored object: %w", err)
	}
	return newStorageCodec(func() runtime.Object { return obj.DeepCopyObject() }, MediaTypeProtobuf).FromStorage(stored)
}
