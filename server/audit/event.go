package audit

import (
	"encoding/json"

	"github.com/corekube/corekube/auth/user"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Event is an audit.k8s.io/v1 Event, the JSON of one line of the log.
type Event struct {
	Kind                     string                     `json:"kind"`
	APIVersion               string                     `json:"apiVersion"`
	Level                    Level                      `json:"level"`
	AuditID                  string                     `json:"auditID"`
	Stage                    Stage                      `json:"stage"`
	RequestURI               string                     `json:"requestURI"`
	Verb                     string                     `json:"verb"`
	User                     authenticationv1.UserInfo  `json:"user"`
	ImpersonatedUser         *authenticationv1.UserInfo `json:"impersonatedUser,omitempty"`
	SourceIPs                []string                   `json:"sourceIPs,omitempty"`
	UserAgent                string                     `json:"userAgent,omitempty"`
	ObjectRef                *ObjectReference           `json:"objectRef,omitempty"`
	ResponseStatus           *metav1.Status             `json:"responseStatus,omitempty"`
	RequestObject            json.RawMessage            `json:"requestObject,omitempty"`
	ResponseObject           json.RawMessage            `json:"responseObject,omitempty"`
	RequestReceivedTimestamp metav1.MicroTime           `json:"requestReceivedTimestamp"`
	StageTimestamp           metav1.MicroTime           `json:"stageTimestamp"`
	Annotations              map[string]string          `json:"annotations,omitempty"`
}

// ObjectReference is the object a resource request is about.
type ObjectReference struct {
	Resource        string `json:"resource,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	APIGroup        string `json:"apiGroup,omitempty"`
	APIVersion      string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Subresource     string `json:"subresource,omitempty"`
}

// userInfo is u as an event records it.
func userInfo(u *user.Info) authenticationv1.UserInfo {
	if u == nil {
		return authenticationv1.UserInfo{}
	}
	out := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		out.Extra = make(map[string]authenticationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			out.Extra[k] = v
		}
	}
	return out
}
