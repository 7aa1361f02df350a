package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/auth/pki"
)

// Kube's secure ports: kube-scheduler's and kube-controller-manager's.
const (
	schedulerSecurePort   = 10259
	controllersSecurePort = 10257
)

// servingOptions are kube-scheduler's and kube-controller-manager's
// secure serving and delegated authentication/authorization flags: the
// HTTPS endpoint with /healthz, /livez, /readyz, /metrics and (with
// --profiling) /debug/pprof/.
type servingOptions struct {
	bindAddress  string
	securePort   int
	certFile     string
	keyFile      string
	clientCAFile string
	authnConfig  string
	authzConfig  string
	alwaysAllow  []string
	profiling    bool
}

func (o *servingOptions) addFlags(f *pflag.FlagSet, port int) {
	f.StringVar(&o.bindAddress, "bind-address", "0.0.0.0", "The IP address on which to listen for the --secure-port port")
	f.IntVar(&o.securePort, "secure-port", port, "The port on which to serve HTTPS with authentication and authorization; 0 serves nothing")
	f.StringVar(&o.certFile, "tls-cert-file", "", "File containing the default x509 certificate for HTTPS; without it (and --tls-private-key-file) a self-signed certificate is generated in memory")
	f.StringVar(&o.keyFile, "tls-private-key-file", "", "File containing the default x509 private key matching --tls-cert-file")
	f.StringVar(&o.clientCAFile, "client-ca-file", "", "If set, any request presenting a client certificate signed by one of the authorities in the file is authenticated with the identity of the certificate's CommonName (and Organizations as groups)")
	f.StringVar(&o.authnConfig, "authentication-kubeconfig", "", "kubeconfig of the API server that may create tokenreviews.authentication.k8s.io; empty: --kubeconfig")
	f.StringVar(&o.authzConfig, "authorization-kubeconfig", "", "kubeconfig of the API server that may create subjectaccessreviews.authorization.k8s.io; empty: --kubeconfig")
	f.StringSliceVar(&o.alwaysAllow, "authorization-always-allow-paths", []string{"/healthz", "/readyz", "/livez"}, "HTTP paths served to anyone, without authorization")
	f.BoolVar(&o.profiling, "profiling", true, "Enable profiling via web interface host:port/debug/pprof/")
}

// newComponentRegistry is the registry of a standalone scheduler or
// controllers process: its components' metrics and the Go and process
// collectors, as kube's components expose them.
func newComponentRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serve listens on --bind-address:--secure-port (nothing when the port is
// 0) and serves metrics from gatherer until ctx ends; cfg (the loops'
// kubeconfig) is the default of the authentication and authorization
// kubeconfigs; checks join ping in the health endpoints. A port in use
// fails at once, as kube's does. The returned function waits until the
// server has stopped.
func (o *servingOptions) serve(ctx context.Context, cfg *rest.Config, gatherer prometheus.Gatherer, log *slog.Logger, checks ...healthCheck) (wait func(), err error) {
	if o.securePort == 0 {
		return func() {}, nil
	}
	if o.securePort < 0 || o.securePort > 65535 {
		return nil, fmt.Errorf("--secure-port %d: must be 0 to 65535", o.securePort)
	}
	tlsConfig, err := o.tlsConfig()
	if err != nil {
		return nil, err
	}
	authn, err := o.reviewClient(o.authnConfig, cfg)
	if err != nil {
		return nil, fmt.Errorf("--authentication-kubeconfig: %w", err)
	}
	authz, err := o.reviewClient(o.authzConfig, cfg)
	if err != nil {
		return nil, fmt.Errorf("--authorization-kubeconfig: %w", err)
	}
	addr := net.JoinHostPort(o.bindAddress, strconv.Itoa(o.securePort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--secure-port: %w", err)
	}
	mux := http.NewServeMux()
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		mux.Handle(path, healthHandler(strings.TrimPrefix(path, "/"), log, checks...))
	}
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	if o.profiling {
		// kube-scheduler's and kube-controller-manager's --profiling (on
		// by default): Go's profiles, behind the same authentication and
		// authorization as /metrics.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	d := &delegated{authn: authn, authz: authz, alwaysAllow: o.alwaysAllow, log: log}
	srv := &http.Server{
		Handler:           d.wrap(mux),
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	log.Info("serving securely", "address", ln.Addr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("secure serving stopped", "err", err)
		}
	}()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-done:
		}
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
		<-done
	}()
	return func() { <-stopped }, nil
}

