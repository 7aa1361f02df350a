package pods

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var ctx = context.Background()

func i64(v int64) *int64 { return &v }
func i32(v int32) *int32 { return &v }

// rawPod is a minimal pod as a client would send it.
func rawPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "default", Labels: map[string]string{"app": "x"}},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "busybox"}},
		},
	}
}

// createdPod is rawPod after PrepareForCreate (i.e. as stored).
func createdPod(mut ...func(*v1.Pod)) *v1.Pod {
	p := rawPod()
	for _, m := range mut {
		m(p)
	}
	NewStrategy().PrepareForCreate(ctx, p)
	return p
}

func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// errSummary renders errors as "Type field" lines, in order.
func errSummary(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s %s", string(e.Type), e.Field))
	}
	return out
}

func expectErrs(t *testing.T, errs field.ErrorList, want ...string) {
	t.Helper()
	got := errSummary(errs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors mismatch\n got: %q\nwant: %q\nfull: %v", got, want, errs.ToAggregate())
	}
}
