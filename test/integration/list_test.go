package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/corekube/corekube/test/testserver"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestLabelSelectors(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	for name, labels := range map[string]map[string]string{
		"p1": {"app": "web", "tier": "fe"},
		"p2": {"app": "db", "tier": "be"},
		"p3": {"app": "cache"},
		"p4": nil,
	} {
		if _, err := pods.Create(t.Context(), newPod(name, labels), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string][]string{
		"":                        {"p1", "p2", "p3", "p4"},
		"app=web":                 {"p1"},
		"app==web":                {"p1"},
		"app!=web":                {"p2", "p3", "p4"},
		"app in (web,db)":         {"p1", "p2"},
		"app in (web, nothing)":   {"p1"},
		"app notin (web,db)":      {"p3", "p4"},
		"tier":                    {"p1", "p2"},
		"!tier":                   {"p3", "p4"},
		"app in (web,db),tier=be": {"p2"},
		"app,!tier":               {"p3"},
		"app=web,app=db":          {},
		"tier!=fe,app":            {"p2", "p3"},
		"app notin (cache),!tier": {"p4"},
		"  app = web  ":           {"p1"},
		"app=nothing":             {},
		"missing-key=x":           {},
		"app in ()":               {}, // kube reads () as the set {""}: no match
	}
	for sel, want := range cases {
		t.Run(sel, func(t *testing.T) {
			list, err := pods.List(t.Context(), metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				t.Fatal(err)
			}
			checkNames(t, sel, names(t, list), want...)
		})
	}
	// Malformed selectors are 400s, for list and watch alike.
	for _, sel := range []string{"a in (b", "=x", "app in web", "app!!=x", "a b", "app=(x)", "!app=x", "app notin", strings.Repeat("k", 64) + "=v", "app=" + strings.Repeat("v", 64)} {
		_, err := pods.List(t.Context(), metav1.ListOptions{LabelSelector: sel})
		checkStatusErr(t, err, 400, metav1.StatusReasonBadRequest, "")
		_, err = pods.Watch(t.Context(), metav1.ListOptions{LabelSelector: sel})
		checkStatusErr(t, err, 400, metav1.StatusReasonBadRequest, "")
		err = pods.DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel})
		checkStatusErr(t, err, 400, metav1.StatusReasonBadRequest, "")
	}
	list, err := pods.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "pods after malformed deletecollections", names(t, list), "p1", "p2", "p3", "p4")
}

