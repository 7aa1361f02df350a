package validation_test

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corekube/corekube/registry/pods"
)

// The validation tests build their pods as the pods strategy stores them
// (defaults applied), so they import the strategy from outside the package.

var ctx = context.Background()

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
