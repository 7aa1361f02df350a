package node

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Kinds of the objects the graph ties to nodes.
const (
	KindSecret                = "secrets"
	KindConfigMap             = "configmaps"
	KindPersistentVolumeClaim = "persistentvolumeclaims"
	KindServiceAccount        = "serviceaccounts"
	KindPod                   = "pods"
)

// kind is a Kind the graph ties to nodes, in one byte rather than a
// string in every edge; KindPod is not one: a pod's own edge is its entry.
type kind uint8

const (
	kindNone kind = iota
	kindSecret
	kindConfigMap
	kindPersistentVolumeClaim
	kindServiceAccount
)

func kindOf(s string) kind {
	switch s {
	case KindSecret:
		return kindSecret
	case KindConfigMap:
		return kindConfigMap
	case KindPersistentVolumeClaim:
		return kindPersistentVolumeClaim
	case KindServiceAccount:
		return kindServiceAccount
	}
	return kindNone
}

// Graph ties each node to the objects its bound pods use (ServiceAccount,
// Secrets, ConfigMaps, PersistentVolumeClaims), as kube's node authorizer
// graph does for the edges pod -> object -> node. It is fed every pod
// change (Upsert, Delete, Replace) from a watch, and keeps per node a
// count of the pods that use each object, so that a question is a few map
// lookups and a pod leaving or moving drops exactly its edges.
//
// It holds every pod of the cluster (150,000 at kube's scale envelope),
// so a pod costs as little as it can: the strings that repeat across pods
// (namespaces, node names, the names of the objects they use) are kept
// once, as 4-byte ids of a reference-counted table; the objects a pod
// uses are kept as a shared list (the pods of one workload, and most
// pods of a cluster — a ServiceAccount and kube-root-ca.crt — use the
// same), and a pod's own edge is its entry rather than a count.
type Graph struct {
	mu sync.RWMutex
	// strs holds the namespaces and node names of the pods and the names
	// of the objects of the lists.
	strs *interner
	// lists holds the lists of objects (kind and name, in the pod's
	// namespace) the pods use; id 0 is the empty list (an unused id).
	lists *interner
	// listRefs is each list of lists, by id.
	listRefs [][]objRef
	// pods is each bound pod's node and list, by podKey.
	pods map[string]podEntry
	// edges counts, per node and object, the pods of that node using it.
	edges  map[edge]int32
	synced bool

	// Scratch space of putLocked, under mu.
	names   []objName
	listKey []byte
	podKey  []byte
}

// appendPodKey appends to b the key in pods of the pod namespace/name:
// the namespace's id (4 bytes) and the name, one string rather than a
// struct so that the map hashes it as a string.
func appendPodKey(b []byte, namespace uint32, name string) []byte {
	return append(binary.LittleEndian.AppendUint32(b, namespace), name...)
}

// podKeyNamespace is the namespace id of a key of appendPodKey.
func podKeyNamespace(key string) uint32 {
	return uint32(key[0]) | uint32(key[1])<<8 | uint32(key[2])<<16 | uint32(key[3])<<24
}

type podEntry struct {
	node uint32 // in strs
	list uint32 // in lists; 0 if the pod uses no object
}

// objRef is an object of a list, its name in strs.
type objRef struct {
	kind kind
	name uint32
}

// edge is an object (kind namespace/name) used by a pod of node; its
// kind is 4 bytes wide so that the struct has no padding and the map
// hashes it as plain memory.
type edge struct {
	node, namespace, name uint32
	kind                  uint32
}

// objName is an object a pod uses, in the pod's namespace.
type objName struct {
	kind kind
	name string
}

// NewGraph returns an empty graph, not yet synced.
func NewGraph() *Graph {
	g := &Graph{}
	g.reset(0)
	return g
}

func (g *Graph) reset(pods int) {
	g.strs, g.lists, g.listRefs = newInterner(), newInterner(), [][]objRef{nil}
	g.pods, g.edges = make(map[string]podEntry, pods), map[edge]int32{}
}

