package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/corekube/corekube/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	mergePatch     = "application/merge-patch+json"
	strategicPatch = "application/strategic-merge-patch+json"
	jsonPatch      = "application/json-patch+json"
	applyYAML      = "application/apply-patch+yaml"
)

func TestPatch(t *testing.T) {
	tooMany := "[" + strings.Repeat(`{"op":"test","path":"/data/k","value":"v"},`, maxJSONPatchOperations) + `{"op":"test","path":"/data/k","value":"v"}]`
	for _, c := range []struct {
		name, target, contentType, body, accept string
		uidErr                                  error
		code                                    int
		reason                                  metav1.StatusReason
		msg                                     string
		data                                    map[string]string // of the answer
		opts                                    *registry.UpdateOptions
		warning                                 string
	}{
		{name: "merge", contentType: mergePatch, body: `{"data":{"k":null,"n":"1"}}`, code: 200, data: map[string]string{"n": "1"}, opts: &registry.UpdateOptions{FieldManager: "unknown"}},
		{name: "strategic", contentType: strategicPatch, body: `{"data":{"n":"1"}}`, code: 200, data: map[string]string{"k": "v", "n": "1"}, opts: &registry.UpdateOptions{FieldManager: "unknown"}},
		{name: "json", contentType: jsonPatch, body: `[{"op":"replace","path":"/data/k","value":"w"}]`, code: 200, data: map[string]string{"k": "w"}, opts: &registry.UpdateOptions{FieldManager: "unknown"}},
		{name: "content type parameters", contentType: mergePatch + "; charset=utf-8", body: `{"data":{"n":"1"}}`, code: 200, data: map[string]string{"k": "v", "n": "1"}, opts: &registry.UpdateOptions{FieldManager: "unknown"}},
		{name: "dry run and manager", target: cmPath + "/a?dryRun=All&fieldManager=me", contentType: mergePatch, body: `{"data":{"n":"1"}}`, code: 200,
			data: map[string]string{"k": "v", "n": "1"}, opts: &registry.UpdateOptions{DryRun: true, FieldManager: "me"}},
		{name: "unsupported patch type", contentType: "application/json", body: `{}`, code: 415, reason: metav1.StatusReasonUnsupportedMediaType,
			msg: "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"},
		{name: "not acceptable", contentType: mergePatch, body: `{}`, accept: "text/html", code: 406, reason: metav1.StatusReasonNotAcceptable, msg: "only the following media types are accepted"},
		{name: "missing object", target: cmPath + "/missing", contentType: mergePatch, body: `{"data":{"n":"1"}}`, code: 404, reason: metav1.StatusReasonNotFound, msg: `configmaps "missing" not found`},
		{name: "renamed", contentType: mergePatch, body: `{"metadata":{"name":"b"}}`, code: 400, reason: metav1.StatusReasonBadRequest,
			msg: "the name of the object (b) does not match the name on the URL (a)"},
		{name: "uid changed", contentType: mergePatch, body: `{"metadata":{"uid":"other"}}`, uidErr: apierrors.NewInvalid(schemaGroupKind("ConfigMap"), "a", nil),
			code: 422, reason: metav1.StatusReasonInvalid, msg: `ConfigMap "a" is invalid`},
		{name: "malformed merge patch", contentType: mergePatch, body: `{`, code: 400, reason: metav1.StatusReasonBadRequest, msg: "error decoding patch: unexpected end of JSON input"},
		{name: "malformed strategic patch", contentType: strategicPatch, body: `[1]`, code: 400, reason: metav1.StatusReasonBadRequest, msg: "json: cannot unmarshal array into Go value of type map[string]interface {}"},
		{name: "malformed json patch", contentType: jsonPatch, body: `{"op":"add"}`, code: 400, reason: metav1.StatusReasonBadRequest, msg: "error decoding patch: json: cannot unmarshal object"},
		{name: "failed json patch test", contentType: jsonPatch, body: `[{"op":"test","path":"/data/k","value":"other"}]`, code: 422, reason: metav1.StatusReasonInvalid, msg: "the server rejected our request due to an error in our request"},
		{name: "too many json patch operations", contentType: jsonPatch, body: tooMany, code: 413, reason: metav1.StatusReasonRequestEntityTooLarge,
			msg: fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, maxJSONPatchOperations+1)},
		{name: "strict unknown field", target: cmPath + "/a?fieldValidation=Strict", contentType: mergePatch, body: `{"bogus":1}`, code: 422, reason: metav1.StatusReasonInvalid,
			msg: `patch: Invalid value: `},
		{name: "strict duplicate field", target: cmPath + "/a?fieldValidation=Strict", contentType: strategicPatch, body: `{"data":{"n":"1","n":"2"}}`, code: 422, reason: metav1.StatusReasonInvalid,
			msg: ` "" is invalid: patch: Invalid value: "map[data:map[n:2]]": strict decoding error: duplicate field "data.n"`},
		{name: "warned duplicate field", target: cmPath + "/a?fieldValidation=Warn", contentType: mergePatch, body: `{"data":{"n":"1","n":"2"}}`, code: 200,
			data: map[string]string{"k": "v", "n": "2"}, opts: &registry.UpdateOptions{FieldManager: "unknown"}, warning: `299 - "duplicate field \"data.n\""`},
		{name: "ignored unknown field", target: cmPath + "/a?fieldValidation=Ignore", contentType: mergePatch, body: `{"bogus":1}`, code: 200,
			data: map[string]string{"k": "v"}, opts: &registry.UpdateOptions{FieldManager: "unknown"}},
		{name: "force without apply", target: cmPath + "/a?force=true", contentType: mergePatch, body: `{}`, code: 422, reason: metav1.StatusReasonInvalid,
			msg: `PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch`},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFakeStore(testConfigMap("a", map[string]string{"k": "v"}))
			st.uidErr = c.uidErr
			target := c.target
			if target == "" {
				target = cmPath + "/a"
			}
			w := serve(t, st, call{method: "PATCH", target: target, body: c.body, header: map[string]string{"Content-Type": c.contentType, "Accept": c.accept}})
			if c.code >= 400 {
				wantStatus(t, w, c.code, c.reason, c.msg)
				if st.writtenName != "" {
					t.Errorf("stored %s despite the error", st.writtenName)
				}
				return
			}
			wantCode(t, w, c.code, "application/json")
			cm := decodeConfigMap(t, w)
			if fmt.Sprint(cm.Data) != fmt.Sprint(c.data) || cm.Name != "a" {
				t.Errorf("answered %s, want data %v", w.Body, c.data)
			}
			if *st.updateOpts != *c.opts {
				t.Errorf("options %+v, want %+v", st.updateOpts, c.opts)
			}
			if got := w.Header().Get("Warning"); got != c.warning {
				t.Errorf("Warning %q, want %q", got, c.warning)
			}
		})
	}
}

