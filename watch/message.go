package watch

import (
	"net"
	"sync"
	"unsafe"

	"github.com/corekube/corekube/watch/rawproto"
)

// The cache keeps an object stored as protobuf as its message, but when
// the message has managedFields entries (manager, operation, time, the
// fields it owns), each entry is kept apart from the rest, and an entry
// equal to one of a recent message is kept once: a manager that writes
// many objects from one template in the same second (a controller
// scaling up, the scheduler binding, a client creating) writes the same
// entry into each, and the entries are ~40% of a pod's bytes. Entries
// that are an object's own (a kubelet's status entry names the pod's IP)
// cost a slice header more than kept inline. Readers see one message:
// Message puts the pieces back together, byte for byte the message
// stored.

// Message is an object's protobuf message (no envelope) as the cache
// keeps it, possibly in pieces: the message is head up to at, then the
// entries in order, then the rest of head. Its bytes are shared and must
// not be modified.
type Message struct {
	head    []byte
	at      int
	entries []string
}

// WholeMessage is the Message of data, in one piece.
func WholeMessage(data []byte) Message { return Message{head: data} }

// Len is the message's length.
func (m Message) Len() int {
	n := len(m.head)
	for _, e := range m.entries {
		n += len(e)
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
		dst = append(dst, e...)
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
		dst = append(dst, stringBytes(e))
	}
	return append(dst, m.head[m.at:])
}

// stringBytes is s's bytes without a copy, for readers that only read
// them (Message's bytes are read-only). The slice points into the
// string's memory, which the collector keeps for as long as it does.
func stringBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// recentEntries is how many distinct entries an entryTable remembers:
// enough for the entries of some seconds of writes at thousands of
// objects a second (a pod has two or three), a few megabytes at most.
const recentEntries = 4096

// entryTable remembers the last recentEntries distinct managedFields
// entries a cache kept, so that an equal entry is kept as the same
// string. Sharing does not depend on it after that: an entry it forgets
// lives on in the objects that hold it, it is just not shared with
// objects kept later.
type entryTable struct {
	mu     sync.Mutex
	byText map[string]string
	order  []string // a ring: order[next] is forgotten first
	next   int
}

// split returns msg as the cache keeps it: its managedFields entries
// apart, each shared with an equal recent one, and the rest in a new
// slice of its own; or msg whole when it has none
// (rawproto.ManagedFields).
func (t *entryTable) split(msg []byte) Message {
	at, entries, ok := rawproto.ManagedFields(msg)
	if !ok {
		return WholeMessage(msg)
	}
	m := Message{at: at, entries: make([]string, len(entries))}
	end := at
	t.mu.Lock()
	for i, e := range entries {
		m.entries[i] = t.share(e)
		end += len(e)
	}
	t.mu.Unlock()
	m.head = make([]byte, 0, len(msg)-(end-at))
	m.head = append(append(m.head, msg[:at]...), msg[end:]...)
	return m
}

// share returns the remembered string equal to e, or remembers a copy of
// e, forgetting the oldest. t.mu is held.
func (t *entryTable) share(e []byte) string {
	if s, ok := t.byText[string(e)]; ok {
		return s
	}
	if t.byText == nil {
		t.byText, t.order = make(map[string]string, recentEntries), make([]string, recentEntries)
	}
	s := string(e)
	if old := t.order[t.next]; old != "" {
		delete(t.byText, old)
	}
	t.order[t.next] = s
	t.next = (t.next + 1) % recentEntries
	t.byText[s] = s
	return s
}
