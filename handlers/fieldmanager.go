package handlers

import (
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/registry/quantity"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// writeOptions are what a create, update or patch says beyond its body.
type writeOptions struct {
	dryRun bool
	// fieldManager is the fieldManager parameter as given.
	fieldManager string
	// manager is who the write's fields are recorded for: fieldManager,
	// else derived from the User-Agent.
	manager string
	// force is a server-side apply's force parameter.
	force *bool
}

// writeOptions parses and validates the options of a write whose options
// kind is CreateOptions, UpdateOptions or PatchOptions (with patchType),
// as kube's ValidateXxxOptions: a 422 on the options kind.
func (q *request) writeOptions(kind string, patchType types.PatchType) (writeOptions, error) {
	dryRun, err := q.dryRun(kind)
	if err != nil {
		return writeOptions{}, err
	}
	query := q.r.URL.Query()
	o := writeOptions{dryRun: dryRun, fieldManager: query.Get("fieldManager")}
	// fieldValidation is one of the options too: a value kube does not
	// know is a 422 here, with the others' errors.
	fv := query.Get("fieldValidation")
	var errs field.ErrorList
	switch kind {
	case "PatchOptions":
		if query.Has("force") {
			// kube's query parameter conversion: anything but "0" and
			// "false" (any case) is true, the empty value too.
			v := query.Get("force")
			force := v != "0" && !strings.EqualFold(v, "false")
			o.force = &force
		}
		errs = metav1validation.ValidatePatchOptions(&metav1.PatchOptions{FieldManager: o.fieldManager, Force: o.force, FieldValidation: fv}, patchType)
	case "UpdateOptions":
		errs = metav1validation.ValidateUpdateOptions(&metav1.UpdateOptions{FieldManager: o.fieldManager, FieldValidation: fv})
	default:
		errs = metav1validation.ValidateCreateOptions(&metav1.CreateOptions{FieldManager: o.fieldManager, FieldValidation: fv})
	}
	if len(errs) > 0 {
		return writeOptions{}, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	o.manager = managerOrUserAgent(o.fieldManager, q.r.UserAgent())
	return o, nil
}

// managerOrUserAgent is kube's name for a write's field manager: the
// fieldManager parameter, else the User-Agent up to its first "/"
// ("kubectl/v1.32.0 (linux/amd64) ..." → "kubectl"), printable
// characters only, at most 128 bytes; "unknown" when that is empty.
func managerOrUserAgent(manager, userAgent string) string {
	if manager != "" {
		return manager
	}
	prefix, _, _ := strings.Cut(userAgent, "/")
	var buf bytes.Buffer
	for _, r := range prefix {
		if !unicode.IsPrint(r) {
			continue
		}
		if buf.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		buf.WriteRune(r)
	}
	if buf.Len() == 0 {
		return "unknown"
	}
	return buf.String()
}

// apply serves a server-side apply (PATCH with application/apply-patch+yaml):
// the body is a partial object in YAML or JSON, merged by the Store's
// field manager. It creates the object when there is none (201).
func (q *request) apply(body []byte, fv fieldValidation, opts writeOptions) {
	patch := &unstructured.Unstructured{Object: map[string]any{}}
	if err := yaml.Unmarshal(body, &patch.Object); err != nil {
		q.fail(badRequest("error decoding YAML: %v", err))
		return
	}
	// The merged object is converted to its type, which parses its
	// quantities: a costly one is refused first.
	if obj := q.store.New(); obj != nil {
		if err := quantity.CheckUnstructured(patch.Object, reflect.TypeOf(obj)); err != nil {
			ri := q.store.Info()
			q.fail(badRequest("%s in version %q cannot be handled as a %s: %v", ri.Kind, ri.Version, ri.Kind, err))
			return
		}
	}
	// Duplicate keys: kube looks for them only once the merge succeeded,
	// so an apply that fails otherwise fails with that error.
	var strictErr, failAfterMerge error
	if fv == validationStrict || fv == validationWarn {
		strictErr = yaml.UnmarshalStrict(body, &map[string]any{})
		if strictErr != nil && fv == validationStrict {
			failAfterMerge = badRequest("error strict decoding YAML: %v", strictErr)
		}
	}
	force := opts.force != nil && *opts.force
	out, created, err := q.store.Apply(q.ctx(), q.info.Namespace, q.info.Name, patch,
		registry.ApplyOptions{DryRun: opts.dryRun, FieldManager: opts.fieldManager, Force: force, FailAfterMerge: failAfterMerge})
	if err != nil {
		q.fail(err)
		return
	}
	if strictErr != nil {
		for _, w := range yamlWarnings(strictErr.Error()) {
			addWarning(q.w, w)
		}
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	q.respond(code, out)
}

// yamlWarnings splits a YAML strict decoding error into one warning per
// problem, as kube's parseYAMLWarnings: without the decoder's prefix, one
// line each (a warning may hold no newline). Other errors stay whole.
func yamlWarnings(text string) []string {
	rest, ok := strings.CutPrefix(text, "yaml: unmarshal errors:\n")
	if !ok {
		if rest, ok = strings.CutPrefix(text, "error converting YAML to JSON: yaml: unmarshal errors:\n"); !ok {
			return []string{text}
		}
	}
	lines := strings.Split(rest, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return lines
}
