package pods

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/pods/internal/podutil"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// defaultKubeletPort is kube-apiserver's --kubelet-port, for nodes that
// report no kubelet port.
const defaultKubeletPort = 10250

// DefaultPreferredAddressTypes is kube-apiserver's default
// --kubelet-preferred-address-types.
var DefaultPreferredAddressTypes = []v1.NodeAddressType{
	v1.NodeHostName, v1.NodeInternalDNS, v1.NodeInternalIP, v1.NodeExternalDNS, v1.NodeExternalIP,
}

// maxAgentErrorBody bounds how much of an agent's error answer is read
// into the Status message (kube's response checker reads this much).
const maxAgentErrorBody = 50000

var (
	podLogResource = schema.GroupResource{Resource: "pods/log"}
	podLogOptions  = schema.GroupKind{Kind: "PodLogOptions"}
)

// LogREST serves GET pods/{name}/log as kube-apiserver v1.32 does
// (pkg/registry/core/pod/rest/log.go and LogLocation): the options are
// validated, the container chosen, and the node agent's
// /containerLogs/{namespace}/{pod}/{container} is streamed back, fetched
// over HTTPS from the node's preferred address and kubelet port.
type LogREST struct {
	pods  *registry.Store // the pod, read from etcd: a pod bound an instant ago must show its node
	nodes *registry.Store // the node, from the watch cache

	mu sync.RWMutex
	// client reaches agents; insecureClient is the one a request with
	// insecureSkipTLSVerifyBackend uses; addressTypes is the preference
	// order of the node's addresses.
	client, insecureClient *http.Client
	addressTypes           []v1.NodeAddressType
}

// KubeletClientConfig is how the API server reaches kubelets, as
// kube-apiserver's --kubelet-* flags.
type KubeletClientConfig struct {
	// TLS has the client certificate the API server presents to the
	// kubelet (--kubelet-client-certificate, --kubelet-client-key) and the
	// CAs that verify the kubelet's serving certificate
	// (--kubelet-certificate-authority); with no RootCAs the certificate
	// is not verified, as kube-apiserver without that flag.
	TLS *tls.Config
	// PreferredAddressTypes is --kubelet-preferred-address-types; empty
	// means DefaultPreferredAddressTypes.
	PreferredAddressTypes []v1.NodeAddressType
}

// NewLogREST returns the log subresource of podStore, which finds the
// agents through the Nodes in nodeStore. Until SetKubeletClient it reaches
// them with no client certificate.
func NewLogREST(podStore, nodeStore *registry.Store) *LogREST {
	r := &LogREST{pods: podStore, nodes: nodeStore}
	r.SetKubeletClient(KubeletClientConfig{})
	return r
}

// SetKubeletClient sets how kubelets are reached (the server knows its
// certificates only after it built its resources).
func (r *LogREST) SetKubeletClient(c KubeletClientConfig) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLS != nil {
		tlsConfig = c.TLS.Clone()
	}
	if tlsConfig.RootCAs == nil {
		tlsConfig.InsecureSkipVerify = true //nolint:gosec // kube-apiserver without --kubelet-certificate-authority
	}
	insecure := tlsConfig.Clone()
	insecure.InsecureSkipVerify = true //nolint:gosec // what the client asked for
	types := c.PreferredAddressTypes
	if len(types) == 0 {
		types = DefaultPreferredAddressTypes
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.client, r.insecureClient, r.addressTypes = agentClient(tlsConfig), agentClient(insecure), slices.Clone(types)
}

// agentClient returns an HTTP client for node agents. It has no overall
// timeout (a followed log lasts as long as its client wants), only
// connection ones, and it follows no redirects, as kube's log proxy.
func agentClient(tlsConfig *tls.Config) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: 10 * time.Second,
			IdleConnTimeout:     90 * time.Second,
			MaxIdleConnsPerHost: 16,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return errors.New("redirects forbidden") },
	}
}

// GroupVersionKind is v1 Pod, the kind kube lists for pods/log.
func (r *LogREST) GroupVersionKind() schema.GroupVersionKind {
	return v1.SchemeGroupVersion.WithKind("Pod")
}

// NewGetOptions returns an empty PodLogOptions.
func (r *LogREST) NewGetOptions() runtime.Object { return &v1.PodLogOptions{} }

// ProducesMIMETypes is what the log answers in: plain text.
func (r *LogREST) ProducesMIMETypes() []string { return []string{"text/plain"} }