// Synced reports whether the graph has had its first Replace.
func (g *Graph) Synced() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.synced
}

// Replace sets the graph to the given pods (a watch's initial state).
func (g *Graph) Replace(pods []*v1.Pod) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reset(len(pods))
	for _, p := range pods {
		g.putLocked(p)
	}
	g.synced = true
}

// Upsert records a pod as it is now: a pod bound to no node has no edges,
// a finished one only to its node (its objects are no longer needed).
func (g *Graph) Upsert(p *v1.Pod) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.putLocked(p)
}

// Delete forgets a pod.
func (g *Graph) Delete(namespace, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ns, ok := g.strs.lookup(namespace)
	if !ok {
		return
	}
	var buf [64]byte
	key := appendPodKey(buf[:0], ns, name)
	if e, ok := g.pods[string(key)]; ok {
		g.dropLocked(string(key), e)
	}
}

func (g *Graph) putLocked(p *v1.Pod) {
	var old podEntry
	found := false
	if ns, ok := g.strs.lookup(p.Namespace); ok {
		g.podKey = appendPodKey(g.podKey[:0], ns, p.Name)
		old, found = g.pods[string(g.podKey)]
	}
	if p.Spec.NodeName == "" {
		if found {
			g.dropLocked(string(g.podKey), old)
		}
		return
	}
	var list uint32
	if p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
		// A finished pod stays bound to its node until deleted: its
		// kubelet still reads it to finish its status (kube's pod ->
		// node edge stays), but its objects are no longer needed.
		list = g.acquireListLocked(p)
	}
	if found {
		if node, ok := g.strs.lookup(p.Spec.NodeName); ok && node == old.node && list == old.list {
			// Unchanged edges, as for most pod writes (status updates).
			g.releaseListLocked(list)
			return
		}
	}
	// The new edges are taken before the old ones are dropped, so that
	// what both share stays in the tables.
	e := podEntry{node: g.strs.acquire(p.Spec.NodeName), list: list}
	ns := g.strs.acquire(p.Namespace)
	g.addEdgesLocked(e, ns, 1)
	if found {
		g.dropLocked(string(g.podKey), old)
	}
	g.podKey = appendPodKey(g.podKey[:0], ns, p.Name)
	g.pods[string(g.podKey)] = e
}

// dropLocked removes the pod of key and its edges.
func (g *Graph) dropLocked(key string, e podEntry) {
	ns := podKeyNamespace(key)
	delete(g.pods, key)
	g.addEdgesLocked(e, ns, -1)
	g.releaseListLocked(e.list)
	g.strs.release(e.node)
	g.strs.release(ns)
}

// addEdgesLocked adds delta to the count of each object of e's list on
// e's node.
func (g *Graph) addEdgesLocked(e podEntry, namespace uint32, delta int32) {
	for _, r := range g.listRefs[e.list] {
		k := edge{node: e.node, namespace: namespace, name: r.name, kind: uint32(r.kind)}
		if n := g.edges[k] + delta; n > 0 {
			g.edges[k] = n
		} else {
			delete(g.edges, k)
		}
	}
}

// acquireListLocked returns the id of the list of the objects p uses,
// with one more reference, or 0 if it uses none.
func (g *Graph) acquireListLocked(p *v1.Pod) uint32 {
	g.names = podRefs(g.names[:0], p)
	if len(g.names) == 0 {
		return 0
	}
	key := g.listKey[:0]
	for _, o := range g.names {
		key = append(key, byte(o.kind))
		key = binary.AppendUvarint(key, uint64(len(o.name)))
		key = append(key, o.name...)
	}
	g.listKey = key
	// The scratch list holds the caller's strings: not past this call.
	defer clear(g.names)
	if id, ok := g.lists.lookupBytes(key); ok {
		g.lists.hold(id)
		return id
	}
	id := g.lists.acquire(string(key))
	refs := make([]objRef, len(g.names))
	for i, o := range g.names {
		refs[i] = objRef{kind: o.kind, name: g.strs.acquire(o.name)}
	}
	for int(id) >= len(g.listRefs) {
		g.listRefs = append(g.listRefs, nil)
	}
	g.listRefs[id] = refs
	return id
}

