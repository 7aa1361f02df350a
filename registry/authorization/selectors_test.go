package authorization

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corekube/corekube/auth/user"
)

// TestReviewSelectors: a review's selectors reach the authorizers as the
// query's would, raw or structured; what field selectors cannot say is an
// error, not a selector.
func TestReviewSelectors(t *testing.T) {
	u := &user.Info{Name: "system:node:n1"}
	for _, c := range []struct {
		name           string
		field, label   string // the requirements as they print, "" when none
		fieldErr, lErr string
		ra             authorizationv1.ResourceAttributes
	}{
		{name: "none", ra: authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}},
		{name: "raw", field: "spec.nodeName=n1", label: "app in (a,b)", ra: authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods",
			FieldSelector: &authorizationv1.FieldSelectorAttributes{RawSelector: "spec.nodeName=n1"},
			LabelSelector: &authorizationv1.LabelSelectorAttributes{RawSelector: "app in (a,b)"}}},
		{name: "structured", field: "spec.nodeName=n1,status.phase!=Failed", label: "!gone", ra: authorizationv1.ResourceAttributes{Verb: "watch", Resource: "pods",
			FieldSelector: &authorizationv1.FieldSelectorAttributes{Requirements: []metav1.FieldSelectorRequirement{
				{Key: "spec.nodeName", Operator: metav1.FieldSelectorOpIn, Values: []string{"n1"}},
				{Key: "status.phase", Operator: metav1.FieldSelectorOpNotIn, Values: []string{"Failed"}}}},
			LabelSelector: &authorizationv1.LabelSelectorAttributes{Requirements: []metav1.LabelSelectorRequirement{
				{Key: "gone", Operator: metav1.LabelSelectorOpDoesNotExist}}}}},
		{name: "two values", fieldErr: "fieldSelectors do not yet support multiple values", ra: authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods",
			FieldSelector: &authorizationv1.FieldSelectorAttributes{Requirements: []metav1.FieldSelectorRequirement{
				{Key: "spec.nodeName", Operator: metav1.FieldSelectorOpIn, Values: []string{"n1", "n2"}}}}}},
		{name: "exists", fieldErr: "fieldSelectors do not yet support Exists", ra: authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods",
			FieldSelector: &authorizationv1.FieldSelectorAttributes{Requirements: []metav1.FieldSelectorRequirement{
				{Key: "spec.nodeName", Operator: metav1.FieldSelectorOpExists}}}}},
		{name: "bad raw", fieldErr: "parse field selector: invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'",
			ra: authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", FieldSelector: &authorizationv1.FieldSelectorAttributes{RawSelector: "spec.nodeName"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := resourceAttributes(u, &c.ra)
			var field, label, fieldErr, lErr string
			for i, r := range a.FieldSelector {
				if i > 0 {
					field += ","
				}
				field += r.Field + string(r.Operator) + r.Value
			}
			for i, r := range a.LabelSelector {
				if i > 0 {
					label += ","
				}
				label += r.String()
			}
			if a.FieldSelectorErr != nil {
				fieldErr = a.FieldSelectorErr.Error()
			}
			if a.LabelSelectorErr != nil {
				lErr = a.LabelSelectorErr.Error()
			}
			if field != c.field || label != c.label || fieldErr != c.fieldErr || lErr != c.lErr {
				t.Errorf("got %q %q %q %q, want %q %q %q %q", field, label, fieldErr, lErr, c.field, c.label, c.fieldErr, c.lErr)
			}
		})
	}
}
