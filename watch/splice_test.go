package watch

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSpliceResourceVersion: the spliced stored value is exactly what
// json.Marshal gives for the object read back with its resourceVersion.
func TestSpliceResourceVersion(t *testing.T) {
	pods := map[string]*v1.Pod{
		"full": {
			TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u-1", Generation: 2,
				Labels: map[string]string{"a": `"}{,\"`}, Annotations: map[string]string{"x": "y"}},
			Spec: v1.PodSpec{NodeName: "n", Containers: []v1.Container{{Name: "c", Image: "i", Command: []string{"{", "]"}}}},
		},
		"name only":  {ObjectMeta: metav1.ObjectMeta{Name: "p"}},
		"empty meta": {TypeMeta: metav1.TypeMeta{Kind: "Pod"}},
		"no before":  {ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}},
	}
	for name, pod := range pods {
		stored, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		got, at, ok := spliceResourceVersion(stored, 12345)
		if !ok {
			t.Errorf("%s: splice refused %s", name, stored)
			continue
		}
		// The Object the cache makes of it gives the stored value back.
		o := &Object{json: got}
		o.setSplice(at, len(got)-len(stored))
		if back, ok := o.Stored(); !ok || !bytes.Equal(back, stored) {
			t.Errorf("%s: Stored() = %s, %v; want %s", name, back, ok, stored)
		}
		pod.ResourceVersion = strconv.Itoa(12345)
		want, _ := json.Marshal(pod)
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
	for _, bad := range []string{`x`, `{}`, `{"metadata":{"resourceVersion":"1"}}`, `{"metadata":[]}`, `{"kind":"Pod"`, `{"metadata":{"name":"p"`} {
		if out, _, ok := spliceResourceVersion([]byte(bad), 1); ok {
			t.Errorf("splice accepted %s: %s", bad, out)
		}
	}
}
