package flowcontrol

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corekube/corekube/handlers"
)

func metav1ObjectMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func withLabel(ri *handlers.RequestInfo) *handlers.RequestInfo {
	ri.LabelSelector = "a"
	return ri
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func withName(ri *handlers.RequestInfo) *handlers.RequestInfo {
	ri.Name = "x"
	return ri
}
