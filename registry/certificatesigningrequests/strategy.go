// Package certificatesigningrequests is the registry strategy of
// certificates.k8s.io/v1 CertificateSigningRequests as kube-apiserver v1.32
// has it (pkg/registry/certificates/certificates and
// pkg/apis/certificates/validation): the request is a PEM PKCS#10 CSR whose
// signature must verify, the spec is immutable and its
// username/uid/groups/extra are the requester's, whatever the client sent;
// the status is written only through the approval (conditions) and status
// (certificate) subresources.
package certificatesigningrequests

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/registry"
)

// Strategy is the strategy of the certificatesigningrequests resource.
type Strategy struct{ registry.Base }

// StatusStrategy is the strategy of certificatesigningrequests/status: the
// signer writes the certificate (and Failed conditions); the approval
// conditions stay as they are.
type StatusStrategy struct{}

// ApprovalStrategy is the strategy of certificatesigningrequests/approval:
// only the conditions change.
type ApprovalStrategy struct{}

var (
	_ registry.Strategy           = (*Strategy)(nil)
	_ registry.StatusStrategy     = (*StatusStrategy)(nil)
	_ registry.StatusStrategy     = (*ApprovalStrategy)(nil)
	_ registry.GenerationStrategy = (*Strategy)(nil)
)

// NewStrategy returns the certificatesigningrequests strategy.
func NewStrategy() *Strategy {
	return &Strategy{registry.Base{
		// Info describes certificatesigningrequests as kube's discovery does.
		Resource: registry.ResourceInfo{
			Group:      certificatesv1.GroupName,
			Version:    "v1",
			Resource:   "certificatesigningrequests",
			Singular:   "certificatesigningrequest",
			Kind:       "CertificateSigningRequest",
			ListKind:   "CertificateSigningRequestList",
			ShortNames: []string{"csr"},
			// kube has field label conversions for spec.signerName.
			CustomFieldSelectors: true,
		},
		NewObject:     func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
		NewListObject: func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
		// AllowCreateOnUpdate is false, as in kube.
	}}
}

// NewStatusStrategy returns the certificatesigningrequests/status strategy.
func NewStatusStrategy() *StatusStrategy { return &StatusStrategy{} }

// NewApprovalStrategy returns the certificatesigningrequests/approval
// strategy.
func NewApprovalStrategy() *ApprovalStrategy { return &ApprovalStrategy{} }

// PrepareForCreate clears the status and sets the requester's identity in
// the spec: a client cannot claim to be someone else, and approvers decide
// on who asked.
func (*Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	csr := obj.(*certificatesv1.CertificateSigningRequest)
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = "", "", nil, nil
	if u, ok := user.From(ctx); ok && u != nil {
		csr.Spec.Username = u.Name
		csr.Spec.UID = u.UID
		csr.Spec.Groups = slices.Clone(u.Groups)
		if len(u.Extra) > 0 {
			csr.Spec.Extra = map[string]certificatesv1.ExtraValue{}
			for k, v := range u.Extra {
				csr.Spec.Extra[k] = slices.Clone(v)
			}
		}
	}
	csr.Status = certificatesv1.CertificateSigningRequestStatus{}
}

// PrepareForUpdate keeps the spec and status: an update of the main
// resource changes only metadata.
func (*Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	csr, oldCSR := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	csr.Spec = oldCSR.Spec
	csr.Status = oldCSR.Status
}

// SpecChanged is never true: the spec is immutable (kube bumps no
// generation either).
func (*Strategy) SpecChanged(_, _ runtime.Object) bool { return false }

// Validate validates a new CSR.
func (*Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validate(obj.(*certificatesv1.CertificateSigningRequest))
}

// ValidateUpdate validates obj (whose spec is old's).
func (*Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	csr, oldCSR := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	return validateUpdate(csr, oldCSR)
}

// GetAttrs returns the CSR's labels, metadata.name and spec.signerName.
func (*Strategy) GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return nil, nil, fmt.Errorf("not a CertificateSigningRequest")
	}
	return labels.Set(csr.Labels), fields.Set{
		"metadata.name":   csr.Name,
		"spec.signerName": csr.Spec.SignerName,
	}, nil
}

// PrepareForUpdate keeps the spec and the approval conditions of old: the
// status subresource writes the certificate and other conditions.
func (*StatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	csr, oldCSR := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	csr.Spec = oldCSR.Spec
	csr.Status.Conditions = mergeConditions(csr.Status.Conditions, oldCSR.Status.Conditions, isApprovalCondition)
}

