package registry

import "testing"

func TestAppendWithoutTypeMeta(t *testing.T) {
	for in, want := range map[string]string{
		`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}`:          `{"metadata":{"name":"a"}}`,
		`{"apiVersion":"v1","metadata":{}}`:                                 `{"metadata":{}}`,
		`{"metadata":{"name":"kind"}}`:                                      `{"metadata":{"name":"kind"}}`,
		`{"kind":"Pod","apiVersion":"policy/v1"}`:                           `{}`,
		`{"kind":"PodDisruptionBudget","apiVersion":"policy/v1","spec":{}}`: `{"spec":{}}`,
	} {
		if got := string(appendWithoutTypeMeta([]byte("x"), []byte(in))); got != "x"+want {
			t.Errorf("%s: got %s, want x%s", in, got, want)
		}
	}
}
