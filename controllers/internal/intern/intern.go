// Package intern shares equal, read-only parts of the objects that the
// controllers' and the scheduler's informers keep. Pods made from one
// template carry the same labels, tolerations, container requests and
// owner reference; decoded apart, each pod holds its own copy (a label
// map or a ResourceList costs hundreds of bytes), so 30,000 pods of a few
// templates hold 30,000 copies of a few values. An informer transform
// passes those parts through a Table and keeps the shared copy.
//
// Sharing is safe because informers' objects are read-only by contract
// (client-go's listers and handlers hand out the cached object itself):
// nothing may write a map or slice it got from one.
//
// A Table holds at most its bound of distinct values and forgets them all
// when full, so a stream of values that never repeat (a label unique to
// each pod) costs a bounded table, not a leak; sharing then starts again
// from the values seen next.
package intern

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"unique"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultBound is the number of distinct values a package table keeps.
const DefaultBound = 4096

// Table shares values by a key that spells them; it is safe for
// concurrent use (informers of several resources transform at once).
type Table[V any] struct {
	mu    sync.Mutex
	bound int
	m     map[string]V
}

// NewTable returns a table of at most bound values.
func NewTable[V any](bound int) *Table[V] {
	return &Table[V]{bound: bound, m: make(map[string]V)}
}

// Share returns the value kept under key, or keeps v under key and
// returns it. key must spell v exactly: values with one key are taken as
// equal.
func (t *Table[V]) Share(key string, v V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.m[key]; ok {
		return old
	}
	if len(t.m) >= t.bound {
		clear(t.m)
	}
	t.m[key] = v
	return v
}

// Len is the number of values kept.
func (t *Table[V]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

var (
	labelTable      = NewTable[map[string]string](DefaultBound)
	tolerationTable = NewTable[[]v1.Toleration](DefaultBound)
	resourceTable   = NewTable[v1.ResourceList](DefaultBound)
	ownerTable      = NewTable[[]metav1.OwnerReference](DefaultBound)
)

// Labels returns a map equal to m, shared with the other callers that
// passed an equal one; nil for an empty m.
func Labels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return labelTable.Share(MapKey(m), m)
}

// MapKey spells a string map: its entries sorted by key.
func MapKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	n := 0
	for k, v := range m {
		keys = append(keys, k)
		n += len(k) + len(v) + 8
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		field(&b, k)
		field(&b, m[k])
	}
	return b.String()
}

// field writes s to a key, length first, so that no two sequences of
// strings spell the same key whatever bytes they hold.
func field(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

// Field writes s to a key as the package's tables spell their keys, for
// tables of other values.
func Field(b *strings.Builder, s string) { field(b, s) }

// Tolerations returns a slice equal to ts, shared as Labels' maps are; nil
// for an empty ts.
func Tolerations(ts []v1.Toleration) []v1.Toleration {
	if len(ts) == 0 {
		return nil
	}
	var b strings.Builder
	for i := range ts {
		t := &ts[i]
		field(&b, t.Key)
		field(&b, string(t.Operator))
		field(&b, t.Value)
		field(&b, string(t.Effect))
		if t.TolerationSeconds != nil {
			field(&b, strconv.FormatInt(*t.TolerationSeconds, 10))
		} else {
			b.WriteByte('-')
		}
	}
	return tolerationTable.Share(b.String(), ts)
}

// ResourceList returns a list equal to rl (the same quantities, in their
// canonical spelling), shared as Labels' maps are; nil for an empty rl.
func ResourceList(rl v1.ResourceList) v1.ResourceList {
	if len(rl) == 0 {
		return nil
	}
	return resourceTable.Share(ResourceListKey(rl), rl)
}

// ResourceListKey spells a resource list: its quantities in their
// canonical spelling, sorted by resource name.
func ResourceListKey(rl v1.ResourceList) string {
	keys := make([]v1.ResourceName, 0, len(rl))
	for k := range rl {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		q := rl[k]
		field(&b, string(k))
		field(&b, q.String())
	}
	return b.String()
}

// OwnerReferences returns a slice equal to refs, shared as Labels' maps
// are (the pods of one ReplicaSet, Job or StatefulSet have the same); nil
// for an empty refs.
func OwnerReferences(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return nil
	}
	var b strings.Builder
	for i := range refs {
		r := &refs[i]
		field(&b, r.APIVersion)
		field(&b, r.Kind)
		field(&b, r.Name)
		field(&b, string(r.UID))
		b.WriteString(boolKey(r.Controller))
		b.WriteString(boolKey(r.BlockOwnerDeletion))
	}
	return ownerTable.Share(b.String(), refs)
}

func boolKey(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "t"
	}
	return "f"
}

// String returns a string equal to s, shared with the other callers that
// passed an equal one (unique.Make: kept while in use), for the strings
// that repeat across objects: namespaces, node names.
func String(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}
