package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/corekube/corekube/admission"
	"github.com/corekube/corekube/auth/authorizer"
	"github.com/corekube/corekube/auth/authorizer/rbac"
	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/registry/certificatesigningrequests"
)

// certificateAdmission is kube's CertificateApproval, CertificateSigning
// and CertificateSubjectRestriction admission plugins: writing a CSR's approval requires the approve verb,
// and its status the sign verb, on the certificates.k8s.io signers
// resource named by the signer (or its domain/* wildcard). It asks the
// server's whole authorizer, which is only known once authorization is set
// up, hence the function. It is not a named plugin (yet), so it cannot be
// disabled.
type certificateAdmission struct {
	authz func() authorizer.Authorizer
}

var _ admission.Validator = (*certificateAdmission)(nil)

// Validate refuses approval and status writes the user may not make.
func (c *certificateAdmission) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Resource.Group != certificatesv1.GroupName || a.Resource.Resource != "certificatesigningrequests" {
		return nil
	}
	if a.Operation == admission.Create && a.Subresource == "" {
		return subjectRestriction(a)
	}
	if a.Operation != admission.Update {
		return nil
	}
	var verb, what string
	switch a.Subresource {
	case "approval":
		verb, what = "approve", "approve"
	case "status":
		verb, what = "sign", "sign"
	default:
		return nil
	}
	csr, ok := a.Object.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return nil
	}
	if old, ok := a.OldObject.(*certificatesv1.CertificateSigningRequest); ok && verb == "sign" && string(old.Status.Certificate) == string(csr.Status.Certificate) {
		// kube checks sign only when the certificate changes.
		return nil
	}
	authz := c.authz()
	u, _ := user.From(ctx)
	if authz == nil || u == nil {
		return nil
	}
	if allowed(ctx, authz, u, verb, csr.Spec.SignerName) {
		return nil
	}
	return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
		fmt.Errorf("user not permitted to %s requests with signerName %q", what, csr.Spec.SignerName))
}

// subjectRestriction is kube's CertificateSubjectRestriction: no
// system:masters certificate through the kube-apiserver-client signer
// (which would make its holder all-powerful).
func subjectRestriction(a *admission.Attributes) error {
	csr, ok := a.Object.(*certificatesv1.CertificateSigningRequest)
	if !ok || csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName {
		return nil
	}
	req, err := certificatesigningrequests.ParseRequest(csr.Spec.Request)
	if err != nil {
		// Validation, after admission, says why.
		return nil
	}
	if slices.Contains(req.Subject.Organization, user.SystemPrivilegedGroup) {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("use of %s signer with %s group is not allowed", csr.Spec.SignerName, user.SystemPrivilegedGroup))
	}
	return nil
}

// allowed asks for verb on signers/NAME, then signers/DOMAIN/*, as kube's
// certificates.IsAuthorizedForSignerName.
func allowed(ctx context.Context, authz authorizer.Authorizer, u *user.Info, verb, signer string) bool {
	attrs := authorizer.Attributes{User: u, Verb: verb, APIGroup: certificatesv1.GroupName, APIVersion: "*", Resource: "signers", Name: signer, ResourceRequest: true}
	if d, _, err := authz.Authorize(ctx, attrs); err == nil && d == authorizer.DecisionAllow {
		return true
	}
	domain, _, ok := strings.Cut(signer, "/")
	if !ok {
		return false
	}
	attrs.Name = domain + "/*"
	d, _, err := authz.Authorize(ctx, attrs)
	return err == nil && d == authorizer.DecisionAllow
}

// newCertificateAdmission asks the authorizer that RBAC's escalation check
// (among mutators) asks: the server's whole authorizer, set once
// authorization is set up.
func newCertificateAdmission(mutators []admission.Mutator) *certificateAdmission {
	for _, m := range mutators {
		if esc, ok := m.(*rbac.EscalationCheck); ok {
			return &certificateAdmission{authz: func() authorizer.Authorizer { return esc.Authorizer }}
		}
	}
	return &certificateAdmission{authz: func() authorizer.Authorizer { return nil }}
}
