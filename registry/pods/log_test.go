package pods

import (
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corekube/corekube/registry/pods/internal/podtest"
)

func TestDecodePodLogOptions(t *testing.T) {
	since := metav1.NewTime(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
	for _, tc := range []struct {
		query   string
		want    *v1.PodLogOptions
		wantErr string
	}{
		{query: "", want: &v1.PodLogOptions{}},
		{
			query: "container=c&follow=true&previous=1&timestamps=yes&tailLines=10&limitBytes=5&sinceSeconds=3&insecureSkipTLSVerifyBackend=true&pretty=true",
			want: &v1.PodLogOptions{Container: "c", Follow: true, Previous: true, Timestamps: true, TailLines: podtest.Int64(10), LimitBytes: podtest.Int64(5),
				SinceSeconds: podtest.Int64(3), InsecureSkipTLSVerifyBackend: true},
		},
		// Booleans are false only when "false" (any case) or "0"; the first
		// value counts.
		{query: "follow=FALSE&previous=0&timestamps=false&timestamps=true", want: &v1.PodLogOptions{}},
		{query: "follow=", want: &v1.PodLogOptions{Follow: true}},
		{query: "sinceTime=2024-05-06T07:08:09Z", want: &v1.PodLogOptions{SinceTime: &since}},
		{query: "tailLines=abc", wantErr: `strconv.ParseInt: parsing "abc": invalid syntax`},
		// kube reports the first malformed field in PodLogOptions' order.
		{query: "limitBytes=x&sinceSeconds=y", wantErr: `strconv.ParseInt: parsing "y": invalid syntax`},
		{query: "sinceTime=yesterday", wantErr: `parsing time "yesterday"`},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodePodLogOptions(q)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.query, err, tc.wantErr)
			}
			continue
		}
		// Query times are parsed in the local zone: compare instants.
		if got != nil && got.SinceTime != nil && tc.want.SinceTime != nil && got.SinceTime.Equal(tc.want.SinceTime) {
			got.SinceTime = tc.want.SinceTime
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v, %v; want %+v", tc.query, got, err, tc.want)
		}
	}
}

func TestValidatePodLogOptions(t *testing.T) {
	now := metav1.Now()
	all := "All"
	for _, tc := range []struct {
		name string
		opts v1.PodLogOptions
		want []string
	}{
		{"valid", v1.PodLogOptions{TailLines: podtest.Int64(0), LimitBytes: podtest.Int64(1), SinceSeconds: podtest.Int64(1)}, nil},
		{"negative tailLines", v1.PodLogOptions{TailLines: podtest.Int64(-1)}, []string{"tailLines: Invalid value: -1: must be greater than or equal to 0"}},
		{"zero limitBytes", v1.PodLogOptions{LimitBytes: podtest.Int64(0)}, []string{"limitBytes: Invalid value: 0: must be greater than 0"}},
		{"zero sinceSeconds", v1.PodLogOptions{SinceSeconds: podtest.Int64(0)}, []string{"sinceSeconds: Invalid value: 0: must be greater than 0"}},
		{"both since", v1.PodLogOptions{SinceSeconds: podtest.Int64(-5), SinceTime: &now}, []string{"[]: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"}},
		{"stream", v1.PodLogOptions{Stream: &all}, []string{"stream: Forbidden: may not be specified"}},
	} {
		var got []string
		for _, e := range validatePodLogOptions(&tc.opts) {
			got = append(got, e.Error())
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestLogContainer(t *testing.T) {
	pod := func(init []string, containers ...string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		for _, n := range init {
			p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n})
		}
		for _, n := range containers {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n})
		}
		return p
	}
	withEphemeral := pod(nil, "a")
	withEphemeral.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}}
	for _, tc := range []struct {
		name      string
		pod       *v1.Pod
		container string
		want      string
		wantErr   string
	}{
		{"only container", pod([]string{"init1"}, "a"), "", "a", ""},
		{"none", pod(nil), "", "", "a container name must be specified for pod p"},
		{"several", pod([]string{"init1"}, "a", "b"), "", "", "a container name must be specified for pod p, choose one of: [init1 a b]"},
		{"named init", pod([]string{"init1"}, "a", "b"), "init1", "init1", ""},
		{"named ephemeral", withEphemeral, "debug", "debug", ""},
		{"unknown", pod(nil, "a"), "x", "", "container x is not valid for pod p"},
	} {
		got, err := logContainer(tc.pod, tc.container)
		switch {
		case tc.wantErr != "":
			if !apierrors.IsBadRequest(err) || err.Error() != tc.wantErr {
				t.Errorf("%s: error %v, want BadRequest %q", tc.name, err, tc.wantErr)
			}
		case err != nil || got != tc.want:
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestAgentURL(t *testing.T) {
	node := func(annotation string, port int32, addrs ...v1.NodeAddress) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
		if annotation != "" {
			n.Annotations = map[string]string{"node.corekube.io/kubelet-endpoint": annotation}
		}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
		n.Status.Addresses = addrs
		return n
	}
	internal := v1.NodeAddress{Type: v1.NodeInternalIP, Address: "10.0.0.1"}
	external := v1.NodeAddress{Type: v1.NodeExternalIP, Address: "1.2.3.4"}
	hostname := v1.NodeAddress{Type: v1.NodeHostName, Address: "node-1"}
	for _, tc := range []struct {
		name    string
		node    *v1.Node
		want    string
		wantErr string
	}{
		// The annotation earlier agents set is never followed.
		{"annotation ignored", node("http://192.0.2.9:41234", 10250, internal), "https://10.0.0.1:10250", ""},
		{"hostname first", node("", 10255, external, internal, hostname), "https://node-1:10255", ""},
		{"internal before external", node("", 10255, external, internal), "https://10.0.0.1:10255", ""},
		{"default port", node("", 0, internal), "https://10.0.0.1:10250", ""},
		{"ipv6", node("", 1, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "::1"}), "https://[::1]:1", ""},
		{"no address", node("", 1), "", "no preferred addresses found; known addresses: []"},
		{"unpreferred address", node("", 1, v1.NodeAddress{Type: "Other", Address: "x"}), "", "no preferred addresses found; known addresses: [{Other x}]"},
	} {
		got, err := NewLogREST(nil, nil).agentURL(tc.node)
		if tc.wantErr != "" {
			status, ok := err.(apierrors.APIStatus)
			if !ok || status.Status().Code != http.StatusInternalServerError || status.Status().Reason != "" || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %#v, want a reasonless 500 %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("%s: %v, %v; want %s", tc.name, got, err, tc.want)
		}
	}
	// --kubelet-preferred-address-types as kubeadm sets it.
	r := NewLogREST(nil, nil)
	r.SetKubeletClient(KubeletClientConfig{PreferredAddressTypes: []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP, v1.NodeHostName}})
	if got, err := r.agentURL(node("", 10250, hostname, external, internal)); err != nil || got.String() != "https://10.0.0.1:10250" {
		t.Errorf("InternalIP first: %v %v", got, err)
	}
}

