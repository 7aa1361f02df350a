// Package bootstrap is the kubelet's TLS bootstrapping and client
// certificate manager for one simulated node: from a bootstrap identity
// (any user bound to system:node-bootstrapper) it requests a client
// certificate for system:node:NAME through a CertificateSigningRequest
// (signer kubernetes.io/kube-apiserver-client-kubelet), waits until the
// controllers approve and sign it, keeps the certificate and its key under
// the node's directory, and renews it, with the node's own identity, at a
// jittered 70-90% of its life, as the kubelet's certificate manager. The
// node's client config presents the current certificate; a renewal closes
// the connections made with the old one, since the server authenticates
// a connection's certificate on every request and an expired one fails.
package bootstrap

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/corekube/corekube/controllers/useragent"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// CertFileName is the file, in the node's directory, holding its
// certificate and key in PEM, as the kubelet's kubelet-client-current.pem.
const CertFileName = "kubelet-client-current.pem"

// Manager keeps one node's client certificate.
type Manager struct {
	node      string
	dir       string
	bootstrap *rest.Config
	log       *slog.Logger

	cert   atomic.Pointer[tls.Certificate]
	dialer *connrotation.Dialer

	mu sync.Mutex // serializes rotations
}

// New returns the manager of node's certificate, kept in certDir/node,
// requested with the bootstrap client config.
func New(bootstrap *rest.Config, certDir, node string, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	return &Manager{
		node:      node,
		dir:       filepath.Join(certDir, node),
		bootstrap: bootstrap,
		log:       log.With("node", node),
		dialer:    connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
	}
}

// UserName is the user a node's certificate names.
func UserName(node string) string { return "system:node:" + node }

// Path is the file of the node's certificate and key.
func (m *Manager) Path() string { return filepath.Join(m.dir, CertFileName) }

// Current returns the certificate in use, nil before Ensure.
func (m *Manager) Current() *tls.Certificate { return m.cert.Load() }

// Ensure loads a valid stored certificate, or requests one with the
// bootstrap identity and stores it; it returns once the node has one.
func (m *Manager) Ensure(ctx context.Context) error {
	if c, err := m.load(); err == nil {
		m.cert.Store(c)
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		m.log.Info("stored client certificate unusable, bootstrapping", "err", err)
	}
	return m.rotate(ctx, m.bootstrap)
}

// load reads the stored certificate; an expired one, or one not for this
// node, is an error.
func (m *Manager) load() (*tls.Certificate, error) {
	data, err := os.ReadFile(m.Path())
	if err != nil {
		return nil, err
	}
	c, err := tls.X509KeyPair(data, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Path(), err)
	}
	leaf := c.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Path(), err)
		}
		c.Leaf = leaf
	}
	if time.Now().After(leaf.NotAfter) {
		return nil, fmt.Errorf("%s expired at %s", m.Path(), leaf.NotAfter.Format(time.RFC3339))
	}
	if leaf.Subject.CommonName != UserName(m.node) {
		return nil, fmt.Errorf("%s is for %q, not %q", m.Path(), leaf.Subject.CommonName, UserName(m.node))
	}
	return &c, nil
}

// rotate requests a new certificate as the user of cfg, stores it, puts it
// in use and closes the connections made with the previous one.
func (m *Manager) rotate(ctx context.Context, cfg *rest.Config) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("node %s: key: %w", m.node, err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: UserName(m.node), Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		return fmt.Errorf("node %s: certificate request: %w", m.node, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("node %s: %w", m.node, err)
	}
	certPEM, err := request(ctx, client, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	if err != nil {
		return fmt.Errorf("node %s: %w", m.node, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("node %s: key: %w", m.node, err)
	}
	pair := append(bytes.Clone(certPEM), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	c, err := tls.X509KeyPair(pair, pair)
	if err != nil {
		return fmt.Errorf("node %s: issued certificate: %w", m.node, err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return fmt.Errorf("node %s: issued certificate: %w", m.node, err)
		}
	}
	if err := writeFile(m.dir, CertFileName, pair); err != nil {
		return fmt.Errorf("node %s: %w", m.node, err)
	}
	m.cert.Store(&c)
	m.dialer.CloseAll()
	m.log.Info("client certificate issued", "expires", c.Leaf.NotAfter.Format(time.RFC3339))
	return nil
}

// request creates a CSR for the node client signer and waits until it is
// issued, denied or failed.
func request(ctx context.Context, client kubernetes.Interface, csrPEM []byte) ([]byte, error) {
	csrs := client.CertificatesV1().CertificateSigningRequests()
	created, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "node-csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    csrPEM,
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create CertificateSigningRequest: %w", err)
	}
	csr := created
	for {
		if cert, done, err := issued(csr); done {
			return cert, err
		}
		w, err := csrs.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", created.Name).String(),
			ResourceVersion: csr.ResourceVersion,
		})
		if err != nil {
			return nil, fmt.Errorf("watch CertificateSigningRequest %s: %w", created.Name, err)
		}
		cert, done, err := waitIssued(ctx, w)
		w.Stop()
		if done {
			return cert, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("wait for CertificateSigningRequest %s: %w", created.Name, ctx.Err())
		}
		// The watch ended (or expired): read the current state and watch
		// again from it.
		if csr, err = csrs.Get(ctx, created.Name, metav1.GetOptions{}); err != nil {
			return nil, fmt.Errorf("get CertificateSigningRequest %s: %w", created.Name, err)
		}
	}
}

