package rawproto

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// errEnvelope reports bytes that are not an enveloped object.
var errEnvelope = errors.New("rawproto: not a protobuf-encoded object")

// IsEnveloped reports whether data starts with kube's protobuf magic: it is
// an enveloped object rather than (for instance) JSON, which cannot start
// with "k8s\x00".
func IsEnveloped(data []byte) bool {
	return len(data) >= len(Magic) && string(data[:len(Magic)]) == Magic
}

// ParseEnvelope reads an enveloped object (the magic, then a
// runtime.Unknown) and returns its envelope and its raw message, a slice of
// data. It accepts what kube's protobuf serializer accepts: the fields in
// any order, the empty contentEncoding and contentType or none; a content
// encoding or type that is set means raw is not a plain message, and is
// refused.
func ParseEnvelope(data []byte) (env Envelope, raw []byte, err error) {
	if !IsEnveloped(data) {
		return Envelope{}, nil, errEnvelope
	}
	err = fields(data[len(Magic):], func(num int, value []byte) error {
		switch num {
		case unknownTypeMeta:
			return fields(value, func(num int, value []byte) error {
				switch num {
				case typeMetaAPIVersion:
					env.APIVersion = string(value)
				case typeMetaKind:
					env.Kind = string(value)
				}
				return nil
			})
		case unknownRaw:
			raw = value
		case unknownContentEncoding, unknownContentType:
			if len(value) != 0 {
				return fmt.Errorf("rawproto: enveloped object with content encoding or type %q", value)
			}
		}
		return nil
	})
	if err != nil {
		return Envelope{}, nil, err
	}
	return env, raw, nil
}

// fields calls fn with each length-delimited field of msg, in order; any
// other wire type, or a truncated field, is an error.
func fields(msg []byte, fn func(num int, value []byte) error) error {
	for len(msg) > 0 {
		key, n := binary.Uvarint(msg)
		if n <= 0 {
			return fmt.Errorf("%w: bad field key", errEnvelope)
		}
		msg = msg[n:]
		if key&7 != wireBytes {
			return fmt.Errorf("%w: field %d has wire type %d", errEnvelope, key>>3, key&7)
		}
		size, n := binary.Uvarint(msg)
		if n <= 0 || size > uint64(len(msg)-n) {
			return fmt.Errorf("%w: field %d is truncated", errEnvelope, key>>3)
		}
		value := msg[n : n+int(size)]
		msg = msg[n+int(size):]
		if err := fn(int(key>>3), value); err != nil {
			return err
		}
	}
	return nil
}