func (g *Graph) releaseListLocked(id uint32) {
	if id == 0 || !g.lists.release(id) {
		return
	}
	for _, r := range g.listRefs[id] {
		g.strs.release(r.name)
	}
	g.listRefs[id] = nil
}

// podRefs appends to dst, once each, the objects p references.
func podRefs(dst []objName, p *v1.Pod) []objName {
	add := func(k kind, name string) {
		if name == "" {
			return
		}
		// A pod uses a handful of objects: a scan is cheaper than a set.
		for _, o := range dst {
			if o.kind == k && o.name == name {
				return
			}
		}
		dst = append(dst, objName{k, name})
	}
	add(kindServiceAccount, p.Spec.ServiceAccountName)
	for _, s := range p.Spec.ImagePullSecrets {
		add(kindSecret, s.Name)
	}
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		switch {
		case v.Secret != nil:
			add(kindSecret, v.Secret.SecretName)
		case v.ConfigMap != nil:
			add(kindConfigMap, v.ConfigMap.Name)
		case v.PersistentVolumeClaim != nil:
			add(kindPersistentVolumeClaim, v.PersistentVolumeClaim.ClaimName)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					add(kindSecret, src.Secret.Name)
				}
				if src.ConfigMap != nil {
					add(kindConfigMap, src.ConfigMap.Name)
				}
			}
		case v.Ephemeral != nil:
			// An ephemeral volume's claim is named after the pod and the volume.
			add(kindPersistentVolumeClaim, p.Name+"-"+v.Name)
		}
	}
	env := func(env []v1.EnvVar, envFrom []v1.EnvFromSource) {
		for _, e := range envFrom {
			if e.SecretRef != nil {
				add(kindSecret, e.SecretRef.Name)
			}
			if e.ConfigMapRef != nil {
				add(kindConfigMap, e.ConfigMapRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom == nil {
				continue
			}
			if e.ValueFrom.SecretKeyRef != nil {
				add(kindSecret, e.ValueFrom.SecretKeyRef.Name)
			}
			if e.ValueFrom.ConfigMapKeyRef != nil {
				add(kindConfigMap, e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	}
	for i := range p.Spec.InitContainers {
		env(p.Spec.InitContainers[i].Env, p.Spec.InitContainers[i].EnvFrom)
	}
	for i := range p.Spec.Containers {
		env(p.Spec.Containers[i].Env, p.Spec.Containers[i].EnvFrom)
	}
	for i := range p.Spec.EphemeralContainers {
		env(p.Spec.EphemeralContainers[i].Env, p.Spec.EphemeralContainers[i].EnvFrom)
	}
	return dst
}

// Related reports whether a pod bound to node uses the object kind
// namespace/name (for KindPod: whether the pod is bound to node).
func (g *Graph) Related(node, kindName, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	ns, ok := g.strs.lookup(namespace)
	if !ok {
		return false
	}
	if kindName == KindPod {
		var buf [64]byte
		e, ok := g.pods[string(appendPodKey(buf[:0], ns, name))]
		return ok && g.strs.vals[e.node] == node
	}
	k := kindOf(kindName)
	if k == kindNone {
		return false
	}
	n, ok := g.strs.lookup(node)
	if !ok {
		return false
	}
	id, ok := g.strs.lookup(name)
	return ok && g.edges[edge{node: n, namespace: ns, name: id, kind: uint32(k)}] > 0
}

// interner keeps each of a set of strings once, with an id (from 1) and
// a count of its users: a string goes when its last user does, so that
// the table follows the pods rather than grow with every name ever seen.
type interner struct {
	ids    map[string]uint32
	vals   []string // by id; vals[0] is unused
	counts []int32  // by id
	free   []uint32 // ids of gone strings, reused first
}

func newInterner() *interner {
	return &interner{ids: map[string]uint32{}, vals: []string{""}, counts: []int32{0}}
}

// lookup returns the id of s without taking a reference.
func (t *interner) lookup(s string) (uint32, bool) {
	id, ok := t.ids[s]
	return id, ok
}

// lookupBytes is lookup of string(b), without copying b.
func (t *interner) lookupBytes(b []byte) (uint32, bool) {
	id, ok := t.ids[string(b)]
	return id, ok
}

// hold takes one more reference to id.
func (t *interner) hold(id uint32) { t.counts[id]++ }

// acquire returns the id of s, with one more reference.
func (t *interner) acquire(s string) uint32 {
	if id, ok := t.ids[s]; ok {
		t.counts[id]++
		return id
	}
	// Not the caller's string, which may share memory with more.
	s = strings.Clone(s)
	var id uint32
	if n := len(t.free); n > 0 {
		id, t.free = t.free[n-1], t.free[:n-1]
		t.vals[id], t.counts[id] = s, 1
	} else {
		id = uint32(len(t.vals))
		t.vals, t.counts = append(t.vals, s), append(t.counts, 1)
	}
	t.ids[s] = id
	return id
}

// release drops a reference to id, and reports whether it was the last.
func (t *interner) release(id uint32) bool {
	if t.counts[id]--; t.counts[id] > 0 {
		return false
	}
	delete(t.ids, t.vals[id])
	t.vals[id] = ""
	t.free = append(t.free, id)
	return true
}

// len is the number of strings kept.
func (t *interner) len() int { return len(t.ids) }

// graphPod is the part of a pod the graph reads.
type graphPod struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		NodeName            string                    `json:"nodeName"`
		ServiceAccountName  string                    `json:"serviceAccountName"`
		ImagePullSecrets    []v1.LocalObjectReference `json:"imagePullSecrets"`
		Volumes             []v1.Volume               `json:"volumes"`
		InitContainers      []graphContainer          `json:"initContainers"`
		Containers          []graphContainer          `json:"containers"`
		EphemeralContainers []graphContainer          `json:"ephemeralContainers"`
	} `json:"spec"`
	Status struct {
		Phase v1.PodPhase `json:"phase"`
	} `json:"status"`
}

type graphContainer struct {
	Env     []v1.EnvVar        `json:"env"`
	EnvFrom []v1.EnvFromSource `json:"envFrom"`
}

// DecodePod decodes, of a pod's JSON, what the graph reads (Upsert):
// every pod write is fed to the graph, and most of a pod (container
// images, resources, probes, its status, managedFields) is not.
func DecodePod(data []byte) (*v1.Pod, error) {
	var g graphPod
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, fmt.Errorf("decode a pod for the node graph: %w", err)
	}
	p := &v1.Pod{}
	p.Name, p.Namespace = g.Metadata.Name, g.Metadata.Namespace
	p.Spec.NodeName, p.Spec.ServiceAccountName = g.Spec.NodeName, g.Spec.ServiceAccountName
	p.Spec.ImagePullSecrets, p.Spec.Volumes = g.Spec.ImagePullSecrets, g.Spec.Volumes
	containers := func(cs []graphContainer) []v1.Container {
		if cs == nil {
			return nil
		}
		out := make([]v1.Container, len(cs))
		for i, c := range cs {
			out[i].Env, out[i].EnvFrom = c.Env, c.EnvFrom
		}
		return out
	}
	p.Spec.InitContainers, p.Spec.Containers = containers(g.Spec.InitContainers), containers(g.Spec.Containers)
	for _, c := range g.Spec.EphemeralContainers {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Env: c.Env, EnvFrom: c.EnvFrom}})
	}
	p.Status.Phase = g.Status.Phase
	return p, nil
}
