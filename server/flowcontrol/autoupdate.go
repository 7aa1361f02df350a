package flowcontrol

import (
	"strconv"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
)

// AutoUpdate is kube's ensurer decision for a stored bootstrap object:
// whether its spec is to be restored, and the apf.kubernetes.io/
// autoupdate-spec annotation it should carry. Mandatory objects are
// always restored ("true"); a suggested one as its annotation says, and
// without a valid one, when it was never changed (generation 1).
func AutoUpdate(mandatory bool, annotations map[string]string, generation int64) (updateSpec bool, annotation string) {
	if mandatory {
		return true, "true"
	}
	v, ok := annotations[flowcontrolv1.AutoUpdateAnnotationKey]
	if b, err := strconv.ParseBool(v); ok && err == nil {
		return b, v
	}
	if generation == 1 {
		return true, "true"
	}
	return false, "false"
}
