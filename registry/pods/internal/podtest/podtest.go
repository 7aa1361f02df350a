// Package podtest holds the small helpers the pods strategy's tests and
// its validation's tests share, so that they are written once. Only
// tests import it.
package podtest

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Int64 returns a pointer to v, for the optional fields of a pod.
func Int64(v int64) *int64 { return &v }

// Int32 returns a pointer to v, for the optional fields of a pod.
func Int32(v int32) *int32 { return &v }

// Resources is the resource list of name, quantity pairs
// ("cpu", "100m", "memory", "1Gi"); a malformed quantity panics.
func Resources(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// ExpectErrs checks errs as "Type field" lines, in order.
func ExpectErrs(t *testing.T, errs field.ErrorList, want ...string) {
	t.Helper()
	got := make([]string, 0, len(errs))
	for _, e := range errs {
		got = append(got, fmt.Sprintf("%s %s", string(e.Type), e.Field))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors mismatch\n got: %q\nwant: %q\nfull: %v", got, want, errs.ToAggregate())
	}
}
