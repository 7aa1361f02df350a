package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/storage/trace"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
)

// maxResponseBytes bounds a webhook's answer (kube reads at most 3 MiB
// more than the request allows; an object is at most ~1.5 MiB).
const maxResponseBytes = 3 << 20

// callError is kube's ErrCallingWebhook: the webhook could not be asked
// or did not answer sensibly; the failure policy decides.
type callError struct {
	hook   string
	reason error
	// code is the HTTP status code kube's ErrCallingWebhook carries into
	// the metrics: the webhook's own non-2xx answer, 400 when it could not
	// be called or its answer not decoded, 503 when the answer decoded but
	// was not a valid AdmissionReview response.
	code int
}

func (e *callError) Error() string {
	return fmt.Sprintf("failed calling webhook %q: %v", e.hook, e.reason)
}

func (e *callError) Unwrap() error { return e.reason }

// clients caches one HTTP client per CA bundle: connections to a webhook
// are reused across requests, and a changed caBundle gets a new client.
type clients struct {
	mu sync.Mutex
	m  map[[32]byte]*http.Client
}

func (c *clients) get(caBundle []byte) (*http.Client, error) {
	key := sha256.Sum256(caBundle)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.m[key]; ok {
		return cl, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("unable to load root certificates: unable to parse bytes as PEM block")
		}
		cfg.RootCAs = pool
	}
	cl := &http.Client{Transport: &http.Transport{
		// As kube's clients: HTTPS_PROXY and NO_PROXY apply (never to
		// loopback addresses).
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     cfg,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}}
	if c.m == nil {
		c.m = map[[32]byte]*http.Client{}
	}
	// A bundle replaced many times would leave its old clients behind;
	// dropping them all now and then bounds the cache.
	if len(c.m) >= 256 {
		for k, old := range c.m {
			old.CloseIdleConnections()
			delete(c.m, k)
		}
	}
	c.m[key] = cl
	return cl, nil
}

// review builds the AdmissionReview of a; each call sets its own uid.
func review(ctx context.Context, a *admission.Attributes) (*admissionv1.AdmissionReview, error) {
	gvk := metav1.GroupVersionKind{Group: a.Kind.Group, Version: a.Kind.Version, Kind: a.Kind.Kind}
	gvr := metav1.GroupVersionResource{Group: a.Resource.Group, Version: a.Resource.Version, Resource: a.Resource.Resource}
	req := &admissionv1.AdmissionRequest{
		Kind:               gvk,
		Resource:           gvr,
		SubResource:        a.Subresource,
		RequestKind:        &gvk,
		RequestResource:    &gvr,
		RequestSubResource: a.Subresource,
		Name:               a.Name,
		Namespace:          a.Namespace,
		Operation:          admissionv1.Operation(a.Operation),
		DryRun:             ptr.To(a.DryRun),
	}
	if u, ok := user.From(ctx); ok {
		req.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
		if len(u.Extra) > 0 {
			req.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
			for k, v := range u.Extra {
				req.UserInfo.Extra[k] = v
			}
		}
	}
	var err error
	if req.Object.Raw, err = encodeObject(a.Object, a); err != nil {
		return nil, err
	}
	if req.OldObject.Raw, err = encodeObject(a.OldObject, a); err != nil {
		return nil, err
	}
	req.Options.Raw = options(a)
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	}, nil
}

// encodeObject is obj's JSON with its apiVersion and kind, which objects
// in the registry's hands may not carry yet.
func encodeObject(obj runtime.Object, a *admission.Attributes) ([]byte, error) {
	if obj == nil {
		return nil, nil
	}
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		obj = obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(a.Kind)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s for admission webhooks: %w", a.Kind.Kind, err)
	}
	return data, nil
}

