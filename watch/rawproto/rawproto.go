// Package rawproto writes kube's protobuf wire forms without decoding
// objects: the envelopes, lists and watch frames around messages that are
// already encoded, so that the watch cache's per-object encodings can be
// copied into a list or a watch frame, and (Transcoder) an object's message
// itself from the JSON the cache keeps; JSONTranscoder goes the other way,
// from an object's message as stored in etcd to the JSON encoding/json
// writes for it. Its output is byte for byte what k8s.io/apimachinery's
// protobuf serializer writes for the same objects:
//
//   - an object is the magic "k8s\x00", then a runtime.Unknown: typeMeta
//     (field 1: apiVersion 1, kind 2), raw (2), contentEncoding (3) and
//     contentType (4), the last two empty but present (gogo writes every
//     non-pointer string);
//   - a list (PodList, NodeList, ...) is metadata (field 1, a ListMeta)
//     then one items field (2) per item: every list of k8s.io/api numbers
//     them so;
//   - a watch stream frame is a 4-byte big-endian length, then a
//     metav1.WatchEvent: type (1) and object (2, a runtime.RawExtension
//     whose raw, field 1, is the enveloped object).
//
// Fields are written forwards here, where gogo writes them backwards: the
// sizes of nested messages are computed first, so the bytes are the same.
package rawproto

import (
	"encoding/binary"
	"slices"
)

// Magic starts every protobuf-encoded object.
const Magic = "k8s\x00"

// wireBytes is protobuf's wire type of length-delimited fields.
const wireBytes = 2

// Field numbers of the messages this package writes.
const (
	unknownTypeMeta        = 1
	unknownRaw             = 2
	unknownContentEncoding = 3
	unknownContentType     = 4
	typeMetaAPIVersion     = 1
	typeMetaKind           = 2

	// ListMetaField and ListItemsField number a list's metadata and items
	// in every list type of k8s.io/api (e.g. core/v1 generated.proto:
	// "optional ListMeta metadata = 1; repeated Pod items = 2;").
	ListMetaField  = 1
	ListItemsField = 2

	watchEventType      = 1
	watchEventObject    = 2
	rawExtensionRaw     = 1
	watchFrameLengthLen = 4
)

// FieldSize is the encoded size of a length-delimited field (with a field
// number below 16) carrying n bytes.
func FieldSize(n int) int { return 1 + uvarintLen(uint64(n)) + n }

// AppendField appends a length-delimited field (number below 16)
// carrying data.
func AppendField(buf []byte, field int, data []byte) []byte {
	return append(AppendFieldHeader(buf, field, len(data)), data...)
}

// AppendFieldHeader appends the key and length of a length-delimited
// field (number below 16) whose n bytes the caller appends next.
func AppendFieldHeader(buf []byte, field, n int) []byte {
	buf = append(buf, byte(field<<3|wireBytes))
	return binary.AppendUvarint(buf, uint64(n))
}

func appendStringField(buf []byte, field int, s string) []byte {
	return append(AppendFieldHeader(buf, field, len(s)), s...)
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// Envelope names the apiVersion and kind of an enveloped object (the
// runtime.Unknown's typeMeta).
type Envelope struct {
	APIVersion, Kind string
}

func (e Envelope) typeMetaSize() int {
	return FieldSize(len(e.APIVersion)) + FieldSize(len(e.Kind))
}

// unknownSize is the size of the runtime.Unknown carrying a raw message of
// n bytes.
func (e Envelope) unknownSize(n int) int {
	// contentEncoding and contentType: empty, two bytes each.
	return FieldSize(e.typeMetaSize()) + FieldSize(n) + 2*FieldSize(0)
}

// Size is the size of an object of n bytes enveloped, magic included.
func (e Envelope) Size(n int) int { return len(Magic) + e.unknownSize(n) }

// AppendHeader appends the magic and the envelope up to the raw message of
// n bytes, which the caller appends next before calling AppendTrailer.
// It grows buf once for the whole object.
func (e Envelope) AppendHeader(buf []byte, n int) []byte {
	buf = slices.Grow(buf, e.Size(n))
	buf = append(buf, Magic...)
	buf = AppendFieldHeader(buf, unknownTypeMeta, e.typeMetaSize())
	buf = appendStringField(buf, typeMetaAPIVersion, e.APIVersion)
	buf = appendStringField(buf, typeMetaKind, e.Kind)
	return AppendFieldHeader(buf, unknownRaw, n)
}

// AppendTrailer ends an envelope that AppendHeader started, once its raw
// message is written: the empty contentEncoding and contentType.
func AppendTrailer(buf []byte) []byte {
	buf = AppendFieldHeader(buf, unknownContentEncoding, 0)
	return AppendFieldHeader(buf, unknownContentType, 0)
}

// Append appends raw, an object's protobuf message, enveloped.
func (e Envelope) Append(buf, raw []byte) []byte {
	return AppendTrailer(append(e.AppendHeader(buf, len(raw)), raw...))
}

// AppendWatchFrame appends one frame of a protobuf watch stream: the event
// of type typ whose object is raw (the object's message) enveloped in e.
func (e Envelope) AppendWatchFrame(buf []byte, typ string, raw []byte) []byte {
	object := e.unknownSize(len(raw)) + len(Magic)
	extension := FieldSize(object)
	size := FieldSize(len(typ)) + FieldSize(extension)
	buf = slices.Grow(buf, watchFrameLengthLen+size)
	buf = binary.BigEndian.AppendUint32(buf, uint32(size))
	buf = appendStringField(buf, watchEventType, typ)
	buf = AppendFieldHeader(buf, watchEventObject, extension)
	buf = AppendFieldHeader(buf, rawExtensionRaw, object)
	return e.Append(buf, raw)
}
