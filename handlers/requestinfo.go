package handlers

import (
	"strings"
)

// requestInfo is what a resource URL names, parsed the way kube's
// RequestInfoFactory does.
type requestInfo struct {
	Group, Version string
	Namespace      string
	Resource       string
	Name           string
	Subresource    string
}

// namespaceSubresources are the subresources of the namespace resource
// itself; anything else after /namespaces/{ns}/ is a namespaced resource.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// parseRequestInfo parses paths below /api/v1/ or /apis/{group}/{version}/.
// ok is false when the path names no resource.
func parseRequestInfo(path string) (ri requestInfo, ok bool) {
	parts := splitPath(path)
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		ri.Version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		ri.Group, ri.Version, parts = parts[1], parts[2], parts[3:]
	default:
		return ri, false
	}
	if parts[0] == "namespaces" && len(parts) > 1 {
		ri.Namespace = parts[1]
		if len(parts) > 2 && !namespaceSubresources[parts[2]] {
			parts = parts[2:]
		}
	}
	if len(parts) > 3 {
		return ri, false
	}
	ri.Resource = parts[0]
	if len(parts) > 1 {
		ri.Name = parts[1]
	}
	if len(parts) > 2 {
		ri.Subresource = parts[2]
	}
	if ri.Resource == "namespaces" {
		// /api/v1/namespaces/{name}: the namespace is the object's name.
		ri.Namespace = ""
	}
	return ri, true
}

func splitPath(path string) []string {
	path = strings.Trim(path, "/")
	if path == "" {
		return nil
	}
	return strings.Split(path, "/")
}
