package rawproto

import (
	"errors"
	"fmt"
	"slices"
)

// Where kube's objects keep their resourceVersion: every top-level object
// of k8s.io/api has its ObjectMeta at field 1, and resourceVersion is
// ObjectMeta's field 6 (a string).
const (
	objectMetaField     = 1
	metaResourceVersion = 6
)

// Protobuf's other wire types, which SetResourceVersion steps over.
const (
	wireFixed64 = 1
	wireFixed32 = 5
)

var errNoMetadata = errors.New("rawproto: message has no metadata (field 1)")

// SetResourceVersion appends to dst msg, the protobuf message of a kube
// top-level object, with its metadata.resourceVersion set to rv: the bytes
// gogo's Marshal writes for the object msg decodes to, with that
// resourceVersion. Objects are stored without one (the revision etcd
// gives a write is not known before it is written); the watch cache
// keeps them with it, so that a protobuf reader is served a copy.
//
// gogo writes fields in number order, and writes a non-pointer string
// even when empty, so a stored ObjectMeta normally has field 6 empty: its
// value is replaced (or inserted before the first field numbered above
// 6, or at the end, when absent), and metadata's length is written again
// (it may take a byte more). Nothing else is read or changed. On error
// (msg is not a message with one metadata field, metadata's fields do not
// parse, resourceVersion occurs twice or with another wire type) dst is
// returned as it was.
func SetResourceVersion(dst, msg []byte, rv string) ([]byte, error) {
	metaKey, metaStart, metaEnd, err := metadataField(msg)
	if err != nil {
		return dst, err
	}
	meta := msg[metaStart:metaEnd]
	at, end, err := resourceVersionField(meta)
	if err != nil {
		return dst, err
	}
	field := FieldSize(len(rv))
	size := len(meta) - (end - at) + field
	dst = slices.Grow(dst, metaKey+FieldSize(size)+len(msg)-metaEnd)
	dst = append(dst, msg[:metaKey]...)
	// The key and length as gogo writes them.
	dst = AppendFieldHeader(dst, objectMetaField, size)
	dst = append(dst, meta[:at]...)
	dst = appendStringField(dst, metaResourceVersion, rv)
	dst = append(dst, meta[end:]...)
	return append(dst, msg[metaEnd:]...), nil
}

// Metadata returns the value of msg's metadata field (an ObjectMeta's
// message), sharing msg's bytes: msg is the protobuf message of a kube
// top-level object, with one metadata field.
func Metadata(msg []byte) ([]byte, error) {
	_, start, end, err := metadataField(msg)
	if err != nil {
		return nil, err
	}
	return msg[start:end], nil
}

// metadataField finds msg's one metadata field: where its key starts and
// where its value starts and ends.
func metadataField(msg []byte) (key, start, end int, err error) {
	key = -1
	err = eachField(msg, func(num, wire, k, s, e int) error {
		if num != objectMetaField {
			return nil
		}
		if wire != wireBytes {
			return fmt.Errorf("rawproto: metadata has wire type %d", wire)
		}
		if key >= 0 {
			// gogo would merge the two: not a message gogo wrote.
			return errors.New("rawproto: metadata occurs twice")
		}
		key, start, end = k, s, e
		return nil
	})
	if err != nil {
		return 0, 0, 0, err
	}
	if key < 0 {
		return 0, 0, 0, errNoMetadata
	}
	return key, start, end, nil
}

// resourceVersionField returns the span of meta (an ObjectMeta) to
// replace with the resourceVersion field: the field itself when present,
// else an empty span where it belongs.
func resourceVersionField(meta []byte) (at, end int, err error) {
	at, end = -1, -1
	insert := len(meta)
	err = eachField(meta, func(num, wire, k, _, e int) error {
		switch {
		case num == metaResourceVersion:
			if wire != wireBytes {
				return fmt.Errorf("rawproto: resourceVersion has wire type %d", wire)
			}
			if at >= 0 {
				return errors.New("rawproto: resourceVersion occurs twice")
			}
			at, end = k, e
		case num > metaResourceVersion && insert == len(meta):
			insert = k
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if at < 0 {
		return insert, insert, nil
	}
	return at, end, nil
}

// eachField calls fn with each field of msg in order: its number and wire
// type, where its key starts, and where its value starts and ends (for a
// length-delimited field, its bytes without the length). Groups (wire
// types 3 and 4, which no kube type uses), malformed varints and
// truncated fields are errors.
func eachField(msg []byte, fn func(num, wire, key, start, end int) error) error {
	for i := 0; i < len(msg); {
		key, next, err := uvarint(msg, i)
		if err != nil {
			return err
		}
		num, wire := key>>3, int(key&7)
		if num == 0 || num > 1<<29-1 {
			return fmt.Errorf("rawproto: field number %d", num)
		}
		start, end := next, 0
		switch wire {
		case wireVarint:
			if _, end, err = uvarint(msg, next); err != nil {
				return err
			}
		case wireFixed64, wireFixed32:
			size := 8
			if wire == wireFixed32 {
				size = 4
			}
			if size > len(msg)-next {
				return errTruncated
			}
			end = next + size
		case wireBytes:
			var n uint64
			if n, start, err = uvarint(msg, next); err != nil {
				return err
			}
			if n > uint64(len(msg)-start) {
				return errTruncated
			}
			end = start + int(n)
		default:
			return fmt.Errorf("rawproto: field %d has wire type %d", num, wire)
		}
		if err := fn(int(num), wire, i, start, end); err != nil {
			return err
		}
		i = end
	}
	return nil
}
