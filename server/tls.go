package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"

	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/auth/pki"
	"github.com/corekube/corekube/auth/user"
	"k8s.io/client-go/rest"
)

// Names in the certificates the server makes for itself.
const (
	caCommonName      = "corekube-ca"
	servingCommonName = "kube-apiserver"
	// AdminUser is the user of the admin client certificate (kubeadm's).
	AdminUser = "kubernetes-admin"
	// loopbackServerName is the SNI the server's own clients ask for when
	// the serving certificate is an operator's (--tls-cert-file), which
	// they cannot verify: they get a certificate of the server's own
	// instead, as kube-apiserver's loopback client does.
	loopbackServerName = "apiserver-loopback-client"
)

// The names of kube's in-cluster service, which the serving certificate
// covers so that pods can verify it under those names, as kubeadm's does.
var inClusterNames = []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}

// serving is the server's TLS material.
type serving struct {
	config *tls.Config
	// caPEM verifies the serving certificate for the server's own clients
	// and the admin kubeconfig.
	caPEM []byte
	// loopbackSNI is the server name loopback clients ask for ("" when
	// caPEM verifies the serving certificate under its own names).
	loopbackSNI string
	// admin is the admin's client certificate, in system:masters.
	admin pki.KeyPair
	// clientCAs verify client certificates.
	clientCAs *x509.CertPool
	// ca issues the in-process nodes' client certificates
	// (NodeClientConfig).
	ca *pki.CA
}

// setupTLS loads or makes the certificates: a CA (in CertDir, else in
// memory) that signs the serving certificate (unless --tls-cert-file gives
// one) and the admin's client certificate, and the pool of client CAs
// (--client-ca-file, else that CA).
func (s *Server) setupTLS() (*serving, error) {
	cfg := &s.cfg
	var ca *pki.CA
	var err error
	if cfg.CertDir != "" {
		// Servers sharing CertDir take turns: the first makes the CA and
		// certificates, the others load them (one CA for all).
		unlock, lockErr := pki.LockDir(cfg.CertDir)
		if lockErr != nil {
			return nil, fmt.Errorf("certificate directory: %w", lockErr)
		}
		defer unlock()
		ca, err = pki.LoadOrCreateCA(cfg.CertDir, caCommonName)
	} else {
		ca, err = pki.NewCA(caCommonName)
	}
	if err != nil {
		return nil, fmt.Errorf("certificate authority: %w", err)
	}
	out := &serving{caPEM: ca.PEM, ca: ca}

	var servingCert tls.Certificate
	if cfg.TLSCertFile != "" || cfg.TLSPrivateKeyFile != "" {
		if cfg.TLSCertFile == "" || cfg.TLSPrivateKeyFile == "" {
			return nil, fmt.Errorf("--tls-cert-file and --tls-private-key-file go together")
		}
		if servingCert, err = tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSPrivateKeyFile); err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		out.loopbackSNI = loopbackServerName
	} else {
		req := pki.ServingRequest{CommonName: servingCommonName, Hosts: servingHosts(cfg.Listen, cfg.TLSSANs)}
		var pair pki.KeyPair
		if cfg.CertDir != "" {
			pair, err = ca.LoadOrCreateServing(cfg.CertDir, "apiserver", req)
		} else {
			pair, err = ca.Serving(req)
		}
		if err == nil {
			servingCert, err = pair.TLSCertificate()
		}
		if err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
	}

	// The loopback clients verify a certificate of the server's CA under
	// loopbackServerName when the serving one is the operator's.
	var loopbackCert *tls.Certificate
	if out.loopbackSNI != "" {
		pair, err := ca.Serving(pki.ServingRequest{CommonName: loopbackServerName, Hosts: []string{loopbackServerName}})
		if err != nil {
			return nil, fmt.Errorf("loopback certificate: %w", err)
		}
		c, err := pair.TLSCertificate()
		if err != nil {
			return nil, fmt.Errorf("loopback certificate: %w", err)
		}
		loopbackCert = &c
	}

	if cfg.CertDir != "" {
		out.admin, err = ca.LoadOrCreateClient(cfg.CertDir, "admin", AdminUser, user.SystemPrivilegedGroup)
	} else {
		out.admin, err = ca.Client(AdminUser, user.SystemPrivilegedGroup)
	}
	if err != nil {
		return nil, fmt.Errorf("admin client certificate: %w", err)
	}

	out.clientCAs = x509.NewCertPool()
	out.clientCAs.AddCert(ca.Cert)
	if cfg.ClientCAFile != "" {
		bundle, err := os.ReadFile(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		if out.clientCAs, err = pki.CertPool(bundle); err != nil {
			return nil, fmt.Errorf("client CA %s: %w", cfg.ClientCAFile, err)
		}
		if _, err := ca.Cert.Verify(x509.VerifyOptions{Roots: out.clientCAs}); err != nil {
			s.log.Warn("the admin client certificate is not signed by --client-ca-file: the admin kubeconfig will not authenticate", "client-ca-file", cfg.ClientCAFile)
		}
	}

	out.config = &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Client certificates are asked for, not required, and verified by
		// the x509 authenticator, so that a bad one is a 401 and other
		// credentials still work (kube's choice).
		ClientAuth: tls.RequestClientCert,
		ClientCAs:  out.clientCAs,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if loopbackCert != nil && hello.ServerName == loopbackServerName {
				return loopbackCert, nil
			}
			return &servingCert, nil
		},
		// HTTP/2 by ALPN, as client-go expects; net/http serves it.
		NextProtos: []string{"h2", "http/1.1"},
	}
	return out, nil
}

// x509Authenticator verifies client certificates against the client CAs.
func (t *serving) x509Authenticator() authenticator.Request {
	pool := t.clientCAs
	return authenticator.NewX509(func() *x509.CertPool { return pool })
}

// servingHosts are the names the generated serving certificate covers: the
// listen address (unless it is a wildcard: then this machine's name),
// localhost and the loopback addresses, kube's in-cluster names and extra
// SANs.
func servingHosts(listen string, sans []string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
			hosts = append(hosts, host)
		} else if name, err := os.Hostname(); err == nil {
			hosts = append(hosts, name)
		}
	}
	hosts = append(hosts, inClusterNames...)
	return append(hosts, sans...)
}

// AdminConfig is a client config for the server as the admin
// (kubernetes-admin in system:masters, by client certificate), trusting
// the server's CA: what `up` writes into the admin kubeconfig. Without TLS
// (InsecureHTTP) it is the bare URL.
func (s *Server) AdminConfig() *rest.Config {
	c := &rest.Config{Host: s.URL(), QPS: -1}
	if s.tls != nil {
		c.TLSClientConfig = rest.TLSClientConfig{
			CAData:   s.CAData(),
			CertData: s.tls.admin.CertPEM,
			KeyData:  s.tls.admin.KeyPEM,
		}
	}
	return c
}

// CAData is the PEM of the CA that verifies the serving certificate when
// the server made it (nil with --tls-cert-file or without TLS).
func (s *Server) CAData() []byte {
	if s.tls == nil || s.tls.loopbackSNI != "" {
		return nil
	}
	return s.tls.caPEM
}
