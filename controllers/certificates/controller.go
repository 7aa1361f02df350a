package certificates

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/corekube/corekube/auth/pki"
	"github.com/corekube/corekube/controllers/worker"
	"github.com/corekube/corekube/registry/certificatesigningrequests"
)

// Config configures a Controller. Zero fields take kube's defaults.
type Config struct {
	// Logger receives the controller's logs; nil is slog.Default().
	Logger *slog.Logger
	// CA signs approved CSRs of the kube-apiserver-client signers; nil runs
	// the approver alone (kube-controller-manager without
	// --cluster-signing-*-file).
	CA *pki.CA
	// Duration is the longest certificate issued (kube's
	// --cluster-signing-duration): one year.
	Duration time.Duration
	// Workers is how many CSRs are handled at once: 5.
	Workers int
	// QueueMetrics gives the controller's workqueues kube's workqueue_*
	// metrics under kube's queue names (workqueuemetrics.For); nil: none.
	QueueMetrics workqueue.MetricsProvider
}

// Controller approves and signs CSRs.
type Controller struct {
	cfg    Config
	client kubernetes.Interface
	lister certlisters.CertificateSigningRequestLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	log    *slog.Logger
	// noReviews is set once the server answered that it serves no
	// SubjectAccessReviews: the group check stands in (see the package doc).
	noReviews atomic.Bool
}

// New builds the controller on factory's CSR informer.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, cfg Config) (*Controller, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 365 * 24 * time.Hour
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 5
	}
	inf := factory.Certificates().V1().CertificateSigningRequests()
	c := &Controller{
		cfg:    cfg,
		client: client,
		lister: inf.Lister(),
		synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "certificate", MetricsProvider: cfg.QueueMetrics}),
		log: cfg.Logger.With("controller", "certificates"),
	}
	enqueue := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
			c.queue.Add(csr.Name)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("certificates controller: %w", err)
	}
	return c, nil
}

// Start runs the workers until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return nil
	}
	loop := &worker.Loop[string]{Name: "csr", Queue: c.queue, Workers: c.cfg.Workers, Log: c.log,
		Sync: worker.NoResult(c.sync), OnError: func(name string, err error) {
			c.log.Error("sync CSR", "name", name, "err", err)
		}}
	if err := loop.Run(ctx); err != nil {
		return fmt.Errorf("certificates controller: %w", err)
	}
	return nil
}

// sync approves a pending kubelet client CSR whose requester may have it,
// and signs an approved CSR of the signers the CA serves.
func (c *Controller) sync(ctx context.Context, name string) error {
	csr, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if certificatesigningrequests.Finished(csr) {
		return nil
	}
	if !certificatesigningrequests.Approved(csr) {
		if csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName {
			return c.approve(ctx, csr)
		}
		return nil
	}
	if c.cfg.CA != nil && (csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName ||
		csr.Spec.SignerName == certificatesv1.KubeAPIServerClientSignerName) {
		return c.sign(ctx, csr)
	}
	return nil
}

// approve approves csr if it is a node client request its requester may
// make; otherwise it leaves it for a human (kubectl certificate approve).
func (c *Controller) approve(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	req, err := certificatesigningrequests.ParseRequest(csr.Spec.Request)
	if err != nil {
		return nil // validation let no such CSR in
	}
	if nodeClientProblem(req, csr.Spec.Usages) != nil {
		return nil
	}
	sub, message := "nodeclient", "Auto approving kubelet client certificate after SubjectAccessReview."
	if csr.Spec.Username == req.Subject.CommonName {
		sub, message = "selfnodeclient", "Auto approving self kubelet client certificate after SubjectAccessReview."
	}
	ok, err := c.mayCreate(ctx, csr, sub)
	if err != nil || !ok {
		return err
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "AutoApproved", Message: message,
		LastUpdateTime: metav1.Now(),
	})
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("approve: %w", err)
	}
	c.log.Info("approved", "csr", csr.Name, "user", csr.Spec.Username, "subject", req.Subject.CommonName)
	return nil
}

