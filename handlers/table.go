package handlers

import (
	"fmt"
	"net/http"
	"time"

	"github.com/corekube/corekube/registry"
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
	tc, printer := t.store.Strategy().(registry.TableConvertor)
	if !printer {
		tc = defaultTableConvertor{}
	}
	now := t.now()
	table := &metav1.Table{}
	table.GetObjectKind().SetGroupVersionKind(gv.WithKind("Table"))
	if !t.options.NoHeaders {
		table.ColumnDefinitions = tc.TableColumns()
	}
	info := t.store.Info()
	addRow := func(item runtime.Object) error {
		row, err := tc.TableRow(item, now)
		if err != nil {
			return err
		}
		switch t.options.IncludeObject {
		case metav1.IncludeObject:
			item.GetObjectKind().SetGroupVersionKind(info.GroupVersion().WithKind(info.Kind))
			row.Object.Object = item
		case metav1.IncludeNone:
		default: // Metadata, the default
			if row.Object.Object, err = partial(item, gv); err != nil {
				return err
			}
		}
		table.Rows = append(table.Rows, row)
		return nil
	}
	if meta.IsListType(obj) {
		// kube's printers answer an empty list with no rows ([]), its
		// default table convertor with null rows.
		if printer {
			table.Rows = make([]metav1.TableRow, 0, meta.LenList(obj))
		}
		if err := meta.EachListItem(obj, addRow); err != nil {
			return nil, err
		}
		if lm, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = lm.GetResourceVersion()
			table.Continue = lm.GetContinue()
			table.RemainingItemCount = lm.GetRemainingItemCount()
		}
	} else {
		if err := addRow(obj); err != nil {
			return nil, err
		}
		if m, err := meta.CommonAccessor(obj); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}
	return table, nil
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
