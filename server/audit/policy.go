// Package audit records what the API server was asked and what it
// answered, as kube-apiserver's auditing: an audit.k8s.io/v1 Policy picks
// a level per request (None, Metadata, Request, RequestResponse), the
// filter builds audit.k8s.io/v1 Events at each stage (RequestReceived,
// ResponseStarted, ResponseComplete, Panic) and a backend writes them as
// JSON lines without ever holding a request up for long: events go through
// a bounded buffer and are dropped, and counted, when it is full.
package audit

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Level is how much of a request an event records.
type Level string

// The levels, in increasing order of detail.
const (
	LevelNone            Level = "None"
	LevelMetadata        Level = "Metadata"
	LevelRequest         Level = "Request"
	LevelRequestResponse Level = "RequestResponse"
)

var levelOrder = map[Level]int{LevelNone: 0, LevelMetadata: 1, LevelRequest: 2, LevelRequestResponse: 3}

// Less reports whether l records less than o.
func (l Level) Less(o Level) bool { return levelOrder[l] < levelOrder[o] }

// Stage is the point of a request's life an event is written at.
type Stage string

// The stages.
const (
	StageRequestReceived  Stage = "RequestReceived"
	StageResponseStarted  Stage = "ResponseStarted"
	StageResponseComplete Stage = "ResponseComplete"
	StagePanic            Stage = "Panic"
)

var validStages = []Stage{StageRequestReceived, StageResponseStarted, StageResponseComplete, StagePanic}

// Policy is an audit.k8s.io/v1 Policy: the first rule that matches a
// request decides its level; a request no rule matches is not audited.
type Policy struct {
	APIVersion        string       `json:"apiVersion"`
	Kind              string       `json:"kind"`
	Rules             []PolicyRule `json:"rules"`
	OmitStages        []Stage      `json:"omitStages,omitempty"`
	OmitManagedFields bool         `json:"omitManagedFields,omitempty"`
}

// PolicyRule matches requests by user, group, verb, resource, namespace or
// non-resource URL; an empty list matches everything.
type PolicyRule struct {
	Level             Level            `json:"level"`
	Users             []string         `json:"users,omitempty"`
	UserGroups        []string         `json:"userGroups,omitempty"`
	Verbs             []string         `json:"verbs,omitempty"`
	Resources         []GroupResources `json:"resources,omitempty"`
	Namespaces        []string         `json:"namespaces,omitempty"`
	NonResourceURLs   []string         `json:"nonResourceURLs,omitempty"`
	OmitStages        []Stage          `json:"omitStages,omitempty"`
	OmitManagedFields *bool            `json:"omitManagedFields,omitempty"`
}

// GroupResources selects resources of one API group ("" is core), by
// name ("pods", "pods/log", "*/status", "pods/*", "*") and optionally by
// object name.
type GroupResources struct {
	Group         string   `json:"group"`
	Resources     []string `json:"resources,omitempty"`
	ResourceNames []string `json:"resourceNames,omitempty"`
}

// LoadPolicy reads and validates a policy file (YAML or JSON), as
// --audit-policy-file.
func LoadPolicy(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit policy: %w", err)
	}
	var p Policy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("audit policy %s: %w", path, err)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("audit policy %s: %w", path, err)
	}
	return &p, nil
}

