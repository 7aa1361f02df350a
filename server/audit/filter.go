package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/corekube/corekube/auth/user"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// HeaderAuditID is the header that carries a request's audit ID, in the
// response always, in the request when the client chose it.
const HeaderAuditID = "Audit-Id"

// maxRecordedBody bounds the request and response bodies an event
// records (kube-apiserver's own request body limit).
const maxRecordedBody = 3 << 20

// Config configures the audit filter.
type Config struct {
	Policy  *Policy
	Backend Backend
	// Attributes describes a request for the policy and the event's verb
	// and objectRef (the user comes from the request's context).
	Attributes func(r *http.Request) Attributes
}

type contextKey struct{}

// record is the audit state of one request.
type record struct {
	id    string
	event *Event // nil when the request is not audited
}

// ID returns the request's audit ID ("" outside a request).
func ID(ctx context.Context) string {
	if rec, ok := ctx.Value(contextKey{}).(*record); ok {
		return rec.id
	}
	return ""
}

// LogImpersonatedUser records the user the request acts as (the
// impersonation filter calls it).
func LogImpersonatedUser(ctx context.Context, u *user.Info) {
	if rec, ok := ctx.Value(contextKey{}).(*record); ok && rec.event != nil {
		info := userInfo(u)
		rec.event.ImpersonatedUser = &info
	}
}

// AddAnnotation adds key=value to the request's event (the authorizer's
// decision and reason, admission's).
func AddAnnotation(ctx context.Context, key, value string) {
	if rec, ok := ctx.Value(contextKey{}).(*record); ok && rec.event != nil {
		if rec.event.Annotations == nil {
			rec.event.Annotations = map[string]string{}
		}
		rec.event.Annotations[key] = value
	}
}

// EnsureID returns the request's audit ID, the one its client sent (up to
// 64 characters) or a new one, and sets it as the Audit-Id response
// header. A new ID is also put in the request's headers, so that a filter
// that runs before the audit filter (the request timeout's, whose 504 the
// client must be able to match to the audit log) and the audit filter
// give the same.
func EnsureID(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get(HeaderAuditID)
	if id == "" || len(id) > 64 {
		id = string(uuid.NewUUID())
		r.Header.Set(HeaderAuditID, id)
	}
	w.Header().Set(HeaderAuditID, id)
	return id
}

// WithAudit gives every request an audit ID (the Audit-Id response header)
// and, when cfg is not nil, writes the events its policy level asks for.
// It runs after authentication, which put the user in the context.
func WithAudit(cfg *Config) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := EnsureID(w, r)
			rec := &record{id: id}
			ctx := context.WithValue(r.Context(), contextKey{}, rec)
			if cfg == nil || cfg.Policy == nil {
				next.ServeHTTP(w, r.WithContext(ctx))
				return
			}
			u, _ := user.From(ctx)
			attrs := cfg.Attributes(r)
			if u != nil {
				attrs.User, attrs.Groups = u.Name, u.Groups
			}
			d := cfg.Policy.Decide(&attrs)
			if d.Level == LevelNone {
				next.ServeHTTP(w, r.WithContext(ctx))
				return
			}
			rec.event = newEvent(r, id, d.Level, u, &attrs)
			serveAudited(cfg.Backend, d, rec.event, w, r.WithContext(ctx), next)
		})
	}
}

// LogFailedAuthentication records a request that authentication refused
// (before the audit filter could see it), as kube's failed-authentication
// audit does: one event at stage ResponseStarted with code 401 and the
// kinds of credentials tried, when the policy audits the request without a
// user. It sets the Audit-Id header; the caller then writes the 401.
func LogFailedAuthentication(cfg *Config, w http.ResponseWriter, r *http.Request) {
	id := EnsureID(w, r)
	if cfg == nil || cfg.Policy == nil {
		return
	}
	attrs := cfg.Attributes(r)
	d := cfg.Policy.Decide(&attrs)
	if d.Level == LevelNone || slices.Contains(d.OmitStages, StageResponseStarted) {
		return
	}
	ev := newEvent(r, id, d.Level, nil, &attrs)
	ev.Stage = StageResponseStarted
	ev.ResponseStatus = &metav1.Status{Code: http.StatusUnauthorized, Message: "Authentication failed, attempted: " + attemptedCredentials(r)}
	ev.StageTimestamp = metav1.NewMicroTime(time.Now())
	cfg.Backend.Process(ev)
}

// attemptedCredentials names the kinds of credentials r carried, as kube
// lists them in a failed authentication's event.
func attemptedCredentials(r *http.Request) string {
	var kinds []string
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		kinds = append(kinds, "certificate")
	}
	if strings.HasPrefix(strings.ToLower(r.Header.Get("Authorization")), "bearer ") {
		kinds = append(kinds, "bearer")
	}
	if _, _, ok := r.BasicAuth(); ok {
		kinds = append(kinds, "basic")
	}
	if len(kinds) == 0 {
		return "none"
	}
	return strings.Join(kinds, ", ")
}

func newEvent(r *http.Request, id string, level Level, u *user.Info, a *Attributes) *Event {
	ev := &Event{
		Kind: "Event", APIVersion: "audit.k8s.io/v1", Level: level, AuditID: id,
		RequestURI: r.URL.RequestURI(), Verb: a.Verb, User: userInfo(u),
		SourceIPs: sourceIPs(r), UserAgent: r.UserAgent(),
		RequestReceivedTimestamp: metav1.NewMicroTime(time.Now()),
	}
	if a.ResourceRequest {
		ev.ObjectRef = &ObjectReference{Resource: a.Resource, Namespace: a.Namespace, Name: a.Name,
			APIGroup: a.APIGroup, APIVersion: apiVersion(r.URL.Path), Subresource: a.Subresource}
	}
	return ev
}

