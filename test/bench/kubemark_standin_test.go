package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/corekube/corekube/auth/pki"
)

// apiStandIn is the kubemark benchmark's stand-in for the five APIs a real
// kubelet (kubemark's hollow kubelet is one, with a fake container
// runtime) needs and corekube does not serve. It is an HTTPS reverse proxy
// to corekube that answers those itself, in memory, and passes every other
// request through:
//
//   - storage.k8s.io/v1 csinodes: the kubelet's CSI plugin gets, creates and
//     updates its node's CSINode, and exits when it cannot (a store here,
//     with resourceVersions and conflicts);
//   - /api/v1/services: the kubelet lists and watches the services (bar the
//     headless ones, a fieldSelector) for pods' environment variables and
//     starts no pod before its informer has synced (an empty list and a
//     watch that stays open and sends nothing);
//   - the ConfigMap kube-root-ca.crt of every namespace, which the service
//     account token volume projects into every pod (corekube's CA, from
//     the kubeconfig, as kube's root-ca-cert-publisher writes it);
//   - node.k8s.io/v1 runtimeclasses and storage.k8s.io/v1 csidrivers,
//     whose informers only log errors without them (empty lists, idle
//     watches).
//
// It answers in protobuf or JSON as the client's Accept header asks: the
// hollow kubelet sends "application/vnd.kubernetes.protobuf, */*" (its
// --kube-api-content-type default with client-go's Accept). It is not a
// part of corekube (issue 17 compares node simulators, not APIs): its
// CPU and memory are the benchmark process's, outside the figures of the
// hollow nodes. Upstream, every request carries the stand-in's identity
// (the kubeconfig's user): the hollow kubelets hold no credentials of
// their own, as the agents in the comparison use the admin's.
type apiStandIn struct {
	proxy  *httputil.ReverseProxy
	caPEM  string // corekube's CA: the data of kube-root-ca.crt
	start  metav1.Time
	srv    *http.Server
	ln     net.Listener
	url    string
	certCA []byte // the CA of the stand-in's serving certificate, PEM
	closed chan struct{}

	mu       sync.Mutex
	csinodes map[string]*storagev1.CSINode
	rv       int64          // the last resourceVersion given, under mu
	answered map[string]int // requests answered here, by API

	proxied atomic.Int64
}

const (
	protobufMediaType = "application/vnd.kubernetes.protobuf"
	jsonMediaType     = "application/json"
	rootCAConfigMap   = "kube-root-ca.crt"
	// standInWatchTimeout ends a watch without timeoutSeconds, as the API
	// server's --min-request-timeout (1800s) does.
	standInWatchTimeout = 30 * time.Minute
)

