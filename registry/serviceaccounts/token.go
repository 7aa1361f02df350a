package serviceaccounts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/corekube/corekube/auth/serviceaccount"
	"github.com/corekube/corekube/registry"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Token lifetimes, as kube's.
const (
	// minExpirationSeconds is the shortest token a TokenRequest may ask
	// for (10 minutes).
	minExpirationSeconds = 10 * 60
	// maxExpirationSeconds is the longest (2^32 seconds).
	maxExpirationSeconds = 1 << 32
	// warnOnlyExpirationSeconds is the lifetime the kubelet asks for its
	// projected tokens by default; kube makes such tokens live a year but
	// flags their use after the hour (--service-account-extend-token-expiration),
	// so that workloads that do not reread their token keep working.
	warnOnlyExpirationSeconds = 3607
	extendedExpirationSeconds = 365 * 24 * 60 * 60
)

var tokenRequestKind = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")

// TokenOptions configures the token subresource.
type TokenOptions struct {
	// Issuer signs the tokens.
	Issuer *serviceaccount.Issuer
	// APIAudiences are the audiences of a request that names none
	// (--api-audiences).
	APIAudiences []string
	// MaxExpiration caps the lifetime asked for (kube's
	// --service-account-max-token-expiration; 0: no cap).
	MaxExpiration time.Duration
	// ExtendExpiration is kube's --service-account-extend-token-expiration.
	ExtendExpiration bool
}

// TokenREST serves POST serviceaccounts/{name}/token: a TokenRequest
// answered with a signed token for the ServiceAccount, optionally bound to
// a pod (valid only while it exists) or a node.
type TokenREST struct {
	serviceAccounts, pods, nodes *registry.Store
	opts                         TokenOptions
	now                          func() time.Time
}

// NewTokenREST returns the token subresource of the ServiceAccounts in
// saStore, binding tokens to the pods of podStore and the nodes of
// nodeStore.
func NewTokenREST(saStore, podStore, nodeStore *registry.Store, opts TokenOptions) *TokenREST {
	return &TokenREST{serviceAccounts: saStore, pods: podStore, nodes: nodeStore, opts: opts, now: time.Now}
}

// New returns an empty TokenRequest.
func (*TokenREST) New() runtime.Object { return &authenticationv1.TokenRequest{} }

// GroupVersionKind is authentication.k8s.io/v1 TokenRequest.
func (*TokenREST) GroupVersionKind() schema.GroupVersionKind { return tokenRequestKind }

// Create issues the token the TokenRequest obj asks for the ServiceAccount
// namespace/name, with kube's checks in kube's order.
func (r *TokenREST) Create(ctx context.Context, namespace, name string, obj runtime.Object, _ bool) (runtime.Object, error) {
	req := obj.(*authenticationv1.TokenRequest).DeepCopy()
	if req.Name != "" && req.Name != name {
		return nil, apierrors.NewInvalid(tokenRequestKind.GroupKind(), name, field.ErrorList{
			field.Invalid(field.NewPath("metadata", "name"), req.Name, "must match the service account name if specified")})
	}
	if req.Namespace != "" && req.Namespace != namespace {
		return nil, apierrors.NewInvalid(tokenRequestKind.GroupKind(), name, field.ErrorList{
			field.Invalid(field.NewPath("metadata", "namespace"), req.Namespace, "must match the service account namespace if specified")})
	}
	// The ServiceAccount from the watch cache (etcd when the cache does
	// not have it yet): what the token names of it (name, uid) is
	// checked against the cache again by every request that presents it,
	// so a copy a few milliseconds old makes no difference a client can
	// see, and a TokenRequest per pod start costs no etcd read.
	saObj, err := r.serviceAccounts.GetCached(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	sa, ok := saObj.(*v1.ServiceAccount)
	if !ok {
		return nil, apierrors.NewInternalError(errors.New("serviceaccount cache holds something else"))
	}

	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = slices.Clone(r.opts.APIAudiences)
	}
	if req.Spec.ExpirationSeconds == nil {
		// v1's default, for a body decoded without defaulting.
		req.Spec.ExpirationSeconds = new(int64)
		*req.Spec.ExpirationSeconds = 3600
	}
	req.Name, req.Namespace = sa.Name, sa.Namespace
	// The time is taken before the token is signed, so that the
	// expirationTimestamp answered is never after the token's exp.
	now := r.now()
	req.CreationTimestamp = metav1.NewTime(now)
	req.Status = authenticationv1.TokenRequestStatus{}
	if errs := validateTokenRequest(req); len(errs) > 0 {
		return nil, apierrors.NewInvalid(tokenRequestKind.GroupKind(), "", errs)
	}

	tok := serviceaccount.Token{ServiceAccount: sa, Audiences: req.Spec.Audiences}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		if err := r.bind(ctx, namespace, name, ref, &tok); err != nil {
			return nil, err
		}
	}

	seconds := *req.Spec.ExpirationSeconds
	if max := int64(r.opts.MaxExpiration / time.Second); max > 0 && seconds > max {
		registry.AddWarning(ctx, fmt.Sprintf("requested expiration of %d seconds shortened to %d seconds", seconds, max))
		seconds = max
		*req.Spec.ExpirationSeconds = max
	}
	tok.Expiration = time.Duration(seconds) * time.Second
	if r.opts.ExtendExpiration && tok.Pod != nil && seconds == warnOnlyExpirationSeconds && r.apiAudiencesOnly(req.Spec.Audiences) {
		tok.WarnAfter = tok.Expiration
		tok.Expiration = extendedExpirationSeconds * time.Second
	}
	signed, err := r.opts.Issuer.Issue(tok)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to generate token: %w", err))
	}
	req.TypeMeta = metav1.TypeMeta{Kind: tokenRequestKind.Kind, APIVersion: tokenRequestKind.GroupVersion().String()}
	req.Status = authenticationv1.TokenRequestStatus{
		Token:               signed,
		ExpirationTimestamp: metav1.NewTime(now.Add(time.Duration(seconds) * time.Second)),
	}
	return req, nil
}

