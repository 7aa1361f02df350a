package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corekube/corekube/test/testserver"
)

// The tests in this file check the Tables (kubectl get), the
// PartialObjectMetadata forms and their content negotiation against the
// answers of a real kube-apiserver v1.32.13 (testdata/kube-1.32/table-*,
// pods-as-PartialObjectMetadataList, 406-*). They run on a server of their
// own so that the cluster holds exactly what the recording's did: namespace
// gold with pods gk1 and gk2, and node-1.

const (
	acceptTableV1      = "application/json;as=Table;v=v1;g=meta.k8s.io"
	acceptTableKubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)

// tableServer starts a server holding what the recording's cluster held
// when the pod tables were recorded.
func tableServer(t *testing.T) string {
	t.Helper()
	s := testserver.Start(t)
	base := s.URL()
	mustCode(t, doRawURL(t, base, "POST", "/api/v1/namespaces", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"gold"}}`)), http.StatusCreated)
	for _, name := range []string{"gk1", "gk2"} {
		body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `","labels":{"app":"gold"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
		mustCode(t, doRawURL(t, base, "POST", "/api/v1/namespaces/gold/pods", []byte(body)), http.StatusCreated)
	}
	return base
}

func mustCode(t *testing.T, r rawResponse, code int) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("HTTP %d, want %d: %s", r.Code, code, r.Body)
	}
}

var resourceVersionRE = regexp.MustCompile(`"resourceVersion":"\d+"`)

// checkTableGolden compares a Table (or PartialObjectMetadataList) answer
// with kube's: byte for byte up to the rows (items), resourceVersions
// aside; then row by row, with ages, uids, timestamps, resourceVersions and
// managedFields (which corekube does not keep) left out.
func checkTableGolden(t *testing.T, got rawResponse, golden string) {
	t.Helper()
	want := goldenBody(t, golden)
	if got.Code != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %s", golden, got.Code, got.Body)
	}
	if ct := got.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json", golden, ct)
	}
	if !bytes.HasSuffix(got.Body, []byte("\n")) {
		t.Errorf("%s: the body does not end with a newline, as kube's does", golden)
	}
	split := `"rows":`
	if !bytes.HasPrefix(want, []byte(`{"kind":"Table"`)) {
		split = `"items":`
	}
	headOf := func(body []byte) string {
		s := resourceVersionRE.ReplaceAllString(string(body), `"resourceVersion":"RV"`)
		i := strings.Index(s, split)
		if i < 0 {
			t.Fatalf("%s: no %s in %s", golden, split, body)
		}
		return s[:i]
	}
	if g, w := headOf(got.Body), headOf(want); g != w {
		t.Errorf("%s: the answer up to %s differs from kube's\n got: %s\nwant: %s", golden, split, g, w)
	}
	var g, w map[string]any
	if err := json.Unmarshal(got.Body, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if rv, _ := g["metadata"].(map[string]any)["resourceVersion"].(string); rv == "" {
		t.Errorf("%s: no metadata.resourceVersion", golden)
	}
	key := strings.Trim(split, `":`)
	gr, wr := normalizeRows(t, g, key), normalizeRows(t, w, key)
	if !reflect.DeepEqual(gr, wr) {
		t.Errorf("%s: %s differ from kube's\n got: %s\nwant: %s", golden, key, mustJSON(t, gr), mustJSON(t, wr))
	}
}

var ageRE = regexp.MustCompile(`^\d+[smhdy]`)

// normalizeRows returns the rows (or items) of a decoded answer without
// what legitimately differs between two clusters.
func normalizeRows(t *testing.T, doc map[string]any, key string) any {
	t.Helper()
	ageCol := -1
	if cols, ok := doc["columnDefinitions"].([]any); ok {
		for i, c := range cols {
			if c.(map[string]any)["name"] == "Age" {
				ageCol = i
			}
		}
	}
	rows, _ := doc[key].([]any)
	for _, r := range rows {
		row := r.(map[string]any)
		obj := row
		if key == "rows" {
			if cells, ok := row["cells"].([]any); ok && ageCol >= 0 {
				if s, _ := cells[ageCol].(string); !ageRE.MatchString(s) {
					t.Errorf("age cell %q is not an age", s)
				}
				cells[ageCol] = "AGE"
			}
			obj, _ = row["object"].(map[string]any)
		}
		if obj == nil {
			continue
		}
		if md, ok := obj["metadata"].(map[string]any); ok {
			for _, k := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields"} {
				delete(md, k)
			}
		}
		if obj["kind"] != "PartialObjectMetadata" {
			// A full object (includeObject=Object): kube's admission adds
			// a service account volume and tolerations corekube does not;
			// compare what identifies it.
			for k := range obj {
				if k != "kind" && k != "apiVersion" && k != "metadata" {
					delete(obj, k)
				}
			}
		}
	}
	return rows
}