func TestApply(t *testing.T) {
	for _, c := range []struct {
		name, target, body string
		code               int
		reason             metav1.StatusReason
		msg                string
		opts               registry.ApplyOptions
		failAfterMerge     bool
	}{
		{name: "creates", target: cmPath + "/new?fieldManager=me", body: "apiVersion: v1\nkind: ConfigMap\ndata:\n  k: v\n", code: 201, opts: registry.ApplyOptions{FieldManager: "me"}},
		{name: "updates with force and dry run", target: cmPath + "/a?fieldManager=me&force=true&dryRun=All", body: "apiVersion: v1\nkind: ConfigMap\n", code: 200,
			opts: registry.ApplyOptions{FieldManager: "me", Force: true, DryRun: true}},
		{name: "json body", target: cmPath + "/a?fieldManager=me", body: `{"apiVersion":"v1","kind":"ConfigMap"}`, code: 200, opts: registry.ApplyOptions{FieldManager: "me"}},
		{name: "no field manager", target: cmPath + "/a", body: "apiVersion: v1\nkind: ConfigMap\n", code: 422, reason: metav1.StatusReasonInvalid,
			msg: `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`},
		{name: "bad yaml", target: cmPath + "/a?fieldManager=me", body: "a: [", code: 400, reason: metav1.StatusReasonBadRequest, msg: "error decoding YAML"},
		{name: "strict duplicate key", target: cmPath + "/a?fieldManager=me&fieldValidation=Strict", body: "apiVersion: v1\nkind: ConfigMap\nkind: ConfigMap\n", code: 400,
			reason: metav1.StatusReasonBadRequest, msg: `error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:`, failAfterMerge: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFakeStore(testConfigMap("a", map[string]string{"k": "v"}))
			w := serve(t, st, call{method: "PATCH", target: c.target, body: c.body, header: map[string]string{"Content-Type": applyYAML}})
			if c.failAfterMerge != (st.applyOpts != nil && st.applyOpts.FailAfterMerge != nil) {
				t.Errorf("apply options %+v, want FailAfterMerge set: %v", st.applyOpts, c.failAfterMerge)
			}
			if c.code >= 400 {
				wantStatus(t, w, c.code, c.reason, c.msg)
				return
			}
			wantCode(t, w, c.code, "application/json")
			got := *st.applyOpts
			if got.FailAfterMerge != nil || got.FieldManager != c.opts.FieldManager || got.Force != c.opts.Force || got.DryRun != c.opts.DryRun {
				t.Errorf("options %+v, want %+v", got, c.opts)
			}
			if st.applyPatch.GetKind() != "ConfigMap" {
				t.Errorf("patch %v", st.applyPatch.Object)
			}
		})
	}
	t.Run("warned duplicate key", func(t *testing.T) {
		st := newFakeStore(testConfigMap("a", nil))
		w := serve(t, st, call{method: "PATCH", target: cmPath + "/a?fieldManager=me&fieldValidation=Warn", body: "apiVersion: v1\nkind: ConfigMap\nkind: ConfigMap\n",
			header: map[string]string{"Content-Type": applyYAML}})
		wantCode(t, w, http.StatusOK, "application/json")
		if got := w.Header().Get("Warning"); !strings.Contains(got, `299 - "line 3: key \"kind\" already set in map"`) {
			t.Errorf("Warning %q", got)
		}
	})
}
