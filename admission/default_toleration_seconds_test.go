package admission

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestDefaultTolerationSeconds(t *testing.T) {
	keys := func(ts []v1.Toleration) []string {
		var out []string
		for _, t := range ts {
			s := t.Key + "/" + string(t.Operator) + "/" + string(t.Effect)
			if t.TolerationSeconds != nil {
				s += "/" + (time.Duration(*t.TolerationSeconds) * time.Second).String()
			}
			out = append(out, s)
		}
		return out
	}
	const (
		notReady5m    = "node.kubernetes.io/not-ready/Exists/NoExecute/5m0s"
		unreachable5m = "node.kubernetes.io/unreachable/Exists/NoExecute/5m0s"
	)
	tests := []struct {
		name string
		in   []v1.Toleration
		want []string
	}{
		{"none", nil, []string{notReady5m, unreachable5m}},
		{"own unreachable", []v1.Toleration{{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}},
			[]string{"node.kubernetes.io/unreachable/Exists/NoExecute", notReady5m}},
		{"tolerate everything", []v1.Toleration{{Operator: v1.TolerationOpExists}}, []string{"/Exists/"}},
		{"a NoSchedule one does not count", []v1.Toleration{{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
			[]string{"node.kubernetes.io/not-ready/Exists/NoSchedule", notReady5m, unreachable5m}},
		{"an empty effect counts", []v1.Toleration{{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists}},
			[]string{"node.kubernetes.io/not-ready/Exists/", unreachable5m}},
	}
	plugin := &DefaultTolerationSeconds{}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Tolerations: tc.in}}
			if err := plugin.Admit(context.Background(), &Attributes{Operation: Create, Resource: pods, Object: pod}); err != nil {
				t.Fatal(err)
			}
			if got := keys(pod.Spec.Tolerations); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("configured seconds, update", func(t *testing.T) {
		p := &DefaultTolerationSeconds{NotReadySeconds: 7, UnreachableSeconds: 60}
		pod := &v1.Pod{}
		if err := p.Admit(context.Background(), &Attributes{Operation: Update, Resource: pods, Object: pod}); err != nil {
			t.Fatal(err)
		}
		want := []string{"node.kubernetes.io/not-ready/Exists/NoExecute/7s", "node.kubernetes.io/unreachable/Exists/NoExecute/1m0s"}
		if got := keys(pod.Spec.Tolerations); !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("subresources and other resources untouched", func(t *testing.T) {
		for _, a := range []*Attributes{
			{Operation: Update, Resource: pods, Subresource: "status", Object: &v1.Pod{}},
			{Operation: Create, Resource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, Object: &v1.Pod{}},
			{Operation: Delete, Resource: pods, Object: &v1.Pod{}},
		} {
			if err := plugin.Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if n := len(a.Object.(*v1.Pod).Spec.Tolerations); n != 0 {
				t.Errorf("%s %s/%s: %d tolerations added", a.Operation, a.Resource.Resource, a.Subresource, n)
			}
		}
	})
}