func TestTableGoldenPods(t *testing.T) {
	base := tableServer(t)
	cases := []struct {
		golden, path, accept string
	}{
		{"table-pods-gold-kubectl-accept", "/api/v1/namespaces/gold/pods?limit=500", acceptTableKubectl},
		{"table-pod-single-gk1", "/api/v1/namespaces/gold/pods/gk1", acceptTableKubectl},
		{"table-pods-gold-includeObject-Object", "/api/v1/namespaces/gold/pods?limit=500&includeObject=Object", acceptTableKubectl},
		{"pods-as-PartialObjectMetadataList", "/api/v1/namespaces/gold/pods", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			checkTableGolden(t, doRawURL(t, base, "GET", c.path, nil, "Accept", c.accept), c.golden)
		})
	}
	t.Run("includeObject=Object rows carry the whole pod", func(t *testing.T) {
		r := doRawURL(t, base, "GET", "/api/v1/namespaces/gold/pods?includeObject=Object", nil, "Accept", acceptTableV1)
		var table struct {
			Rows []struct {
				Object struct {
					Kind       string         `json:"kind"`
					APIVersion string         `json:"apiVersion"`
					Spec       map[string]any `json:"spec"`
					Status     map[string]any `json:"status"`
				} `json:"object"`
			} `json:"rows"`
		}
		if err := json.Unmarshal(r.Body, &table); err != nil {
			t.Fatal(err)
		}
		if len(table.Rows) != 2 {
			t.Fatalf("%d rows: %s", len(table.Rows), r.Body)
		}
		for _, row := range table.Rows {
			o := row.Object
			if o.Kind != "Pod" || o.APIVersion != "v1" || o.Spec["containers"] == nil || o.Status["phase"] != "Pending" {
				t.Errorf("row object %+v, want the Pod", o)
			}
		}
	})
	for _, golden := range []string{"406-table-unsupported-version", "406-unknown-accept"} {
		t.Run(golden, func(t *testing.T) {
			accept := map[string]string{
				"406-table-unsupported-version": "application/json;as=Table;v=v2;g=meta.k8s.io",
				"406-unknown-accept":            "application/yaml;as=Foo",
			}[golden]
			checkGolden(t, doRawURL(t, base, "GET", "/api/v1/namespaces/gold/pods", nil, "Accept", accept), golden)
		})
	}
}

func TestTableGoldenNodes(t *testing.T) {
	base := testserver.Start(t).URL()
	get := func() rawResponse { return doRawURL(t, base, "GET", "/api/v1/nodes", nil, "Accept", acceptTableV1) }
	checkTableGolden(t, get(), "table-nodes-empty")

	mustCode(t, doRawURL(t, base, "POST", "/api/v1/nodes", []byte(
		`{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-1","labels":{"kubernetes.io/hostname":"node-1"}},"spec":{"podCIDR":"10.244.0.0/24","podCIDRs":["10.244.0.0/24"]}}`)),
		http.StatusCreated)
	checkTableGolden(t, get(), "table-nodes-one-node-no-status")

	now := time.Now().UTC().Format(time.RFC3339)
	status := `{"status":{"addresses":[{"type":"InternalIP","address":"10.1.2.3"}],` +
		`"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastHeartbeatTime":"` + now + `","lastTransitionTime":"` + now + `"}],` +
		`"nodeInfo":{"machineID":"m","systemUUID":"s","bootID":"b","kernelVersion":"6.1.0","osImage":"Debian GNU/Linux 12 (bookworm)",` +
		`"containerRuntimeVersion":"containerd://1.7.0","kubeletVersion":"v1.32.13","kubeProxyVersion":"","operatingSystem":"linux","architecture":"amd64"}}}`
	mustCode(t, doRawURL(t, base, "PATCH", "/api/v1/nodes/node-1/status", []byte(status), "Content-Type", "application/merge-patch+json"), http.StatusOK)
	checkTableGolden(t, get(), "table-nodes-one-node-ready")
}

