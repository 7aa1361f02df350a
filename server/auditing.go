package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/corekube/corekube/handlers"
	"github.com/corekube/corekube/server/audit"
	"gopkg.in/natefinch/lumberjack.v2"
)

// auditing is the server's audit log: the policy, and the backend that
// writes events (nil when --audit-policy-file or --audit-log-path is
// unset: requests still get an Audit-Id).
type auditing struct {
	config  *audit.Config
	backend *audit.LogBackend
	stop    context.CancelFunc
	out     io.WriteCloser
}

// setupAudit loads the policy and opens the log, as kube-apiserver does
// when both --audit-policy-file and --audit-log-path are given; the
// backend's writer runs until the server closes (after the requests).
func (s *Server) setupAudit() error {
	cfg := &s.cfg
	if cfg.AuditPolicyFile == "" || cfg.AuditLogPath == "" {
		if cfg.AuditPolicyFile != "" {
			s.log.Warn("--audit-policy-file without --audit-log-path: no audit log is written")
		}
		return nil
	}
	policy, err := audit.LoadPolicy(cfg.AuditPolicyFile)
	if err != nil {
		return fmt.Errorf("--audit-policy-file: %w", err)
	}
	var out io.WriteCloser
	if cfg.AuditLogPath == "-" {
		out = nopCloser{os.Stdout}
	} else {
		if err := os.MkdirAll(filepath.Dir(cfg.AuditLogPath), 0o700); err != nil {
			return fmt.Errorf("--audit-log-path: %w", err)
		}
		// lumberjack rotates as kube's log backend does: by size (MB),
		// keeping maxbackup files for maxage days (0: no limit).
		out = &lumberjack.Logger{
			Filename:   cfg.AuditLogPath,
			MaxSize:    cfg.AuditLogMaxSize,
			MaxBackups: cfg.AuditLogMaxBackup,
			MaxAge:     cfg.AuditLogMaxAge,
		}
	}
	a := &auditing{out: out, backend: audit.NewLogBackend(out, 0, s.log)}
	a.config = &audit.Config{Policy: policy, Backend: a.backend, Attributes: auditAttributes}
	ctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	go a.backend.Run(ctx)
	s.audit = a
	s.closers = append(s.closers, a.close)
	s.log.Info("audit log on", "path", cfg.AuditLogPath, "rules", len(policy.Rules))
	return nil
}

// close flushes what the backend holds and closes the log.
func (a *auditing) close() error {
	a.stop()
	a.backend.Wait()
	return a.out.Close()
}

// withAudit is the audit filter for the server's configuration: every
// request gets an Audit-Id; events are written when the log is on.
func (s *Server) withAudit() func(http.Handler) http.Handler {
	if s.audit == nil {
		return audit.WithAudit(nil)
	}
	return audit.WithAudit(s.audit.config)
}

// logFailedAuthentication audits a request refused by authentication (it
// never reaches the audit filter).
func (s *Server) logFailedAuthentication(w http.ResponseWriter, r *http.Request) {
	if s.audit == nil {
		audit.LogFailedAuthentication(nil, w, r)
		return
	}
	audit.LogFailedAuthentication(s.audit.config, w, r)
}

// auditAttributes describes a request for the audit policy, from its
// RequestInfo (withRequestInfo runs before the audit filter).
func auditAttributes(r *http.Request) audit.Attributes {
	ri, ok := handlers.RequestInfoFrom(r.Context())
	if !ok {
		ri = handlers.NewRequestInfo(r)
	}
	return audit.Attributes{
		Verb: ri.Verb, ResourceRequest: ri.IsResourceRequest, APIGroup: ri.APIGroup,
		Namespace: ri.Namespace, Resource: ri.Resource, Subresource: ri.Subresource, Name: ri.Name,
		Path: ri.Path,
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