// newAPIStandIn makes a stand-in in front of the API server of rc (its
// host, CA and credentials) and starts it on a port of 127.0.0.1; Close
// stops it.
func newAPIStandIn(rc *rest.Config) (*apiStandIn, error) {
	upstream, err := url.Parse(rc.Host)
	if err != nil {
		return nil, fmt.Errorf("stand-in: upstream %q: %w", rc.Host, err)
	}
	caPEM := rc.CAData
	if len(caPEM) == 0 && rc.CAFile != "" {
		if caPEM, err = os.ReadFile(rc.CAFile); err != nil {
			return nil, fmt.Errorf("stand-in: corekube's CA: %w", err)
		}
	}
	if len(caPEM) == 0 {
		return nil, errors.New("stand-in: the kubeconfig holds no CA for kube-root-ca.crt")
	}
	transport, err := rest.TransportFor(rc)
	if err != nil {
		return nil, fmt.Errorf("stand-in: transport to corekube: %w", err)
	}
	s := &apiStandIn{
		caPEM:    string(caPEM),
		start:    metav1.NewTime(time.Now().Truncate(time.Second)),
		closed:   make(chan struct{}),
		csinodes: map[string]*storagev1.CSINode{},
		answered: map[string]int{},
	}
	s.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			// The hollow kubelets hold no credentials; should a client
			// send some, upstream still sees the stand-in's identity only.
			pr.Out.Header.Del("Authorization")
		},
		Transport: transport,
		// Watches are streamed: every event is flushed as it comes.
		FlushInterval: -1,
		ErrorLog:      log.New(os.Stderr, "kubemark stand-in: ", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// A client gone (a hollow kubelet stopped, a request timed
			// out) is no news; corekube unreachable is.
			if !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "kubemark stand-in: %s %s: %v\n", r.Method, r.URL.Path, err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	// A serving certificate of its own, from a throwaway CA the hollow
	// nodes' kubeconfig trusts.
	ca, err := pki.NewCA("kubemark-stand-in-ca")
	if err != nil {
		return nil, fmt.Errorf("stand-in: %w", err)
	}
	pair, err := ca.Serving(pki.ServingRequest{CommonName: "kubemark-stand-in", Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		return nil, fmt.Errorf("stand-in: serving certificate: %w", err)
	}
	cert, err := pair.TLSCertificate()
	if err != nil {
		return nil, fmt.Errorf("stand-in: serving certificate: %w", err)
	}
	s.certCA = ca.PEM
	s.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("stand-in: listen: %w", err)
	}
	s.url = "https://" + s.ln.Addr().String()
	s.srv = &http.Server{
		Handler:           s,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
		ReadHeaderTimeout: time.Minute,
		ErrorLog:          log.New(io.Discard, "", 0), // clients going away mid-watch
	}
	go func() { _ = s.srv.ServeTLS(s.ln, "", "") }()
	return s, nil
}

// Close stops the stand-in: its listener, connections and open watches.
func (s *apiStandIn) Close() error {
	close(s.closed)
	return s.srv.Close()
}

// URL is the stand-in's https:// address.
func (s *apiStandIn) URL() string { return s.url }

// writeKubeconfig writes a kubeconfig for the stand-in to path: its
// address and its CA, no credentials.
func (s *apiStandIn) writeKubeconfig(path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["stand-in"] = &clientcmdapi.Cluster{Server: s.url, CertificateAuthorityData: s.certCA}
	cfg.AuthInfos["hollow"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["stand-in"] = &clientcmdapi.Context{Cluster: "stand-in", AuthInfo: "hollow"}
	cfg.CurrentContext = "stand-in"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("stand-in kubeconfig: %w", err)
	}
	return nil
}

// answeredCounts returns how many requests each API had answered here, and
// how many went to corekube.
func (s *apiStandIn) answeredCounts() (map[string]int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.answered), s.proxied.Load()
}

func (s *apiStandIn) count(api string) {
	s.mu.Lock()
	s.answered[api]++
	s.mu.Unlock()
}

// summary is answeredCounts as one line.
func (s *apiStandIn) summary() string {
	counts, proxied := s.answeredCounts()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return fmt.Sprintf("answered %s; passed %d to corekube", strings.Join(parts, ", "), proxied)
}

// Resources of the stand-in, and the fields each takes in a fieldSelector
// (the API server's field label conversions for them).
var (
	servicesResource       = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	configMapsResource     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	csiNodesResource       = storagev1.SchemeGroupVersion.WithResource("csinodes")
	csiDriversResource     = storagev1.SchemeGroupVersion.WithResource("csidrivers")
	runtimeClassesResource = nodev1.SchemeGroupVersion.WithResource("runtimeclasses")
	standInFields          = map[string][]string{
		"services":       {"metadata.name", "metadata.namespace", "spec.clusterIP", "spec.type"},
		"configmaps":     {"metadata.name", "metadata.namespace"},
		"csinodes":       {"metadata.name"},
		"csidrivers":     {"metadata.name"},
		"runtimeclasses": {"metadata.name"},
	}
)

// standInRequest is a request for a resource, parsed from its path:
// /api/v1[/namespaces/NS]/RESOURCE[/NAME] or
// /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE[/NAME].
type standInRequest struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
	sub       bool // a subresource or a deeper path: never answered here
}

