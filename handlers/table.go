package handlers

import (
	"bufio"
	"fmt"
	"net/http"
	"time"

	"github.com/corekube/corekube/registry"
	"github.com/corekube/corekube/storage/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// This file serves the alternative forms of a resource that a client asks
// for with as=, g= and v= parameters on an Accept entry, as kube-apiserver
// does (pkg/endpoints/handlers/response.go):
//
//   - application/json;as=Table;g=meta.k8s.io;v=v1 (or v1beta1): a Table of
//     the object or list, printed by the strategy's TableConvertor (kube's
//     default table for strategies without one), rows carrying the object as
//     PartialObjectMetadata, the full object or nothing (includeObject);
//   - as=PartialObjectMetadata / as=PartialObjectMetadataList: the metadata
//     of an object / of a list's items.
//
// Which as/g/v an entry may ask for, and in which encodings, is decided
// in negotiate.go: any other makes the entry unacceptable; the next entry
// may still be served.

// transformer turns the objects of one response into the negotiated form.
type transformer struct {
	target  *schema.GroupVersionKind
	options *metav1.TableOptions // for a Table
	store   restStorage
	now     func() time.Time
}

// transformer returns the transformer of the request, nil when the
// response is the object itself (or the Accept header is unacceptable,
// which writeObject answers). Invalid Table options are a 400.
func (q *request) transformer() (*transformer, error) {
	n, err := negotiate(q.r)
	if err != nil || n.target == nil || q.store == nil {
		// A create-only resource (no store) answers its object as it is.
		return nil, nil
	}
	t := &transformer{target: n.target, store: q.store, now: time.Now}
	if n.target.Kind == "Table" {
		if t.options, err = tableOptions(q.r); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// tableOptions decodes and validates the Table query parameters
// (includeObject) as kube's optionsForTransform does.
func tableOptions(r *http.Request) (*metav1.TableOptions, error) {
	opts := &metav1.TableOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	switch errs := metav1validation.ValidateTableOptions(opts); len(errs) {
	case 0:
		return opts, nil
	case 1:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs[0].Error()))
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs))
	}
}

// transform answers obj in the negotiated form: the response of get, list,
// create, update, patch and delete.
func (q *request) transform(obj runtime.Object) (runtime.Object, error) {
	t, err := q.transformer()
	if err != nil || t == nil {
		return obj, err
	}
	return t.transform(obj)
}

// watchTransform returns the function that puts each watch event's object
// in the negotiated form. As in kube, only the first event's Table carries
// the column definitions, and an object that cannot be transformed is sent
// as it is.
func (q *request) watchTransform() (func(runtime.Object) runtime.Object, error) {
	t, err := q.transformer()
	if err != nil {
		return nil, err
	}
	return func(obj runtime.Object) runtime.Object {
		if t == nil {
			return obj
		}
		out, err := t.transform(obj)
		if err != nil {
			loggerFrom(q.ctx()).Warn("transform watch event", "path", q.r.URL.Path, "target", t.target.Kind, "err", err)
			return obj
		}
		if t.options != nil {
			t.options.NoHeaders = true
		}
		return out
	}, nil
}

func (t *transformer) transform(obj runtime.Object) (runtime.Object, error) {
	if _, ok := obj.(*metav1.Status); ok {
		return obj, nil
	}
	gv := t.target.GroupVersion()
	switch t.target.Kind {
	case "PartialObjectMetadata":
		return asPartialObjectMetadata(obj, gv)
	case "PartialObjectMetadataList":
		return asPartialObjectMetadataList(obj, gv)
	default:
		return t.asTable(obj, gv)
	}
}

func notAcceptable(format string, args ...any) error {
	return newStatusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, fmt.Sprintf(format, args...))
}

// partial returns the PartialObjectMetadata of obj in group version gv.
func partial(obj runtime.Object, gv schema.GroupVersion) (*metav1.PartialObjectMetadata, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	p := meta.AsPartialObjectMetadata(m)
	p.GetObjectKind().SetGroupVersionKind(gv.WithKind("PartialObjectMetadata"))
	return p, nil
}