// apiVersion is the version segment of /api/VERSION/... or
// /apis/GROUP/VERSION/....
func apiVersion(path string) string {
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 4)
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		return parts[1]
	case len(parts) >= 3 && parts[0] == "apis":
		return parts[2]
	}
	return ""
}

// sourceIPs are the X-Forwarded-For addresses, X-Real-Ip, then the peer,
// as kube lists them.
func sourceIPs(r *http.Request) []string {
	var ips []string
	if fwd := r.Header.Get("X-Forwarded-For"); fwd != "" {
		for _, p := range strings.Split(fwd, ",") {
			if ip := net.ParseIP(strings.TrimSpace(p)); ip != nil {
				ips = append(ips, ip.String())
			}
		}
	}
	if real := net.ParseIP(strings.TrimSpace(r.Header.Get("X-Real-Ip"))); real != nil && !slices.Contains(ips, real.String()) {
		ips = append(ips, real.String())
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip != nil && !slices.Contains(ips, ip.String()) {
		ips = append(ips, ip.String())
	}
	return ips
}

func serveAudited(b Backend, d Decision, ev *Event, w http.ResponseWriter, r *http.Request, next http.Handler) {
	omitted := func(s Stage) bool { return slices.Contains(d.OmitStages, s) }
	emit := func(s Stage) {
		if omitted(s) {
			return
		}
		c := *ev
		c.Stage = s
		if ev.Annotations != nil {
			// The request goes on annotating its own event.
			c.Annotations = make(map[string]string, len(ev.Annotations))
			for k, v := range ev.Annotations {
				c.Annotations[k] = v
			}
		}
		c.StageTimestamp = metav1.NewMicroTime(time.Now())
		b.Process(&c)
	}
	if !d.Level.Less(LevelRequest) && r.Body != nil && (r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRecordedBody+1))
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		if err == nil && len(body) <= maxRecordedBody {
			ev.RequestObject = asJSON(r.Header.Get("Content-Type"), body)
		}
	}
	emit(StageRequestReceived)

	aw := &responseWriter{ResponseWriter: w, keepBody: !d.Level.Less(LevelRequestResponse)}
	if ev.Verb == "watch" || r.URL.Query().Get("follow") == "true" {
		// A long-running request: its start is an event of its own, and
		// its stream is no object to record.
		aw.started = func() { emit(StageResponseStarted) }
		aw.keepBody = false
	}
	defer func() {
		if v := recover(); v != nil {
			ev.ResponseStatus = &metav1.Status{Code: http.StatusInternalServerError, Status: metav1.StatusFailure,
				Reason: metav1.StatusReasonInternalError, Message: "APIServer panic'd"}
			emit(StagePanic)
			panic(v)
		}
	}()
	next.ServeHTTP(aw, r)
	code := aw.code
	if code == 0 {
		code = http.StatusOK
	}
	ev.ResponseStatus = &metav1.Status{Code: int32(code)}
	contentType := aw.Header().Get("Content-Type")
	if code >= 400 {
		// An error's body is its Status: record its reason and message
		// (without details) as kube does, at any level.
		var st metav1.Status
		if body := asJSON(contentType, aw.body.Bytes()); body != nil && json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
			ev.ResponseStatus = &metav1.Status{Status: st.Status, Message: st.Message, Reason: st.Reason, Code: int32(code)}
		}
	}
	if aw.keepBody && aw.body.Len() <= maxRecordedBody {
		ev.ResponseObject = asJSON(contentType, aw.body.Bytes())
	}
	emit(StageResponseComplete)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// responseWriter records the status code, keeps the body when an event
// needs it (errors always: their Status is small) and reports when the
// response of a long-running request starts.
type responseWriter struct {
	http.ResponseWriter
	code     int
	keepBody bool
	body     bytes.Buffer
	started  func()
}

func (w *responseWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
		if w.started != nil {
			w.started()
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if (w.keepBody || w.code >= 400) && w.body.Len() <= maxRecordedBody {
		w.body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Flush lets watches stream through the recorder.
func (w *responseWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack passes hijacking through (upgrades).
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// protobufType is the content type of kube's protobuf encoding, which
// client-go's typed clients speak.
const protobufType = "application/vnd.kubernetes.protobuf"

// protobufCodec decodes the protobuf bodies of the built-in kinds.
var protobufCodec = protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)

// asJSON is a request or response body as the JSON an event records: JSON
// as it is, kube's protobuf decoded and re-encoded (as kube records the
// objects, whatever the wire encoding), nil for anything else (YAML
// bodies, streams, kinds this decoder does not know).
func asJSON(contentType string, body []byte) json.RawMessage {
	switch {
	case len(body) == 0:
		return nil
	case strings.HasPrefix(contentType, protobufType):
		obj, gvk, err := protobufCodec.Decode(body, nil, nil)
		if err != nil {
			return nil
		}
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
		out, err := json.Marshal(obj)
		if err != nil {
			return nil
		}
		return out
	case json.Valid(body):
		return body
	}
	return nil
}