// bind puts in tok the object ref names (a Pod, or a Node), checked as
// kube checks it: it exists, the uid matches, a pod runs as the
// ServiceAccount.
func (r *TokenREST) bind(ctx context.Context, namespace, saName string, ref *authenticationv1.BoundObjectReference, tok *serviceaccount.Token) error {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	var uid types.UID
	switch {
	case gvk.Group == "" && gvk.Kind == "Pod":
		pod, err := r.pod(ctx, namespace, ref.Name, ref.UID)
		if err != nil {
			return err
		}
		if pod.Spec.ServiceAccountName != saName {
			return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", saName))
		}
		tok.Pod, uid = pod, pod.UID
		if nodeName := pod.Spec.NodeName; nodeName != "" {
			// The pod's node goes in the token for information; a node
			// that does not exist (any more) leaves just its name.
			node, err := r.node(ctx, nodeName)
			switch {
			case apierrors.IsNotFound(err):
				tok.Node = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
			case err != nil:
				return apierrors.NewInternalError(err)
			default:
				tok.Node = node
			}
		}
	case gvk.Group == "" && gvk.Kind == "Node":
		node, err := r.node(ctx, ref.Name)
		if err != nil {
			return err
		}
		tok.Node, uid = node, node.UID
	default:
		// kube also binds to Secrets, which corekube does not serve.
		return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
	}
	if ref.UID != "" && ref.UID != uid {
		return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return nil
}

// pod reads the pod a token is bound to. The watch cache's copy serves
// when it is the pod the reference names (same uid, which a pod keeps for
// life, as it keeps its serviceAccountName) and it is bound to a node (the
// token names the node): the kubelet's request, which saw the pod bound
// through a watch the cache served, always finds that. Anything else (no
// uid asked for, a pod the cache does not have yet, another pod of that
// name, not yet bound) reads etcd, as kube always does, so a miss is never
// answered from a stale copy.
func (r *TokenREST) pod(ctx context.Context, namespace, name string, uid types.UID) (*v1.Pod, error) {
	if uid != "" {
		if obj, ok := r.pods.Cached(namespace, name); ok {
			if pod, ok := obj.(*v1.Pod); ok && pod.UID == uid && pod.Spec.NodeName != "" {
				return pod, nil
			}
		}
	}
	obj, err := r.pods.Get(ctx, namespace, name, nil)
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, apierrors.NewInternalError(errors.New("pod storage holds something else"))
	}
	return pod, nil
}

// node reads a node from the watch cache, as kube reads it at
// resourceVersion 0.
func (r *TokenREST) node(ctx context.Context, name string) (*v1.Node, error) {
	obj, err := r.nodes.GetCached(ctx, "", name)
	if err != nil {
		return nil, err
	}
	node, ok := obj.(*v1.Node)
	if !ok {
		return nil, errors.New("node cache holds something else")
	}
	return node, nil
}

// apiAudiencesOnly reports whether every audience is one of the API
// server's: only tokens for the API server itself get the extended life.
func (r *TokenREST) apiAudiencesOnly(audiences []string) bool {
	for _, a := range audiences {
		if !slices.Contains(r.opts.APIAudiences, a) {
			return false
		}
	}
	return true
}

// validateTokenRequest is kube's ValidateTokenRequest.
func validateTokenRequest(req *authenticationv1.TokenRequest) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "expirationSeconds")
	seconds := *req.Spec.ExpirationSeconds
	if seconds < minExpirationSeconds {
		errs = append(errs, field.Invalid(path, seconds, "may not specify a duration less than 10 minutes"))
	}
	if seconds > maxExpirationSeconds {
		errs = append(errs, field.Invalid(path, seconds, "may not specify a duration larger than 2^32 seconds"))
	}
	return errs
}
