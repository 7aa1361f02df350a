// Package aggregate writes errors the way kube's aggregate errors
// (k8s.io/apimachinery/pkg/util/errors.Aggregate) read, for the review
// resources that answer an error as a string in their status.
package aggregate

import "strings"

// Message is err as kube's aggregate errors read: one error alone,
// several (errors.Join, nested or not) as "[a, b]".
func Message(err error) string {
	var flat []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, inner := range j.Unwrap() {
				walk(inner)
			}
			return
		}
		flat = append(flat, e.Error())
	}
	walk(err)
	if len(flat) == 1 {
		return flat[0]
	}
	return "[" + strings.Join(flat, ", ") + "]"
}
