package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/leases"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
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

// TestTableListInBatches: a Table LIST written a batch of items at a
// time is byte for byte the Table made of the whole page, whatever the
// batch size, for each includeObject and with or without headers.
func TestTableListInBatches(t *testing.T) {
	var cms []*v1.ConfigMap
	for i := range 7 {
		cms = append(cms, testConfigMap(fmt.Sprintf("cm-%d", i), map[string]string{"i": fmt.Sprint(i)}))
	}
	defer func(n int) { tableWriteBatch = n }(tableWriteBatch)
	for _, strategy := range []registry.Strategy{fakeStrategy{}, printingStrategy{}} {
		for _, query := range []string{"", "includeObject=Object", "includeObject=None", "includeObject=Metadata&noHeaders=true"} {
			st := newFakeStore(cms...)
			st.strategy = strategy
			page, err := st.ListPage(t.Context(), "ns", nil)
			if err != nil {
				t.Fatal(err)
			}
			list, _ := page.ObjectFor(registry.FullItems)
			opts := &metav1.TableOptions{}
			if err := metainternalversionscheme.ParameterCodec.DecodeParameters(mustParseQuery(t, query), metav1.SchemeGroupVersion, opts); err != nil {
				t.Fatal(err)
			}
			tr := &transformer{target: &schema.GroupVersionKind{Group: "meta.k8s.io", Version: "v1", Kind: "Table"}, options: opts, store: st, now: time.Now}
			whole, err := tr.transform(list)
			if err != nil {
				t.Fatal(err)
			}
			want, err := registry.MarshalJSON(whole)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, '\n')
			for _, batch := range []int{1, 3, 7, 1024} {
				tableWriteBatch = batch
				st.itemBatches = 0
				w := serve(t, st, call{method: "GET", target: cmPath + "?" + query, header: map[string]string{"Accept": tableJSON}})
				wantCode(t, w, http.StatusOK, "application/json")
				if got := w.Body.Bytes(); !bytes.Equal(got, want) {
					t.Errorf("%T, %q, batches of %d:\n got %s\nwant %s", strategy, query, batch, got, want)
				}
				if want := (len(cms) + batch - 1) / batch; st.itemBatches != want {
					t.Errorf("%T, %q: %d batches of %d items read, want %d", strategy, query, st.itemBatches, batch, want)
				}
			}
		}
	}
}

func mustParseQuery(t *testing.T, q string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
