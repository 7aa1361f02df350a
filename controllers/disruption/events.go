package disruption

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// eventSource is the component kube's disruption controller reports as.
const eventSource = "controllermanager"

func pdbRef(namespace, name string, uid types.UID, rv string) v1.ObjectReference {
	return v1.ObjectReference{Kind: "PodDisruptionBudget", APIVersion: "policy/v1", Namespace: namespace, Name: name, UID: uid, ResourceVersion: rv}
}
