package handlers

import (
	"bufio"
	"context"
	"net/http"
	"strconv"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/storage/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// request is one resource request being served.
type request struct {
	w     http.ResponseWriter
	r     *http.Request
	info  requestInfo
	store restResource
}

// ctx is the request's context, in which what the registry and admission
// warn about (registry.AddWarning) becomes Warning headers: a
// TokenRequest's shortened expiration, PodSecurity's warnings.
func (q *request) ctx() context.Context {
	return registry.WithWarnings(q.r.Context(), func(msg string) { addWarning(q.w, msg) })
}

func (q *request) fail(err error) { WriteError(q.w, q.r, err) }

// acceptable answers kube's 406 and returns false when nothing the Accept
// header lists can be answered. Every verb checks it before acting, as
// kube's handlers do, so that a create is not done and then refused.
func (q *request) acceptable() bool {
	if _, err := negotiate(q.r); err != nil {
		q.fail(err)
		return false
	}
	return true
}

// respond answers obj in the negotiated form (table.go): the object
// itself, a Table or PartialObjectMetadata.
func (q *request) respond(code int, obj runtime.Object) {
	out, err := q.transform(obj)
	if err != nil {
		q.fail(err)
		return
	}
	writeObject(q.w, q.r, code, out)
	trace.Mark(q.r.Context(), trace.ResponseWritten)
}

func (q *request) gvk() schema.GroupVersionKind {
	info := q.store.Info()
	return info.GroupVersion().WithKind(info.Kind)
}

func (q *request) get() {
	if !q.acceptable() {
		return
	}
	// A resourceVersion asks for a state no older than it: one the store
	// has not reached is kube's 504 (Store.Get).
	obj, err := q.store.Get(q.ctx(), q.info.Namespace, q.info.Name, &metav1.GetOptions{ResourceVersion: q.r.URL.Query().Get("resourceVersion")})
	if err != nil {
		q.fail(err)
		return
	}
	q.respond(http.StatusOK, obj)
}

// listOptions decodes the list query parameters exactly as kube does (the
// same codec, so the same 400 messages for malformed selectors).
func (q *request) listOptions() (*metainternalversion.ListOptions, error) {
	opts := &metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(q.r.URL.Query(), metav1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return opts, nil
}

// watchPath serves kube's deprecated /watch/ paths as a list request with
// watch=true; for one object, as a watch selecting metadata.name (a
// fieldSelector of the request may only name the same object), as kube's
// ListResource does.
func (q *request) watchPath() {
	if _, err := negotiate(q.r); err != nil {
		q.fail(err)
		return
	}
	opts, err := q.listOptions()
	if err != nil {
		q.fail(err)
		return
	}
	opts.Watch = true
	if name := q.info.Name; name != "" {
		if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
			if selected, ok := opts.FieldSelector.RequiresExactMatch("metadata.name"); !ok || selected != name {
				q.fail(apierrors.NewBadRequest("fieldSelector metadata.name doesn't match requested name"))
				return
			}
		} else {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name)
		}
	}
	q.watch(opts)
}

