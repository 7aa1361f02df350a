package watch

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

func TestAttrs(t *testing.T) {
	m := map[string]string{"spec.nodeName": "node-1", "metadata.name": "p", "status.phase": "Running", "empty": ""}
	a := NewAttrs(m)
	if !reflect.DeepEqual(a.Map(), m) || a.Len() != 4 {
		t.Fatalf("round trip: %v", a.Map())
	}
	for k, v := range m {
		if !a.Has(k) || a.Get(k) != v {
			t.Errorf("%s: Has %v Get %q, want %q", k, a.Has(k), a.Get(k), v)
		}
	}
	for _, k := range []string{"", "a", "zzz", "spec", "status.phasex"} {
		if a.Has(k) || a.Get(k) != "" {
			t.Errorf("%q: found in %v", k, a)
		}
	}
	if NewAttrs(nil) != nil || NewAttrs(nil).Has("x") {
		t.Error("empty Attrs")
	}

	// Selectors match on Attrs as on the maps they replace.
	for _, sel := range []string{"spec.nodeName=node-1", "spec.nodeName!=node-2,status.phase=Running", "empty=", "metadata.name!=p", "missing="} {
		fs := fields.ParseSelectorOrDie(sel)
		if got, want := fs.Matches(a), fs.Matches(fields.Set(m)); got != want {
			t.Errorf("field selector %q: %v, map says %v", sel, got, want)
		}
	}
	l := NewAttrs(map[string]string{"app": "web", "tier": "front"})
	for _, sel := range []string{"app=web", "app in (web,db),tier", "!missing", "tier notin (front)", "app=db"} {
		ls, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ls.Matches(l), ls.Matches(labels.Set(l.Map())); got != want {
			t.Errorf("label selector %q: %v, map says %v", sel, got, want)
		}
	}
}
