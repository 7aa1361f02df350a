package pods

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var ctx = context.Background()

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
