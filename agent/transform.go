package agent

import (
	"unique"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stripManagedFields is the informers' transform: the agent never reads
// managedFields. Pods also get their repeated strings interned (intern).
func stripManagedFields(obj any) (any, error) {
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		acc.GetObjectMeta().SetManagedFields(nil)
	}
	if pod, ok := obj.(*v1.Pod); ok {
		internPod(pod)
	}
	return obj, nil
}

// intern returns the canonical copy of s: the informer's cache holds tens
// of thousands of pods whose namespaces, node names, images, defaults and
// condition strings are the same few values, each decoded into a string of
// its own. Strings are immutable, so sharing them changes nothing else.
func intern(s *string) {
	if *s != "" {
		*s = unique.Make(*s).Value()
	}
}

// internPod interns the strings of pod that many pods share (not names,
// UIDs, resourceVersions, IPs or container IDs, which are one pod's own).
func internPod(pod *v1.Pod) {
	intern(&pod.Namespace)
	intern(&pod.GenerateName)
	for i := range pod.OwnerReferences {
		r := &pod.OwnerReferences[i]
		intern(&r.APIVersion)
		intern(&r.Kind)
		intern(&r.Name)
	}
	s := &pod.Spec
	intern(&s.NodeName)
	intern((*string)(&s.RestartPolicy))
	intern((*string)(&s.DNSPolicy))
	intern(&s.ServiceAccountName)
	intern(&s.DeprecatedServiceAccount)
	intern(&s.SchedulerName)
	intern(&s.PriorityClassName)
	for i := range s.Tolerations {
		t := &s.Tolerations[i]
		intern(&t.Key)
		intern((*string)(&t.Operator))
		intern(&t.Value)
		intern((*string)(&t.Effect))
	}
	for _, cs := range [][]v1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			c := &cs[i]
			intern(&c.Name)
			intern(&c.Image)
			intern(&c.TerminationMessagePath)
			intern((*string)(&c.TerminationMessagePolicy))
			intern((*string)(&c.ImagePullPolicy))
		}
	}
	st := &pod.Status
	intern((*string)(&st.Phase))
	intern((*string)(&st.QOSClass))
	intern(&st.HostIP)
	for i := range st.HostIPs {
		intern(&st.HostIPs[i].IP)
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		intern((*string)(&c.Type))
		intern((*string)(&c.Status))
		intern(&c.Reason)
	}
	for _, cs := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range cs {
			c := &cs[i]
			intern(&c.Name)
			intern(&c.Image)
			intern(&c.ImageID)
		}
	}
}
