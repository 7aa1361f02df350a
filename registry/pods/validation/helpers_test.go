package validation_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corekube/corekube/registry/pods"
)

// The validation tests build their pods as the pods strategy stores them
// (defaults applied), so they import the strategy from outside the package.

var ctx = context.Background()

func i64(v int64) *int64 { return &v }
func i32(v int32) *int32 { return &v }

// createdPod is a minimal client pod after PrepareForCreate (as stored).
func createdPod(mut ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "default", Labels: map[string]string{"app": "x"}},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "busybox"}},
		},
	}
	for _, m := range mut {
		m(p)
	}
	pods.NewStrategy().PrepareForCreate(ctx, p)
	return p
}

// updated is old changed by mut, after the strategy's PrepareForUpdate.
func updated(old *v1.Pod, mut func(*v1.Pod)) *v1.Pod {
	p := old.DeepCopy()
	mut(p)
	pods.NewStrategy().PrepareForUpdate(ctx, p, old)
	return p
}

// statusUpdated is old changed by mut, after the status strategy's
// PrepareForUpdate.
func statusUpdated(old *v1.Pod, mut func(*v1.Pod)) *v1.Pod {
	p := old.DeepCopy()
	mut(p)
	pods.NewStatusStrategy().PrepareForUpdate(ctx, p, old)
	return p
}

func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// expectErrs checks errs as "Type field" lines, in order.
func expectErrs(t *testing.T, errs field.ErrorList, want ...string) {
	t.Helper()
	got := make([]string, 0, len(errs))
	for _, e := range errs {
		got = append(got, fmt.Sprintf("%s %s", string(e.Type), e.Field))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors mismatch\n got: %q\nwant: %q\nfull: %v", got, want, errs.ToAggregate())
	}
}