func (p *Policy) validate() error {
	if p.Kind != "Policy" || (p.APIVersion != "audit.k8s.io/v1" && p.APIVersion != "audit.k8s.io/v1beta1") {
		return fmt.Errorf("want kind Policy of apiVersion audit.k8s.io/v1, got %s %s", p.Kind, p.APIVersion)
	}
	var errs []string
	checkStages := func(path string, stages []Stage) {
		for _, s := range stages {
			if !slices.Contains(validStages, s) {
				errs = append(errs, fmt.Sprintf("%s: Unsupported value: %q", path, s))
			}
		}
	}
	checkStages("omitStages", p.OmitStages)
	for i, r := range p.Rules {
		path := fmt.Sprintf("rules[%d]", i)
		if _, ok := levelOrder[r.Level]; !ok {
			errs = append(errs, fmt.Sprintf("%s.level: Unsupported value: %q", path, r.Level))
		}
		checkStages(path+".omitStages", r.OmitStages)
		if len(r.NonResourceURLs) > 0 && (len(r.Resources) > 0 || len(r.Namespaces) > 0) {
			errs = append(errs, fmt.Sprintf("%s.nonResourceURLs: Invalid value: rules cannot apply to both regular resources and non-resource URLs", path))
		}
		for j, gr := range r.Resources {
			if len(gr.ResourceNames) > 0 && len(gr.Resources) == 0 {
				errs = append(errs, fmt.Sprintf("%s.resources[%d].resourceNames: Invalid value: resourceNames require a non-empty resources list", path, j))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Attributes are what a policy matches a request on.
type Attributes struct {
	User            string
	Groups          []string
	Verb            string
	ResourceRequest bool
	APIGroup        string
	Namespace       string
	Resource        string
	Subresource     string
	Name            string
	// Path is the URL path of a non-resource request.
	Path string
}

// Decision is the level of a request and the stages not to write.
type Decision struct {
	Level             Level
	OmitStages        []Stage
	OmitManagedFields bool
}

// Decide returns the level of the first rule that matches a (None when
// none does), with the policy's and the rule's omitted stages.
func (p *Policy) Decide(a *Attributes) Decision {
	for i := range p.Rules {
		r := &p.Rules[i]
		if !r.matches(a) {
			continue
		}
		d := Decision{Level: r.Level, OmitStages: p.OmitStages, OmitManagedFields: p.OmitManagedFields}
		if len(r.OmitStages) > 0 {
			d.OmitStages = append(slices.Clip(d.OmitStages), r.OmitStages...)
		}
		if r.OmitManagedFields != nil {
			d.OmitManagedFields = *r.OmitManagedFields
		}
		return d
	}
	return Decision{Level: LevelNone}
}

func (r *PolicyRule) matches(a *Attributes) bool {
	if len(r.Users) > 0 && !slices.Contains(r.Users, a.User) {
		return false
	}
	if len(r.UserGroups) > 0 && !slices.ContainsFunc(a.Groups, func(g string) bool { return slices.Contains(r.UserGroups, g) }) {
		return false
	}
	if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, a.Verb) {
		return false
	}
	if len(r.Namespaces) > 0 || len(r.Resources) > 0 {
		return a.ResourceRequest && r.matchesResource(a)
	}
	if len(r.NonResourceURLs) > 0 {
		return !a.ResourceRequest && matchesURL(r.NonResourceURLs, a.Path)
	}
	return true
}

// matchesResource: the namespaces ("" for cluster-scoped objects) and the
// group resources, as kube's policy checker reads them.
func (r *PolicyRule) matchesResource(a *Attributes) bool {
	if len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, a.Namespace) {
		return false
	}
	if len(r.Resources) == 0 {
		return true
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined += "/" + a.Subresource
	}
	for _, gr := range r.Resources {
		if gr.Group != a.APIGroup {
			continue
		}
		if len(gr.Resources) == 0 {
			return true
		}
		if len(gr.ResourceNames) > 0 && !slices.Contains(gr.ResourceNames, a.Name) {
			continue
		}
		for _, res := range gr.Resources {
			switch {
			case res == combined || res == "*":
				return true
			case a.Subresource != "" && strings.HasPrefix(res, "*/") && res[2:] == a.Subresource:
				return true
			case strings.HasSuffix(res, "/*") && res[:len(res)-2] == a.Resource:
				return true
			}
		}
	}
	return false
}

// matchesURL: exact paths, or prefixes ending in "*".
func matchesURL(patterns []string, path string) bool {
	for _, p := range patterns {
		if p == "*" || p == path || (strings.HasSuffix(p, "*") && strings.HasPrefix(path, p[:len(p)-1])) {
			return true
		}
	}
	return false
}
