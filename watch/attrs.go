package watch

import (
	"sort"
)

// Attrs is a small read-only string map kept compact: its key/value pairs
// sorted by key in one slice (k0, v0, k1, v1, ...). The cache holds the
// labels and selectable fields of every object, and of the previous state
// in every window event; as Go maps they cost ~0.8 KB per pod, as Attrs
// a third of that. It implements labels.Labels and fields.Fields, so
// selectors match on it directly.
type Attrs []string

// NewAttrs returns m as Attrs; nil for an empty m.
func NewAttrs(m map[string]string) Attrs {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	a := make(Attrs, 0, 2*len(m))
	for _, k := range keys {
		a = append(a, k, m[k])
	}
	return a
}

// index returns the position of key's pair, or -1.
func (a Attrs) index(key string) int {
	n := len(a) / 2
	i := sort.Search(n, func(i int) bool { return a[2*i] >= key })
	if i < n && a[2*i] == key {
		return 2 * i
	}
	return -1
}

// Has reports whether key is set.
func (a Attrs) Has(key string) bool { return a.index(key) >= 0 }

// Get returns key's value, "" when it is not set.
func (a Attrs) Get(key string) string {
	if i := a.index(key); i >= 0 {
		return a[i+1]
	}
	return ""
}

// Len is the number of keys.
func (a Attrs) Len() int { return len(a) / 2 }

// Map returns a copy as a map.
func (a Attrs) Map() map[string]string {
	m := make(map[string]string, a.Len())
	for i := 0; i+1 < len(a); i += 2 {
		m[a[i]] = a[i+1]
	}
	return m
}
