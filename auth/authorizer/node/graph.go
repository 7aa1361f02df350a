package node

import (
	"encoding/json"
	"fmt"
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

type ref struct{ kind, namespace, name string }

// Graph ties each node to the objects its bound pods use (ServiceAccount,
// Secrets, ConfigMaps, PersistentVolumeClaims), as kube's node authorizer
// graph does for the edges pod -> object -> node. It is fed every pod
// change (Upsert, Delete, Replace) from a watch, and keeps per node a
// count of the pods that use each object, so that a question is one map
// lookup and a pod leaving or moving drops exactly its edges.
type Graph struct {
	mu sync.RWMutex
	// pods is what each pod (namespace/name) contributes: its node and
	// the objects it references.
	pods map[string]podEdges
	// refs counts, per node, the pods of that node that use each object.
	refs   map[string]map[ref]int
	synced bool
}

type podEdges struct {
	node string
	refs []ref
}

// NewGraph returns an empty graph, not yet synced.
func NewGraph() *Graph {
	return &Graph{pods: map[string]podEdges{}, refs: map[string]map[ref]int{}}
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
	g.pods = map[string]podEdges{}
	g.refs = map[string]map[ref]int{}
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
	g.removeLocked(p.Namespace + "/" + p.Name)
	g.putLocked(p)
}

// Delete forgets a pod.
func (g *Graph) Delete(namespace, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removeLocked(namespace + "/" + name)
}

func (g *Graph) removeLocked(key string) {
	e, ok := g.pods[key]
	if !ok {
		return
	}
	delete(g.pods, key)
	m := g.refs[e.node]
	for _, r := range e.refs {
		if m[r]--; m[r] <= 0 {
			delete(m, r)
		}
	}
	if len(m) == 0 {
		delete(g.refs, e.node)
	}
}

func (g *Graph) putLocked(p *v1.Pod) {
	if p.Spec.NodeName == "" {
		return
	}
	var refs []ref
	if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		// A finished pod stays bound to its node until deleted: its
		// kubelet still reads it to finish its status (kube's pod ->
		// node edge stays), but its objects are no longer needed.
		refs = []ref{{KindPod, p.Namespace, p.Name}}
	} else {
		refs = podRefs(p)
	}
	g.pods[p.Namespace+"/"+p.Name] = podEdges{node: p.Spec.NodeName, refs: refs}
	m := g.refs[p.Spec.NodeName]
	if m == nil {
		m = map[ref]int{}
		g.refs[p.Spec.NodeName] = m
	}
	for _, r := range refs {
		m[r]++
	}
}

// podRefs lists, once each, the pod itself and the objects it references.
func podRefs(p *v1.Pod) []ref {
	seen := map[ref]bool{}
	var out []ref
	add := func(kind, name string) {
		if name == "" {
			return
		}
		r := ref{kind, p.Namespace, name}
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	add(KindPod, p.Name)
	add(KindServiceAccount, p.Spec.ServiceAccountName)
	for _, s := range p.Spec.ImagePullSecrets {
		add(KindSecret, s.Name)
	}
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		switch {
		case v.Secret != nil:
			add(KindSecret, v.Secret.SecretName)
		case v.ConfigMap != nil:
			add(KindConfigMap, v.ConfigMap.Name)
		case v.PersistentVolumeClaim != nil:
			add(KindPersistentVolumeClaim, v.PersistentVolumeClaim.ClaimName)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					add(KindSecret, src.Secret.Name)
				}
				if src.ConfigMap != nil {
					add(KindConfigMap, src.ConfigMap.Name)
				}
			}
		case v.Ephemeral != nil:
			// An ephemeral volume's claim is named after the pod and the volume.
			add(KindPersistentVolumeClaim, p.Name+"-"+v.Name)
		}
	}
	visit := func(cs []v1.Container) {
		for i := range cs {
			for _, e := range cs[i].EnvFrom {
				if e.SecretRef != nil {
					add(KindSecret, e.SecretRef.Name)
				}
				if e.ConfigMapRef != nil {
					add(KindConfigMap, e.ConfigMapRef.Name)
				}
			}
			for _, e := range cs[i].Env {
				if e.ValueFrom == nil {
					continue
				}
				if e.ValueFrom.SecretKeyRef != nil {
					add(KindSecret, e.ValueFrom.SecretKeyRef.Name)
				}
				if e.ValueFrom.ConfigMapKeyRef != nil {
					add(KindConfigMap, e.ValueFrom.ConfigMapKeyRef.Name)
				}
			}
		}
	}
	visit(p.Spec.InitContainers)
	visit(p.Spec.Containers)
	for i := range p.Spec.EphemeralContainers {
		c := v1.Container{Env: p.Spec.EphemeralContainers[i].Env, EnvFrom: p.Spec.EphemeralContainers[i].EnvFrom}
		visit([]v1.Container{c})
	}
	return out
}

// Related reports whether a pod bound to node uses the object kind
// namespace/name (for KindPod: whether the pod is bound to node).
func (g *Graph) Related(node, kind, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.refs[node][ref{kind, namespace, name}] > 0
}

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
