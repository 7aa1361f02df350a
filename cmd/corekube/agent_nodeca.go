package main

import (
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/auth/authorizer/node"
	"github.com/corekube/corekube/auth/pki"
)

// nodeIdentitiesFromCA gives each node of a separately started agent a
// client certificate of system:node:NAME issued from the CA in dir (the
// server's ca.crt and ca.key): a shortcut around TLS bootstrapping for
// benchmarks and tests on one machine, which needs the CA's key and so is
// no way to run a real cluster.
func nodeIdentitiesFromCA(dir string, base *rest.Config) (func(string) (*rest.Config, error), error) {
	ca, err := pki.LoadOrCreateCA(dir, "")
	if err != nil {
		return nil, fmt.Errorf("--node-identities-ca-dir: %w", err)
	}
	return func(name string) (*rest.Config, error) {
		pair, err := ca.Client(node.UserPrefix+name, node.Group)
		if err != nil {
			return nil, fmt.Errorf("node %s client certificate: %w", name, err)
		}
		c := rest.AnonymousClientConfig(base)
		c.CertData, c.KeyData = pair.CertPEM, pair.KeyPEM
		return c, nil
	}, nil
}
