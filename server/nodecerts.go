package server

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/corekube/corekube/auth/authorizer/node"
)

// NodeClientConfig is a client config acting as the node name: a client
// certificate of CN system:node:NAME, O system:nodes, issued by the
// server's CA (as a kubelet's after TLS bootstrapping), trusting the
// serving certificate as LoopbackConfig does. `up` gives one to each of
// its in-process nodes. Without TLS, or when --client-ca-file makes the
// server trust another CA, there is no such certificate.
func (s *Server) NodeClientConfig(name string) (*rest.Config, error) {
	if s.tls == nil || s.tls.ca == nil {
		return nil, errors.New("node client certificates need the server's TLS")
	}
	if s.cfg.ClientCAFile != "" {
		return nil, errors.New("node client certificates: the server trusts --client-ca-file, not its own CA")
	}
	pair, err := s.tls.ca.Client(node.UserPrefix+name, node.Group)
	if err != nil {
		return nil, fmt.Errorf("node %s client certificate: %w", name, err)
	}
	c := s.LoopbackConfig()
	c.BearerToken = ""
	c.CertData, c.KeyData = pair.CertPEM, pair.KeyPEM
	return c, nil
}