// Get decodes the PodLogOptions in query (400 when malformed), validates
// them (422), and returns the stream of the container's log: empty when
// the pod is not bound to a node yet.
func (r *LogREST) Get(ctx context.Context, namespace, name string, query url.Values) (runtime.Object, error) {
	opts, err := decodePodLogOptions(query)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if errs := validatePodLogOptions(opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(podLogOptions, name, errs)
	}
	location, err := r.logLocation(ctx, namespace, name, opts)
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	client := r.client
	if opts.InsecureSkipTLSVerifyBackend {
		client = r.insecureClient
	}
	r.mu.RUnlock()
	return &logStream{location: location, client: client, flush: opts.Follow, name: name}, nil
}

// decodePodLogOptions decodes the query as kube's parameter codec does for
// v1 PodLogOptions: the first value of each parameter, booleans true
// unless "false" or "0", unknown parameters ignored.
func decodePodLogOptions(query url.Values) (*v1.PodLogOptions, error) {
	opts := &v1.PodLogOptions{}
	boolean := func(out *bool) func(*[]string) error {
		return func(v *[]string) error { return runtime.Convert_Slice_string_To_bool(v, out, nil) }
	}
	integer := func(out **int64) func(*[]string) error {
		return func(v *[]string) error { return runtime.Convert_Slice_string_To_Pointer_int64(v, out, nil) }
	}
	// In kube's field order: the first malformed parameter is the one
	// reported.
	params := []struct {
		key    string
		decode func(*[]string) error
	}{
		{"container", func(v *[]string) error { return runtime.Convert_Slice_string_To_string(v, &opts.Container, nil) }},
		{"follow", boolean(&opts.Follow)},
		{"previous", boolean(&opts.Previous)},
		{"sinceSeconds", integer(&opts.SinceSeconds)},
		{"sinceTime", func(v *[]string) error {
			return metav1.Convert_Slice_string_To_Pointer_v1_Time(v, &opts.SinceTime, nil)
		}},
		{"timestamps", boolean(&opts.Timestamps)},
		{"tailLines", integer(&opts.TailLines)},
		{"limitBytes", integer(&opts.LimitBytes)},
		{"insecureSkipTLSVerifyBackend", boolean(&opts.InsecureSkipTLSVerifyBackend)},
		{"stream", func(v *[]string) error { opts.Stream = &(*v)[0]; return nil }},
	}
	for _, p := range params {
		if v := query[p.key]; len(v) > 0 {
			if err := p.decode(&v); err != nil {
				return nil, err
			}
		}
	}
	return opts, nil
}

// validatePodLogOptions is kube's ValidatePodLogOptions with the
// PodLogsQuerySplitStreams feature off, as in a default v1.32 server.
func validatePodLogOptions(opts *v1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if opts.TailLines != nil && *opts.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *opts.TailLines, apimachineryvalidation.IsNegativeErrorMsg))
	}
	if opts.LimitBytes != nil && *opts.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *opts.LimitBytes, "must be greater than 0"))
	}
	switch {
	case opts.SinceSeconds != nil && opts.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case opts.SinceSeconds != nil && *opts.SinceSeconds < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *opts.SinceSeconds, "must be greater than 0"))
	}
	if opts.Stream != nil {
		errs = append(errs, field.Forbidden(field.NewPath("stream"), "may not be specified"))
	}
	return errs
}