func parseResourcePath(p string) (standInRequest, bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	var r standInRequest
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		r.gvr.Version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		r.gvr.Group, r.gvr.Version, parts = parts[1], parts[2], parts[3:]
	default:
		return r, false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		r.namespace, parts = parts[1], parts[2:]
	}
	r.gvr.Resource = parts[0]
	if len(parts) >= 2 {
		r.name = parts[1]
	}
	r.sub = len(parts) > 2
	return r, true
}

// ServeHTTP answers the stand-in's APIs and proxies the rest.
func (s *apiStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := parseResourcePath(r.URL.Path)
	if ok && !req.sub && s.serve(w, r, req) {
		return
	}
	s.proxied.Add(1)
	s.proxy.ServeHTTP(w, r)
}

// serve answers r if it is for an API of the stand-in's.
func (s *apiStandIn) serve(w http.ResponseWriter, r *http.Request, req standInRequest) bool {
	switch req.gvr {
	case servicesResource:
		s.count("services")
		s.serveEmpty(w, r, req, &v1.ServiceList{})
	case runtimeClassesResource:
		s.count("runtimeclasses")
		s.serveEmpty(w, r, req, &nodev1.RuntimeClassList{})
	case csiDriversResource:
		s.count("csidrivers")
		s.serveEmpty(w, r, req, &storagev1.CSIDriverList{})
	case csiNodesResource:
		s.count("csinodes")
		s.serveCSINodes(w, r, req)
	case configMapsResource:
		return s.serveRootCA(w, r, req)
	default:
		return false
	}
	return true
}

// serveEmpty answers a resource with no objects: a list, an idle watch, a
// NotFound for a name.
func (s *apiStandIn) serveEmpty(w http.ResponseWriter, r *http.Request, req standInRequest, list runtime.Object) {
	switch {
	case r.Method != http.MethodGet:
		s.writeStatus(w, r, methodNotAllowed(r.Method, req))
	case req.name != "":
		s.writeStatus(w, r, apierrors.NewNotFound(req.gvr.GroupResource(), req.name))
	default:
		if err := checkSelectors(r, req.gvr.Resource); err != nil {
			s.writeStatus(w, r, err)
			return
		}
		if isWatch(r) {
			s.idleWatch(w, r)
			return
		}
		list.(metav1.ListInterface).SetResourceVersion(s.resourceVersion())
		s.write(w, r, http.StatusOK, list, req.gvr.GroupVersion())
	}
}

// serveRootCA answers for the ConfigMap kube-root-ca.crt: a GET of it, a
// LIST or WATCH with a fieldSelector on its name (the kubelet's
// watch-based ConfigMap manager); any other ConfigMap request is not the
// stand-in's.
func (s *apiStandIn) serveRootCA(w http.ResponseWriter, r *http.Request, req standInRequest) bool {
	if req.namespace == "" {
		return false
	}
	if req.name != "" {
		if req.name != rootCAConfigMap {
			return false
		}
		s.count("configmaps/" + rootCAConfigMap)
		if r.Method != http.MethodGet || isWatch(r) {
			s.writeStatus(w, r, methodNotAllowed(r.Method, req))
			return true
		}
		s.write(w, r, http.StatusOK, s.rootCA(req.namespace), req.gvr.GroupVersion())
		return true
	}
	sel, err := fields.ParseSelector(r.URL.Query().Get("fieldSelector"))
	if err != nil {
		return false
	}
	if name, ok := sel.RequiresExactMatch("metadata.name"); !ok || name != rootCAConfigMap || r.Method != http.MethodGet {
		return false
	}
	s.count("configmaps/" + rootCAConfigMap)
	if err := checkSelectors(r, req.gvr.Resource); err != nil {
		s.writeStatus(w, r, err)
		return true
	}
	if isWatch(r) {
		s.idleWatch(w, r)
		return true
	}
	list := &v1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: s.resourceVersion()}}
	if cm := s.rootCA(req.namespace); sel.Matches(fields.Set{"metadata.name": cm.Name, "metadata.namespace": cm.Namespace}) {
		list.Items = append(list.Items, *cm)
	}
	s.write(w, r, http.StatusOK, list, req.gvr.GroupVersion())
	return true
}

