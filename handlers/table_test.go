package handlers

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/leases"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// plainStrategy hides a strategy's printer: the resource gets kube's
// default table.
type plainStrategy struct{ registry.Strategy }

func TestDefaultTable(t *testing.T) {
	store := registry.NewStore(nil, plainStrategy{leases.NewStrategy()}, registry.Options{})
	created := metav1.NewTime(time.Date(2026, 11, 21, 20, 16, 18, 0, time.UTC))
	tr := &transformer{
		target:  &schema.GroupVersionKind{Group: "meta.k8s.io", Version: "v1", Kind: "Table"},
		options: &metav1.TableOptions{},
		store:   store,
		now:     func() time.Time { return created.Add(time.Hour) },
	}
	list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: []coordinationv1.Lease{}}
	out, err := tr.transform(list)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(out)
	want := `{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"9"},"columnDefinitions":[` +
		`{"name":"Name","type":"string","format":"name","description":` + mustQuote(metav1.ObjectMeta{}.SwaggerDoc()["name"]) + `,"priority":0},` +
		`{"name":"Created At","type":"date","format":"","description":` + mustQuote(metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]) + `,"priority":0}],` +
		`"rows":null}`
	if string(data) != want {
		t.Errorf("empty list:\n got %s\nwant %s", data, want)
	}

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns", ResourceVersion: "7", CreationTimestamp: created}}
	tr.options = &metav1.TableOptions{NoHeaders: true, IncludeObject: metav1.IncludeNone}
	out, err = tr.transform(lease)
	if err != nil {
		t.Fatal(err)
	}
	data, _ = json.Marshal(out)
	want = `{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"7"},"columnDefinitions":null,` +
		`"rows":[{"cells":["l","2026-11-21T20:16:18Z"],"object":null}]}`
	if string(data) != want {
		t.Errorf("one lease:\n got %s\nwant %s", data, want)
	}
}

func mustQuote(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}
