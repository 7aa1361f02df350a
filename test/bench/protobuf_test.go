package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// protobufAccept is what client-go sends when configured for protobuf, as
// kube-controller-manager and kube-scheduler are.
const protobufAccept = "application/vnd.kubernetes.protobuf, */*"

// BenchmarkPodListProtobuf measures one LIST answered in protobuf next to
// the same LIST in JSON, on BenchmarkPodList's fixture. The cache holds
// each pod's JSON, so a JSON LIST copies those encodings while a protobuf
// LIST decodes every item and encodes it again. One op is one LIST, the
// whole body read (not decoded) by one client.
func BenchmarkPodListProtobuf(b *testing.B) {
	skipShort(b)
	srv := listServer.get(b)
	const selected = "?labelSelector=app%3Dselected"
	for _, c := range []struct {
		name  string
		path  string
		items int
	}{
		{"ns5000", "/api/v1/namespaces/list-5k/pods", 5000},
		{"ns5000-selector500", "/api/v1/namespaces/list-5k/pods" + selected, 500},
		{"ns10000", "/api/v1/namespaces/list-10k/pods", 10000},
	} {
		for _, enc := range []struct {
			name, accept string
			count        func(*http.Client, string) (int, error)
		}{
			{"json", "application/json", countJSONItems},
			{"protobuf", protobufAccept, countProtobufItems},
		} {
			b.Run(c.name+"-"+enc.name, func(b *testing.B) {
				benchGET(b, srv.URL()+c.path, enc.accept, c.items, enc.count)
			})
		}
	}
}

// countProtobufItems checks, outside the timed loop, that url answers a
// protobuf PodList and returns its number of items.
func countProtobufItems(c *http.Client, url string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", protobufAccept)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(data, []byte("k8s\x00")) {
		return 0, fmt.Errorf("GET %s: %d, %s, %.40q", url, resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(data[4:]); err != nil {
		return 0, err
	}
	var list v1.PodList
	if unk.Kind != "PodList" {
		return 0, fmt.Errorf("GET %s: kind %q", url, unk.Kind)
	}
	if err := list.Unmarshal(unk.Raw); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}