func (q *request) list() {
	n, err := negotiate(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	opts, err := q.listOptions()
	if err != nil {
		q.fail(err)
		return
	}
	if opts.Watch {
		q.watch(opts)
		return
	}
	page, err := q.store.ListPage(q.ctx(), q.info.Namespace, opts)
	if err != nil {
		q.fail(err)
		return
	}
	// Plain compact JSON and plain protobuf are assembled from the cached
	// encodings of the items; every other form (YAML, pretty JSON, Tables,
	// metadata) goes through the typed list, decoded for this answer.
	if n.target == nil && n.media == mediaProtobuf {
		// Protobuf's lengths come first: the pieces are all known before
		// a byte is written (the cache's kept messages, not copies).
		chunks, err := page.ProtobufChunks()
		if err != nil {
			q.fail(err)
			return
		}
		q.w.Header().Set("Content-Type", n.media.contentType())
		writeChunks(q.w, http.StatusOK, chunks)
		return
	}
	if n.target == nil && n.media == mediaJSON && !wantsPretty(q.r, n) {
		q.writeJSONList(page, n)
		return
	}
	t, err := q.transformer()
	if err != nil {
		q.fail(err)
		return
	}
	view := listView(t)
	if t != nil && t.target.Kind == "Table" && n.media == mediaJSON && !wantsPretty(q.r, n) && page.Len() > 0 {
		q.writeTableList(page, t, view, n)
		return
	}
	list, err := page.ObjectFor(view)
	if err != nil {
		q.fail(err)
		return
	}
	q.respond(http.StatusOK, list)
}

// listView is how much of each item the negotiated form of a list reads
// (t, the request's transformer, may be nil): a Table without the whole
// object prints from the metadata and a few fields, a
// PartialObjectMetadataList reads the metadata only; everything else
// (YAML, pretty JSON, protobuf, includeObject=Object) needs every field.
func listView(t *transformer) registry.ItemView {
	switch {
	case t == nil:
		return registry.FullItems
	case t.target.Kind == "Table" && t.options.IncludeObject != metav1.IncludeObject:
		return registry.TableItems
	case t.target.Kind == "PartialObjectMetadataList":
		return registry.MetadataItems
	}
	return registry.FullItems
}

// decodeBody reads and decodes the request body into a new object of the
// endpoint's type.
func (q *request) decodeBody(into runtime.Object, gvk schema.GroupVersionKind) error {
	return q.decodeBodyAccepting(into, gvk, nil)
}

// decodeBodyAccepting is decodeBody that also takes bodies of gvk's kind in
// the group versions accepts allows (nil: none).
func (q *request) decodeBodyAccepting(into runtime.Object, gvk schema.GroupVersionKind, accepts func(schema.GroupVersion) bool) error {
	fv, err := parseFieldValidation(q.r)
	if err != nil {
		return err
	}
	body, err := readBody(q.w, q.r)
	if err != nil {
		return err
	}
	if err := decodeRequestObject(q.w, q.r, body, into, gvk, fv, accepts); err != nil {
		return err
	}
	trace.Mark(q.r.Context(), trace.Decoded)
	return nil
}

// dryRun parses the dryRun parameter: only "All" is valid.
func (q *request) dryRun(optionsKind string) (bool, error) {
	values := q.r.URL.Query()["dryRun"]
	var errs field.ErrorList
	for i, v := range values {
		if v != metav1.DryRunAll {
			errs = append(errs, field.NotSupported(field.NewPath("dryRun").Index(i), v, []string{metav1.DryRunAll}))
		}
	}
	if len(errs) > 0 {
		return false, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: optionsKind}, "", errs)
	}
	return len(values) > 0, nil
}

// acceptedWriteOptions is the start every create and update shares, in
// kube's order: the Accept check (406), then the options validated as
// optionsKind. It answers the request and returns false when either fails.
func (q *request) acceptedWriteOptions(optionsKind string) (writeOptions, bool) {
	if !q.acceptable() {
		return writeOptions{}, false
	}
	opts, err := q.writeOptions(optionsKind, "")
	if err != nil {
		q.fail(err)
		return writeOptions{}, false
	}
	return opts, true
}

// decodedWrite is acceptedWriteOptions followed by the body decoded into a
// new object of the endpoint's type, as create and update both begin.
func (q *request) decodedWrite(optionsKind string) (writeOptions, runtime.Object, bool) {
	opts, ok := q.acceptedWriteOptions(optionsKind)
	if !ok {
		return writeOptions{}, nil, false
	}
	obj := q.store.New()
	if err := q.decodeBody(obj, q.gvk()); err != nil {
		q.fail(err)
		return writeOptions{}, nil, false
	}
	return opts, obj, true
}

func (q *request) create() {
	opts, obj, ok := q.decodedWrite("CreateOptions")
	if !ok {
		return
	}
	out, err := q.store.Create(q.ctx(), q.info.Namespace, obj, registry.CreateOptions{DryRun: opts.dryRun, FieldManager: opts.manager})
	if err != nil {
		q.fail(err)
		return
	}
	q.respond(http.StatusCreated, out)
}

