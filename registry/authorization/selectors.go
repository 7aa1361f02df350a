package authorization

import (
	"errors"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/corekube/corekube/auth/authorizer"
)

// reviewSelectors sets a's selectors from a review's, as kube does with
// AuthorizeWithSelectors (on by default in 1.32): a raw selector is parsed
// as the query's would be, structured requirements are converted (a field
// requirement only with In or NotIn and one value, which is all field
// selectors can say). What does not convert leaves the requirements nil
// with the reason in the Err, and authorizers treat the review as
// unselected.
func reviewSelectors(a *authorizer.Attributes, ra *authorizationv1.ResourceAttributes) {
	if fs := ra.FieldSelector; fs != nil {
		if fs.RawSelector != "" {
			a.ParseSelectors(fs.RawSelector, "")
		} else {
			a.FieldSelector, a.FieldSelectorErr = fieldRequirements(fs.Requirements)
		}
	}
	if ls := ra.LabelSelector; ls != nil {
		if ls.RawSelector != "" {
			a.ParseSelectors("", ls.RawSelector)
		} else {
			a.LabelSelector, a.LabelSelectorErr = labelRequirements(ls.Requirements)
		}
	}
}

func fieldRequirements(in []metav1.FieldSelectorRequirement) (fields.Requirements, error) {
	out := make(fields.Requirements, 0, len(in))
	for _, r := range in {
		if len(r.Values) > 1 {
			return nil, errors.New("fieldSelectors do not yet support multiple values")
		}
		var op selection.Operator
		switch r.Operator {
		case metav1.FieldSelectorOpIn:
			op = selection.Equals
		case metav1.FieldSelectorOpNotIn:
			op = selection.NotEquals
		case metav1.FieldSelectorOpExists, metav1.FieldSelectorOpDoesNotExist:
			return nil, fmt.Errorf("fieldSelectors do not yet support %v", r.Operator)
		default:
			return nil, fmt.Errorf("%q is not a valid field selector operator", r.Operator)
		}
		if len(r.Values) != 1 {
			return nil, fmt.Errorf("fieldSelectors %v must have one value", r.Operator)
		}
		out = append(out, fields.Requirement{Field: r.Key, Operator: op, Value: r.Values[0]})
	}
	return out, nil
}

func labelRequirements(in []metav1.LabelSelectorRequirement) (labels.Requirements, error) {
	out := make(labels.Requirements, 0, len(in))
	for _, r := range in {
		var op selection.Operator
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			op = selection.In
		case metav1.LabelSelectorOpNotIn:
			op = selection.NotIn
		case metav1.LabelSelectorOpExists:
			op = selection.Exists
		case metav1.LabelSelectorOpDoesNotExist:
			op = selection.DoesNotExist
		default:
			return nil, fmt.Errorf("%q is not a valid label selector operator", r.Operator)
		}
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil {
			return nil, fmt.Errorf("label selector requirement %q: %w", r.Key, err)
		}
		out = append(out, *req)
	}
	return out, nil
}
