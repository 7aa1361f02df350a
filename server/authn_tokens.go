package server

import (
	"context"
	"fmt"

	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/auth/authenticator/oidc"
	"github.com/corekube/corekube/auth/authenticator/tokenfile"
)

// tokenAuthenticators are the static tokens of --token-auth-file and the
// OIDC issuers of --authentication-config (nil when not configured). The
// OIDC authenticator fetches its issuers' keys in the background until the
// server closes.
func (s *Server) tokenAuthenticators() (static, jwt authenticator.Token, err error) {
	if path := s.cfg.TokenAuthFile; path != "" {
		a, err := tokenfile.NewCSV(path, s.log)
		if err != nil {
			return nil, nil, fmt.Errorf("--token-auth-file: %w", err)
		}
		s.log.Info("static tokens loaded", "path", path, "tokens", a.Len())
		static = a
	}
	if path := s.cfg.AuthenticationConfigFile; path != "" {
		// The ServiceAccount issuers are refused here, as kube does: their
		// tokens are the ServiceAccount authenticator's.
		cfg, err := oidc.LoadConfigFile(path, s.cfg.ServiceAccountIssuers)
		if err != nil {
			return nil, nil, fmt.Errorf("--authentication-config: %w", err)
		}
		if len(cfg.JWT) > 0 {
			a, err := oidc.New(context.Background(), cfg, oidc.Options{Logger: s.log, Metrics: s.metrics})
			if err != nil {
				return nil, nil, fmt.Errorf("--authentication-config %q: %w", path, err)
			}
			s.closers = append(s.closers, a.Close)
			s.log.Info("OIDC issuers configured", "issuers", a.Issuers())
			jwt = a
		}
	}
	return static, jwt, nil
}