// mayCreate asks whether csr's requester may create
// certificatesigningrequests/sub, as kube's csrapproving does.
func (c *Controller) mayCreate(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, sub string) (bool, error) {
	if !c.noReviews.Load() {
		extra := map[string]authorizationv1.ExtraValue{}
		for k, v := range csr.Spec.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
		sar, err := c.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User: csr.Spec.Username, UID: csr.Spec.UID, Groups: csr.Spec.Groups, Extra: extra,
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Group: certificatesv1.GroupName, Resource: "certificatesigningrequests", Subresource: sub, Verb: "create",
				},
			},
		}, metav1.CreateOptions{})
		switch {
		case err == nil:
			return sar.Status.Allowed, nil
		case apierrors.IsNotFound(err):
			c.log.Info("the server serves no SubjectAccessReviews: approving by group", "csr", csr.Name)
			c.noReviews.Store(true)
		default:
			return false, fmt.Errorf("SubjectAccessReview: %w", err)
		}
	}
	if sub == "selfnodeclient" {
		return slices.Contains(csr.Spec.Groups, "system:nodes"), nil
	}
	return slices.Contains(csr.Spec.Groups, "system:bootstrappers"), nil
}

// nodeClientProblem says why req is not a node client certificate request
// (kube's IsKubeletClientCSR), or nil.
func nodeClientProblem(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
		return errors.New("subject organization is not system:nodes")
	}
	if len(req.DNSNames) > 0 || len(req.EmailAddresses) > 0 || len(req.IPAddresses) > 0 || len(req.URIs) > 0 {
		return errors.New("DNS, email, IP or URI subjectAltNames are not allowed")
	}
	if !strings.HasPrefix(req.Subject.CommonName, "system:node:") || len(req.Subject.CommonName) == len("system:node:") {
		return errors.New("subject common name does not begin with system:node:")
	}
	return clientUsagesProblem(usages)
}

// clientUsagesProblem: client auth, optionally digital signature and key
// encipherment, nothing else.
func clientUsagesProblem(usages []certificatesv1.KeyUsage) error {
	if !slices.Contains(usages, certificatesv1.UsageClientAuth) {
		return errors.New("usages did not include client auth")
	}
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
		default:
			return fmt.Errorf("usages did not match [client auth digital signature key encipherment]: %q is not allowed", u)
		}
	}
	return nil
}

// sign issues csr's certificate with the CA, or marks it Failed when the
// request does not fit its signer.
func (c *Controller) sign(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	req, err := certificatesigningrequests.ParseRequest(csr.Spec.Request)
	if err != nil {
		return c.fail(ctx, csr, err)
	}
	if csr.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName {
		err = nodeClientProblem(req, csr.Spec.Usages)
	} else {
		err = clientUsagesProblem(csr.Spec.Usages)
	}
	if err != nil {
		return c.fail(ctx, csr, err)
	}
	certPEM, err := c.issue(req, csr)
	if err != nil {
		return err
	}
	csr = csr.DeepCopy()
	csr.Status.Certificate = certPEM
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("write certificate: %w", err)
	}
	c.log.Info("signed", "csr", csr.Name, "subject", req.Subject.CommonName)
	return nil
}

// issue makes the certificate: the request's subject and key, valid from
// five minutes ago (clocks a little behind) for the shorter of the
// configured duration and the requested one, but not past the CA's own
// expiry.
func (c *Controller) issue(req *x509.CertificateRequest, csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	now := time.Now()
	ttl := c.cfg.Duration
	if e := csr.Spec.ExpirationSeconds; e != nil && time.Duration(*e)*time.Second < ttl {
		ttl = time.Duration(*e) * time.Second
	}
	notAfter := now.Add(ttl)
	if ca := c.cfg.CA.Cert; notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.Subject.CommonName, Organization: req.Subject.Organization, OrganizationalUnit: req.Subject.OrganizationalUnit},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     notAfter,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage:     keyUsage(csr.Spec.Usages),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cfg.CA.Cert, req.PublicKey, c.cfg.CA.Key)
	if err != nil {
		return nil, fmt.Errorf("sign CSR %s: %w", csr.Name, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func keyUsage(usages []certificatesv1.KeyUsage) x509.KeyUsage {
	var ku x509.KeyUsage
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature:
			ku |= x509.KeyUsageDigitalSignature
		case certificatesv1.UsageKeyEncipherment:
			ku |= x509.KeyUsageKeyEncipherment
		}
	}
	return ku
}

// fail marks csr Failed, as kube's signer does for a request its signer
// does not accept.
func (c *Controller) fail(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, cause error) error {
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateFailed, Status: v1.ConditionTrue, Reason: "SignerValidationFailure",
		Message: cause.Error(), LastUpdateTime: metav1.Now(),
	})
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("mark CSR failed: %w", err)
	}
	return nil
}
