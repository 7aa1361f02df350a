package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"

	"github.com/corekube/corekube/registry/quantity"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
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

// protobufMediaType is kube's protobuf encoding, which kubectl and client-go
// use to send built-in types.
const protobufMediaType = "application/vnd.kubernetes.protobuf"

// protobufCodec decodes kube's protobuf envelope into the k8s.io/api types.
var protobufCodec = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// requestMediaType returns the body's media type; no Content-Type is JSON.
func requestMediaType(r *http.Request) (string, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return "application/json", nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", errUnsupportedMediaType(ct)
	}
	return mt, nil
}

// decodeRequestObject decodes a body of any accepted media type into into.
// accepts, when not nil, lets bodies of gvk's kind in other group versions
// with the same schema through (see GroupVersionAcceptor).
func decodeRequestObject(w http.ResponseWriter, r *http.Request, body []byte, into runtime.Object, gvk schema.GroupVersionKind, fv fieldValidation, accepts func(schema.GroupVersion) bool) error {
	mt, err := requestMediaType(r)
	if err != nil {
		return err
	}
	if mt == protobufMediaType {
		// Where quantities are cannot be known without decoding, and
		// decoding a costly one is the cost: any will do.
		if err := quantity.CheckBytes(body); err != nil {
			return badRequest("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, err)
		}
		out, actual, err := protobufCodec.Decode(body, &gvk, into)
		if err != nil {
			return badRequest("the object provided is unrecognized (must be of type %s): %v", gvk.Kind, err)
		}
		if (out != into || *actual != gvk) && accepts != nil && actual.Kind == gvk.Kind && accepts(actual.GroupVersion()) {
			// Same schema in another version: carry the fields over.
			data, err := json.Marshal(out)
			if err == nil {
				err = json.Unmarshal(data, into)
			}
			if err != nil {
				return badRequest("%s in version %q cannot be handled as a %s: %v", actual.Kind, actual.Version, gvk.Kind, err)
			}
			out, actual = into, &gvk
		}
		if out != into || *actual != gvk {
			return badRequest("%s in version %q cannot be handled as a %s: unknown conversion", actual.Kind, actual.Version, gvk.Kind)
		}
		into.GetObjectKind().SetGroupVersionKind(gvk)
		return nil
	}
	data, err := bodyToJSON(r, body)
	if err != nil {
		return err
	}
	decodeAs := gvk
	if accepts != nil {
		var tm metav1.TypeMeta
		if json.Unmarshal(data, &tm) == nil && tm.Kind == gvk.Kind {
			if gv, err := schema.ParseGroupVersion(tm.APIVersion); err == nil && gv != gvk.GroupVersion() && accepts(gv) {
				decodeAs = gv.WithKind(gvk.Kind)
			}
		}
	}
	err = decodeObject(w, data, into, decodeAs, fv)
	if _, strict := runtime.AsStrictDecodingError(err); strict {
		// kube's create and update handlers name the kind (transformDecodeError).
		return badRequest("%s in version %q cannot be handled as a %s: %v", gvk.Kind, decodeAs.Version, gvk.Kind, err)
	}
	if err == nil {
		into.GetObjectKind().SetGroupVersionKind(gvk)
	}
	return err
}

// bodyToJSON converts a JSON or YAML body to JSON.
func bodyToJSON(r *http.Request, body []byte) ([]byte, error) {
	mt, err := requestMediaType(r)
	if err != nil {
		return nil, err
	}
	switch mt {
	case "application/json":
		return body, nil
	case "application/yaml":
		data, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, badRequest("the object provided is not valid YAML: %v", err)
		}
		return data, nil
	default:
		return nil, errUnsupportedMediaType(r.Header.Get("Content-Type"))
	}
}

func errUnsupportedMediaType(ct string) error {
	return newStatusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, %s (got %q)", protobufMediaType, ct))
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
// and duplicate fields follow fieldValidation: a runtime strict decoding
// error (Strict), which callers turn into their 400, Warning headers (Warn)
// or nothing (Ignore).
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
	// Before decoding: parsing a quantity such as "1.0000000000000000001e-100000000"
	// alone would take minutes.
	if err := quantity.CheckJSON(data, reflect.TypeOf(into)); err != nil {
		return badRequest("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, err)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(data, into, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return badRequest("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, jsonErrorText(err))
	}
	if len(strictErrs) > 0 {
		switch fv {
		case validationStrict:
			return runtime.NewStrictDecodingError(strictErrs)
		case validationWarn:
			for _, e := range strictErrs {
				addWarning(w, e.Error())
			}
		}
	}
	into.GetObjectKind().SetGroupVersionKind(gvk)
	return nil
}

// addWarning adds an HTTP Warning header as kube does (code 299), once
// per text: kube's warning recorder drops repeats.
func addWarning(w http.ResponseWriter, msg string) {
	v := fmt.Sprintf("299 - %q", msg)
	if slices.Contains(w.Header().Values("Warning"), v) {
		return
	}
	w.Header().Add("Warning", v)
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

// decodeDeleteOptions decodes a DELETE body. DeleteOptions exist in every
// group version (v1, meta.k8s.io/v1, policy/v1, ...), so any apiVersion
// is accepted.
func decodeDeleteOptions(r *http.Request, body []byte, opts *metav1.DeleteOptions) error {
	mt, err := requestMediaType(r)
	if err != nil {
		return err
	}
	if mt == protobufMediaType {
		if _, _, err := protobufCodec.Decode(body, nil, opts); err != nil {
			return badRequest("the body of the request is not valid DeleteOptions: %v", err)
		}
		return nil
	}
	data, err := bodyToJSON(r, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, opts); err != nil {
		return badRequest("the body of the request is not valid DeleteOptions: %v", jsonErrorText(err))
	}
	if opts.Kind != "" && opts.Kind != "DeleteOptions" {
		return badRequest("%s cannot be handled as DeleteOptions", opts.Kind)
	}
	return nil
}