// watchStatus starts a watch and returns its HTTP status; the body of a
// watch that started (200) is not read.
func watchStatus(t testing.TB, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := testserver.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 200 {
		return 200, nil
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// fieldSelectorCase is one row of reference/fieldselectors.txt.
type fieldSelectorCase struct {
	path     string
	accepted []string
	refused  map[string]string // field -> message
}

func fieldNotSupported(fields ...string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		m[f] = "field label not supported: " + f
	}
	return m
}

// TestFieldSelectorLabels checks exactly the field labels kube v1.32
// accepts and refuses per resource (shared/reference/.../fieldselectors.txt).
func TestFieldSelectorLabels(t *testing.T) {
	ns := newNamespace(t)
	pdbLike := `%q is not a known field selector: only "metadata.name", "metadata.namespace"`
	cases := []fieldSelectorCase{
		{
			path: "/api/v1/namespaces/" + ns + "/pods",
			accepted: []string{"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
				"spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName"},
			refused: fieldNotSupported("spec.containers.name", "metadata.uid", "metadata.labels", "status.hostIP", "spec.priority", "spec.foo"),
		},
		{
			path:     "/api/v1/pods",
			accepted: []string{"metadata.namespace", "spec.nodeName"},
			refused:  fieldNotSupported("spec.foo"),
		},
		{
			path:     "/api/v1/nodes",
			accepted: []string{"metadata.name", "spec.unschedulable"},
			refused:  fieldNotSupported("metadata.namespace", "spec.podCIDR", "spec.providerID", "status.phase", "spec.taints", "metadata.uid"),
		},
		{
			path:     "/api/v1/namespaces",
			accepted: []string{"metadata.name", "status.phase"},
			refused:  fieldNotSupported("metadata.namespace", "spec.foo"),
		},
		{
			path: "/api/v1/namespaces/" + ns + "/events",
			accepted: []string{"metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.name", "reason",
				"source", "type", "reportingComponent", "involvedObject.namespace", "involvedObject.uid",
				"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath"},
			refused: fieldNotSupported("spec.foo", "message"),
		},
		{
			path:     "/apis/policy/v1/namespaces/" + ns + "/poddisruptionbudgets",
			accepted: []string{"metadata.name", "metadata.namespace"},
			refused:  map[string]string{"spec.foo": fmt.Sprintf(pdbLike, "spec.foo"), "spec.minAvailable": fmt.Sprintf(pdbLike, "spec.minAvailable")},
		},
		{
			path:     "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases",
			accepted: []string{"metadata.name", "metadata.namespace"},
			refused:  map[string]string{"spec.holderIdentity": fmt.Sprintf(pdbLike, "spec.holderIdentity")},
		},
	}
	for _, c := range cases {
		for _, f := range c.accepted {
			path := c.path + "?fieldSelector=" + url.QueryEscape(f+"=x")
			if r := doRaw(t, "GET", path, nil); r.Code != 200 {
				t.Errorf("list %s %s: %d %s", c.path, f, r.Code, r.Body)
			}
			if code, body := watchStatus(t, path+"&watch=1"); code != 200 {
				t.Errorf("watch %s %s: %d %s", c.path, f, code, body)
			}
		}
		for f, msg := range c.refused {
			for _, watch := range []string{"", "&watch=1"} {
				r := doRaw(t, "GET", c.path+"?fieldSelector="+url.QueryEscape(f+"=x")+watch, nil)
				st := statusMap(t, r.Body)
				if r.Code != 400 || st["reason"] != "BadRequest" || st["message"] != msg {
					t.Errorf("%s %s%s: %d %s, want 400 %q", c.path, f, watch, r.Code, r.Body, msg)
				}
			}
		}
	}
}

func TestFieldSelectors(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	mk := func(name string, mut func(*v1.Pod)) {
		p := newPod(name, nil)
		if mut != nil {
			mut(p)
		}
		if _, err := pods.Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mk("p1", nil)
	mk("p2", func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever; p.Spec.ServiceAccountName = "robot" })
	mk("p3", func(p *v1.Pod) {
		p.Spec.NodeName = "node-a"
		p.Spec.HostNetwork = true
		p.Spec.SchedulerName = "custom"
	})
	// p1 runs (status through /status).
	p1, err := pods.Get(t.Context(), "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1.Status.Phase = v1.PodRunning
	p1.Status.PodIP = "10.0.0.7"
	p1.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.7"}}
	if _, err := pods.UpdateStatus(t.Context(), p1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	podCases := map[string][]string{
		"metadata.name=p1":                      {"p1"},
		"metadata.name==p1":                     {"p1"},
		"metadata.name!=p1":                     {"p2", "p3"},
		"metadata.name=p1,status.phase=Pending": {},
		"metadata.name=p2,status.phase=Pending": {"p2"},
		"metadata.namespace=" + ns:              {"p1", "p2", "p3"},
		"metadata.namespace!=" + ns:             {},
		"spec.nodeName=":                        {"p1", "p2"},
		"spec.nodeName=node-a":                  {"p3"},
		"spec.nodeName!=":                       {"p3"},
		"spec.restartPolicy=Never":              {"p2"},
		"spec.restartPolicy=Always":             {"p1", "p3"},
		"spec.schedulerName=custom":             {"p3"},
		"spec.schedulerName=default-scheduler":  {"p1", "p2"},
		"spec.serviceAccountName=robot":         {"p2"},
		"spec.hostNetwork=true":                 {"p3"},
		"spec.hostNetwork=false":                {"p1", "p2"},
		"status.phase=Running":                  {"p1"},
		"status.phase!=Running":                 {"p2", "p3"},
		"status.phase=Pending,spec.nodeName=":   {"p2"},
		"status.podIP=10.0.0.7":                 {"p1"},
		"status.nominatedNodeName=":             {"p1", "p2", "p3"},
		"metadata.name!=p1,metadata.name!=p2":   {"p3"},
		"spec.nodeName=node-a,spec.hostNetwork=true,status.phase=Pending": {"p3"},
	}
	for sel, want := range podCases {
		list, err := pods.List(t.Context(), metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Errorf("%s: %v", sel, err)
			continue
		}
		checkNames(t, sel, names(t, list), want...)
	}
	// Across namespaces, metadata.namespace selects one.
	all, err := cs.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{FieldSelector: "metadata.namespace=" + ns + ",spec.nodeName=node-a"})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "all namespaces", names(t, all), "p3")

	// Malformed field selectors.
	for sel, msg := range map[string]string{
		"a===b":                     "invalid field selector: unescaped character in value: 61",
		"status.phase in (Pending)": "invalid selector: 'status.phase in (Pending)'; can't understand 'status.phase in (Pending)'",
		"status.phase":              "invalid selector: 'status.phase'; can't understand 'status.phase'",
	} {
		_, err := pods.List(t.Context(), metav1.ListOptions{FieldSelector: sel})
		checkStatusErr(t, err, 400, metav1.StatusReasonBadRequest, msg)
	}

	t.Run("nodes", func(t *testing.T) {
		suite := uniqueName(t, "s")
		a, b := uniqueName(t, "a"), uniqueName(t, "b")
		for _, n := range []*v1.Node{newNode(a, map[string]string{"suite": suite}), newNode(b, map[string]string{"suite": suite})} {
			if n.Name == b {
				n.Spec.Unschedulable = true
			}
			if _, err := cs.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for sel, want := range map[string][]string{
			"spec.unschedulable=true":  {b},
			"spec.unschedulable=false": {a},
			"metadata.name=" + a:       {a},
		} {
			list, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{FieldSelector: sel, LabelSelector: "suite=" + suite})
			if err != nil {
				t.Fatal(err)
			}
			checkNames(t, sel, names(t, list), want...)
		}
	})

	t.Run("namespaces", func(t *testing.T) {
		list, err := cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{FieldSelector: "status.phase=Active,metadata.name=" + ns})
		if err != nil {
			t.Fatal(err)
		}
		checkNames(t, "active", names(t, list), ns)
		list, err = cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{FieldSelector: "status.phase=Terminating,metadata.name=" + ns})
		if err != nil {
			t.Fatal(err)
		}
		checkNames(t, "terminating", names(t, list))
	})

	t.Run("events", func(t *testing.T) {
		events := cs.CoreV1().Events(ns)
		e1 := newEvent(ns, "e1", nil)
		e2 := newEvent(ns, "e2", nil)
		e2.InvolvedObject = v1.ObjectReference{Kind: "Node", Name: "node-a", UID: types.UID("u-1")}
		e2.Namespace = ns
		e2.InvolvedObject.Namespace = ns
		e2.Reason, e2.Type, e2.Source = "Rebooted", v1.EventTypeWarning, v1.EventSource{Component: "kubelet"}
		e2.ReportingController = "kubelet-reporter"
		for _, e := range []*v1.Event{e1, e2} {
			if _, err := events.Create(t.Context(), e, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for sel, want := range map[string][]string{
			"involvedObject.kind=Node":             {"e2"},
			"involvedObject.name=some-pod":         {"e1"},
			"involvedObject.uid=u-1":               {"e2"},
			"reason=Rebooted":                      {"e2"},
			"type=Normal":                          {"e1"},
			"type!=Normal":                         {"e2"},
			"source=kubelet":                       {"e2"},
			"source=integration-test":              {"e1"},
			"reportingComponent=kubelet-reporter":  {"e2"},
			"reportingComponent=":                  {"e1"},
			"involvedObject.kind=Pod,reason=Other": {},
		} {
			list, err := events.List(t.Context(), metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				t.Fatalf("%s: %v", sel, err)
			}
			checkNames(t, sel, names(t, list), want...)
		}
	})
}

// createPods creates pods named names in ns.
func createPods(t *testing.T, ns string, labels map[string]string, podNames ...string) {
	t.Helper()
	for _, n := range podNames {
		if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), newPod(n, labels), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPagination(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	createPods(t, ns, map[string]string{"app": "x"}, "p0", "p1", "p2", "p3", "p4")

	page1, err := pods.List(t.Context(), metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "page 1", names(t, page1), "p0", "p1")
	if page1.Continue == "" || page1.RemainingItemCount == nil || *page1.RemainingItemCount != 3 {
		t.Fatalf("page 1: continue %q remainingItemCount %v, want a token and 3", page1.Continue, page1.RemainingItemCount)
	}

	// Writes between pages do not show: the pages are one snapshot.
	createPods(t, ns, map[string]string{"app": "x"}, "p2a")
	if err := pods.Delete(t.Context(), "p3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Patch(t.Context(), "p4", types.MergePatchType, []byte(`{"metadata":{"labels":{"late":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	page2, err := pods.List(t.Context(), metav1.ListOptions{Limit: 2, Continue: page1.Continue})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "page 2", names(t, page2), "p2", "p3")
	if page2.ResourceVersion != page1.ResourceVersion {
		t.Errorf("page 2 resourceVersion %s, page 1 %s: not one snapshot", page2.ResourceVersion, page1.ResourceVersion)
	}
	if page2.Continue == "" || page2.RemainingItemCount == nil || *page2.RemainingItemCount != 1 {
		t.Fatalf("page 2: continue %q remainingItemCount %v, want a token and 1", page2.Continue, page2.RemainingItemCount)
	}
	page3, err := pods.List(t.Context(), metav1.ListOptions{Limit: 2, Continue: page2.Continue})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "page 3", names(t, page3), "p4")
	if page3.Continue != "" || page3.RemainingItemCount != nil {
		t.Errorf("last page: continue %q remainingItemCount %v, want none", page3.Continue, page3.RemainingItemCount)
	}
	if page3.Items[0].Labels["late"] != "" {
		t.Error("page 3 shows a write made after the snapshot")
	}

	// A fresh list sees the writes.
	now, err := pods.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "fresh list", names(t, now), "p0", "p1", "p2", "p2a", "p4")

	// With a selector, limit counts matches; kube gives no remainingItemCount.
	sel, err := pods.List(t.Context(), metav1.ListOptions{Limit: 1, LabelSelector: "app=x,late"})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "selected page", names(t, sel), "p4")
	if sel.RemainingItemCount != nil {
		t.Errorf("remainingItemCount %d with a selector, want none", *sel.RemainingItemCount)
	}
	sel, err = pods.List(t.Context(), metav1.ListOptions{Limit: 2, LabelSelector: "app=x"})
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "selected page", names(t, sel), "p0", "p1")
	if sel.Continue == "" || sel.RemainingItemCount != nil {
		t.Errorf("selected page: continue %q remainingItemCount %v", sel.Continue, sel.RemainingItemCount)
	}

	// The whole list through client-go's pager-like loop.
	var all []string
	opts := metav1.ListOptions{Limit: 1}
	for i := 0; ; i++ {
		page, err := pods.List(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, names(t, page)...)
		if page.Continue == "" || i > 10 {
			break
		}
		opts.Continue = page.Continue
	}
	checkNames(t, "paged one by one", all, "p0", "p1", "p2", "p2a", "p4")

	// Malformed tokens and combinations.
	_, err = pods.List(t.Context(), metav1.ListOptions{Limit: 1, Continue: "not-a-token"})
	checkStatusErr(t, err, 400, metav1.StatusReasonBadRequest, "")
	_, err = pods.List(t.Context(), metav1.ListOptions{Limit: 1, Continue: page1.Continue, ResourceVersion: page1.ResourceVersion})
	checkStatusErr(t, err, 400, metav1.StatusReasonBadRequest, "specifying resource version is not allowed when using continue")
	_, err = pods.List(t.Context(), metav1.ListOptions{Limit: 1, Continue: page1.Continue, ResourceVersion: page1.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
	checkCauses(t, st, map[string]metav1.CauseType{"resourceVersionMatch": metav1.CauseTypeForbidden})
}

// compactNow compacts etcd at its current revision: every older revision
// is gone.
func compactNow(t *testing.T) int64 {
	t.Helper()
	rev, err := srv.Storage().CurrentRevision(context.Background(), "/pods/")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Storage().Compact(context.Background(), rev); err != nil {
		t.Fatalf("compact at %d: %v", rev, err)
	}
	return rev
}

// continueToken builds a continue token as kube encodes it.
func continueToken(rv int64, start string) string {
	data, _ := json.Marshal(map[string]any{"v": "meta.k8s.io/v1", "rv": rv, "start": start})
	return base64.RawURLEncoding.EncodeToString(data)
}

func TestExpiredContinue(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	createPods(t, ns, nil, "gw1", "gw2", "gw3")
	page1, err := pods.List(t.Context(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if page1.Continue == "" {
		t.Fatal("no continue token")
	}
	createPods(t, ns, nil, "gw4")
	compactNow(t)

	path := "/api/v1/namespaces/" + ns + "/pods?limit=1&continue=" + page1.Continue
	r := doRaw(t, "GET", path, nil)
	checkGolden(t, r, "410-list-expired-continue-token")
	var st metav1.Status
	if err := json.Unmarshal(r.Body, &st); err != nil {
		t.Fatal(err)
	}
	// The 410 carries a token that goes on from the latest state
	// (resourceVersion -1), inconsistently, as in kube.
	if st.ListMeta.Continue == "" {
		t.Fatal("410 carries no continue token")
	}
	raw, err := base64.RawURLEncoding.DecodeString(st.ListMeta.Continue)
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		V     string `json:"v"`
		RV    int64  `json:"rv"`
		Start string `json:"start"`
	}
	if err := json.Unmarshal(raw, &tok); err != nil || tok.RV != -1 || tok.V != "meta.k8s.io/v1" {
		t.Errorf("410 token %s, want rv -1", raw)
	}
	rest, err := pods.List(t.Context(), metav1.ListOptions{Continue: st.ListMeta.Continue})
	if err != nil {
		t.Fatalf("list with the inconsistent token: %v", err)
	}
	checkNames(t, "rest of the list", names(t, rest), "gw2", "gw3", "gw4")

	// client-go sees a 410 Expired.
	_, err = pods.List(t.Context(), metav1.ListOptions{Limit: 1, Continue: page1.Continue})
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("client-go: %v, want Expired", err)
	}

	// A token exactly as the recorded kube request had it (start key with a
	// leading slash) is understood the same way.
	var pageRV int64
	fmt.Sscan(page1.ResourceVersion, &pageRV)
	tokenPath := "/api/v1/namespaces/" + ns + "/pods?limit=1&continue=" + continueToken(pageRV, "/gw1\x00")
	checkGolden(t, doRaw(t, "GET", tokenPath, nil), "410-list-expired-continue-token")
}

func TestResourceVersionMatch(t *testing.T) {
	ns := newNamespace(t)
	pods := cs.CoreV1().Pods(ns)
	createPods(t, ns, nil, "a")
	first, err := pods.List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv1 := first.ResourceVersion
	if rv1 == "" {
		t.Fatal("list has no resourceVersion")
	}
	createPods(t, ns, nil, "b")

	list := func(t *testing.T, rv string, match metav1.ResourceVersionMatch) *v1.PodList {
		t.Helper()
		l, err := pods.List(t.Context(), metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: match})
		if err != nil {
			t.Fatalf("list rv=%q match=%q: %v", rv, match, err)
		}
		return l
	}
	atLeast := func(t *testing.T, l *v1.PodList, min string) {
		t.Helper()
		got, _ := strconv.ParseInt(l.ResourceVersion, 10, 64)
		want, _ := strconv.ParseInt(min, 10, 64)
		if got < want {
			t.Errorf("list resourceVersion %d older than %d", got, want)
		}
	}

	t.Run("unset is the latest", func(t *testing.T) {
		checkNames(t, "unset", names(t, list(t, "", "")), "a", "b")
	})
	t.Run("0 is any", func(t *testing.T) {
		l := list(t, "0", "")
		if len(l.Items) == 0 || l.ResourceVersion == "" {
			t.Errorf("rv=0: %v items, rv %q", names(t, l), l.ResourceVersion)
		}
		l = list(t, "0", metav1.ResourceVersionMatchNotOlderThan)
		if len(l.Items) == 0 {
			t.Errorf("rv=0 NotOlderThan: no items")
		}
	})
	t.Run("N is not older than N", func(t *testing.T) {
		l := list(t, rv1, "")
		checkNames(t, "rv=N", names(t, l), "a", "b")
		atLeast(t, l, rv1)
		l = list(t, rv1, metav1.ResourceVersionMatchNotOlderThan)
		checkNames(t, "rv=N NotOlderThan", names(t, l), "a", "b")
		atLeast(t, l, rv1)
	})
	t.Run("Exact is the state at N", func(t *testing.T) {
		l := list(t, rv1, metav1.ResourceVersionMatchExact)
		checkNames(t, "rv=N Exact", names(t, l), "a")
		if l.ResourceVersion != rv1 {
			t.Errorf("Exact list resourceVersion %s, want %s", l.ResourceVersion, rv1)
		}
		// Exact pages stay at N too.
		p, err := pods.List(t.Context(), metav1.ListOptions{ResourceVersion: rv1, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		checkNames(t, "Exact page", names(t, p), "a")
		if p.Continue != "" {
			t.Errorf("Exact page of a one-item snapshot has a continue token")
		}
	})
	t.Run("invalid combinations", func(t *testing.T) {
		for _, c := range []struct {
			rv, match string
			field     string
			cause     metav1.CauseType
		}{
			{"", "Exact", "resourceVersionMatch", metav1.CauseTypeForbidden},
			{"", "NotOlderThan", "resourceVersionMatch", metav1.CauseTypeForbidden},
			{"0", "Exact", "resourceVersionMatch", metav1.CauseTypeForbidden},
			{rv1, "Sometime", "resourceVersionMatch", metav1.CauseTypeFieldValueNotSupported},
		} {
			_, err := pods.List(t.Context(), metav1.ListOptions{ResourceVersion: c.rv, ResourceVersionMatch: metav1.ResourceVersionMatch(c.match)})
			st := checkStatusErr(t, err, 422, metav1.StatusReasonInvalid, "")
			checkCauses(t, st, map[string]metav1.CauseType{c.field: c.cause})
			if st.Details.Kind != "ListOptions" || st.Details.Group != "meta.k8s.io" {
				t.Errorf("details %+v", st.Details)
			}
		}
		_, err := pods.List(t.Context(), metav1.ListOptions{ResourceVersion: "abc"})
		checkStatusErr(t, err, 400, metav1.StatusReasonBadRequest, "")
		_, err = pods.List(t.Context(), metav1.ListOptions{ResourceVersion: "abc", ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		checkStatusErr(t, err, 400, metav1.StatusReasonBadRequest, "")
		r := doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods?limit=-1", nil)
		if r.Code != 200 {
			t.Errorf("limit=-1: %d %s (kube ignores a negative limit)", r.Code, r.Body)
		}
	})
	t.Run("future resourceVersion", func(t *testing.T) {
		// Raw HTTP: client-go would retry the 504 (Retry-After) ten times.
		n, _ := strconv.ParseInt(rv1, 10, 64)
		r := doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods?resourceVersion="+strconv.FormatInt(n+1_000_000, 10), nil)
		var st metav1.Status
		if err := json.Unmarshal(r.Body, &st); err != nil {
			t.Fatal(err)
		}
		if r.Code != 504 || st.Reason != metav1.StatusReasonTimeout || !strings.HasPrefix(st.Message, "Timeout: Too large resource version: ") {
			t.Errorf("%d %s", r.Code, r.Body)
		}
		if r.Header.Get("Retry-After") == "" {
			t.Error("no Retry-After header")
		}
		checkCauses(t, &st, map[string]metav1.CauseType{"": metav1.CauseTypeResourceVersionTooLarge})
	})
	t.Run("compacted", func(t *testing.T) {
		compactNow(t)
		r := doRaw(t, "GET", "/api/v1/namespaces/"+ns+"/pods?resourceVersion="+rv1+"&resourceVersionMatch=Exact", nil)
		checkGolden(t, r, "410-list-exact-compacted-rv")
		_, err := pods.List(t.Context(), metav1.ListOptions{ResourceVersion: rv1, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Errorf("client-go Exact on a compacted revision: %v, want 410", err)
		}
		// NotOlderThan a compacted revision is fine: the latest state is newer.
		l := list(t, rv1, metav1.ResourceVersionMatchNotOlderThan)
		checkNames(t, "NotOlderThan compacted", names(t, l), "a", "b")
		atLeast(t, l, rv1)
	})
}
