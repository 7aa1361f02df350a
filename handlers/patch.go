package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/corekube/corekube/registry"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// kube-apiserver's bounds on the work a JSON patch may ask for: at most
// 10,000 operations (413), and "copy" operations adding at most the
// largest request body (3 MiB) between them (422), so that a short patch
// cannot double an array into gigabytes.
const (
	maxJSONPatchOperations = 10000
	jsonPatchMaxCopyBytes  = MaxRequestBodyBytes
)

func init() {
	// The library has only this process-wide setting; kube-apiserver sets
	// it the same way when it builds its server.
	jsonpatch.AccumulatedCopySizeLimit = jsonPatchMaxCopyBytes
}

// patch applies a JSON, merge or strategic merge patch to the stored
// object inside the Store's compare-and-swap loop, so a concurrent write
// makes it re-apply to the new state rather than lose either change.
func (q *request) patch() {
	patchType, err := q.patchType()
	if err != nil {
		q.fail(err)
		return
	}
	if !q.acceptable() {
		return
	}
	body, err := readBody(q.w, q.r)
	if err != nil {
		q.fail(err)
		return
	}
	opts, err := q.writeOptions("PatchOptions", patchType)
	if err != nil {
		q.fail(err)
		return
	}
	fv, err := parseFieldValidation(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	if patchType == types.ApplyYAMLPatchType {
		q.apply(body, fv, opts)
		return
	}
	// Duplicate (and, in JSON patch operations, unknown) fields of the
	// patch itself, as kube's patchers find them before applying it.
	var patchErrs []error
	if fv == validationStrict || fv == validationWarn {
		if patchErrs, err = patchStrictErrors(patchType, body); err != nil {
			q.fail(err)
			return
		}
		if fv == validationWarn {
			for _, e := range patchErrs {
				addWarning(q.w, e.Error())
			}
			patchErrs = nil
		}
	}
	gvk := q.gvk()
	apply := func(_ context.Context, current runtime.Object) (runtime.Object, error) {
		if current == nil {
			return nil, apierrors.NewNotFound(q.store.Info().GroupResource(), q.info.Name)
		}
		original, err := json.Marshal(current)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		patched, err := applyPatch(patchType, original, body, q.store.New())
		if err != nil {
			return nil, err
		}
		obj := q.store.New()
		if err := decodeObject(q.w, patched, obj, gvk, fv); err != nil {
			if strictErr, strict := runtime.AsStrictDecodingError(err); strict {
				return nil, strictPatchError(patchType, body, patched, append(slices.Clone(patchErrs), strictErr.Errors()...))
			}
			return nil, err
		}
		if len(patchErrs) > 0 {
			return nil, strictPatchError(patchType, body, patched, patchErrs)
		}
		// kube's checks of every patch's result (its patcher's checkName):
		// the name is the URL's; a changed uid is refused as immutable.
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if m.GetName() != q.info.Name {
			return nil, badRequest("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), q.info.Name)
		}
		if err := q.store.CheckPatchedUID(current, obj); err != nil {
			return nil, err
		}
		return obj, nil
	}
	out, _, err := q.store.Update(q.ctx(), q.info.Namespace, q.info.Name, apply, registry.UpdateOptions{DryRun: opts.dryRun, FieldManager: opts.manager})
	if err != nil {
		q.fail(err)
		return
	}
	q.respond(http.StatusOK, out)
}

func (q *request) patchType() (types.PatchType, error) {
	ct := q.r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt = ct
	}
	switch pt := types.PatchType(mt); pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType:
		return pt, nil
	default:
		// application/apply-patch+cbor too: kube 1.32 serves it only
		// behind the CBORServingAndStorage feature gate, off by default.
		return "", newStatusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s, %s",
				types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType))
	}
}

// applyPatch applies patch to the JSON document original. schemaObj is an
// empty object of the resource's type, whose struct tags give strategic
// merge patch its merge keys and strategies.
func applyPatch(pt types.PatchType, original, patch []byte, schemaObj runtime.Object) ([]byte, error) {
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, badRequest("the server rejected our request due to an error in our request: %v", err)
		}
		if len(p) > maxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
				"The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(p)))
		}
		out, err := p.Apply(original)
		if err != nil {
			// kube's jsonPatcher answers with the generic 422, which keeps
			// the library's message out of the Status.
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
		return out, nil
	case types.MergePatchType:
		out, err := jsonpatch.MergePatch(original, patch)
		if err != nil {
			return nil, badRequest("the server rejected our request due to an error in our request: %v", err)
		}
		return out, nil
	default:
		var patchMap map[string]any
		if err := json.Unmarshal(patch, &patchMap); err != nil {
			return nil, badRequest("the server rejected our request due to an error in our request: %v", jsonErrorText(err))
		}
		out, err := strategicMergePatch(original, patch, schemaObj)
		if err != nil {
			return nil, invalidPatch(err)
		}
		return out, nil
	}
}

// strategicMergePatch is strategicpatch.StrategicMergePatch, whose panics
// on patches of the wrong shape (a list as a merge key's value:
// {"spec":{"containers":[{"name":[]}]}} compares two slices) are the
// patch's error, not the server's: a 422 rather than kube's 500.
func strategicMergePatch(original, patch []byte, schemaObj runtime.Object) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("the patch does not fit the object's schema: %v", r)
		}
	}()
	return strategicpatch.StrategicMergePatch(original, patch, schemaObj)
}

// patchStrictErrors decodes a JSON, merge or strategic merge patch
// strictly, as kube's patchers do under fieldValidation=Strict or Warn:
// its duplicate fields (and a JSON patch operation's unknown ones) are the
// errors; a patch that does not decode is kube's 400.
func patchStrictErrors(pt types.PatchType, body []byte) ([]error, error) {
	switch pt {
	case types.JSONPatchType:
		var ops []struct {
			Op    string `json:"op"`
			Path  string `json:"path"`
			From  string `json:"from"`
			Value any    `json:"value"`
		}
		errs, err := sigsjson.UnmarshalStrict(body, &ops)
		if err != nil {
			return nil, badRequest("error decoding patch: %v", err)
		}
		for i, e := range errs {
			errs[i] = fmt.Errorf("json patch %v", e)
		}
		return errs, nil
	case types.MergePatchType:
		v := map[string]any{}
		errs, err := sigsjson.UnmarshalStrict(body, &v)
		if err != nil {
			return nil, badRequest("error decoding patch: %v", err)
		}
		return errs, nil
	default:
		v := map[string]any{}
		errs, err := sigsjson.UnmarshalStrict(body, &v)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return errs, nil
	}
}

// strictPatchError is kube's answer to a patch whose result has unknown or
// duplicate fields under fieldValidation=Strict: a 422 on the field "patch"
// whose value is the patch as a Go map (strategic, errors sorted) or the
// patched object (json, merge), as in kube's applyPatchToObject and
// jsonPatcher.
func strictPatchError(pt types.PatchType, patch, patched []byte, errs []error) error {
	value := string(patched)
	if pt == types.StrategicMergePatchType {
		var patchMap map[string]any
		_ = sigsjson.UnmarshalCaseSensitivePreserveInts(patch, &patchMap) // decoded once already by applyPatch
		value = fmt.Sprintf("%+v", patchMap)
		errs = slices.Clone(errs)
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	}
	return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
		field.Invalid(field.NewPath("patch"), value, runtime.NewStrictDecodingError(errs).Error()),
	})
}

func invalidPatch(err error) error {
	return newStatusError(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		fmt.Sprintf("the server rejected our request due to an error in our request: %v", err))
}
