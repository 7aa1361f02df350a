package handlers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/corekube/corekube/registry"
	"net"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// writeObject answers obj with the status code in the encoding the Accept
// header negotiates for a resource endpoint. Nothing acceptable is kube's
// 406, in JSON.
func writeObject(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object) {
	n, err := negotiate(r)
	if err != nil {
		status, statusCode := statusFor(err)
		writeRawJSON(w, statusCode, status)
		return
	}
	writeNegotiated(w, r, code, obj, n)
}

// writeNegotiated answers obj with the status code in n's encoding.
func writeNegotiated(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object, n negotiation) {
	var data []byte
	var err error
	switch n.media {
	case mediaYAML:
		data, err = yaml.Marshal(obj)
	case mediaProtobuf:
		data, err = encodeProtobuf(obj, schema.GroupVersion{Version: "v1"})
	default:
		if wantsPretty(r, n) {
			// kube's pretty JSON has no final newline, its compact
			// JSON has one (json.Encoder's).
			data, err = json.MarshalIndent(obj, "", "  ")
		} else if data, err = registry.MarshalJSON(obj); err == nil {
			data = append(data, '\n')
		}
	}
	if err != nil {
		if code >= http.StatusBadRequest {
			// Already an error: answer it in JSON rather than hide it.
			loggerFrom(r.Context()).Error("encode response", "method", r.Method, "path", r.URL.Path, "media", n.media, "err", err)
			writeRawJSON(w, code, obj)
			return
		}
		WriteError(w, r, apierrors.NewInternalError(fmt.Errorf("encode the response as %s: %w", n.media, err)))
		return
	}
	w.Header().Set("Content-Type", n.media.contentType())
	writeEncoded(w, code, data)
}

// writeRawJSON answers obj as indented JSON, kube's answer when even an
// error cannot be negotiated (responsewriters.WriteRawJSON).
func writeRawJSON(w http.ResponseWriter, code int, obj any) {
	data, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	writeEncoded(w, code, data)
}

func writeEncoded(w http.ResponseWriter, code int, data []byte) {
	w.Header().Set("Cache-Control", "no-cache, private")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// writeChunks is writeEncoded of the concatenation of chunks, written in
// turn through one buffer rather than copied together first: a LIST of a
// whole cluster is hundreds of megabytes, in pieces of a few bytes (an
// item's field header) to a few kilobytes.
func writeChunks(w http.ResponseWriter, code int, chunks net.Buffers) {
	size := 0
	for _, c := range chunks {
		size += len(c)
	}
	w.Header().Set("Cache-Control", "no-cache, private")
	w.Header().Set("Content-Length", strconv.Itoa(size))
	w.WriteHeader(code)
	bw := bufio.NewWriterSize(w, 64<<10)
	for _, c := range chunks {
		if _, err := bw.Write(c); err != nil {
			return // the client is gone
		}
	}
	_ = bw.Flush()
}

// newline ends a JSON answer, as kube's encoder does.
var newline = []byte("\n")

// WriteError answers err as a Kubernetes Status, in the encoding the
// Accept header negotiates (protobuf too), as kube's ErrorNegotiated: an
// entry asking for another form (a Table) is passed over, and nothing
// acceptable answers the Status as JSON. Anything that is not already a
// Status error is an internal error: logged through the request's logger
// (WithLogger), and a 500.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusFor(err)
	if code == http.StatusInternalServerError && r.Context().Err() == nil {
		// A request its client gave up on is no server error.
		loggerFrom(r.Context()).Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if status.Details != nil && status.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(status.Details.RetryAfterSeconds)))
	}
	n, ok := plainEndpoint.negotiate(r.Header.Get("Accept"))
	if !ok {
		writeRawJSON(w, code, status)
		return
	}
	writeNegotiated(w, r, code, status, n)
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
