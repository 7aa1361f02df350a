package server

import (
	"crypto/tls"
	"fmt"
	"os"

	"github.com/corekube/corekube/auth/pki"
	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/registry/pods"
	v1 "k8s.io/api/core/v1"
)

// KubeletClientUser is the user of the client certificate the server
// makes for itself to call kubelets (kubeadm's apiserver-kubelet-client).
const KubeletClientUser = "kube-apiserver-kubelet-client"

// setupKubeletClient tells pods/log how to reach kubelets: over HTTPS,
// presenting --kubelet-client-certificate (else a certificate of the
// server's CA), verifying their certificates by
// --kubelet-certificate-authority (else not at all, as kube), at the
// address --kubelet-preferred-address-types picks.
func (s *Server) setupKubeletClient(logs *pods.LogREST) error {
	cfg := &s.cfg
	kc := pods.KubeletClientConfig{TLS: &tls.Config{MinVersion: tls.VersionTLS12}}
	for _, t := range cfg.KubeletPreferredAddressTypes {
		switch at := v1.NodeAddressType(t); at {
		case v1.NodeHostName, v1.NodeInternalDNS, v1.NodeInternalIP, v1.NodeExternalDNS, v1.NodeExternalIP:
			kc.PreferredAddressTypes = append(kc.PreferredAddressTypes, at)
		default:
			return fmt.Errorf("--kubelet-preferred-address-types: unknown address type %q", t)
		}
	}
	switch {
	case cfg.KubeletClientCertFile != "" || cfg.KubeletClientKeyFile != "":
		if cfg.KubeletClientCertFile == "" || cfg.KubeletClientKeyFile == "" {
			return fmt.Errorf("--kubelet-client-certificate and --kubelet-client-key go together")
		}
		cert, err := tls.LoadX509KeyPair(cfg.KubeletClientCertFile, cfg.KubeletClientKeyFile)
		if err != nil {
			return fmt.Errorf("kubelet client certificate: %w", err)
		}
		kc.TLS.Certificates = []tls.Certificate{cert}
	case s.tls != nil && s.tls.ca != nil:
		var pair pki.KeyPair
		var err error
		if cfg.CertDir != "" {
			unlock, lockErr := pki.LockDir(cfg.CertDir)
			if lockErr != nil {
				return fmt.Errorf("certificate directory: %w", lockErr)
			}
			pair, err = s.tls.ca.LoadOrCreateClient(cfg.CertDir, "apiserver-kubelet-client", KubeletClientUser, user.SystemPrivilegedGroup)
			if uerr := unlock(); err == nil && uerr != nil {
				err = uerr
			}
		} else {
			pair, err = s.tls.ca.Client(KubeletClientUser, user.SystemPrivilegedGroup)
		}
		if err != nil {
			return fmt.Errorf("kubelet client certificate: %w", err)
		}
		cert, err := pair.TLSCertificate()
		if err != nil {
			return fmt.Errorf("kubelet client certificate: %w", err)
		}
		kc.TLS.Certificates = []tls.Certificate{cert}
	default:
		// Plain HTTP (--insecure-http) has no CA: kubelets that require a
		// client certificate refuse pods/log.
		s.log.Warn("no kubelet client certificate: kubelets will refuse pods/log (give --kubelet-client-certificate and --kubelet-client-key)")
	}
	if cfg.KubeletCertificateAuthority != "" {
		bundle, err := os.ReadFile(cfg.KubeletCertificateAuthority)
		if err != nil {
			return fmt.Errorf("--kubelet-certificate-authority: %w", err)
		}
		if kc.TLS.RootCAs, err = pki.CertPool(bundle); err != nil {
			return fmt.Errorf("--kubelet-certificate-authority %s: %w", cfg.KubeletCertificateAuthority, err)
		}
	}
	logs.SetKubeletClient(kc)
	return nil
}