// ValidateUpdate validates the status written by a signer.
func (*StatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validateUpdate(obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest))
}

// PrepareForUpdate keeps the spec, the certificate and the non-approval
// conditions of old: approval changes only Approved/Denied conditions.
func (*ApprovalStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	csr, oldCSR := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	csr.Spec = oldCSR.Spec
	csr.Status.Certificate = oldCSR.Status.Certificate
	csr.Status.Conditions = mergeConditions(csr.Status.Conditions, oldCSR.Status.Conditions, func(t certificatesv1.RequestConditionType) bool {
		return !isApprovalCondition(t)
	})
}

// ValidateUpdate validates the conditions written by an approver.
func (*ApprovalStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validateUpdate(obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest))
}

func isApprovalCondition(t certificatesv1.RequestConditionType) bool {
	return t == certificatesv1.CertificateApproved || t == certificatesv1.CertificateDenied
}

// mergeConditions returns conds with its conditions of the types keep
// selects replaced by old's (in old's order, first), so a subresource
// cannot change what another subresource owns.
func mergeConditions(conds, old []certificatesv1.CertificateSigningRequestCondition, keep func(certificatesv1.RequestConditionType) bool) []certificatesv1.CertificateSigningRequestCondition {
	var out []certificatesv1.CertificateSigningRequestCondition
	for _, c := range old {
		if keep(c.Type) {
			out = append(out, c)
		}
	}
	for _, c := range conds {
		if !keep(c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// validUsages are kube's KeyUsage values.
var validUsages = []string{
	string(certificatesv1.UsageSigning), string(certificatesv1.UsageDigitalSignature), string(certificatesv1.UsageContentCommitment),
	string(certificatesv1.UsageKeyEncipherment), string(certificatesv1.UsageKeyAgreement), string(certificatesv1.UsageDataEncipherment),
	string(certificatesv1.UsageCertSign), string(certificatesv1.UsageCRLSign), string(certificatesv1.UsageEncipherOnly),
	string(certificatesv1.UsageDecipherOnly), string(certificatesv1.UsageAny), string(certificatesv1.UsageServerAuth),
	string(certificatesv1.UsageClientAuth), string(certificatesv1.UsageCodeSigning), string(certificatesv1.UsageEmailProtection),
	string(certificatesv1.UsageSMIME), string(certificatesv1.UsageIPsecEndSystem), string(certificatesv1.UsageIPsecTunnel),
	string(certificatesv1.UsageIPsecUser), string(certificatesv1.UsageTimestamping), string(certificatesv1.UsageOCSPSigning),
	string(certificatesv1.UsageMicrosoftSGC), string(certificatesv1.UsageNetscapeSGC),
}

// ParseRequest parses a CSR's spec.request: one PEM block of type
// CERTIFICATE REQUEST holding a PKCS#10 request.
func ParseRequest(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// validate is kube's ValidateCertificateSigningRequestCreate for v1.
func validate(csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	req, err := ParseRequest(csr.Spec.Request)
	if err == nil {
		err = req.CheckSignature()
	}
	if err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), "<redacted>", err.Error()))
	}
	if len(csr.Spec.Usages) == 0 {
		errs = append(errs, field.Required(spec.Child("usages"), ""))
	}
	seen := map[certificatesv1.KeyUsage]bool{}
	for i, u := range csr.Spec.Usages {
		p := spec.Child("usages").Index(i)
		if !slices.Contains(validUsages, string(u)) {
			errs = append(errs, field.NotSupported(p, u, validUsages))
		}
		if seen[u] {
			errs = append(errs, field.Duplicate(p, u))
		}
		seen[u] = true
	}
	errs = append(errs, validateSignerName(spec.Child("signerName"), csr.Spec.SignerName)...)
	if e := csr.Spec.ExpirationSeconds; e != nil && *e < 600 {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *e, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	errs = append(errs, validateConditions(field.NewPath("status", "conditions"), csr)...)
	if len(csr.Status.Certificate) > 0 {
		errs = append(errs, validateCertificate(field.NewPath("status", "certificate"), csr)...)
	}
	return errs
}

// validateSignerName: a fully qualified domain, a slash and a path.
func validateSignerName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	domain, path, ok := strings.Cut(name, "/")
	if !ok || domain == "" || path == "" {
		return field.ErrorList{field.Invalid(p, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	if e := validation.IsFullyQualifiedDomainName(p, domain); len(e) > 0 {
		errs = append(errs, field.Invalid(p, name, "the domain portion of the signerName must be a fully qualified domain name"))
	}
	if len(path) > 253 {
		errs = append(errs, field.TooLong(p, name, 253+len(domain)+1))
	}
	return errs
}

// validateConditions: known types unique, Approved and Denied exclusive,
// and those two only True.
func validateConditions(p *field.Path, csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
	var errs field.ErrorList
	seen := map[certificatesv1.RequestConditionType]bool{}
	for i, c := range csr.Status.Conditions {
		cp := p.Index(i)
		if c.Type == "" {
			errs = append(errs, field.Required(cp.Child("type"), ""))
		}
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			if seen[c.Type] {
				errs = append(errs, field.Duplicate(cp.Child("type"), c.Type))
			}
		}
		seen[c.Type] = true
		switch {
		case c.Status == "":
			errs = append(errs, field.Required(cp.Child("status"), ""))
		case isApprovalCondition(c.Type) && c.Status != v1.ConditionTrue:
			errs = append(errs, field.NotSupported(cp.Child("status"), c.Status, []string{string(v1.ConditionTrue)}))
		case !slices.Contains([]v1.ConditionStatus{v1.ConditionTrue, v1.ConditionFalse, v1.ConditionUnknown}, c.Status):
			errs = append(errs, field.NotSupported(cp.Child("status"), c.Status, []string{string(v1.ConditionTrue), string(v1.ConditionFalse), string(v1.ConditionUnknown)}))
		}
	}
	if seen[certificatesv1.CertificateApproved] && seen[certificatesv1.CertificateDenied] {
		errs = append(errs, field.Invalid(p, csr.Status.Conditions, "Approved and Denied conditions are mutually exclusive"))
	}
	return errs
}

// validateCertificate: only an approved request gets a certificate, and it
// must be PEM CERTIFICATE blocks that parse.
func validateCertificate(p *field.Path, csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
	var errs field.ErrorList
	if !hasCondition(csr, certificatesv1.CertificateApproved) {
		errs = append(errs, field.Invalid(p, "<certificate data>", "certificate may only be set if the Approved condition is present"))
	}
	if hasCondition(csr, certificatesv1.CertificateFailed) {
		errs = append(errs, field.Invalid(p, "<certificate data>", "certificate may not be set if the Failed condition is present"))
	}
	rest, n := csr.Status.Certificate, 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			errs = append(errs, field.Invalid(p, "<certificate data>", fmt.Sprintf("only CERTIFICATE PEM blocks are allowed, found %q", block.Type)))
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			errs = append(errs, field.Invalid(p, "<certificate data>", err.Error()))
		}
	}
	if n == 0 {
		errs = append(errs, field.Invalid(p, "<certificate data>", "must contain at least one CERTIFICATE PEM block"))
	}
	return errs
}

