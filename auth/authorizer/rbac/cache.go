package rbac

import (
	"strconv"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Cache holds the roles and bindings RBAC decides on, as kube's listers
// do: whoever feeds it (the server's watches) calls Replace once per kind
// with the current objects, then Upsert and Delete as they change. Reads
// take a read lock; objects are never changed once in the cache.
type Cache struct {
	mu           sync.RWMutex
	clusterRoles map[string]*rbacv1.ClusterRole
	roles        map[string]map[string]*rbacv1.Role // namespace, name
	crbs         map[string]*rbacv1.ClusterRoleBinding
	rbs          map[string]map[string]*rbacv1.RoleBinding // namespace, name
	// crbList is crbs as a slice, rebuilt on change: every decision walks
	// it, and a slice walks faster than a map.
	crbList []*rbacv1.ClusterRoleBinding
	rbList  map[string][]*rbacv1.RoleBinding
	synced  map[string]bool

	// onClusterRoleChange, when set, is called (outside the lock) after a
	// ClusterRole changes: the aggregation controller's trigger.
	onClusterRoleChange func()
}

// NewCache returns an empty Cache.
func NewCache() *Cache {
	return &Cache{
		clusterRoles: map[string]*rbacv1.ClusterRole{},
		roles:        map[string]map[string]*rbacv1.Role{},
		crbs:         map[string]*rbacv1.ClusterRoleBinding{},
		rbs:          map[string]map[string]*rbacv1.RoleBinding{},
		rbList:       map[string][]*rbacv1.RoleBinding{},
		synced:       map[string]bool{},
	}
}

// Kinds the cache holds, as Replace names them.
const (
	KindRole               = "Role"
	KindClusterRole        = "ClusterRole"
	KindRoleBinding        = "RoleBinding"
	KindClusterRoleBinding = "ClusterRoleBinding"
)

// OnClusterRoleChange sets f to be called after any ClusterRole changes.
func (c *Cache) OnClusterRoleChange(f func()) {
	c.mu.Lock()
	c.onClusterRoleChange = f
	c.mu.Unlock()
}

// Replace sets every object of kind to objs (a watch's initial state).
func (c *Cache) Replace(kind string, objs []runtime.Object) {
	c.mu.Lock()
	switch kind {
	case KindClusterRole:
		c.clusterRoles = map[string]*rbacv1.ClusterRole{}
	case KindRole:
		c.roles = map[string]map[string]*rbacv1.Role{}
	case KindClusterRoleBinding:
		c.crbs = map[string]*rbacv1.ClusterRoleBinding{}
	case KindRoleBinding:
		c.rbs = map[string]map[string]*rbacv1.RoleBinding{}
	}
	for _, o := range objs {
		c.putLocked(o)
	}
	c.synced[kind] = true
	c.rebuildLocked(kind, "")
	f := c.notifyLocked(kind)
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

// Synced reports whether every kind has had its initial state.
func (c *Cache) Synced() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.synced[KindRole] && c.synced[KindClusterRole] && c.synced[KindRoleBinding] && c.synced[KindClusterRoleBinding]
}

// Upsert adds or replaces obj.
func (c *Cache) Upsert(obj runtime.Object) {
	c.mu.Lock()
	kind, ns := c.putLocked(obj)
	c.rebuildLocked(kind, ns)
	f := c.notifyLocked(kind)
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

// Delete removes obj.
func (c *Cache) Delete(obj runtime.Object) {
	c.mu.Lock()
	var kind, ns string
	switch o := obj.(type) {
	case *rbacv1.ClusterRole:
		kind = KindClusterRole
		delete(c.clusterRoles, o.Name)
	case *rbacv1.Role:
		kind, ns = KindRole, o.Namespace
		delete(c.roles[o.Namespace], o.Name)
	case *rbacv1.ClusterRoleBinding:
		kind = KindClusterRoleBinding
		delete(c.crbs, o.Name)
	case *rbacv1.RoleBinding:
		kind, ns = KindRoleBinding, o.Namespace
		delete(c.rbs[o.Namespace], o.Name)
	}
	c.rebuildLocked(kind, ns)
	f := c.notifyLocked(kind)
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

func (c *Cache) putLocked(obj runtime.Object) (kind, namespace string) {
	switch o := obj.(type) {
	case *rbacv1.ClusterRole:
		c.clusterRoles[o.Name] = o
		return KindClusterRole, ""
	case *rbacv1.Role:
		m := c.roles[o.Namespace]
		if m == nil {
			m = map[string]*rbacv1.Role{}
			c.roles[o.Namespace] = m
		}
		m[o.Name] = o
		return KindRole, o.Namespace
	case *rbacv1.ClusterRoleBinding:
		c.crbs[o.Name] = o
		return KindClusterRoleBinding, ""
	case *rbacv1.RoleBinding:
		m := c.rbs[o.Namespace]
		if m == nil {
			m = map[string]*rbacv1.RoleBinding{}
			c.rbs[o.Namespace] = m
		}
		m[o.Name] = o
		return KindRoleBinding, o.Namespace
	}
	return "", ""
}

// rebuildLocked refreshes the slices decisions walk: all
// ClusterRoleBindings, or the RoleBindings of one namespace ("" all).
func (c *Cache) rebuildLocked(kind, namespace string) {
	switch kind {
	case KindClusterRoleBinding:
		c.crbList = make([]*rbacv1.ClusterRoleBinding, 0, len(c.crbs))
		for _, b := range c.crbs {
			c.crbList = append(c.crbList, b)
		}
	case KindRoleBinding:
		rebuild := func(ns string) {
			m := c.rbs[ns]
			if len(m) == 0 {
				delete(c.rbList, ns)
				delete(c.rbs, ns)
				return
			}
			l := make([]*rbacv1.RoleBinding, 0, len(m))
			for _, b := range m {
				l = append(l, b)
			}
			c.rbList[ns] = l
		}
		if namespace != "" {
			rebuild(namespace)
			return
		}
		c.rbList = map[string][]*rbacv1.RoleBinding{}
		for ns := range c.rbs {
			rebuild(ns)
		}
	}
}

func (c *Cache) notifyLocked(kind string) func() {
	if kind == KindClusterRole {
		return c.onClusterRoleChange
	}
	return nil
}

// ClusterRole returns the named ClusterRole (shared: do not change it).
func (c *Cache) ClusterRole(name string) (*rbacv1.ClusterRole, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	r, ok := c.clusterRoles[name]
	return r, ok
}

// ClusterRoles returns every ClusterRole (shared).
func (c *Cache) ClusterRoles() []*rbacv1.ClusterRole {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*rbacv1.ClusterRole, 0, len(c.clusterRoles))
	for _, r := range c.clusterRoles {
		out = append(out, r)
	}
	return out
}

// HasVersion reports whether the cache holds the cluster-scoped object of
// kind (ClusterRole or ClusterRoleBinding) named name at resourceVersion
// rv or later: whether a write has reached it.
func (c *Cache) HasVersion(kind, name, rv string) bool {
	want, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	var have string
	switch kind {
	case KindClusterRole:
		r, ok := c.clusterRoles[name]
		if !ok {
			return false
		}
		have = r.ResourceVersion
	case KindClusterRoleBinding:
		b, ok := c.crbs[name]
		if !ok {
			return false
		}
		have = b.ResourceVersion
	default:
		return false
	}
	got, err := strconv.ParseInt(have, 10, 64)
	return err == nil && got >= want
}