func TestAgentLogParams(t *testing.T) {
	since := metav1.NewTime(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
	if got := agentLogParams(&v1.PodLogOptions{Container: "c", InsecureSkipTLSVerifyBackend: true}).Encode(); got != "" {
		t.Errorf("defaults send %q", got)
	}
	got := agentLogParams(&v1.PodLogOptions{Follow: true, Previous: true, Timestamps: true, SinceSeconds: podtest.Int64(5), SinceTime: &since, TailLines: podtest.Int64(0), LimitBytes: podtest.Int64(7)}).Encode()
	want := "follow=true&limitBytes=7&previous=true&sinceSeconds=5&sinceTime=2024-05-06T07%3A08%3A09Z&tailLines=0&timestamps=true"
	if got != want {
		t.Errorf("params %s\nwant   %s", got, want)
	}
}

func TestCheckAgentResponse(t *testing.T) {
	resp := func(code int, body string) *http.Response {
		return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader(body))}
	}
	for _, tc := range []struct {
		code    int
		body    string
		status  int32
		reason  metav1.StatusReason
		message string
	}{
		{http.StatusOK, "", 0, "", ""},
		{http.StatusPartialContent, "", 0, "", ""},
		{http.StatusBadRequest, "bad tail", 400, metav1.StatusReasonBadRequest, "bad tail"},
		{http.StatusNotFound, "no such container", 404, metav1.StatusReasonNotFound, "the server could not find the requested resource ( pods/log p)"},
		{http.StatusInternalServerError, "boom", 500, metav1.StatusReasonInternalError, "Internal error occurred: boom"},
		{http.StatusServiceUnavailable, "later", 503, metav1.StatusReasonServiceUnavailable, "the server is currently unable to handle the request ( pods/log p)"},
		{http.StatusBadGateway, "no route", 502, metav1.StatusReasonInternalError, `an error on the server ("no route") has prevented the request from succeeding ( pods/log p)`},
		{http.StatusMovedPermanently, "", 301, metav1.StatusReasonUnknown, "the server responded with the status code 301 but did not return more information ( pods/log p)"},
	} {
		err := checkAgentResponse(resp(tc.code, tc.body), "p")
		if tc.status == 0 {
			if err != nil {
				t.Errorf("%d: %v", tc.code, err)
			}
			continue
		}
		s := err.(apierrors.APIStatus).Status()
		if s.Code != tc.status || s.Reason != tc.reason || s.Message != tc.message {
			t.Errorf("%d: %d %s %q, want %d %s %q", tc.code, s.Code, s.Reason, s.Message, tc.status, tc.reason, tc.message)
		}
		// As kube's: the agent's text is dropped, the details name the log.
		if tc.code == http.StatusNotFound && (s.Details == nil || s.Details.Kind != "pods/log" || s.Details.Name != "p" || len(s.Details.Causes) != 0) {
			t.Errorf("404 details: %+v", s.Details)
		}
	}
}
