package watch

import (
	"slices"
	"strings"
)

// Attrs is a small read-only string map kept compact: its key/value pairs
// sorted by key in one string, each key and value preceded by its length
// (uvarint). The cache holds the labels and selectable fields of every
// object, and of the previous state in every window event. As Go maps
// they cost ~0.8 KB a pod; as a slice of strings a third of that, but a
// dozen small objects a pod (each value its own string from the decoder),
// ~2 million at 150,000 pods for the garbage collector to mark at every
// cycle; as one string they are one object without pointers. It
// implements labels.Labels and fields.Fields, so selectors match on it
// directly. The zero value is the empty map.
type Attrs string

// NewAttrs returns m as Attrs; "" for an empty m.
func NewAttrs(m map[string]string) Attrs {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		keys = append(keys, k)
		size += uvarintLen(len(k)) + len(k) + uvarintLen(len(v)) + len(v)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size)
	for _, k := range keys {
		appendField(&b, k)
		appendField(&b, m[k])
	}
	return Attrs(b.String())
}

func appendField(b *strings.Builder, s string) {
	n := uint64(len(s))
	for n >= 0x80 {
		b.WriteByte(byte(n) | 0x80)
		n >>= 7
	}
	b.WriteByte(byte(n))
	b.WriteString(s)
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// nextField splits the first length-prefixed field off s.
func nextField(s string) (field, rest string) {
	n := int(s[0])
	i := 1
	if n >= 0x80 {
		n &= 0x7f
		for shift := 7; ; shift += 7 {
			c := s[i]
			i++
			n |= int(c&0x7f) << shift
			if c < 0x80 {
				break
			}
		}
	}
	return s[i : i+n], s[i+n:]
}

// each calls f with every pair in key order until it returns false.
func (a Attrs) each(f func(k, v string) bool) {
	s := string(a)
	for len(s) > 0 {
		var k, v string
		k, s = nextField(s)
		v, s = nextField(s)
		if !f(k, v) {
			return
		}
	}
}

// lookup returns key's value and whether it is set: a linear walk, which
// over a dozen pairs costs about what a binary search of a slice did,
// since most keys differ from key in length and are passed over without
// comparing their bytes.
func (a Attrs) lookup(key string) (value string, found bool) {
	s := string(a)
	for len(s) > 0 {
		var k, v string
		k, s = nextField(s)
		v, s = nextField(s)
		if len(k) == len(key) && k == key {
			return v, true
		}
	}
	return "", false
}

// Has reports whether key is set.
func (a Attrs) Has(key string) bool {
	_, found := a.lookup(key)
	return found
}

// Get returns key's value, "" when it is not set.
func (a Attrs) Get(key string) string {
	v, _ := a.lookup(key)
	return v
}

// Len is the number of keys.
func (a Attrs) Len() int {
	n := 0
	a.each(func(string, string) bool { n++; return true })
	return n
}

// Map returns a copy as a map.
func (a Attrs) Map() map[string]string {
	m := make(map[string]string, a.Len())
	a.each(func(k, v string) bool { m[k] = v; return true })
	return m
}
