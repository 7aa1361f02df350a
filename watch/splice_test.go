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
		o := &Object{data: got}
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

// TestCutResourceVersion: cutting the resourceVersion out of an object's
// JSON gives what json.Marshal writes for the object without one, wherever
// the member is (first, among others, last); JSON without one is refused.
func TestCutResourceVersion(t *testing.T) {
	pods := map[string]*v1.Pod{
		"only":   {},
		"first":  {ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"resourceVersion": "x"}}},
		"middle": {ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"a": `"resourceVersion":"1"`}}},
		"last":   {TypeMeta: metav1.TypeMeta{Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}},
		"pod":    benchPod(3),
	}
	for name, pod := range pods {
		want, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		pod = pod.DeepCopy()
		pod.ResourceVersion = "123"
		data, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := cutResourceVersion(data); !ok || !bytes.Equal(got, want) {
			t.Errorf("%s: cut %s = %s, %v; want %s", name, data, got, ok, want)
		}
		if got, ok := cutResourceVersion(want); ok {
			t.Errorf("%s: cut from JSON without a resourceVersion: %s", name, got)
		}
	}
	spaced := []byte(` { "kind" : "Pod" , "metadata" : { "resourceVersion" : "1" , "name" : "p" } } `)
	if got, ok := cutResourceVersion(spaced); !ok || string(got) != ` { "kind" : "Pod" , "metadata" : { "name" : "p" } } ` {
		t.Errorf("with spaces: %q, %v", got, ok)
	}
	for _, bad := range []string{``, `x`, `{}`, `{"metadata":{}}`, `{"metadata":[]}`, `{"metadata":{"name":"p"`, `{"metadata":{"resourceVersion":"1"`, `{"metadata":{"resourceVersion":}}`} {
		if out, ok := cutResourceVersion([]byte(bad)); ok {
			t.Errorf("cut accepted %s: %s", bad, out)
		}
	}
}
