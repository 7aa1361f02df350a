package main

import (
	"path/filepath"

	"github.com/corekube/corekube/auth/serviceaccount"
	"github.com/corekube/corekube/server"
)

// upServiceAccountKey gives `up` a signing key that survives restarts
// (tokens stay valid): <data-dir>/pki/sa.key, created on first start
// (0600), as both --service-account-signing-key-file and
// --service-account-key-file unless they are given.
func upServiceAccountKey(cfg *server.Config) error {
	if cfg.ServiceAccountSigningKeyFile == "" {
		path := filepath.Join(cfg.DataDir, "pki", "sa.key")
		if _, err := serviceaccount.LoadOrCreateKey(path); err != nil {
			return err
		}
		cfg.ServiceAccountSigningKeyFile = path
	}
	if len(cfg.ServiceAccountKeyFiles) == 0 {
		cfg.ServiceAccountKeyFiles = []string{cfg.ServiceAccountSigningKeyFile}
	}
	return nil
}