func (q *request) update() {
	opts, obj, ok := q.decodedWrite("UpdateOptions")
	if !ok {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		q.fail(err)
		return
	}
	if m.GetName() != q.info.Name {
		q.fail(badRequest("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), q.info.Name))
		return
	}
	if q.store.Info().Namespaced && m.GetNamespace() != "" && m.GetNamespace() != q.info.Namespace {
		q.fail(badRequest("the namespace of the provided object does not match the namespace sent on the request"))
		return
	}
	replace := func(_ context.Context, _ runtime.Object) (runtime.Object, error) {
		return obj.DeepCopyObject(), nil
	}
	out, created, err := q.store.Update(q.ctx(), q.info.Namespace, q.info.Name, replace, registry.UpdateOptions{DryRun: opts.dryRun, FieldManager: opts.manager})
	if err != nil {
		q.fail(err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	q.respond(code, out)
}

// acceptedDeleteOptions is the start delete and deleteCollection share:
// the Accept check (406), then the delete options. It answers the request
// and returns false when either fails.
func (q *request) acceptedDeleteOptions() (*metav1.DeleteOptions, bool) {
	if !q.acceptable() {
		return nil, false
	}
	opts, err := q.deleteOptions()
	if err != nil {
		q.fail(err)
		return nil, false
	}
	return opts, true
}

func (q *request) delete() {
	opts, ok := q.acceptedDeleteOptions()
	if !ok {
		return
	}
	out, deleted, err := q.store.Delete(q.ctx(), q.info.Namespace, q.info.Name, opts)
	if err != nil {
		q.fail(err)
		return
	}
	if deleted && !q.store.ReturnsDeletedObject() {
		m, _ := meta.Accessor(out)
		info := q.store.Info()
		q.respond(http.StatusOK, &metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusSuccess,
			Details:  &metav1.StatusDetails{Name: q.info.Name, Group: info.Group, Kind: info.Resource, UID: m.GetUID()},
		})
		return
	}
	q.respond(http.StatusOK, out)
}

func (q *request) deleteCollection() {
	opts, ok := q.acceptedDeleteOptions()
	if !ok {
		return
	}
	listOpts, err := q.listOptions()
	if err != nil {
		q.fail(err)
		return
	}
	out, err := q.store.DeleteCollection(q.ctx(), q.info.Namespace, listOpts, opts)
	if err != nil {
		q.fail(err)
		return
	}
	q.respond(http.StatusOK, out)
}

// deleteOptions come from the body when there is one, else from the query.
func (q *request) deleteOptions() (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	body, err := readBody(q.w, q.r)
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		if err := decodeDeleteOptions(q.r, body, opts); err != nil {
			return nil, err
		}
	}
	query := q.r.URL.Query()
	if v := query.Get("gracePeriodSeconds"); v != "" && opts.GracePeriodSeconds == nil {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, badRequest("invalid gracePeriodSeconds %q: %v", v, err)
		}
		opts.GracePeriodSeconds = &n
	}
	if v := query.Get("propagationPolicy"); v != "" && opts.PropagationPolicy == nil {
		p := metav1.DeletionPropagation(v)
		opts.PropagationPolicy = &p
	}
	if v := query.Get("orphanDependents"); v != "" && opts.OrphanDependents == nil { //nolint:staticcheck // still accepted
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, badRequest("invalid orphanDependents %q: %v", v, err)
		}
		opts.OrphanDependents = &b //nolint:staticcheck // still accepted
	}
	if len(opts.DryRun) == 0 {
		opts.DryRun = query["dryRun"]
	}
	return opts, nil
}

// createSubresource answers a POST to a Creater; admit runs the admission
// chain on the decoded object before the Creater acts.
func (q *request) createSubresource(c Creater, admit func(ctx context.Context, obj runtime.Object, dryRun bool) error) {
	// Validated as every create's options are (kube's createHandler),
	// though nothing is stored to record a manager for.
	opts, ok := q.acceptedWriteOptions("CreateOptions")
	if !ok {
		return
	}
	dryRun := opts.dryRun
	obj := c.New()
	var accepts func(schema.GroupVersion) bool
	if a, ok := c.(GroupVersionAcceptor); ok {
		accepts = a.AcceptsGroupVersion
	}
	if err := q.decodeBodyAccepting(obj, c.GroupVersionKind(), accepts); err != nil {
		q.fail(err)
		return
	}
	ctx := q.ctx()
	if err := admit(ctx, obj, dryRun); err != nil {
		q.fail(err)
		return
	}
	out, err := c.Create(ctx, q.info.Namespace, q.info.Name, obj, dryRun)
	if err != nil {
		q.fail(err)
		return
	}
	// A Status answer carries its own code, as in kube (pods/eviction
	// answers 500 when a pod has two budgets).
	code := http.StatusCreated
	if st, ok := out.(*metav1.Status); ok && st.Code != 0 {
		code = int(st.Code)
	}
	q.respond(code, out)
}

// writeJSONList writes a page as compact JSON, streamed in batches of
// items (listPage.WriteJSON) with no Content-Length, as kube's encoder
// streams a list: items kept as protobuf are made JSON a batch at a time.
// An error after the first bytes went out can only cut the answer short;
// it is logged.
func (q *request) writeJSONList(page listPage, n negotiation) {
	bw := bufio.NewWriterSize(q.w, 64<<10)
	started, err := page.WriteJSON(bw, func() {
		q.w.Header().Set("Content-Type", n.media.contentType())
		q.w.Header().Set("Cache-Control", "no-cache, private")
		q.w.WriteHeader(http.StatusOK)
	})
	if !started {
		q.fail(err)
		return
	}
	if err == nil {
		_, err = bw.Write(newline)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil && q.r.Context().Err() == nil {
		loggerFrom(q.r.Context()).Error("list answer cut short", "path", q.r.URL.Path, "err", err)
	}
}
