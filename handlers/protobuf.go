package handlers

import (
	"encoding/binary"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
)

// This file writes kube's protobuf encoding (k8s.io/apimachinery's
// runtime/serializer/protobuf), byte for byte:
//
//   - an object is the magic "k8s\x00" then a runtime.Unknown whose typeMeta
//     names the object's apiVersion and kind, whose raw is the object's own
//     protobuf message and whose contentEncoding and contentType are empty;
//   - a watch stream is a sequence of frames, each a 4-byte big-endian length
//     then a metav1.WatchEvent without envelope (kube's raw stream
//     serializer), whose object.raw holds the event's object encoded as above.

// protobufMagic starts every protobuf-encoded object.
var protobufMagic = []byte{'k', '8', 's', 0}

// protoMessage is what the k8s.io/api and meta types generate for their
// protobuf encoding (gogo-protobuf).
type protoMessage interface {
	runtime.Object
	Size() int
	MarshalTo(data []byte) (int, error)
}

// appendProtobuf appends obj in kube's protobuf encoding to buf. The
// envelope names kind, which callers take from kindOf: the object is not
// modified, so objects shared with others can be encoded as they are.
func appendProtobuf(buf []byte, obj runtime.Object, kind schema.GroupVersionKind) ([]byte, error) {
	m, ok := obj.(protoMessage)
	if !ok {
		return nil, fmt.Errorf("%T has no protobuf encoding", obj)
	}
	unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: kind.GroupVersion().String(), Kind: kind.Kind}}
	size := uint64(m.Size())
	// As kube's serializer: one allocation for the whole message, its
	// estimate allowing the longest varint for the nested length.
	need := len(protobufMagic) + unk.Size() + 1 + binary.MaxVarintLen64 + int(size)
	buf = slices.Grow(buf, need)
	buf = append(buf, protobufMagic...)
	n, err := unk.NestedMarshalTo(buf[len(buf):len(buf)+need-len(protobufMagic)], m, size)
	if err != nil {
		return nil, fmt.Errorf("encode %s as protobuf: %w", kind.Kind, err)
	}
	return buf[:len(buf)+n], nil
}

// encodeProtobuf returns obj in kube's protobuf encoding.
func encodeProtobuf(obj runtime.Object, fallback schema.GroupVersion) ([]byte, error) {
	kind, err := kindOf(obj, fallback)
	if err != nil {
		return nil, err
	}
	return appendProtobuf(nil, obj, kind)
}

// kindOf returns the kind an encoding of obj names: the one it carries,
// else the one the scheme registers for its type, preferring group
// version gv (the endpoint's, as kube's encoder for the endpoint's
// version does). Status and the other meta types are registered as v1.
func kindOf(obj runtime.Object, gv schema.GroupVersion) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
		return gvk, nil
	}
	kinds, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("kind of %T: %w", obj, err)
	}
	for _, k := range kinds {
		if k.GroupVersion() == gv {
			return k, nil
		}
	}
	return kinds[0], nil
}

// appendWatchFrame appends one protobuf watch frame to buf: the event of
// type typ carrying obj (already encoded with appendProtobuf).
func appendWatchFrame(buf []byte, typ watch.EventType, obj []byte) ([]byte, error) {
	ev := metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: obj}}
	size := ev.Size()
	start := len(buf)
	buf = append(buf, make([]byte, 4+size)...)
	binary.BigEndian.PutUint32(buf[start:], uint32(size))
	if _, err := ev.MarshalTo(buf[start+4:]); err != nil {
		return nil, fmt.Errorf("encode watch event: %w", err)
	}
	return buf, nil
}
