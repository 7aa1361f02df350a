package server

import (
	"sync"

	"github.com/corekube/corekube/openapi"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// apiserverFieldManager is the field manager of the objects the server
// writes itself (system namespaces, bootstrap RBAC policy): kube's, which
// writes them through a client whose User-Agent starts "kube-apiserver/".
const apiserverFieldManager = "kube-apiserver"

// typeConverter is structured-merge-diff's view of the served types, built
// from the same OpenAPI models /openapi/v2 publishes (openapi.Models),
// once, in the background at start-up (or by the first write, if that
// comes first).
type typeConverter struct {
	once sync.Once
	// resources are the stored resources, set before the first write.
	resources []openapi.Resource
	tc        managedfields.TypeConverter
	err       error
}

func (t *typeConverter) get() (managedfields.TypeConverter, error) {
	t.once.Do(func() { t.tc, t.err = openapi.TypeConverter(t.resources) })
	return t.tc, t.err
}
