package node

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkEmpty fails unless g keeps nothing: every table follows the pods,
// so that interned strings and lists go with the last pod using them.
func checkEmpty(t *testing.T, g *Graph) {
	t.Helper()
	g.mu.RLock()
	defer g.mu.RUnlock()
	if len(g.pods) != 0 || len(g.edges) != 0 || g.strs.len() != 0 || g.lists.len() != 0 {
		t.Fatalf("graph without pods keeps %d pods, %d edges, %d strings, %d lists", len(g.pods), len(g.edges), g.strs.len(), g.lists.len())
	}
	for id, refs := range g.listRefs {
		if refs != nil {
			t.Fatalf("list %d of no pod kept: %v", id, refs)
		}
	}
}

func TestGraphMoveDropsOldEdges(t *testing.T) {
	g := NewGraph()
	g.Replace(nil)
	g.Upsert(pod("a", "node-1", "sa", "s1"))
	moved := pod("a", "node-2", "sa", "s2")
	g.Upsert(moved)
	for _, q := range []struct{ kind, name string }{{KindPod, "a"}, {KindServiceAccount, "sa"}, {KindSecret, "s1"}, {KindSecret, "s2"}} {
		if g.Related("node-1", q.kind, "ns", q.name) {
			t.Errorf("the old node still reaches %s %s", q.kind, q.name)
		}
	}
	for _, q := range []struct{ kind, name string }{{KindPod, "a"}, {KindServiceAccount, "sa"}, {KindSecret, "s2"}} {
		if !g.Related("node-2", q.kind, "ns", q.name) {
			t.Errorf("the new node does not reach %s %s", q.kind, q.name)
		}
	}
	if g.Related("node-2", KindSecret, "ns", "s1") {
		t.Error("the new node reaches the secret the pod no longer uses")
	}
	g.mu.RLock()
	n := len(g.edges)
	g.mu.RUnlock()
	if n != 2 {
		t.Errorf("%d edges, want 2 (node-2's sa and s2)", n)
	}
	// A move alone, the same objects used.
	g.Upsert(pod("b", "node-3", "sb"))
	g.Upsert(pod("b", "node-2", "sb")) // a node already known
	if g.Related("node-3", KindPod, "ns", "b") || g.Related("node-3", KindServiceAccount, "ns", "sb") ||
		!g.Related("node-2", KindPod, "ns", "b") || !g.Related("node-2", KindServiceAccount, "ns", "sb") {
		t.Error("a pod moved with the same objects kept its old node's edges")
	}
	g.Delete("ns", "a")
	g.Delete("ns", "b")
	checkEmpty(t, g)
}

// TestGraphInterningSurvivesDeletes: a string freed with its last pod
// leaves no answer behind when its id is reused, and strings still used
// stay.
func TestGraphInterningSurvivesDeletes(t *testing.T) {
	g := NewGraph()
	g.Replace([]*v1.Pod{pod("a", "node-1", "sa", "s1"), pod("b", "node-1", "sa")})
	g.Delete("ns", "a")
	if !g.Related("node-1", KindServiceAccount, "ns", "sa") || !g.Related("node-1", KindPod, "ns", "b") {
		t.Fatal("the remaining pod lost its edges")
	}
	if g.Related("node-1", KindSecret, "ns", "s1") {
		t.Fatal("the deleted pod's secret is still reached")
	}
	// Other strings take the freed ids.
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "c"}, Spec: v1.PodSpec{NodeName: "node-9", ServiceAccountName: "x",
		Volumes: []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "y"}}}}}}
	g.Upsert(other)
	if g.Related("node-1", KindSecret, "ns", "s1") || g.Related("node-1", KindSecret, "ns", "y") || g.Related("node-9", KindSecret, "ns", "y") {
		t.Fatal("a reused id answers for another object")
	}
	if !g.Related("node-9", KindSecret, "other", "y") || !g.Related("node-9", KindServiceAccount, "other", "x") || !g.Related("node-1", KindServiceAccount, "ns", "sa") {
		t.Fatal("lost edges")
	}
	g.Delete("ns", "b")
	g.Delete("other", "c")
	g.Delete("ns", "never")
	checkEmpty(t, g)
}

