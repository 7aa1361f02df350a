package watch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestOrdered checks the ordered set against a map and a sort through
// random puts and removes, with chunks splitting and merging.
func TestOrdered(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var o ordered
	model := map[string]*Object{}
	key := func() string { return fmt.Sprintf("/p/ns%d/o%04d", r.IntN(5), r.IntN(3000)) }
	for step := range 40000 {
		k := key()
		if r.IntN(3) == 0 {
			got, want := o.remove(k), model[k]
			delete(model, k)
			if got != want {
				t.Fatalf("step %d: remove(%s) = %v, want %v", step, k, got, want)
			}
		} else {
			obj := &Object{Key: k, Revision: int64(step)}
			if got, want := o.put(obj), model[k]; got != want {
				t.Fatalf("step %d: put(%s) replaced %v, want %v", step, k, got, want)
			}
			model[k] = obj
		}
		if step%4000 != 0 {
			continue
		}
		if o.len() != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, o.len(), len(model))
		}
		for _, c := range o.chunks {
			if len(c) == 0 || len(c) > maxChunk {
				t.Fatalf("step %d: chunk of %d", step, len(c))
			}
		}
		for _, prefix := range []string{"/p/", "/p/ns3/", "/p/ns9/"} {
			from := key()
			var want []string
			for k := range model {
				if strings.HasPrefix(k, prefix) && k >= from {
					want = append(want, k)
				}
			}
			slices.Sort(want)
			var got []string
			o.ascend(prefix, from, func(obj *Object) bool { got = append(got, obj.Key); return true })
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: ascend(%s, %s): %d keys, want %d", step, prefix, from, len(got), len(want))
			}
		}
		for k, want := range model {
			if got, ok := o.get(k); !ok || got != want {
				t.Fatalf("step %d: get(%s) = %v, %v", step, k, got, ok)
			}
		}
	}
	if _, ok := o.get("/p/none"); ok {
		t.Error("get of a missing key succeeded")
	}
	n := 0
	o.ascend("/p/", "", func(*Object) bool { n++; return n < 3 })
	if n != 3 {
		t.Errorf("ascend did not stop: %d", n)
	}
}
