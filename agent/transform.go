package agent

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"unique"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stripManagedFields is the node informer's transform: the agent never
// reads managedFields.
func stripManagedFields(obj any) (any, error) {
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		acc.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}

// podTransform is the pod informer's transform. Besides dropping
// managedFields, it makes the pods in the cache share what many of them
// hold alike: repeated strings are interned (internPod), and the parts of
// a pod that are the same in every pod of a template or a namespace (the
// ServiceAccount's projected volume, tolerations, security contexts,
// container resources, probes, env, labels, ...) become one copy for all
// (podSharer). The pod reads the same in every field (the agent reads
// nearly all of a pod's spec, and writes its status from the previous
// one): only the memory behind it is shared. Nothing in the agent writes
// into a cached pod (client-go's rule for informer objects; writes go to a
// DeepCopy), so sharing is safe.
func (s *podSharer) podTransform(obj any) (any, error) {
	if acc, ok := obj.(metav1.ObjectMetaAccessor); ok {
		acc.GetObjectMeta().SetManagedFields(nil)
	}
	if pod, ok := obj.(*v1.Pod); ok {
		internPod(pod)
		s.share(pod)
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
			for j := range c.VolumeMounts {
				intern(&c.VolumeMounts[j].MountPath)
			}
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

// maxShared bounds the values a podSharer keeps for sharing: when full, it
// starts over (the pods keep what they share; new pods share anew), so a
// cluster of ever new templates cannot grow it without bound.
const maxShared = 4096

// podSharer keeps one copy of each value of the pod parts it shares, keyed
// by the part's kind and its protobuf encoding (deterministic: map keys
// are sorted; quantities are encoded in their canonical form), so that
// equal parts of different pods become the same memory.
type podSharer struct {
	mu     sync.Mutex
	values map[string]any
	ptrs   map[any]any
	buf    []byte
}

func newPodSharer() *podSharer { return &podSharer{values: map[string]any{}, ptrs: map[any]any{}} }

// marshaler is what the API types' generated protobuf code provides.
type marshaler interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// key is kind and m's encoding, in s.buf (valid until the next call).
func (s *podSharer) key(kind string, m marshaler) ([]byte, bool) {
	n := len(kind) + 1 + m.Size()
	if cap(s.buf) < n {
		s.buf = make([]byte, n)
	}
	b := s.buf[:n]
	copy(b, kind)
	b[len(kind)] = 0
	if _, err := m.MarshalToSizedBuffer(b[len(kind)+1:]); err != nil {
		return nil, false
	}
	return b, true
}

// canonical returns the value shared under key, after making v that value
// when there is none yet.
func (s *podSharer) canonical(key []byte, v any) any {
	if got, ok := s.values[string(key)]; ok { // no allocation for the lookup
		return got
	}
	if len(s.values) >= maxShared {
		clear(s.values)
	}
	s.values[string(key)] = v
	return v
}

// sharePtr makes *p the shared copy of its value (p's pointee type T is a
// generated API type: *T encodes itself).
func sharePtr[T any, PT interface {
	*T
	marshaler
}](s *podSharer, kind string, p **T) {
	if *p == nil {
		return
	}
	if k, ok := s.key(kind, PT(*p)); ok {
		*p = s.canonical(k, *p).(*T)
	}
}

// shareSlice makes *p the shared copy of its elements (clipped, so that an
// append never writes into another pod's copy).
func shareSlice[T any, PT interface {
	*T
	marshaler
}](s *podSharer, kind string, p *[]T) {
	if len(*p) == 0 {
		return
	}
	// The key: the kind, then each element's encoding after its length.
	key := append(s.buf[:0], kind...)
	key = append(key, 0)
	for i := range *p {
		m := PT(&(*p)[i])
		n := m.Size()
		key = append(key, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		start := len(key)
		key = slices.Grow(key, n)[:start+n]
		if _, err := m.MarshalToSizedBuffer(key[start:]); err != nil {
			return
		}
	}
	s.buf = key
	*p = s.canonical(key, slices.Clip(*p)).([]T)
}

// shareStrings makes *p (command, args) the shared copy of its strings.
func (s *podSharer) shareStrings(kind string, p *[]string) {
	if len(*p) == 0 {
		return
	}
	key := append(s.buf[:0], kind...)
	key = append(key, 0)
	for _, v := range *p {
		n := len(v)
		key = append(key, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		key = append(key, v...)
	}
	s.buf = key
	*p = s.canonical(key, slices.Clip(*p)).([]string)
}

// shareMap makes *m (labels, a node selector) the shared copy of its
// entries.
func (s *podSharer) shareMap(kind string, m *map[string]string) {
	if len(*m) == 0 {
		return
	}
	keys := make([]string, 0, len(*m))
	for k := range *m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	key := append(s.buf[:0], kind...)
	key = append(key, 0)
	for _, k := range keys {
		v := (*m)[k]
		for _, x := range [2]string{k, v} {
			n := len(x)
			key = append(key, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
			key = append(key, x...)
		}
	}
	s.buf = key
	*m = s.canonical(key, *m).(map[string]string)
}

// shareResources makes r's maps the shared copies of their entries.
func (s *podSharer) shareResources(r *v1.ResourceRequirements) {
	for _, l := range []struct {
		kind string
		list *v1.ResourceList
	}{{"limits", &r.Limits}, {"requests", &r.Requests}} {
		if len(*l.list) == 0 {
			continue
		}
		keys := make([]string, 0, len(*l.list))
		for k := range *l.list {
			keys = append(keys, string(k))
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteString(l.kind)
		b.WriteByte(0)
		for _, k := range keys {
			q := (*l.list)[v1.ResourceName(k)]
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(q.String()) // the canonical form: equal quantities, equal strings
			b.WriteByte(0)
		}
		*l.list = s.canonical([]byte(b.String()), *l.list).(v1.ResourceList)
	}
	shareSlice(s, "claims", &r.Claims)
}

// share makes the parts of pod that pods commonly hold alike shared.
func (s *podSharer) share(pod *v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shareMap("labels", &pod.Labels)
	spec := &pod.Spec
	for i := range spec.Volumes {
		vs := &spec.Volumes[i].VolumeSource
		sharePtr(s, "projected", &vs.Projected)
		sharePtr(s, "configMap", &vs.ConfigMap)
		sharePtr(s, "secret", &vs.Secret)
		sharePtr(s, "emptyDir", &vs.EmptyDir)
		sharePtr(s, "hostPath", &vs.HostPath)
		sharePtr(s, "downwardAPI", &vs.DownwardAPI)
	}
	shareSlice(s, "tolerations", &spec.Tolerations)
	sharePtr(s, "podSecurityContext", &spec.SecurityContext)
	sharePtr(s, "affinity", &spec.Affinity)
	sharePtr(s, "dnsConfig", &spec.DNSConfig)
	s.shareMap("nodeSelector", &spec.NodeSelector)
	shareSlice(s, "imagePullSecrets", &spec.ImagePullSecrets)
	shareSlice(s, "topologySpreadConstraints", &spec.TopologySpreadConstraints)
	shareSlice(s, "readinessGates", &spec.ReadinessGates)
	for _, cs := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			c := &cs[i]
			s.shareStrings("command", &c.Command)
			s.shareStrings("args", &c.Args)
			shareSlice(s, "ports", &c.Ports)
			shareSlice(s, "env", &c.Env)
			shareSlice(s, "envFrom", &c.EnvFrom)
			s.shareResources(&c.Resources)
			sharePtr(s, "probe", &c.LivenessProbe)
			sharePtr(s, "probe", &c.ReadinessProbe)
			sharePtr(s, "probe", &c.StartupProbe)
			sharePtr(s, "lifecycle", &c.Lifecycle)
			sharePtr(s, "securityContext", &c.SecurityContext)
		}
	}
	// Pointers to the same few numbers and words in every pod.
	sharePtrValue(s, "int64", &spec.TerminationGracePeriodSeconds)
	sharePtrValue(s, "int32", &spec.Priority)
	sharePtrValue(s, "bool", &spec.EnableServiceLinks)
	sharePtrValue(s, "preemptionPolicy", &spec.PreemptionPolicy)
}

// sharePtrValue makes *p a shared pointer to its value (a number, a bool
// or a word: comparable scalars).
func sharePtrValue[T comparable](s *podSharer, kind string, p **T) {
	if *p == nil {
		return
	}
	k := ptrKey[T]{kind, **p}
	if got, ok := s.ptrs[k]; ok {
		*p = got.(*T)
		return
	}
	if len(s.ptrs) >= maxShared {
		clear(s.ptrs)
	}
	s.ptrs[k] = *p
}

// ptrKey is the key of a shared pointer's value.
type ptrKey[T comparable] struct {
	kind string
	v    T
}