func asPartialObjectMetadata(obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error) {
	if meta.IsListType(obj) {
		return nil, notAcceptable("you requested PartialObjectMetadata, but the requested object is a list (%T)", obj)
	}
	return partial(obj, gv)
}

func asPartialObjectMetadataList(obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error) {
	lm, err := meta.ListAccessor(obj)
	if err != nil || !meta.IsListType(obj) {
		return nil, notAcceptable("you requested PartialObjectMetadataList, but the requested object is not a list (%T)", obj)
	}
	// Like kube, an empty list has null items.
	list := &metav1.PartialObjectMetadataList{}
	err = meta.EachListItem(obj, func(item runtime.Object) error {
		p, err := partial(item, gv)
		if err != nil {
			return err
		}
		list.Items = append(list.Items, *p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	list.ResourceVersion = lm.GetResourceVersion()
	list.Continue = lm.GetContinue()
	list.RemainingItemCount = lm.GetRemainingItemCount()
	list.GetObjectKind().SetGroupVersionKind(gv.WithKind("PartialObjectMetadataList"))
	if gv == metav1beta1.SchemeGroupVersion {
		return &metav1beta1.PartialObjectMetadataList{TypeMeta: list.TypeMeta, ListMeta: list.ListMeta, Items: list.Items}, nil
	}
	return list, nil
}

// asTable prints obj (one object or a list) as a Table in group version gv.
func (t *transformer) asTable(obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error) {
	p := t.tablePrinter(gv)
	table := p.newTable()
	if meta.IsListType(obj) {
		// kube's printers answer an empty list with no rows ([]), its
		// default table convertor with null rows.
		if p.printer {
			table.Rows = make([]metav1.TableRow, 0, meta.LenList(obj))
		}
		if err := meta.EachListItem(obj, func(item runtime.Object) error {
			row, err := p.row(item)
			table.Rows = append(table.Rows, row)
			return err
		}); err != nil {
			return nil, err
		}
		if lm, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = lm.GetResourceVersion()
			table.Continue = lm.GetContinue()
			table.RemainingItemCount = lm.GetRemainingItemCount()
		}
	} else {
		row, err := p.row(obj)
		if err != nil {
			return nil, err
		}
		table.Rows = append(table.Rows, row)
		if m, err := meta.CommonAccessor(obj); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}
	return table, nil
}

// tablePrinter prints a resource's objects as the rows of a Table in one
// group version, at one instant (ages are printed relative to it).
type tablePrinter struct {
	tc registry.TableConvertor
	// printer says whether tc is the resource's own (not the default).
	printer bool
	now     time.Time
	gv      schema.GroupVersion
	options *metav1.TableOptions
	// objectGVK is what a row's whole object (includeObject=Object) says
	// it is.
	objectGVK schema.GroupVersionKind
}

func (t *transformer) tablePrinter(gv schema.GroupVersion) *tablePrinter {
	tc, printer := t.store.Strategy().(registry.TableConvertor)
	if !printer {
		tc = defaultTableConvertor{}
	}
	info := t.store.Info()
	return &tablePrinter{tc: tc, printer: printer, now: t.now(), gv: gv, options: t.options,
		objectGVK: info.GroupVersion().WithKind(info.Kind)}
}

// newTable is a Table without rows: its kind and its columns.
func (p *tablePrinter) newTable() *metav1.Table {
	table := &metav1.Table{}
	table.GetObjectKind().SetGroupVersionKind(p.gv.WithKind("Table"))
	if !p.options.NoHeaders {
		table.ColumnDefinitions = p.tc.TableColumns()
	}
	return table
}

// row prints item, which becomes the row's object as includeObject asks
// (item itself for Object: it must be the caller's).
func (p *tablePrinter) row(item runtime.Object) (metav1.TableRow, error) {
	row, err := p.tc.TableRow(item, p.now)
	if err != nil {
		return row, err
	}
	switch p.options.IncludeObject {
	case metav1.IncludeObject:
		item.GetObjectKind().SetGroupVersionKind(p.objectGVK)
		row.Object.Object = item
	case metav1.IncludeNone:
	default: // Metadata, the default
		if row.Object.Object, err = partial(item, p.gv); err != nil {
			return row, err
		}
	}
	return row, nil
}

// tableWriteBatch is how many items writeTableList decodes and prints
// before it writes their rows. A variable for the tests.
var tableWriteBatch = 1024

// writeTableList writes a page as a Table in compact JSON (what kubectl get
// asks for), its items decoded, printed and written a batch at a time: a
// Table of all 150,000 pods of a cluster would otherwise hold every
// decoded pod and every row before its first byte. The bytes are those
// asTable's Table of the whole page encodes to. An error after the first
// bytes went out can only cut the answer short; it is logged.
func (q *request) writeTableList(page listPage, t *transformer, view registry.ItemView, n negotiation) {
	p := t.tablePrinter(n.target.GroupVersion())
	table := p.newTable()
	lm := page.ListMeta()
	table.ResourceVersion, table.Continue, table.RemainingItemCount = lm.ResourceVersion, lm.Continue, lm.RemainingItemCount
	out, err := registry.TableJSONHead(table)
	if err != nil {
		q.fail(apierrors.NewInternalError(err))
		return
	}
	bw := bufio.NewWriterSize(q.w, 64<<10)
	started := false
	total := page.Len()
	for lo := 0; lo < total && err == nil; lo += tableWriteBatch {
		out, err = p.appendRows(out, page, view, lo, min(lo+tableWriteBatch, total))
		if err != nil {
			break
		}
		if lo+tableWriteBatch >= total {
			out = append(out, registry.TableJSONEnd+"\n"...)
		}
		if !started {
			q.w.Header().Set("Content-Type", n.media.contentType())
			q.w.Header().Set("Cache-Control", "no-cache, private")
			q.w.WriteHeader(http.StatusOK)
			started = true
		}
		_, err = bw.Write(out)
		out = out[:0]
	}
	if !started {
		q.fail(err)
		return
	}
	if err == nil {
		err = bw.Flush()
	}
	trace.Mark(q.r.Context(), trace.ResponseWritten)
	if err != nil && q.r.Context().Err() == nil {
		loggerFrom(q.r.Context()).Error("table answer cut short", "path", q.r.URL.Path, "err", err)
	}
}

// appendRows appends the rows of the page's items lo to hi, each after a
// comma but the first of the page.
func (p *tablePrinter) appendRows(out []byte, page listPage, view registry.ItemView, lo, hi int) ([]byte, error) {
	items, err := page.ItemsFor(view, lo, hi)
	if err != nil {
		return out, err
	}
	for i, item := range items {
		row, err := p.row(item)
		if err != nil {
			return out, apierrors.NewInternalError(err)
		}
		if lo+i > 0 {
			out = append(out, ',')
		}
		if out, err = registry.AppendTableRowJSON(out, &row); err != nil {
			return out, apierrors.NewInternalError(err)
		}
		items[i] = nil // printed: its decoded object can go
	}
	return out, nil
}

// defaultTableConvertor is kube's table for resources without a printer
// (rest.NewDefaultTableConvertor): the name and the creation time.
type defaultTableConvertor struct{}

var objectMetaDoc = metav1.ObjectMeta{}.SwaggerDoc()

func (defaultTableConvertor) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: objectMetaDoc["name"]},
		{Name: "Created At", Type: "date", Description: objectMetaDoc["creationTimestamp"]},
	}
}

func (defaultTableConvertor) TableRow(obj runtime.Object, _ time.Time) (metav1.TableRow, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return metav1.TableRow{}, err
	}
	return metav1.TableRow{Cells: []any{m.GetName(), m.GetCreationTimestamp().UTC().Format(time.RFC3339)}}, nil
}
