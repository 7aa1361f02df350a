package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// mediaType is a negotiated response encoding.
type mediaType int

const (
	mediaJSON mediaType = iota
	mediaYAML
)

// errNotAcceptable is kube's 406, word for word (kube lists the encodings
// of its serializers, protobuf included).
var errNotAcceptable = newStatusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
	"only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf")

// negotiate picks the response encoding from the Accept header, kube style:
// the first acceptable entry wins; an Accept header with nothing acceptable
// is 406.
func negotiate(r *http.Request) (mediaType, error) {
	mt, _, err := negotiateTarget(r)
	return mt, err
}

// negotiateTarget is negotiate that also returns the form (Table,
// PartialObjectMetadata[List]) the accepted entry asks for with its as, g
// and v parameters; nil for the object itself (see table.go).
func negotiateTarget(r *http.Request) (mediaType, *schema.GroupVersionKind, error) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return mediaJSON, nil, nil
	}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		target, ok := acceptTarget(params)
		if !ok {
			continue
		}
		switch mt {
		case "application/json", "application/*", "*/*":
			return mediaJSON, target, nil
		case "application/yaml":
			return mediaYAML, target, nil
		}
	}
	return mediaJSON, nil, errNotAcceptable
}

// prettyAgents get indented JSON, as kube gives them.
func wantsPretty(r *http.Request) bool {
	if p := r.URL.Query().Get("pretty"); p != "" {
		b, _ := strconv.ParseBool(p)
		return b
	}
	ua := r.UserAgent()
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}

// writeObject encodes obj in the negotiated media type with the status code.
func writeObject(w http.ResponseWriter, r *http.Request, code int, obj any) {
	mt, err := negotiate(r)
	if err != nil {
		// The error itself still needs an encoding: JSON.
		mt = mediaJSON
		if obj, code = statusFor(err); code == 0 {
			code = http.StatusNotAcceptable
		}
	}
	var data []byte
	switch mt {
	case mediaYAML:
		data, err = yaml.Marshal(obj)
		w.Header().Set("Content-Type", "application/yaml")
	default:
		if wantsPretty(r) {
			data, err = json.MarshalIndent(obj, "", "  ")
		} else {
			data, err = json.Marshal(obj)
		}
		w.Header().Set("Content-Type", "application/json")
	}
	if err != nil {
		slog.Error("encode response", "err", err)
		http.Error(w, "internal error encoding the response", http.StatusInternalServerError)
		return
	}
	if mt == mediaJSON {
		data = append(data, '\n')
	}
	writeEncoded(w, code, data)
}

// writeJSON writes an already encoded JSON body.
func writeJSON(w http.ResponseWriter, code int, data []byte) {
	w.Header().Set("Content-Type", "application/json")
	writeEncoded(w, code, data)
}

func writeEncoded(w http.ResponseWriter, code int, data []byte) {
	w.Header().Set("Cache-Control", "no-cache, private")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// WriteError answers err as a Kubernetes Status. Anything that is not
// already a Status error is an internal error: logged, and a 500.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusFor(err)
	if code == http.StatusInternalServerError && r.Context().Err() == nil {
		// A request its client gave up on is no server error.
		slog.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if status.Details != nil && status.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(status.Details.RetryAfterSeconds)))
	}
	writeObject(w, r, code, status)
}

func statusFor(err error) (*metav1.Status, int) {
	var apiStatus apierrors.APIStatus
	if !errors.As(err, &apiStatus) {
		apiStatus = apierrors.NewInternalError(err)
	}
	status := apiStatus.Status()
	status.Kind = "Status"
	status.APIVersion = "v1"
	code := int(status.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	return &status, code
}

// trimBody shortens a request body for an error message as kube does.
func trimBody(body []byte) string {
	const max = 30
	if len(body) > max {
		return string(bytes.TrimSpace(body[:max])) + " ..."
	}
	return string(body)
}

func badRequest(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}

// newStatusError builds a Status error for the codes apierrors has no
// constructor for.
func newStatusError(code int32, reason metav1.StatusReason, message string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: code, Reason: reason, Message: message,
	}}
}
