package flowcontrol

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"github.com/corekube/corekube/auth/user"
	"github.com/corekube/corekube/handlers"
)

// distinguisher says how a schema splits its requests into flows.
type distinguisher uint8

const (
	byNothing distinguisher = iota
	byUser
	byNamespace
)

// schema is a FlowSchema compiled for matching: rules as flat lists.
type schema struct {
	name       string
	uid        string
	precedence int32
	level      *level
	dist       distinguisher
	rules      []rule
}

type rule struct {
	subjects    []subject
	resources   []resourceRule
	nonResource []nonResourceRule
}

// subject matches a user: kind and name as in the FlowSchema; for a
// ServiceAccount, name is its whole user name
// (system:serviceaccount:NS:NAME) or, for "*", its namespace's prefix.
type subject struct {
	kind   flowcontrolv1.SubjectKind
	name   string
	prefix bool
}

type resourceRule struct {
	verbs, groups, resources, namespaces []string
	clusterScope                         bool
}

type nonResourceRule struct {
	verbs, urls []string
}

// compileSchema compiles fs for a level (nil: the schema is dangling and
// never matches).
func compileSchema(fs *flowcontrolv1.FlowSchema, lvl *level) *schema {
	s := &schema{name: fs.Name, uid: string(fs.UID), precedence: fs.Spec.MatchingPrecedence, level: lvl}
	if dm := fs.Spec.DistinguisherMethod; dm != nil {
		switch dm.Type {
		case flowcontrolv1.FlowDistinguisherMethodByUserType:
			s.dist = byUser
		case flowcontrolv1.FlowDistinguisherMethodByNamespaceType:
			s.dist = byNamespace
		}
	}
	for _, r := range fs.Spec.Rules {
		var cr rule
		for _, sub := range r.Subjects {
			switch {
			case sub.Kind == flowcontrolv1.SubjectKindUser && sub.User != nil:
				cr.subjects = append(cr.subjects, subject{kind: sub.Kind, name: sub.User.Name})
			case sub.Kind == flowcontrolv1.SubjectKindGroup && sub.Group != nil:
				cr.subjects = append(cr.subjects, subject{kind: sub.Kind, name: sub.Group.Name})
			case sub.Kind == flowcontrolv1.SubjectKindServiceAccount && sub.ServiceAccount != nil:
				sa := sub.ServiceAccount
				if sa.Name == flowcontrolv1.NameAll {
					cr.subjects = append(cr.subjects, subject{kind: sub.Kind, name: user.ServiceAccountUsernamePrefix + sa.Namespace + ":", prefix: true})
				} else {
					cr.subjects = append(cr.subjects, subject{kind: sub.Kind, name: user.ServiceAccountUsernamePrefix + sa.Namespace + ":" + sa.Name})
				}
			}
		}
		for _, rr := range r.ResourceRules {
			cr.resources = append(cr.resources, resourceRule{verbs: rr.Verbs, groups: rr.APIGroups, resources: rr.Resources, namespaces: rr.Namespaces, clusterScope: rr.ClusterScope})
		}
		for _, nr := range r.NonResourceRules {
			cr.nonResource = append(cr.nonResource, nonResourceRule{verbs: nr.Verbs, urls: nr.NonResourceURLs})
		}
		s.rules = append(s.rules, cr)
	}
	return s
}

// sortSchemas orders schemas as kube matches them: by matchingPrecedence,
// then by name.
func sortSchemas(schemas []*schema) {
	slices.SortFunc(schemas, func(a, b *schema) int {
		if c := cmp.Compare(a.precedence, b.precedence); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
}

// matches is kube's matchesFlowSchema: some rule matches both the user and
// what the request asks for.
func (s *schema) matches(u *user.Info, ri *handlers.RequestInfo) bool {
	for i := range s.rules {
		r := &s.rules[i]
		if r.matchesUser(u) && r.matchesRequest(ri) {
			return true
		}
	}
	return false
}

func (r *rule) matchesUser(u *user.Info) bool {
	for _, s := range r.subjects {
		switch s.kind {
		case flowcontrolv1.SubjectKindUser:
			if s.name == flowcontrolv1.NameAll || s.name == u.Name {
				return true
			}
		case flowcontrolv1.SubjectKindGroup:
			if s.name == flowcontrolv1.NameAll {
				return true
			}
			for _, g := range u.Groups {
				if g == s.name {
					return true
				}
			}
		case flowcontrolv1.SubjectKindServiceAccount:
			if s.prefix {
				// A name after the namespace, without another colon.
				if rest, ok := strings.CutPrefix(u.Name, s.name); ok && rest != "" && !strings.Contains(rest, ":") {
					return true
				}
			} else if u.Name == s.name {
				return true
			}
		}
	}
	return false
}

func (r *rule) matchesRequest(ri *handlers.RequestInfo) bool {
	if ri.IsResourceRequest {
		for i := range r.resources {
			if r.resources[i].matches(ri) {
				return true
			}
		}
		return false
	}
	for i := range r.nonResource {
		if r.nonResource[i].matches(ri) {
			return true
		}
	}
	return false
}

func hasOrAll(list []string, v string) bool {
	for _, x := range list {
		if x == v || x == "*" {
			return true
		}
	}
	return false
}

// matches is kube's matchesResourcePolicyRule: a subresource is matched as
// "resource/subresource"; a request without a namespace only by a
// cluster-scoped rule.
func (rr *resourceRule) matches(ri *handlers.RequestInfo) bool {
	if !hasOrAll(rr.verbs, ri.Verb) || !hasOrAll(rr.groups, ri.APIGroup) {
		return false
	}
	resourceOK := false
	for _, res := range rr.resources {
		if res == "*" || (ri.Subresource == "" && res == ri.Resource) ||
			(ri.Subresource != "" && len(res) == len(ri.Resource)+1+len(ri.Subresource) &&
				strings.HasPrefix(res, ri.Resource) && res[len(ri.Resource)] == '/' && strings.HasSuffix(res, ri.Subresource)) {
			resourceOK = true
			break
		}
	}
	if !resourceOK {
		return false
	}
	if ri.Namespace == "" {
		return rr.clusterScope
	}
	return hasOrAll(rr.namespaces, ri.Namespace)
}

// matches is kube's matchesNonResourcePolicyRule: "/x/*" matches by prefix.
func (nr *nonResourceRule) matches(ri *handlers.RequestInfo) bool {
	if !hasOrAll(nr.verbs, ri.Verb) {
		return false
	}
	for _, u := range nr.urls {
		if u == "*" || u == ri.Path || (strings.HasSuffix(u, "*") && strings.HasPrefix(ri.Path, strings.TrimRight(u, "*"))) {
			return true
		}
	}
	return false
}

// flowHash is the hash of a flow, kube's hashFlowID: the schema's name
// and the distinguisher's value.
func flowHash(schemaName, distinguisher string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(schemaName))
	_, _ = h.Write([]byte{1})
	_, _ = h.Write([]byte(distinguisher))
	return h.Sum64()
}

// flowOf returns the request's flow within s.
func (s *schema) flowOf(u *user.Info, ri *handlers.RequestInfo) uint64 {
	switch s.dist {
	case byUser:
		return flowHash(s.name, u.Name)
	case byNamespace:
		return flowHash(s.name, ri.Namespace)
	}
	return flowHash(s.name, "")
}
