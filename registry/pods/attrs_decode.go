package pods

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corekube/corekube/registry"
)

var _ registry.AttrsDecoder = (*Strategy)(nil)

// attrsPod is the part of a pod GetAttrs reads: the watch cache decodes
// every pod write into it. encoding/json skips the rest without building
// it (containers, volumes, managedFields, most of the status).
type attrsPod struct {
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		NodeName           string           `json:"nodeName"`
		RestartPolicy      v1.RestartPolicy `json:"restartPolicy"`
		SchedulerName      string           `json:"schedulerName"`
		ServiceAccountName string           `json:"serviceAccountName"`
		HostNetwork        bool             `json:"hostNetwork"`
	} `json:"spec"`
	Status struct {
		Phase             v1.PodPhase `json:"phase"`
		PodIP             string      `json:"podIP"`
		PodIPs            []v1.PodIP  `json:"podIPs"`
		NominatedNodeName string      `json:"nominatedNodeName"`
	} `json:"status"`
}

// DecodeForAttrs decodes of a stored pod what GetAttrs reads.
func (*Strategy) DecodeForAttrs(data []byte) (runtime.Object, error) {
	var a attrsPod
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("decode pod attributes: %w", err)
	}
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.Labels = a.Metadata.Name, a.Metadata.Namespace, a.Metadata.Labels
	pod.Spec.NodeName, pod.Spec.RestartPolicy, pod.Spec.SchedulerName = a.Spec.NodeName, a.Spec.RestartPolicy, a.Spec.SchedulerName
	pod.Spec.ServiceAccountName, pod.Spec.HostNetwork = a.Spec.ServiceAccountName, a.Spec.HostNetwork
	pod.Status.Phase, pod.Status.PodIP, pod.Status.PodIPs = a.Status.Phase, a.Status.PodIP, a.Status.PodIPs
	pod.Status.NominatedNodeName = a.Status.NominatedNodeName
	return pod, nil
}