// validateUpdate adds to validate what may not change: approval
// conditions are never removed, a certificate never changed once set.
func validateUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	errs := validate(csr)
	p := field.NewPath("status", "conditions")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		if hasCondition(old, t) && !hasCondition(csr, t) {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		}
	}
	if len(old.Status.Certificate) > 0 && !apiequality.Semantic.DeepEqual(old.Status.Certificate, csr.Status.Certificate) {
		errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not modify existing certificate content"))
	}
	return errs
}

// hasCondition reports whether csr has a condition of type t (whose status
// is not False).
func hasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && c.Status != v1.ConditionFalse {
			return true
		}
	}
	return false
}

// Approved reports whether csr is approved and not denied.
func Approved(csr *certificatesv1.CertificateSigningRequest) bool {
	return hasCondition(csr, certificatesv1.CertificateApproved) && !hasCondition(csr, certificatesv1.CertificateDenied)
}

// Finished reports whether nothing more will happen to csr: denied,
// failed or issued.
func Finished(csr *certificatesv1.CertificateSigningRequest) bool {
	return hasCondition(csr, certificatesv1.CertificateDenied) || hasCondition(csr, certificatesv1.CertificateFailed) || len(csr.Status.Certificate) > 0
}

// GetResetFields: an update of the request never changes its status, so those fields are never owned by the writer
// in managedFields (kube's reset fields).
func (*Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("certificates.k8s.io/v1", "status")
}

// GetResetFields: a status update never changes the spec or the conditions (approval does), so those fields are never owned by the writer
// in managedFields (kube's reset fields).
func (*StatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("certificates.k8s.io/v1", "spec", "status.conditions")
}

// GetResetFields: approval never changes the spec or the certificate, so those fields are never owned by the writer
// in managedFields (kube's reset fields).
func (*ApprovalStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return registry.ResetFields("certificates.k8s.io/v1", "spec", "status.certificate")
}