// logLocation returns the URL of the container's log on its node's agent,
// or nil when the pod has no node yet (kube's LogLocation).
func (r *LogREST) logLocation(ctx context.Context, namespace, name string, opts *v1.PodLogOptions) (*url.URL, error) {
	obj, err := r.pods.Get(ctx, namespace, name, nil)
	if err != nil {
		return nil, err
	}
	pod := obj.(*v1.Pod)
	container, err := logContainer(pod, opts.Container)
	if err != nil {
		return nil, err
	}
	if pod.Spec.NodeName == "" {
		return nil, nil
	}
	obj, err = r.nodes.GetCached(ctx, "", pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	loc, err := r.agentURL(obj.(*v1.Node))
	if err != nil {
		return nil, err
	}
	loc.Path = strings.TrimSuffix(loc.Path, "/") + fmt.Sprintf("/containerLogs/%s/%s/%s", pod.Namespace, pod.Name, container)
	loc.RawQuery = agentLogParams(opts).Encode()
	return loc, nil
}

// logContainer picks the container whose log is asked for, with kube's
// messages: the only one when none is named, else the named one, which
// may be an init or ephemeral container.
func logContainer(pod *v1.Pod, name string) (string, error) {
	var names []string
	podutil.EachContainer(&pod.Spec, func(c *v1.Container) { names = append(names, c.Name) })
	if name == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		default:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, names))
		}
	}
	for _, n := range names {
		if n == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

// agentURL is the base URL of the node's agent: https, the node's
// preferred address and its kubelet port, as kube's node connection info
// (never anything a Node's metadata says: whoever may patch a Node must
// not point the API server elsewhere).
func (r *LogREST) agentURL(node *v1.Node) (*url.URL, error) {
	r.mu.RLock()
	types := r.addressTypes
	r.mu.RUnlock()
	host, err := preferredAddress(node, types)
	if err != nil {
		return nil, err
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 {
		port = defaultKubeletPort
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(port))}, nil
}

// preferredAddress is kube's GetPreferredNodeAddress. kube answers its
// failure as a plain error: a 500 without a reason.
func preferredAddress(node *v1.Node, types []v1.NodeAddressType) (string, error) {
	for _, t := range types {
		for _, a := range node.Status.Addresses {
			if a.Type == t {
				return a.Address, nil
			}
		}
	}
	return "", unknownError(fmt.Errorf("no preferred addresses found; known addresses: %v", node.Status.Addresses))
}

// agentLogParams are the kubelet's /containerLogs query parameters for
// opts: only those set, as kube sends them.
func agentLogParams(opts *v1.PodLogOptions) url.Values {
	params := url.Values{}
	if opts.Follow {
		params.Set("follow", "true")
	}
	if opts.Previous {
		params.Set("previous", "true")
	}
	if opts.Timestamps {
		params.Set("timestamps", "true")
	}
	if opts.SinceSeconds != nil {
		params.Set("sinceSeconds", strconv.FormatInt(*opts.SinceSeconds, 10))
	}
	if opts.SinceTime != nil {
		params.Set("sinceTime", opts.SinceTime.Format(time.RFC3339))
	}
	if opts.TailLines != nil {
		params.Set("tailLines", strconv.FormatInt(*opts.TailLines, 10))
	}
	if opts.LimitBytes != nil {
		params.Set("limitBytes", strconv.FormatInt(*opts.LimitBytes, 10))
	}
	return params
}

// logStream is the answer of LogREST.Get: kube's LocationStreamer for a
// log. The handlers stream it (handlers.ResourceStreamer); it is a
// runtime.Object only to travel as Get's result.
type logStream struct {
	location *url.URL // nil: nothing to stream
	client   *http.Client
	flush    bool
	name     string // the pod, for error messages
}

func (s *logStream) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (s *logStream) DeepCopyObject() runtime.Object {
	c := *s
	if s.location != nil {
		loc := *s.location
		c.location = &loc
	}
	return &c
}

// InputStream opens the log on the agent. The request carries ctx, so the
// agent's stream ends when the API client goes away.
func (s *logStream) InputStream(ctx context.Context) (io.ReadCloser, bool, string, error) {
	if s.location == nil {
		return nil, false, "", nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.location.String(), nil)
	if err != nil {
		return nil, false, "", unknownError(fmt.Errorf("failed to construct request for %s, got %w", s.location, err))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// kube answers the transport's error as is: Get "http://...":
		// dial tcp ...: connect: connection refused.
		return nil, false, "", unknownError(err)
	}
	if err := checkAgentResponse(resp, s.name); err != nil {
		return nil, false, "", err
	}
	return resp.Body, s.flush, "text/plain", nil
}

// checkAgentResponse turns an agent's answer other than 2xx into the
// Status kube's GenericHttpResponseChecker makes of it, the agent's text in
// the message or cause.
func checkAgentResponse(resp *http.Response, name string) error {
	if resp.StatusCode >= http.StatusOK && resp.StatusCode <= http.StatusPartialContent {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAgentErrorBody))
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("read the node agent's answer: %w", err))
	}
	text := string(body)
	switch resp.StatusCode {
	case http.StatusInternalServerError:
		return apierrors.NewInternalError(errors.New(text))
	case http.StatusBadRequest:
		return apierrors.NewBadRequest(text)
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, "", podLogResource, name, text, 0, false)
}

// unknownError is what kube-apiserver answers for an error that is not a
// Status error (ErrorToAPIStatus): 500, no reason, the error's text as the
// message, rather than handlers' "Internal error occurred: ...".
func unknownError(err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Message: err.Error(),
	}}
}
