package watch

import (
	"net"
	"unique"
	"unsafe"

	"github.com/corekube/corekube/watch/rawproto"
)

// The cache keeps an object stored as protobuf as its message, but not in
// one piece when the message has managedFields: each entry (manager,
// operation, time, the fields it owns) is interned, and the message is
// kept without them, with where they go back. The entries are ~40% of a
// pod's bytes, and every pod of a template written by the same manager in
// the same second has the same entry, so a cluster of pods made by a few
// controllers keeps each entry once rather than once a pod (at 150,000
// pods, hundreds of megabytes of heap). An entry is dropped by the
// collector once no object holds it (unique's handles are weak in its
// map). Readers see one message: Message puts the pieces back together,
// byte for byte the message stored.

// Message is an object's protobuf message (no envelope) as the cache
// keeps it, possibly in pieces: the message is head up to at, then the
// entries in order, then the rest of head. Its bytes are shared and must
// not be modified.
type Message struct {
	head    []byte
	at      int
	entries []unique.Handle[string]
}

// WholeMessage is the Message of data, in one piece.
func WholeMessage(data []byte) Message { return Message{head: data} }

// splitMessage returns msg as the cache keeps it: its managedFields
// entries interned and the rest in a new slice of its own, or msg whole
// when it has none (rawproto.ManagedFields).
func splitMessage(msg []byte) Message {
	at, entries, ok := rawproto.ManagedFields(msg)
	if !ok {
		return WholeMessage(msg)
	}
	m := Message{at: at, entries: make([]unique.Handle[string], len(entries))}
	end := at
	for i, e := range entries {
		m.entries[i] = unique.Make(string(e))
		end += len(e)
	}
	m.head = make([]byte, 0, len(msg)-(end-at))
	m.head = append(append(m.head, msg[:at]...), msg[end:]...)
	return m
}

// Len is the message's length.
func (m Message) Len() int {
	n := len(m.head)
	for _, e := range m.entries {
		n += len(e.Value())
	}
	return n
}

// AppendTo appends the message to dst.
func (m Message) AppendTo(dst []byte) []byte {
	if m.entries == nil {
		return append(dst, m.head...)
	}
	dst = append(dst, m.head[:m.at]...)
	for _, e := range m.entries {
		dst = append(dst, e.Value()...)
	}
	return append(dst, m.head[m.at:]...)
}

// Bytes returns the message in one slice: shared when it is kept in one
// piece, else a new one.
func (m Message) Bytes() []byte {
	if m.entries == nil {
		return m.head
	}
	return m.AppendTo(make([]byte, 0, m.Len()))
}

// Pieces is how many pieces AppendPieces appends.
func (m Message) Pieces() int {
	if m.entries == nil {
		return 1
	}
	return 2 + len(m.entries)
}

// AppendPieces appends the message's pieces to dst, to be written in
// turn without copying them together.
func (m Message) AppendPieces(dst net.Buffers) net.Buffers {
	if m.entries == nil {
		return append(dst, m.head)
	}
	dst = append(dst, m.head[:m.at:m.at])
	for _, e := range m.entries {
		dst = append(dst, stringBytes(e.Value()))
	}
	return append(dst, m.head[m.at:])
}

// stringBytes is s's bytes without a copy, for readers that only read
// them (Message's bytes are read-only). The slice points into the
// string's memory, which the collector keeps for as long as it does.
func stringBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
