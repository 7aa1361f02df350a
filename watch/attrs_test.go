package watch

import (
	"reflect"
	"strings"
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
	if NewAttrs(nil) != "" || NewAttrs(nil).Has("x") || NewAttrs(nil).Len() != 0 {
		t.Error("empty Attrs")
	}
	// Lengths past one varint byte, and keys sharing prefixes.
	long := map[string]string{strings.Repeat("k", 300): strings.Repeat("v", 20000), "k": "", "kk": "2", "a": strings.Repeat("x", 128)}
	la := NewAttrs(long)
	if !reflect.DeepEqual(la.Map(), long) || la.Len() != 4 {
		t.Fatalf("long round trip: %d keys", la.Len())
	}
	for k, v := range long {
		if !la.Has(k) || la.Get(k) != v {
			t.Errorf("long %.10s: Has %v, Get %d bytes, want %d", k, la.Has(k), len(la.Get(k)), len(v))
		}
	}
	if la.Has("kkk") || la.Has("b") || la.Has("") {
		t.Error("long: a missing key found")
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

// BenchmarkAttrsGet: a field selector's lookups on a pod's selectable
// fields (the watch fan-out by spec.nodeName and every selected LIST).
func BenchmarkAttrsGet(b *testing.B) {
	a := NewAttrs(map[string]string{
		"metadata.name": "scale-00001", "metadata.namespace": "default", "spec.nodeName": "node-1234",
		"spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler", "spec.serviceAccountName": "default",
		"spec.hostNetwork": "false", "status.phase": "Running", "status.podIP": "10.0.0.1", "status.nominatedNodeName": "",
	})
	b.ReportAllocs()
	for b.Loop() {
		if a.Get("spec.nodeName") != "node-1234" || a.Has("zzz") {
			b.Fatal("wrong")
		}
	}
}
