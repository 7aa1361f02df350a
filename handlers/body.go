package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// MaxRequestBodyBytes is kube's limit on a request body (3 MiB).
const MaxRequestBodyBytes = 3 * 1024 * 1024

// readBody reads the whole request body, refusing more than the limit with
// kube's 413.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", MaxRequestBodyBytes))
	}
	if err != nil {
		return nil, badRequest("reading the request body: %v", err)
	}
	return body, nil
}

// bodyToJSON converts a body in its declared Content-Type to JSON.
func bodyToJSON(r *http.Request, body []byte) ([]byte, error) {
	ct := r.Header.Get("Content-Type")
	mt := "application/json"
	if ct != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			return nil, errUnsupportedMediaType(ct)
		}
	}
	switch mt {
	case "application/json", "*/*":
		return body, nil
	case "application/yaml":
		data, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, badRequest("the object provided is not valid YAML: %v", err)
		}
		return data, nil
	default:
		return nil, errUnsupportedMediaType(ct)
	}
}

func errUnsupportedMediaType(ct string) error {
	return newStatusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got %q)", ct))
}

// fieldValidation is the fieldValidation query parameter.
type fieldValidation string

const (
	validationIgnore fieldValidation = "Ignore"
	validationWarn   fieldValidation = "Warn"
	validationStrict fieldValidation = "Strict"
)

func parseFieldValidation(r *http.Request) (fieldValidation, error) {
	switch v := fieldValidation(r.URL.Query().Get("fieldValidation")); v {
	case "":
		return validationWarn, nil
	case validationIgnore, validationWarn, validationStrict:
		return v, nil
	default:
		return "", badRequest("fieldValidation parameter unsupported: %s. Supported options: %s, %s, %s", v, validationIgnore, validationWarn, validationStrict)
	}
}

// decodeObject decodes a JSON body into into, the type the endpoint serves
// (gvk). A body of another kind or version is a 400, like kube's. Unknown
// and duplicate fields follow fieldValidation: a 400 (Strict), Warning
// headers (Warn) or nothing (Ignore).
func decodeObject(w http.ResponseWriter, data []byte, into runtime.Object, gvk schema.GroupVersionKind, fv fieldValidation) error {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return badRequest("the object provided is unrecognized (must be of type %s): couldn't get version/kind; json parse error: %v (%s)",
			gvk.Kind, jsonErrorText(err), trimBody(data))
	}
	if (tm.Kind != "" && tm.Kind != gvk.Kind) || (tm.APIVersion != "" && tm.APIVersion != gvk.GroupVersion().String()) {
		from := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
		return badRequest("%s in version %q cannot be handled as a %s: converting (%s.%s) to (%s.%s): unknown conversion",
			tm.Kind, from.Version, gvk.Kind, from.Version, tm.Kind, groupOrCore(gvk.Group), gvk.Kind)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(data, into, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return badRequest("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, jsonErrorText(err))
	}
	if len(strictErrs) > 0 {
		switch fv {
		case validationStrict:
			msgs := make([]string, len(strictErrs))
			for i, e := range strictErrs {
				msgs[i] = e.Error()
			}
			return badRequest("strict decoding error: %s", strings.Join(msgs, ", "))
		case validationWarn:
			for _, e := range strictErrs {
				addWarning(w, e.Error())
			}
		}
	}
	into.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}

// addWarning adds an HTTP Warning header as kube does (code 299).
func addWarning(w http.ResponseWriter, msg string) {
	w.Header().Add("Warning", fmt.Sprintf("299 - %q", msg))
}

func jsonErrorText(err error) string {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return syntax.Error()
	}
	return err.Error()
}

func groupOrCore(g string) string {
	if g == "" {
		return "core"
	}
	return g
}