// rootCA is namespace's kube-root-ca.crt, as kube's publisher writes it:
// the CA clients of the API server trust.
func (s *apiStandIn) rootCA(namespace string) *v1.ConfigMap {
	h := fnv.New64a()
	h.Write([]byte(namespace))
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: rootCAConfigMap, Namespace: namespace,
			// Stable per namespace: it never changes here.
			UID:               types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012x", h.Sum64()&(1<<48-1))),
			ResourceVersion:   "1",
			CreationTimestamp: s.start,
		},
		Data: map[string]string{"ca.crt": s.caPEM},
	}
}

// serveCSINodes is a store of CSINodes in memory: what the kubelet's CSI
// plugin does with its node's (GET, POST, PUT) and LIST, WATCH (idle) and
// DELETE for completeness.
func (s *apiStandIn) serveCSINodes(w http.ResponseWriter, r *http.Request, req standInRequest) {
	gv, gr := req.gvr.GroupVersion(), req.gvr.GroupResource()
	switch {
	case r.Method == http.MethodGet && req.name == "":
		if err := checkSelectors(r, req.gvr.Resource); err != nil {
			s.writeStatus(w, r, err)
			return
		}
		if isWatch(r) {
			// The kubelet never watches CSINodes: no events are made.
			s.idleWatch(w, r)
			return
		}
		sel, _ := fields.ParseSelector(r.URL.Query().Get("fieldSelector"))
		lsel, _ := labels.Parse(r.URL.Query().Get("labelSelector"))
		s.mu.Lock()
		list := &storagev1.CSINodeList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(s.rv, 10)}}
		for _, name := range slices.Sorted(maps.Keys(s.csinodes)) {
			n := s.csinodes[name]
			if sel.Matches(fields.Set{"metadata.name": n.Name}) && lsel.Matches(labels.Set(n.Labels)) {
				list.Items = append(list.Items, *n.DeepCopy())
			}
		}
		s.mu.Unlock()
		s.write(w, r, http.StatusOK, list, gv)
	case r.Method == http.MethodGet:
		s.mu.Lock()
		n, ok := s.csinodes[req.name]
		if ok {
			n = n.DeepCopy()
		}
		s.mu.Unlock()
		if !ok {
			s.writeStatus(w, r, apierrors.NewNotFound(gr, req.name))
			return
		}
		s.write(w, r, http.StatusOK, n, gv)
	case r.Method == http.MethodPost && req.name == "", r.Method == http.MethodPut && req.name != "":
		n, err := decodeCSINode(r)
		if err != nil {
			s.writeStatus(w, r, err)
			return
		}
		if req.name != "" && n.Name != req.name {
			s.writeStatus(w, r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", n.Name, req.name)))
			return
		}
		if n.Name == "" {
			s.writeStatus(w, r, apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "CSINode"}, "",
				field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name is required")}))
			return
		}
		code, err := s.putCSINode(n, r.Method == http.MethodPost, gr)
		if err != nil {
			s.writeStatus(w, r, err)
			return
		}
		s.write(w, r, code, n, gv)
	case r.Method == http.MethodDelete && req.name != "":
		s.mu.Lock()
		n, ok := s.csinodes[req.name]
		delete(s.csinodes, req.name)
		s.mu.Unlock()
		if !ok {
			s.writeStatus(w, r, apierrors.NewNotFound(gr, req.name))
			return
		}
		s.write(w, r, http.StatusOK, n, gv)
	default:
		s.writeStatus(w, r, methodNotAllowed(r.Method, req))
	}
}

