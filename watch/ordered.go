package watch

import (
	"slices"
	"sort"
	"strings"
)

// maxChunk bounds the objects of one chunk of an ordered set. An insert or
// a delete moves at most this many pointers (and the chunk index, ~1/256
// of the objects); a lookup is two binary searches.
const maxChunk = 512

// ordered is the cache's current state: its objects sorted by key, kept
// in chunks of at most maxChunk, so that a LIST walks the keys of its
// prefix in order instead of scanning every object and sorting the
// matches (kube's watch cache keeps a B-tree for the same reason). A plain
// sorted slice would move up to every pointer on each insert; a map plus
// a sort per LIST costs O(n log n) per LIST however small the namespace.
// It is not safe for concurrent use; the Cache's lock guards it.
type ordered struct {
	// chunks are non-empty and sorted, and every key of a chunk is less
	// than every key of the next.
	chunks [][]*Object
	n      int
}

// search returns the chunk that holds key or where it belongs, and its
// position there.
func (o *ordered) search(key string) (ci, i int, found bool) {
	// The first chunk whose last key is >= key; past the end, the last.
	ci = sort.Search(len(o.chunks), func(c int) bool {
		ch := o.chunks[c]
		return ch[len(ch)-1].Key >= key
	})
	if ci == len(o.chunks) {
		if ci == 0 {
			return 0, 0, false
		}
		ci--
		return ci, len(o.chunks[ci]), false
	}
	ch := o.chunks[ci]
	i = sort.Search(len(ch), func(j int) bool { return ch[j].Key >= key })
	return ci, i, i < len(ch) && ch[i].Key == key
}

// get returns the object under key.
func (o *ordered) get(key string) (*Object, bool) {
	ci, i, found := o.search(key)
	if !found {
		return nil, false
	}
	return o.chunks[ci][i], true
}

// put stores obj under its key and returns the object it replaced, if any.
func (o *ordered) put(obj *Object) *Object {
	if len(o.chunks) == 0 {
		o.chunks = [][]*Object{{obj}}
		o.n = 1
		return nil
	}
	ci, i, found := o.search(obj.Key)
	ch := o.chunks[ci]
	if found {
		prev := ch[i]
		ch[i] = obj
		return prev
	}
	ch = slices.Insert(ch, i, obj)
	o.n++
	if len(ch) <= maxChunk {
		o.chunks[ci] = ch
		return nil
	}
	// Split in halves; each gets its own array so that appending to the
	// first never writes into the second.
	half := len(ch) / 2
	left := slices.Clone(ch[:half])
	right := slices.Clone(ch[half:])
	o.chunks[ci] = left
	o.chunks = slices.Insert(o.chunks, ci+1, right)
	return nil
}

// remove deletes the object under key and returns it, if there was one.
func (o *ordered) remove(key string) *Object {
	ci, i, found := o.search(key)
	if !found {
		return nil
	}
	ch := o.chunks[ci]
	prev := ch[i]
	ch = slices.Delete(ch, i, i+1) // clears the vacated slot
	o.n--
	switch {
	case len(ch) == 0:
		o.chunks = slices.Delete(o.chunks, ci, ci+1)
	case ci+1 < len(o.chunks) && len(ch)+len(o.chunks[ci+1]) <= maxChunk/2:
		// Merge small neighbours, so that deletes do not leave a long
		// index of near-empty chunks.
		o.chunks[ci] = append(ch, o.chunks[ci+1]...)
		o.chunks = slices.Delete(o.chunks, ci+1, ci+2)
	default:
		o.chunks[ci] = ch
	}
	return prev
}

// len returns the number of objects.
func (o *ordered) len() int { return o.n }

// ascend calls fn with the objects whose keys have prefix and are >= from,
// in key order, until fn returns false.
func (o *ordered) ascend(prefix, from string, fn func(*Object) bool) {
	start := max(prefix, from)
	ci, i, _ := o.search(start)
	for ; ci < len(o.chunks); ci, i = ci+1, 0 {
		for _, obj := range o.chunks[ci][i:] {
			if !strings.HasPrefix(obj.Key, prefix) {
				return
			}
			if !fn(obj) {
				return
			}
		}
	}
}
