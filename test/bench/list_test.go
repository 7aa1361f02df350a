package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/server"
)

// listFixture is what the LIST benchmarks read: namespaces with n pods,
// every tenth labelled app=selected and the others app=other.
var listFixture = []struct {
	namespace string
	pods      int
}{
	{"list-10k", 10000},
	{"list-5k", 5000}, // the size kube-apiserver's reference figures are for
}

// listServer holds only the list fixture, so that /api/v1/pods lists
// exactly its 15,000 pods whatever else the benchmark process ran. The
// pods are created through the API (16 clients) so that they are stored
// exactly as real pods are: defaulted, with uid, timestamps and status.
var listServer = &lazyServer{setup: setupList}

// listServerPlain is the same fixture on a server of plain HTTP.
var listServerPlain = &lazyServer{start: startPlainServer, setup: setupList}

func setupList(srv *server.Server) error {
	client := clientFor(srv.URL())
	defer client.CloseIdleConnections()
	ctx := context.Background()
	start := time.Now()
	total := 0
	for _, f := range listFixture {
		if err := createNamespace(client, srv.URL(), f.namespace); err != nil {
			return err
		}
		_, bodies := podBodies(f.namespace, f.pods, func(i int) string {
			if i%10 == 0 {
				return "selected"
			}
			return "other"
		})
		url := srv.URL() + "/api/v1/namespaces/" + f.namespace + "/pods"
		if _, _, err := runPool(concurrency, len(bodies), func(i int) error {
			return post(ctx, client, url, bodies[i], http.StatusCreated)
		}); err != nil {
			return err
		}
		total += f.pods
	}
	fmt.Printf("list fixture: %d pods created through the API in %v\n", total, time.Since(start).Round(time.Millisecond))
	return nil
}

// BenchmarkPodList measures one LIST request (GET, whole JSON body read)
// by one client: a namespace of 10,000 pods with and without the label
// selector app=selected (1,000 match), the same for 5,000 pods (500
// match), and across namespaces (/api/v1/pods, 15,000 pods). One op is
// one LIST.
func BenchmarkPodList(b *testing.B) {
	skipShort(b)
	srv := listServer.get(b)
	const selected = "?labelSelector=app%3Dselected"
	for _, c := range []struct {
		name  string
		path  string
		items int
	}{
		{"ns10000", "/api/v1/namespaces/list-10k/pods", 10000},
		{"ns10000-selector1000", "/api/v1/namespaces/list-10k/pods" + selected, 1000},
		{"ns5000", "/api/v1/namespaces/list-5k/pods", 5000},
		{"ns5000-selector500", "/api/v1/namespaces/list-5k/pods" + selected, 500},
		{"all15000", "/api/v1/pods", 15000},
		{"all15000-selector1500", "/api/v1/pods" + selected, 1500},
		// A namespace with no pods beside the fixture's 15,000: what
		// finding a namespace's keys costs, without the items.
		{"ns-empty-of15000", "/api/v1/namespaces/default/pods", 0},
	} {
		b.Run(c.name, func(b *testing.B) { benchList(b, srv.URL()+c.path, c.items) })
	}
	// The same with a ServiceAccount token instead of a client certificate.
	token, err := serviceAccountToken(srv, "list-5k", "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ns5000-token", func(b *testing.B) {
		benchListWith(b, newTokenClient(token), srv.URL()+"/api/v1/namespaces/list-5k/pods", 5000)
	})
	// kubectl get pods asks for a Table: every item is converted to a row
	// (and, with includeObject=Metadata, its ObjectMeta), so this path
	// needs the decoded objects rather than their cached JSON.
	for _, c := range []struct {
		name  string
		path  string
		items int
	}{
		{"ns5000-table", "/api/v1/namespaces/list-5k/pods", 5000},
		{"ns5000-selector500-table", "/api/v1/namespaces/list-5k/pods" + selected, 500},
	} {
		b.Run(c.name, func(b *testing.B) { benchTableList(b, srv.URL()+c.path, c.items) })
	}
}

// BenchmarkPodListPlainHTTP is BenchmarkPodList's 5,000-pod cases on a
// server of plain HTTP (--insecure-http): what TLS adds to a LIST.
func BenchmarkPodListPlainHTTP(b *testing.B) {
	skipShort(b)
	srv := listServerPlain.get(b)
	b.Run("ns5000", func(b *testing.B) { benchList(b, srv.URL()+"/api/v1/namespaces/list-5k/pods", 5000) })
	b.Run("ns5000-selector500", func(b *testing.B) {
		benchList(b, srv.URL()+"/api/v1/namespaces/list-5k/pods?labelSelector=app%3Dselected", 500)
	})
}

// tableAccept is what kubectl get sends.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

func benchTableList(b *testing.B, url string, items int) {
	url += map[bool]string{true: "&", false: "?"}[strings.Contains(url, "?")] + "includeObject=Metadata"
	benchGET(b, url, tableAccept, items, getTableRows)
}

// getTableRows reads a Table answer and returns its number of rows.
func getTableRows(c *http.Client, url string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", tableAccept)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var table struct {
		Kind string            `json:"kind"`
		Rows []json.RawMessage `json:"rows"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK || table.Kind != "Table" {
		return 0, fmt.Errorf("GET %s: %d, kind %q", url, resp.StatusCode, table.Kind)
	}
	return len(table.Rows), nil
}

func benchList(b *testing.B, url string, items int) {
	benchGET(b, url, "application/json", items, countJSONItems)
}

// benchListWith is benchList with client's credentials.
func benchListWith(b *testing.B, client *http.Client, url string, items int) {
	benchGETWith(b, client, url, "application/json", items, countJSONItems)
}

// benchGET times GETs of url with the Accept header accept, once count
// (outside the timed loop) found the expected number of items in the
// answer, and reports ms/op, the body size and the item count.
func benchGET(b *testing.B, url, accept string, items int, count func(c *http.Client, url string) (int, error)) {
	benchGETWith(b, clientFor(url), url, accept, items, count)
}

func benchGETWith(b *testing.B, client *http.Client, url, accept string, items int, count func(c *http.Client, url string) (int, error)) {
	defer client.CloseIdleConnections()
	if n, err := count(client, url); err != nil || n != items {
		b.Fatalf("GET %s (%s): %d items, want %d (%v)", url, accept, n, items, err)
	}
	var size int64
	b.ResetTimer()
	for range b.N {
		n, err := getAccept(client, url, accept)
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed())/float64(time.Millisecond)/float64(b.N), "ms/op")
	b.ReportMetric(float64(size), "body-bytes")
	b.ReportMetric(float64(items), "items")
}

// get reads the whole answer to a GET and returns its size.
func get(c *http.Client, url string) (int64, error) {
	return getAccept(c, url, "application/json")
}

// getAccept is get with the given Accept header.
func getAccept(c *http.Client, url, accept string) (int64, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", accept)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return 0, fmt.Errorf("GET %s: %d: %s", url, resp.StatusCode, msg)
	}
	return io.Copy(io.Discard, resp.Body)
}

// countJSONItems reads a JSON PodList answer and returns its number of
// items.
func countJSONItems(c *http.Client, url string) (int, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var list struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK || list.Kind != "PodList" {
		return 0, fmt.Errorf("GET %s: %d, kind %q; want 200, PodList", url, resp.StatusCode, list.Kind)
	}
	return len(list.Items), nil
}