// options are the request's options as kube sends them: its
// meta.k8s.io/v1 CreateOptions, UpdateOptions or DeleteOptions.
func options(a *admission.Attributes) []byte {
	if a.Options == nil {
		return nil
	}
	o := a.Options.DeepCopyObject()
	kind := map[admission.Operation]string{admission.Create: "CreateOptions", admission.Update: "UpdateOptions", admission.Delete: "DeleteOptions"}[a.Operation]
	if o.GetObjectKind().GroupVersionKind().Empty() && kind != "" {
		o.GetObjectKind().SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind(kind))
	}
	data, _ := json.Marshal(o)
	return data
}

// call POSTs the review to h and returns its response, checked as kube
// checks it; every failure is a *callError.
func (d *Dispatcher) call(ctx context.Context, h *Hook, rev *admissionv1.AdmissionReview) (*admissionv1.AdmissionResponse, error) {
	fail := func(err error) (*admissionv1.AdmissionResponse, error) {
		return nil, &callError{hook: h.Name, reason: err, code: http.StatusBadRequest}
	}
	invalid := func(err error) (*admissionv1.AdmissionResponse, error) {
		return nil, &callError{hook: h.Name, reason: err, code: http.StatusServiceUnavailable}
	}
	// The request's SLI latency leaves out the time webhooks take, as
	// kube's.
	defer func(start time.Time) { trace.From(ctx).Exclude(time.Since(start)) }(time.Now())
	cc := h.ClientConfig
	if cc.Service != nil {
		port := int32(443)
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		return fail(fmt.Errorf("failed to call webhook: service %s/%s:%d: service references are not supported: this server does not serve Services",
			cc.Service.Namespace, cc.Service.Name, port))
	}
	if cc.URL == nil {
		return fail(errors.New("failed to call webhook: no url"))
	}
	u, err := url.Parse(*cc.URL)
	if err != nil {
		return fail(fmt.Errorf("failed to call webhook: %w", err))
	}
	// kube's client asks for the timeout in the query too, so the webhook
	// can give up in time.
	q := u.Query()
	q.Set("timeout", h.Timeout.String())
	u.RawQuery = q.Encode()

	client, err := d.clients.get(cc.CABundle)
	if err != nil {
		return fail(fmt.Errorf("could not get REST client: %w", err))
	}
	body, err := json.Marshal(rev)
	if err != nil {
		return fail(fmt.Errorf("failed to encode the request: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return fail(fmt.Errorf("failed to call webhook: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	req.Header.Set("User-Agent", userAgent)
	resp, err := client.Do(req)
	if err != nil {
		return fail(fmt.Errorf("failed to call webhook: %w", err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fail(fmt.Errorf("failed to call webhook: %w", err))
	}
	if len(data) > maxResponseBytes {
		return fail(errors.New("failed to call webhook: the response is too large"))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &callError{hook: h.Name, code: resp.StatusCode,
			reason: fmt.Errorf("failed to call webhook: the server responded with the status code %d but did not return more information", resp.StatusCode)}
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil {
		return fail(fmt.Errorf("received invalid webhook response: %w", err))
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
		return invalid(fmt.Errorf("received invalid webhook response: expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got %s, Kind=%s", out.APIVersion, out.Kind))
	}
	r := out.Response
	switch {
	case r == nil:
		return invalid(errors.New("received invalid webhook response: webhook response was absent"))
	case r.UID != rev.Request.UID:
		return invalid(fmt.Errorf("received invalid webhook response: expected response.uid=%q, got %q", rev.Request.UID, r.UID))
	case len(r.Patch) > 0 && r.PatchType == nil:
		return invalid(errors.New("received invalid webhook response: webhook returned response.patch but not response.patchType"))
	case r.PatchType != nil && *r.PatchType != admissionv1.PatchTypeJSONPatch:
		return invalid(fmt.Errorf("received invalid webhook response: webhook returned invalid response.patchType of %q", *r.PatchType))
	}
	return r, nil
}

// userAgent is what kube-apiserver's admission webhook client calls
// itself; webhooks log it.
const userAgent = "kube-apiserver-admission"

// newUID is one AdmissionReview's uid.
func newUID() types.UID { return uuid.NewUUID() }
