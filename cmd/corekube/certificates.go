package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/corekube/corekube/controllers/useragent"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/auth/pki"
	"github.com/corekube/corekube/controllers/certificates"
	"github.com/corekube/corekube/controllers/workqueuemetrics"
	"github.com/prometheus/client_golang/prometheus"
)

// signingOptions are kube-controller-manager's --cluster-signing-* flags:
// the CA the certificates controller signs CSRs with.
type signingOptions struct {
	certFile, keyFile string
}

func (o *signingOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.certFile, "cluster-signing-cert-file", "", "PEM CA certificate that signs the kube-apiserver-client(-kubelet) CSRs (without it CSRs are approved, not signed)")
	f.StringVar(&o.keyFile, "cluster-signing-key-file", "", "PEM private key of --cluster-signing-cert-file")
}

// ca loads the signing CA; nil when no flag is set.
func (o *signingOptions) ca() (*pki.CA, error) {
	if o.certFile == "" && o.keyFile == "" {
		return nil, nil
	}
	if o.certFile == "" || o.keyFile == "" {
		return nil, errors.New("--cluster-signing-cert-file and --cluster-signing-key-file go together")
	}
	return loadCA(o.certFile, o.keyFile)
}

func loadCA(certFile, keyFile string) (*pki.CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("signing CA: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("signing CA key: %w", err)
	}
	ca, err := pki.ParseCA(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("signing CA %s: %w", certFile, err)
	}
	return ca, nil
}

// upSigningCA is the CA `up` signs CSRs with: the server's own, in
// <data-dir>/pki; nil when the server made none there (plain HTTP).
func upSigningCA(certDir string) (*pki.CA, error) {
	if certDir == "" {
		return nil, nil
	}
	certFile, keyFile := filepath.Join(certDir, "ca.crt"), filepath.Join(certDir, "ca.key")
	if _, err := os.Stat(keyFile); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return loadCA(certFile, keyFile)
}

// certificatesLoops are the CSR approver and signer (signer only with a
// CA) and the loop of their informers: one watch of CSRs, apart from the
// other controllers' factory, so that `up` and `corekube controllers` add
// them without changing the others. Its workqueue's metrics go to
// metrics (nil: none).
func certificatesLoops(cfg *rest.Config, ca *pki.CA, log *slog.Logger, metrics prometheus.Registerer) ([]loop, error) {
	queues, err := workqueuemetrics.For(metrics)
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = useragent.For(useragent.KubeControllerManager, "certificate-controller")
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("certificates controller: %w", err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	ctrl, err := certificates.New(client, factory, certificates.Config{Logger: log, CA: ca, QueueMetrics: queues})
	if err != nil {
		return nil, err
	}
	if ca == nil {
		log.Info("no signing CA: CSRs are approved, not signed")
	}
	return []loop{
		{name: "certificates controller", start: ctrl.Start},
		{name: "certificates informers", start: func(ctx context.Context) error {
			factory.Start(ctx.Done())
			<-ctx.Done()
			factory.Shutdown()
			return nil
		}},
	}, nil
}
