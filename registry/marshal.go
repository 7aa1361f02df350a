package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/corekube/corekube/watch/rawjson"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// MarshalJSON is json.Marshal of an API object, byte for byte, but faster
// for objects with managedFields. encoding/json validates and compacts
// whatever a json.Marshaler returns, which for each managedFields entry's
// fieldsV1 (kept as raw JSON) is a second pass over up to half of a pod's
// encoding. The fieldsV1 the server holds are always compact JSON it
// wrote itself (the field manager encodes them; stored ones were encoded
// so), so they are copied as they are: the object is encoded without its
// managedFields, which are spliced in at the end of its metadata, where
// encoding/json writes them (the last field of ObjectMeta).
func MarshalJSON(obj any) ([]byte, error) {
	switch o := obj.(type) {
	case *metav1.Table:
		return marshalTable(o)
	case runtime.Object:
		rest, managed, ok, err := marshalWithoutManagedFields(o)
		if !ok {
			return json.Marshal(obj)
		}
		if err != nil {
			return nil, err
		}
		return spliceManagedFields(rest, managed)
	default:
		return json.Marshal(obj)
	}
}

// marshalWithoutManagedFields is the first half of MarshalJSON of an
// object with managedFields: the encoding of the object without them, and
// them. ok is false when MarshalJSON encodes o as encoding/json does (no
// managedFields, or not a pointer to a struct).
func marshalWithoutManagedFields(o runtime.Object) (rest []byte, managed []metav1.ManagedFieldsEntry, ok bool, err error) {
	m, err := meta.Accessor(o)
	if err != nil || len(m.GetManagedFields()) == 0 {
		return nil, nil, false, nil
	}
	managed = m.GetManagedFields()
	// A shallow copy of the object without them: obj may be shared.
	v := reflect.ValueOf(o)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, nil, false, nil
	}
	cp := reflect.New(v.Elem().Type())
	cp.Elem().Set(v.Elem())
	cm, err := meta.Accessor(cp.Interface())
	if err != nil {
		return nil, nil, false, nil
	}
	cm.SetManagedFields(nil)
	rest, err = json.Marshal(cp.Interface())
	return rest, managed, true, err
}

// spliceManagedFields adds "managedFields" as the last member of the
// metadata of data, an object encoded without them.
func spliceManagedFields(data []byte, managed []metav1.ManagedFieldsEntry) ([]byte, error) {
	md, err := rawjson.Member(data, "metadata")
	if err != nil || len(md) < 2 || md[len(md)-1] != '}' {
		return nil, fmt.Errorf("encode managedFields: no metadata object in %.40q", data)
	}
	end := offsetIn(data, md) + len(md) - 1 // the metadata's closing brace
	out := make([]byte, 0, len(data)+managedFieldsSize(managed))
	out = append(out, data[:end]...)
	if len(md) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"managedFields":[`...)
	for i := range managed {
		if i > 0 {
			out = append(out, ',')
		}
		if out, err = appendManagedFieldsEntry(out, &managed[i]); err != nil {
			return nil, err
		}
	}
	out = append(out, ']')
	return append(out, data[end:]...), nil
}

func managedFieldsSize(managed []metav1.ManagedFieldsEntry) int {
	n := 20
	for i := range managed {
		n += 160
		if managed[i].FieldsV1 != nil {
			n += len(managed[i].FieldsV1.Raw)
		}
	}
	return n
}

// appendManagedFieldsEntry appends e as encoding/json writes it, its
// fieldsV1 copied raw.
func appendManagedFieldsEntry(out []byte, e *metav1.ManagedFieldsEntry) ([]byte, error) {
	rest := *e
	rest.FieldsV1, rest.Subresource = nil, ""
	head, err := json.Marshal(&rest)
	if err != nil {
		return nil, err
	}
	out = append(out, head[:len(head)-1]...)
	members := len(head) > 2
	if e.FieldsV1 != nil {
		raw := e.FieldsV1.Raw
		if raw == nil {
			raw = []byte("null")
		} else if !compactObject(raw) {
			// Not what the server writes: let encoding/json check it.
			var compacted, escaped bytes.Buffer
			if err := json.Compact(&compacted, raw); err != nil {
				return nil, fmt.Errorf("encode managedFields: %w", err)
			}
			json.HTMLEscape(&escaped, compacted.Bytes())
			raw = escaped.Bytes()
		}
		if members {
			out = append(out, ',')
		}
		out = append(append(out, `"fieldsV1":`...), raw...)
		members = true
	}
	if e.Subresource != "" {
		s, err := json.Marshal(e.Subresource)
		if err != nil {
			return nil, err
		}
		if members {
			out = append(out, ',')
		}
		out = append(append(out, `"subresource":`...), s...)
	}
	return append(out, '}'), nil
}

// compactObject reports, cheaply, whether raw looks like the compact JSON
// object the server writes: braces at both ends, no white space or
// control characters outside strings, no characters encoding/json would
// escape. The full check is what json.Compact does.
func compactObject(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return false
	}
	for _, c := range raw {
		if c <= ' ' || c == '<' || c == '>' || c == '&' || c >= 0x80 {
			return false
		}
	}
	return true
}

// marshalTable is MarshalJSON of a Table: its rows' objects
// (PartialObjectMetadata by default, each with managedFields) are encoded
// by MarshalJSON.
func marshalTable(t *metav1.Table) ([]byte, error) {
	if t.Rows == nil {
		return json.Marshal(t)
	}
	out, err := TableJSONHead(t)
	if err != nil {
		return nil, err
	}
	for i := range t.Rows {
		if i > 0 {
			out = append(out, ',')
		}
		if out, err = AppendTableRowJSON(out, &t.Rows[i]); err != nil {
			return nil, err
		}
	}
	return append(out, TableJSONEnd...), nil
}

// TableJSONEnd closes what TableJSONHead opens.
const TableJSONEnd = "]}"

// TableJSONHead is the JSON of t (without its rows) up to its first row:
// a Table's answer is TableJSONHead, its rows' AppendTableRowJSON apart by
// commas, and TableJSONEnd, the bytes MarshalJSON gives for t with those
// rows (and which json.Marshal gives). A large Table is written so, a
// batch of rows at a time.
func TableJSONHead(t *metav1.Table) ([]byte, error) {
	head := *t
	head.Rows = nil
	data, err := marshalOpenLast(&head, "rows")
	if err != nil {
		return nil, err
	}
	return append(data, '['), nil
}

// marshalOpenLast is the JSON of v, whose last field is named field and
// is null, cut after that field's colon, for its value to be appended.
func marshalOpenLast(v any, field string) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	null := `"` + field + `":null}`
	if !bytes.HasSuffix(data, []byte(null)) {
		return nil, fmt.Errorf("%T encodes as %q…, not ending in its %s", v, data[:min(len(data), 40)], field)
	}
	return data[:len(data)-len("null}")], nil
}

// AppendTableRowJSON appends the JSON of row to out, its object encoded
// by MarshalJSON.
func AppendTableRowJSON(out []byte, row *metav1.TableRow) ([]byte, error) {
	head := *row
	head.Object = runtime.RawExtension{}
	r, err := marshalOpenLast(&head, "object")
	if err != nil {
		return nil, err
	}
	out = append(out, r...)
	var o []byte
	if row.Object.Object != nil {
		o, err = MarshalJSON(row.Object.Object)
	} else {
		o, err = json.Marshal(&row.Object)
	}
	if err != nil {
		return nil, err
	}
	out = append(out, o...)
	return append(out, '}'), nil
}
