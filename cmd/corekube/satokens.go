package main

import (
	"errors"
	"path/filepath"

	"github.com/corekube/corekube/auth/pki"
	"github.com/corekube/corekube/auth/serviceaccount"
	"github.com/corekube/corekube/server"
)

// upServiceAccountKey gives `up` and `apiserver --data-dir` a signing key
// that survives restarts (tokens stay valid) and that the servers sharing
// the directory share: <data-dir>/pki/sa.key, created on first start
// (0600), as both --service-account-signing-key-file and
// --service-account-key-file unless they are given.
func upServiceAccountKey(cfg *server.Config) error {
	if cfg.ServiceAccountSigningKeyFile == "" {
		dir := filepath.Join(cfg.DataDir, "pki")
		// Servers starting at once on one directory take turns, so that
		// none reads a key another is still writing.
		unlock, err := pki.LockDir(dir)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, "sa.key")
		_, err = serviceaccount.LoadOrCreateKey(path)
		if err := errors.Join(err, unlock()); err != nil {
			return err
		}
		cfg.ServiceAccountSigningKeyFile = path
	}
	if len(cfg.ServiceAccountKeyFiles) == 0 {
		cfg.ServiceAccountKeyFiles = []string{cfg.ServiceAccountSigningKeyFile}
	}
	return nil
}