// tableDoc decodes a Table answer.
type tableDoc struct {
	Kind              string `json:"kind"`
	APIVersion        string `json:"apiVersion"`
	Metadata          map[string]any
	ColumnDefinitions []map[string]any `json:"columnDefinitions"`
	Rows              []struct {
		Cells      []any            `json:"cells"`
		Conditions []map[string]any `json:"conditions"`
		Object     map[string]any   `json:"object"`
	} `json:"rows"`
}

func decodeTable(t *testing.T, r rawResponse) tableDoc {
	t.Helper()
	if r.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", r.Code, r.Body)
	}
	var doc tableDoc
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	if doc.Kind != "Table" {
		t.Fatalf("kind %q: %s", doc.Kind, r.Body)
	}
	return doc
}

func TestTableNegotiation(t *testing.T) {
	base := tableServer(t)
	pods := "/api/v1/namespaces/gold/pods"

	t.Run("v1beta1 Table with v1beta1 partial rows", func(t *testing.T) {
		doc := decodeTable(t, doRawURL(t, base, "GET", pods, nil, "Accept", "application/json;as=Table;v=v1beta1;g=meta.k8s.io"))
		if doc.APIVersion != "meta.k8s.io/v1beta1" || len(doc.Rows) != 2 || doc.Rows[0].Object["apiVersion"] != "meta.k8s.io/v1beta1" ||
			doc.Rows[0].Object["kind"] != "PartialObjectMetadata" {
			t.Errorf("got %+v", doc)
		}
	})
	t.Run("includeObject=None", func(t *testing.T) {
		r := doRawURL(t, base, "GET", pods+"/gk1?includeObject=None", nil, "Accept", acceptTableV1)
		doc := decodeTable(t, r)
		if len(doc.Rows) != 1 || doc.Rows[0].Object != nil || !bytes.Contains(r.Body, []byte(`"object":null`)) {
			t.Errorf("got %s", r.Body)
		}
	})
	t.Run("includeObject=Metadata", func(t *testing.T) {
		doc := decodeTable(t, doRawURL(t, base, "GET", pods+"?includeObject=Metadata", nil, "Accept", acceptTableV1))
		if len(doc.Rows) != 2 || doc.Rows[1].Object["kind"] != "PartialObjectMetadata" {
			t.Errorf("got %+v", doc)
		}
	})
	t.Run("invalid includeObject", func(t *testing.T) {
		r := doRawURL(t, base, "GET", pods+"?includeObject=Everything", nil, "Accept", acceptTableV1)
		st := statusMap(t, r.Body)
		want := `Unable to convert to Table as requested: includeObject: Invalid value: "Everything": must be 'Metadata', 'Object', 'None', or empty`
		if r.Code != http.StatusBadRequest || st["reason"] != "BadRequest" || st["message"] != want {
			t.Errorf("got %d %s", r.Code, r.Body)
		}
		// Without a Table, includeObject means nothing.
		if r := doRawURL(t, base, "GET", pods+"?includeObject=Everything", nil); r.Code != http.StatusOK {
			t.Errorf("plain list with includeObject: %d %s", r.Code, r.Body)
		}
	})
	t.Run("limit and continue are copied to the Table", func(t *testing.T) {
		doc := decodeTable(t, doRawURL(t, base, "GET", pods+"?limit=1", nil, "Accept", acceptTableKubectl))
		if len(doc.Rows) != 1 || doc.Metadata["continue"] == "" || doc.Metadata["continue"] == nil || doc.Metadata["remainingItemCount"] != float64(1) {
			t.Fatalf("got %+v", doc)
		}
		next := decodeTable(t, doRawURL(t, base, "GET", pods+"?limit=1&continue="+doc.Metadata["continue"].(string), nil, "Accept", acceptTableKubectl))
		if len(next.Rows) != 1 || next.Rows[0].Cells[0] != "gk2" || next.Metadata["continue"] != nil {
			t.Errorf("second page %+v", next)
		}
	})
	t.Run("yaml Table", func(t *testing.T) {
		r := doRawURL(t, base, "GET", pods, nil, "Accept", "application/yaml;as=Table;v=v1;g=meta.k8s.io")
		if r.Code != http.StatusOK || r.Header.Get("Content-Type") != "application/yaml" || !bytes.HasPrefix(r.Body, []byte("apiVersion: meta.k8s.io/v1\n")) ||
			!bytes.Contains(r.Body, []byte("kind: Table\n")) {
			t.Errorf("got %d %q %s", r.Code, r.Header.Get("Content-Type"), r.Body)
		}
	})
	t.Run("an unacceptable entry falls back to the next", func(t *testing.T) {
		r := doRawURL(t, base, "GET", pods, nil, "Accept", "application/json;as=Table;v=v2;g=meta.k8s.io,application/json")
		if r.Code != http.StatusOK || !bytes.Contains(r.Body, []byte(`"kind":"PodList"`)) {
			t.Errorf("got %d %s", r.Code, r.Body)
		}
	})
	t.Run("PartialObjectMetadata of one pod", func(t *testing.T) {
		r := doRawURL(t, base, "GET", pods+"/gk1", nil, "Accept", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil || r.Code != http.StatusOK {
			t.Fatalf("%d %s", r.Code, r.Body)
		}
		md, _ := m["metadata"].(map[string]any)
		if m["kind"] != "PartialObjectMetadata" || m["apiVersion"] != "meta.k8s.io/v1" || md["name"] != "gk1" || m["spec"] != nil {
			t.Errorf("got %s", r.Body)
		}
	})
	t.Run("PartialObjectMetadataList v1beta1", func(t *testing.T) {
		r := doRawURL(t, base, "GET", pods, nil, "Accept", "application/json;as=PartialObjectMetadataList;v=v1beta1;g=meta.k8s.io")
		if r.Code != http.StatusOK || !bytes.HasPrefix(r.Body, []byte(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1beta1",`)) ||
			!bytes.Contains(r.Body, []byte(`"items":[{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1beta1"`)) {
			t.Errorf("got %d %s", r.Code, r.Body)
		}
	})
	t.Run("PartialObjectMetadataList of nothing", func(t *testing.T) {
		r := doRawURL(t, base, "GET", pods+"?labelSelector=app%3Dnone", nil, "Accept", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io")
		if r.Code != http.StatusOK || !bytes.HasSuffix(r.Body, []byte(`"items":null}`+"\n")) {
			t.Errorf("got %d %s", r.Code, r.Body)
		}
	})
	for _, c := range []struct{ path, accept, message string }{
		{pods, "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io", "you requested PartialObjectMetadata, but the requested object is a list (*v1.PodList)"},
		{pods + "/gk1", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", "you requested PartialObjectMetadataList, but the requested object is not a list (*v1.Pod)"},
		{pods, "application/json;as=Table;g=meta.k8s.io", "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"},
		{pods, "application/json;as=Table;v=v1;g=example.com", "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"},
		{pods, "application/json;as=Status;v=v1;g=meta.k8s.io", "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"},
	} {
		t.Run("406 for "+c.accept, func(t *testing.T) {
			r := doRawURL(t, base, "GET", c.path, nil, "Accept", c.accept)
			st := statusMap(t, r.Body)
			if r.Code != http.StatusNotAcceptable || st["reason"] != "NotAcceptable" || st["message"] != c.message || st["code"] != float64(406) {
				t.Errorf("got %d %s", r.Code, r.Body)
			}
		})
	}
	t.Run("a 404 stays a Status", func(t *testing.T) {
		r := doRawURL(t, base, "GET", pods+"/nope", nil, "Accept", acceptTableKubectl)
		if st := statusMap(t, r.Body); r.Code != http.StatusNotFound || st["kind"] != "Status" {
			t.Errorf("got %d %s", r.Code, r.Body)
		}
	})
	t.Run("writes answer Tables too", func(t *testing.T) {
		body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"gk3"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
		r := doRawURL(t, base, "POST", pods, []byte(body), "Accept", acceptTableKubectl)
		if r.Code != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Code, r.Body)
		}
		doc := decodeTable(t, rawResponse{Code: http.StatusOK, Body: r.Body})
		if len(doc.Rows) != 1 || doc.Rows[0].Cells[0] != "gk3" || len(doc.ColumnDefinitions) != 9 {
			t.Errorf("got %s", r.Body)
		}
		del := doRawURL(t, base, "DELETE", pods+"/gk3", nil, "Accept", acceptTableKubectl)
		doc = decodeTable(t, del)
		if len(doc.Rows) != 1 || doc.Rows[0].Cells[2] != "Terminating" && doc.Rows[0].Cells[2] != "Pending" {
			t.Errorf("delete answered %s", del.Body)
		}
	})
	t.Run("every resource prints its columns", func(t *testing.T) {
		cases := map[string][]string{
			"/api/v1/namespaces":                                   {"Name", "Status", "Age"},
			"/api/v1/namespaces/gold/events":                       {"Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"},
			"/apis/coordination.k8s.io/v1/namespaces/gold/leases":  {"Name", "Holder", "Age"},
			"/apis/policy/v1/namespaces/gold/poddisruptionbudgets": {"Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"},
		}
		for path, want := range cases {
			doc := decodeTable(t, doRawURL(t, base, "GET", path, nil, "Accept", acceptTableKubectl))
			var names []string
			for _, c := range doc.ColumnDefinitions {
				names = append(names, c["name"].(string))
				if c["description"] == "" {
					t.Errorf("%s: column %v has no description", path, c["name"])
				}
			}
			if !reflect.DeepEqual(names, want) {
				t.Errorf("%s: columns %v, want %v", path, names, want)
			}
		}
		doc := decodeTable(t, doRawURL(t, base, "GET", "/api/v1/namespaces/gold", nil, "Accept", acceptTableKubectl))
		if len(doc.Rows) != 1 || !reflect.DeepEqual(doc.Rows[0].Cells[:2], []any{"gold", "Active"}) {
			t.Errorf("namespace gold: %+v", doc.Rows)
		}
	})
}

// watchLines reads the events of a watch until n have arrived.
func watchLines(t *testing.T, base, path, accept string, n int, during func()) []map[string]json.RawMessage {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := testserver.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: HTTP %d", resp.StatusCode)
	}
	go during()
	var events []map[string]json.RawMessage
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for len(events) < n && sc.Scan() {
		var ev map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		events = append(events, ev)
	}
	if len(events) < n {
		t.Fatalf("%d events, want %d (%v)", len(events), n, sc.Err())
	}
	return events
}

func TestTableWatch(t *testing.T) {
	base := tableServer(t)
	pods := "/api/v1/namespaces/gold/pods"
	events := watchLines(t, base, pods+"?watch=1&timeoutSeconds=10", acceptTableKubectl, 3, func() {
		body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"gk3"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
		doRawURL(t, base, "POST", pods, []byte(body))
	})
	for i, ev := range events {
		var typ string
		_ = json.Unmarshal(ev["type"], &typ)
		var doc tableDoc
		if err := json.Unmarshal(ev["object"], &doc); err != nil {
			t.Fatal(err)
		}
		name := []string{"gk1", "gk2", "gk3"}[i]
		if typ != "ADDED" || doc.Kind != "Table" || doc.APIVersion != "meta.k8s.io/v1" || len(doc.Rows) != 1 || doc.Rows[0].Cells[0] != name ||
			doc.Rows[0].Object["kind"] != "PartialObjectMetadata" || doc.Metadata["resourceVersion"] == nil {
			t.Errorf("event %d: %s %s", i, typ, ev["object"])
		}
		// Like kube: column definitions on the first event only.
		if headers := bytes.Contains(ev["object"], []byte(`"columnDefinitions":null`)); headers == (i == 0) {
			t.Errorf("event %d: columnDefinitions %v", i, doc.ColumnDefinitions)
		}
	}

	t.Run("PartialObjectMetadata", func(t *testing.T) {
		events := watchLines(t, base, pods+"?watch=1&timeoutSeconds=10", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json", 1, func() {})
		var m map[string]any
		if err := json.Unmarshal(events[0]["object"], &m); err != nil || m["kind"] != "PartialObjectMetadata" || m["spec"] != nil {
			t.Errorf("event object %s", events[0]["object"])
		}
	})
	t.Run("invalid includeObject", func(t *testing.T) {
		r := doRawURL(t, base, "GET", pods+"?watch=1&timeoutSeconds=10&includeObject=All", nil, "Accept", acceptTableV1)
		if r.Code != http.StatusBadRequest {
			t.Errorf("got %d %s", r.Code, r.Body)
		}
	})
}