// TestGraphMatchesModel feeds random pod changes to the graph and to the
// plain model of its semantics (per node, the set of the objects its
// pods use, a bound pod using itself, a finished pod only itself) and
// compares every answer after each change.
func TestGraphMatchesModel(t *testing.T) {
	nodes := []string{"", "n1", "n2", "n3"}
	namespaces := []string{"ns1", "ns2"}
	names := []string{"a", "b", "c", "d"}
	objects := []string{"a", "x", "y", "z"} // "a" is also a pod's name
	kinds := []string{KindSecret, KindConfigMap, KindPersistentVolumeClaim, KindServiceAccount, KindPod, "persistentvolumes"}
	type key struct{ kind, ns, name string }
	type podState struct {
		node string
		uses map[key]bool
	}
	rng := rand.New(rand.NewSource(1))
	randomPod := func() (*v1.Pod, podState) {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespaces[rng.Intn(len(namespaces))], Name: names[rng.Intn(len(names))]}}
		p.Spec.NodeName = nodes[rng.Intn(len(nodes))]
		st := podState{node: p.Spec.NodeName, uses: map[key]bool{}}
		use := func(kind, name string) { st.uses[key{kind, p.Namespace, name}] = true }
		if rng.Intn(4) > 0 {
			p.Spec.ServiceAccountName = objects[rng.Intn(len(objects))]
			use(KindServiceAccount, p.Spec.ServiceAccountName)
		}
		for n := rng.Intn(4); n > 0; n-- {
			o := objects[rng.Intn(len(objects))]
			switch rng.Intn(5) {
			case 0:
				p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: o}}})
				use(KindSecret, o)
			case 1:
				p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
					Sources: []v1.VolumeProjection{{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: o}}}}}}})
				use(KindConfigMap, o)
			case 2:
				p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: o}}})
				use(KindPersistentVolumeClaim, o)
			case 3:
				p.Spec.Containers = append(p.Spec.Containers, v1.Container{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: o}}}}})
				use(KindSecret, o)
			case 4:
				p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: o})
				use(KindSecret, o)
			}
		}
		switch rng.Intn(6) {
		case 0:
			p.Status.Phase = v1.PodSucceeded
		case 1:
			p.Status.Phase = v1.PodFailed
		default:
			p.Status.Phase = v1.PodRunning
		}
		if p.Status.Phase != v1.PodRunning {
			st.uses = map[key]bool{}
		}
		st.uses[key{KindPod, p.Namespace, p.Name}] = true
		return p, st
	}
	model := map[string]podState{}
	g := NewGraph()
	check := func(step int) {
		t.Helper()
		for _, node := range nodes[1:] {
			for _, kind := range kinds {
				for _, ns := range namespaces {
					for _, name := range append(names, objects...) {
						want := false
						for _, st := range model {
							if st.node == node && st.uses[key{kind, ns, name}] {
								want = true
							}
						}
						if got := g.Related(node, kind, ns, name); got != want {
							t.Fatalf("step %d: Related(%s, %s, %s, %s) = %v, want %v", step, node, kind, ns, name, got, want)
						}
					}
				}
			}
		}
	}
	for step := 0; step < 3000; step++ {
		switch r := rng.Intn(20); {
		case r == 0:
			var pods []*v1.Pod
			model = map[string]podState{}
			for n := rng.Intn(6); n > 0; n-- {
				p, st := randomPod()
				pods = append(pods, p)
				model[p.Namespace+"/"+p.Name] = st // the last of a name wins, as in the graph
			}
			g.Replace(pods)
		case r < 7:
			ns, name := namespaces[rng.Intn(len(namespaces))], names[rng.Intn(len(names))]
			g.Delete(ns, name)
			delete(model, ns+"/"+name)
		default:
			p, st := randomPod()
			g.Upsert(p)
			if st.node == "" {
				delete(model, p.Namespace+"/"+p.Name)
			} else {
				model[p.Namespace+"/"+p.Name] = st
			}
		}
		check(step)
	}
	for k := range model {
		ns, name, _ := strings.Cut(k, "/")
		g.Delete(ns, name)
	}
	checkEmpty(t, g)
}

// TestPodRefsOnce: a pod's objects are listed once each, in the order
// first met, whatever references them.
func TestPodRefsOnce(t *testing.T) {
	p := pod("a", "n", "sa", "s", "s")
	p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "s"}, {Name: ""}}
	p.Spec.Containers = []v1.Container{{Env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sa"}}}}}}}
	got := fmt.Sprint(podRefs(nil, p))
	if want := fmt.Sprint([]objName{{kindServiceAccount, "sa"}, {kindSecret, "s"}, {kindSecret, "sa"}}); got != want {
		t.Errorf("podRefs %s, want %s", got, want)
	}
}