// waitIssued reads w until the CSR is done or the watch ends.
func waitIssued(ctx context.Context, w watch.Interface) ([]byte, bool, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, false, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, false, nil
			}
			switch ev.Type {
			case watch.Deleted:
				return nil, true, errors.New("the CertificateSigningRequest was deleted")
			case watch.Error:
				if st, ok := ev.Object.(*metav1.Status); ok && st.Code == 410 {
					return nil, false, nil
				}
				return nil, false, apierrors.FromObject(ev.Object)
			}
			if csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest); ok {
				if cert, done, err := issued(csr); done {
					return cert, true, err
				}
			}
		}
	}
}

// issued says whether csr is done: its certificate, or why there is none.
func issued(csr *certificatesv1.CertificateSigningRequest) ([]byte, bool, error) {
	for _, c := range csr.Status.Conditions {
		if c.Status == v1.ConditionFalse {
			continue
		}
		switch c.Type {
		case certificatesv1.CertificateDenied:
			return nil, true, fmt.Errorf("CertificateSigningRequest %s denied: %s %s", csr.Name, c.Reason, c.Message)
		case certificatesv1.CertificateFailed:
			return nil, true, fmt.Errorf("CertificateSigningRequest %s failed: %s %s", csr.Name, c.Reason, c.Message)
		}
	}
	if len(csr.Status.Certificate) > 0 {
		return csr.Status.Certificate, true, nil
	}
	return nil, false, nil
}

// writeFile writes data to dir/name (0600, dir 0700) through a temporary
// file, so a crash leaves the old or the new pair, never half of one.
func writeFile(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// ClientConfig is the node's client config: the bootstrap config's server
// and CA, presenting the current certificate (whatever rotation put in
// use) on connections that a rotation closes.
func (m *Manager) ClientConfig() (*rest.Config, error) {
	tlsCfg, err := rest.TLSConfigFor(rest.AnonymousClientConfig(m.bootstrap))
	if err != nil {
		return nil, fmt.Errorf("node %s: TLS config: %w", m.node, err)
	}
	if tlsCfg == nil {
		return nil, fmt.Errorf("node %s: the bootstrap kubeconfig's server is not HTTPS", m.node)
	}
	tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := m.cert.Load(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil
	}
	cfg := rest.AnonymousClientConfig(m.bootstrap)
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	cfg.Transport = &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         m.dialer.DialContext,
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 25,
		ForceAttemptHTTP2:   true,
	}
	cfg.UserAgent = useragent.For(useragent.Kubelet, "agent/"+m.node)
	return cfg, nil
}

// Run renews the certificate at a jittered 70-90% of its life, with the
// node's own identity (the bootstrap one once it has expired), until ctx
// ends. Failures are retried with a back-off.
func (m *Manager) Run(ctx context.Context) {
	backoff := time.Second
	for {
		c := m.cert.Load()
		if c == nil || c.Leaf == nil {
			return
		}
		timer := time.NewTimer(time.Until(renewalDeadline(c.Leaf)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if err := m.Renew(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Error("renew client certificate", "err", err, "retry", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Minute)
			continue
		}
		backoff = time.Second
	}
}

// Renew requests a new certificate now, as the node itself (as the
// bootstrap identity once its certificate has expired), and puts it in
// use.
func (m *Manager) Renew(ctx context.Context) error {
	c := m.cert.Load()
	if c == nil || c.Leaf == nil || time.Now().After(c.Leaf.NotAfter) {
		return m.rotate(ctx, m.bootstrap)
	}
	cfg, err := m.ClientConfig()
	if err != nil {
		return err
	}
	return m.rotate(ctx, cfg)
}

// renewalDeadline is a random point in 70-90% of the certificate's life,
// as the kubelet's certificate manager picks it, so that nodes that got
// their certificates together do not renew together.
func renewalDeadline(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	// 70% plus n/1000 of the next 20%, in integers: a float product
	// can land a nanosecond below 70%.
	jitter := int64(500) // 80% when no random number is at hand
	if n, err := rand.Int(rand.Reader, big.NewInt(1000)); err == nil {
		jitter = n.Int64()
	}
	return cert.NotBefore.Add(life*7/10 + life/5000*time.Duration(jitter))
}