// tlsConfig is the serving certificate (the files, or a self-signed one
// made in memory, as kube's components make one when given none) and the
// client CAs.
func (o *servingOptions) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case o.certFile != "" && o.keyFile != "":
		cert, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case o.certFile != "" || o.keyFile != "":
		return nil, errors.New("--tls-cert-file and --tls-private-key-file go together")
	default:
		cert, err := o.selfSigned()
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if o.clientCAFile != "" {
		pem, err := os.ReadFile(o.clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		pool, err := pki.CertPool(pem)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file %s: %w", o.clientCAFile, err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// selfSigned is kube's in-memory serving certificate: a CA of its own
// ("localhost-ca@<time>") and a certificate for localhost, the loopback
// addresses and the bind address.
func (o *servingOptions) selfSigned() (tls.Certificate, error) {
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	ca, err := pki.NewCA("localhost-ca@" + stamp)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if ip := net.ParseIP(o.bindAddress); ip != nil && !ip.IsUnspecified() {
		hosts = append(hosts, o.bindAddress)
	}
	pair, err := ca.Serving(pki.ServingRequest{CommonName: "localhost@" + stamp, Hosts: hosts})
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	cert, err := pair.TLSCertificate()
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	// The chain with the CA, as kube serves it.
	cert.Certificate = append(cert.Certificate, ca.Cert.Raw)
	return cert, nil
}

// reviewClient is a client for TokenReviews or SubjectAccessReviews: from
// kubeconfig when set, else cfg.
func (o *servingOptions) reviewClient(kubeconfig string, cfg *rest.Config) (kubernetes.Interface, error) {
	if kubeconfig != "" {
		c, err := restConfigFrom(kubeconfig)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	cfg = rest.CopyConfig(cfg)
	// A review is a small request on the scrape's path: bounded.
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// healthCheck is one named check of a component's health endpoints, as
// kube's healthz.HealthChecker (client-go's leader election adaptor is one).
type healthCheck interface {
	Name() string
	Check(r *http.Request) error
}

// healthHandler answers /healthz, /livez or /readyz as kube's components
// do: "ok" when ping and every check pass, or with ?verbose the checks;
// when one fails, 500 with every check's line (a failure's reason
// withheld, as kube's, since the endpoint is open to anyone) and
// "<name> check failed". The reason goes to the log.
func healthHandler(name string, log *slog.Logger, checks ...healthCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		var report strings.Builder
		report.WriteString("[+]ping ok\n")
		failed := false
		for _, c := range checks {
			if err := c.Check(r); err != nil {
				failed = true
				log.Info("health check failed", "endpoint", name, "check", c.Name(), "err", err)
				fmt.Fprintf(&report, "[-]%s failed: reason withheld\n", c.Name())
				continue
			}
			fmt.Fprintf(&report, "[+]%s ok\n", c.Name())
		}
		if failed {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed\n", report.String(), name)
			return
		}
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprintf(w, "%s%s check passed\n", report.String(), name)
			return
		}
		fmt.Fprint(w, "ok")
	})
}

// delegated authenticates a request (client certificate, else bearer
// token through a TokenReview, else system:anonymous) and authorizes it
// through a SubjectAccessReview, as kube's delegated authentication and
// authorization do; alwaysAllow paths need no authorization.
type delegated struct {
	authn, authz kubernetes.Interface
	alwaysAllow  []string
	log          *slog.Logger
}

type requestUser struct {
	name   string
	uid    string
	groups []string
	extra  map[string]authorizationv1.ExtraValue
}

func (d *delegated) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok, err := d.authenticate(r)
		if err != nil {
			d.log.Info("authentication failed", "err", err)
			writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
			return
		}
		if !ok {
			writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
			return
		}
		if slices.Contains(d.alwaysAllow, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		verb := nonResourceVerb(r.Method)
		allowed, err := d.authorize(r.Context(), user, r.URL.Path, verb)
		if err != nil {
			d.log.Info("authorization failed", "user", user.name, "path", r.URL.Path, "err", err)
		}
		if !allowed {
			writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden,
				fmt.Sprintf("forbidden: User %q cannot %s path %q", user.name, verb, r.URL.Path))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate says who made r; ok is false for a token the API server
// does not accept.
func (d *delegated) authenticate(r *http.Request) (requestUser, bool, error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		return requestUser{name: cert.Subject.CommonName, groups: append(slices.Clone(cert.Subject.Organization), "system:authenticated")}, true, nil
	}
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	if scheme, token, found := strings.Cut(auth, " "); found && strings.EqualFold(scheme, "bearer") && strings.TrimSpace(token) != "" {
		review, err := d.authn.AuthenticationV1().TokenReviews().Create(r.Context(), &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: strings.TrimSpace(token)},
		}, metav1.CreateOptions{})
		if err != nil {
			return requestUser{}, false, fmt.Errorf("tokenreview: %w", err)
		}
		if !review.Status.Authenticated {
			return requestUser{}, false, nil
		}
		u := review.Status.User
		extra := map[string]authorizationv1.ExtraValue{}
		for k, v := range u.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
		return requestUser{name: u.Username, uid: u.UID, groups: u.Groups, extra: extra}, true, nil
	}
	return requestUser{name: "system:anonymous", groups: []string{"system:unauthenticated"}}, true, nil
}

func (d *delegated) authorize(ctx context.Context, user requestUser, path, verb string) (bool, error) {
	review, err := d.authz.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  user.name,
			UID:                   user.uid,
			Groups:                user.groups,
			Extra:                 user.extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subjectaccessreview: %w", err)
	}
	return review.Status.Allowed, nil
}

// nonResourceVerb is kube's verb of a non-resource request.
func nonResourceVerb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return "get"
}

// writeStatus writes a metav1.Status failure, as kube's components
// answer a request they refuse.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  msg,
		Reason:   reason,
		Code:     int32(code),
	})
}