// putCSINode creates (create) or updates n in the store, as the API server
// would: AlreadyExists, NotFound, a Conflict for a stale resourceVersion
// (none: an unconditional update). n gets its stored metadata.
func (s *apiStandIn) putCSINode(n *storagev1.CSINode, create bool, gr schema.GroupResource) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.csinodes[n.Name]
	switch {
	case create && exists:
		return 0, apierrors.NewAlreadyExists(gr, n.Name)
	case !create && !exists:
		return 0, apierrors.NewNotFound(gr, n.Name)
	case !create && n.ResourceVersion != "" && n.ResourceVersion != old.ResourceVersion:
		return 0, apierrors.NewConflict(gr, n.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	code := http.StatusOK
	if create {
		code = http.StatusCreated
		h := fnv.New64a()
		h.Write([]byte(n.Name))
		n.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8001-%012x", h.Sum64()&(1<<48-1)))
		n.CreationTimestamp = metav1.NewTime(time.Now().Truncate(time.Second))
		n.Generation = 1
	} else {
		n.UID, n.CreationTimestamp, n.Generation = old.UID, old.CreationTimestamp, old.Generation+1
	}
	s.rv++
	n.ResourceVersion = strconv.FormatInt(s.rv, 10)
	s.csinodes[n.Name] = n.DeepCopy()
	return code, nil
}

// decodeCSINode reads a CSINode from r's body, protobuf or JSON.
func decodeCSINode(r *http.Request) (*storagev1.CSINode, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("read body: %v", err))
	}
	mt := strings.TrimSpace(strings.Split(r.Header.Get("Content-Type"), ";")[0])
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mt)
	if !ok {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
			Reason: metav1.StatusReasonUnsupportedMediaType, Message: fmt.Sprintf("the body of the request was in an unknown format: %q", mt),
		}}
	}
	obj, _, err := info.Serializer.Decode(body, nil, &storagev1.CSINode{})
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decode CSINode: %v", err))
	}
	n, ok := obj.(*storagev1.CSINode)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("a %T, not a CSINode", obj))
	}
	return n, nil
}

// checkSelectors refuses, as the API server does, a labelSelector that
// does not parse and a fieldSelector on a field resource has no label
// conversion for (the kubelet's services informer asks for
// spec.clusterIP!=None).
func checkSelectors(r *http.Request, resource string) error {
	q := r.URL.Query()
	if _, err := labels.Parse(q.Get("labelSelector")); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
	}
	sel, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
	}
	for _, req := range sel.Requirements() {
		if !slices.Contains(standInFields[resource], req.Field) {
			return apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	return nil
}

func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

func methodNotAllowed(method string, req standInRequest) error {
	return apierrors.NewMethodNotSupported(req.gvr.GroupResource(), strings.ToLower(method)+" (kubemark stand-in)")
}

// resourceVersion is the stand-in's current resourceVersion for lists.
func (s *apiStandIn) resourceVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.FormatInt(s.rv+1, 10)
}

// mediaType is the encoding r's Accept header asks for first of the two
// the stand-in speaks; JSON for */* or none.
func mediaType(r *http.Request) string {
	for _, clause := range strings.Split(r.Header.Get("Accept"), ",") {
		switch strings.TrimSpace(strings.Split(clause, ";")[0]) {
		case protobufMediaType:
			return protobufMediaType
		case jsonMediaType, "*/*", "application/*":
			return jsonMediaType
		}
	}
	return jsonMediaType
}

// idleWatch holds a watch open without an event until the client goes, its
// timeoutSeconds pass or the stand-in closes: a resource nothing changes.
func (s *apiStandIn) idleWatch(w http.ResponseWriter, r *http.Request) {
	timeout := standInWatchTimeout
	if v := r.URL.Query().Get("timeoutSeconds"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	ct := jsonMediaType
	if mediaType(r) == protobufMediaType {
		ct = protobufMediaType + ";stream=watch"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-r.Context().Done():
	case <-t.C:
	case <-s.closed:
	}
}

// write encodes obj for r (gv its group and version) with code.
func (s *apiStandIn) write(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object, gv schema.GroupVersion) {
	mt := mediaType(r)
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mt)
	if !ok {
		http.Error(w, "no serializer for "+mt, http.StatusInternalServerError)
		return
	}
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, gv), obj)
	if err != nil {
		http.Error(w, fmt.Sprintf("encode %T: %v", obj, err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", mt)
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// writeStatus writes err as the API server does: a Status with its code.
func (s *apiStandIn) writeStatus(w http.ResponseWriter, r *http.Request, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	s.write(w, r, int(status.Code), &status, schema.GroupVersion{Version: "v1"})
}
