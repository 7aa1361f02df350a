// Package certificates holds kube-controller-manager's CSR controllers for
// TLS bootstrapping: the approver of kubelet client certificates (kube's
// csrapproving) and the signer of the kube-apiserver-client(-kubelet)
// signers with the cluster CA (kube's csrsigning). They act through the
// API as any controller.
//
// The approver approves a kubernetes.io/kube-apiserver-client-kubelet CSR
// that asks for a node client certificate (CN system:node:NAME, O
// system:nodes, client auth usages, no subject alternative names) when its
// requester may create certificatesigningrequests/nodeclient (or, renewing
// its own certificate, certificatesigningrequests/selfnodeclient), asked
// with a SubjectAccessReview. A server that does not serve
// SubjectAccessReviews yet gets a simplification: a bootstrapper (group
// system:bootstrappers) may have nodeclient, a node (system:nodes) its own
// selfnodeclient, as the bootstrap policy binds them.
package certificates
