package registry

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/corekube/corekube/storage"
	"github.com/corekube/corekube/watch/rawjson"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// encode serializes obj for storage: with its kind and apiVersion, without
// a resourceVersion (the storage revision is the resourceVersion; storing
// it too would make it stale on every write).
func (s *Store) encode(obj runtime.Object) ([]byte, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := accessor.GetResourceVersion()
	accessor.SetResourceVersion("")
	defer accessor.SetResourceVersion(rv)
	s.setTypeMeta(obj)
	data, err := MarshalJSON(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", s.info.Kind, err)
	}
	return data, nil
}

// encodeWithoutManagedFields is encode of obj without its managedFields,
// to which spliceManagedFields adds a list of entries to make what encode
// gives for obj with those entries. ok is false when encode does not
// encode obj so (obj has no managedFields, or the encoding failed).
func (s *Store) encodeWithoutManagedFields(obj runtime.Object) (rest []byte, ok bool) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, false
	}
	rv := accessor.GetResourceVersion()
	accessor.SetResourceVersion("")
	defer accessor.SetResourceVersion(rv)
	s.setTypeMeta(obj)
	rest, _, ok, err = marshalWithoutManagedFields(obj)
	return rest, ok && err == nil
}

// decode reverses encode and sets the resourceVersion from the revision.
func (s *Store) decode(kv storage.KV) (runtime.Object, error) {
	obj := s.strategy.New()
	if err := json.Unmarshal(kv.Value, obj); err != nil {
		return nil, fmt.Errorf("decode %s at %s: %w", s.info.Kind, kv.Key, err)
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	accessor.SetResourceVersion(strconv.FormatInt(kv.Revision, 10))
	s.setTypeMeta(obj)
	return obj, nil
}

// decodeWithoutManagedFields is decode for readers that never look at
// metadata.managedFields (the watch cache computing labels and fields, the
// server's own caches): it leaves them out of the JSON it decodes, which
// saves decoding a third of a pod's encoding.
func (s *Store) decodeWithoutManagedFields(kv storage.KV) (runtime.Object, error) {
	kv.Value = withoutManagedFields(kv.Value)
	return s.decode(kv)
}

// withoutManagedFields returns the JSON of an object without its
// metadata.managedFields member: data itself when it has none, else a copy
// (data may be shared). It expects what encoding/json writes; anything it
// cannot follow comes back unchanged.
func withoutManagedFields(data []byte) []byte {
	metadata, err := rawjson.Member(data, "metadata")
	if err != nil || metadata == nil {
		return data
	}
	it := rawjson.NewObject(metadata)
	for it.Next() {
		if string(it.Key()) != "managedFields" {
			continue
		}
		// The member runs from the key's opening quote to the end of its
		// value; one comma beside it goes too.
		start := offsetIn(data, it.Key()) - 1
		end := offsetIn(data, it.Value()) + len(it.Value())
		if start < 0 || data[start] != '"' {
			return data
		}
		after := end
		for after < len(data) && isSpace(data[after]) {
			after++
		}
		before := start - 1
		for before >= 0 && isSpace(data[before]) {
			before--
		}
		switch {
		case after < len(data) && data[after] == ',':
			end = after + 1
		case before >= 0 && data[before] == ',':
			start = before
		}
		out := make([]byte, 0, len(data)-(end-start))
		return append(append(out, data[:start]...), data[end:]...)
	}
	return data
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// offsetIn is the offset in data of sub, a slice of data.
func offsetIn(data, sub []byte) int { return cap(data) - cap(sub) }

func (s *Store) setTypeMeta(obj runtime.Object) {
	obj.GetObjectKind().SetGroupVersionKind(s.info.GroupVersion().WithKind(s.info.Kind))
}

// DecodeObjectMeta decodes the JSON of an ObjectMeta into m as json.Unmarshal
// would, several times faster: it reads the common fields itself and leaves
// only the rare, nested ones (ownerReferences, managedFields) to
// encoding/json. Partial decodes of cached objects (Table rows,
// PartialObjectMetadata) spend most of their time here.
func DecodeObjectMeta(data []byte, m *metav1.ObjectMeta) error {
	it := rawjson.NewObject(data)
	for it.Next() {
		value := it.Value()
		var err error
		switch string(it.Key()) {
		case "name":
			m.Name, err = rawjson.String(value)
		case "generateName":
			m.GenerateName, err = rawjson.String(value)
		case "namespace":
			m.Namespace, err = rawjson.String(value)
		case "selfLink":
			m.SelfLink, err = rawjson.String(value)
		case "uid":
			var uid string
			uid, err = rawjson.String(value)
			m.UID = types.UID(uid)
		case "resourceVersion":
			m.ResourceVersion, err = rawjson.String(value)
		case "generation":
			if string(value) != "null" {
				m.Generation, err = strconv.ParseInt(string(value), 10, 64)
			}
		case "creationTimestamp":
			m.CreationTimestamp, err = DecodeTime(value)
		case "deletionTimestamp":
			m.DeletionTimestamp, err = decodeTimePtr(value)
		case "deletionGracePeriodSeconds":
			if string(value) != "null" {
				var n int64
				n, err = strconv.ParseInt(string(value), 10, 64)
				m.DeletionGracePeriodSeconds = &n
			}
		case "labels":
			m.Labels, err = decodeStringMap(value)
		case "annotations":
			m.Annotations, err = decodeStringMap(value)
		case "finalizers":
			m.Finalizers, err = decodeStrings(value)
		case "ownerReferences":
			err = json.Unmarshal(value, &m.OwnerReferences)
		case "managedFields":
			m.ManagedFields, err = decodeManagedFields(value)
		default:
			// Unknown fields are ignored, as encoding/json does.
		}
		if err != nil {
			return fmt.Errorf("metadata.%s: %w", it.Key(), err)
		}
	}
	return it.Err()
}

// decodeManagedFields decodes metadata.managedFields as json.Unmarshal
// would, without validating and copying each entry's fieldsV1 twice (its
// UnmarshalJSON keeps the raw bytes): they are half of a pod's encoding,
// and Table rows and PartialObjectMetadata decode them for every item.
func decodeManagedFields(value []byte) ([]metav1.ManagedFieldsEntry, error) {
	if string(value) == "null" {
		return nil, nil
	}
	out := []metav1.ManagedFieldsEntry{}
	entries := rawjson.NewArray(value)
	for entries.Next() {
		var e metav1.ManagedFieldsEntry
		it := rawjson.NewObject(entries.Value())
		for it.Next() {
			v := it.Value()
			var err error
			switch string(it.Key()) {
			case "manager":
				e.Manager, err = rawjson.String(v)
			case "operation":
				var op string
				op, err = rawjson.String(v)
				e.Operation = metav1.ManagedFieldsOperationType(op)
			case "apiVersion":
				e.APIVersion, err = rawjson.String(v)
			case "time":
				e.Time, err = decodeTimePtr(v)
			case "fieldsType":
				e.FieldsType, err = rawjson.String(v)
			case "fieldsV1":
				if string(v) != "null" {
					e.FieldsV1 = &metav1.FieldsV1{Raw: append([]byte(nil), v...)}
				}
			case "subresource":
				e.Subresource, err = rawjson.String(v)
			}
			if err != nil {
				return nil, fmt.Errorf("managedFields: %s: %w", it.Key(), err)
			}
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, entries.Err()
}

func decodeTimePtr(value []byte) (*metav1.Time, error) {
	if string(value) == "null" {
		return nil, nil
	}
	t, err := DecodeTime(value)
	return &t, err
}

// decodeTime is metav1.Time's UnmarshalJSON without its inner
// json.Unmarshal of the string.
func DecodeTime(value []byte) (metav1.Time, error) {
	if string(value) == "null" {
		return metav1.Time{}, nil
	}
	s, err := rawjson.String(value)
	if err != nil {
		return metav1.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return metav1.Time{}, err
	}
	return metav1.NewTime(t.Local()), nil
}

// decodeStringMap decodes a JSON object of strings: nil for null, an empty
// map for {} (as encoding/json).
func decodeStringMap(value []byte) (map[string]string, error) {
	if string(value) == "null" {
		return nil, nil
	}
	m := map[string]string{}
	it := rawjson.NewObject(value)
	for it.Next() {
		k, err := rawjson.Unescape(it.Key())
		if err != nil {
			return nil, err
		}
		if m[k], err = rawjson.String(it.Value()); err != nil {
			return nil, err
		}
	}
	return m, it.Err()
}

// decodeStrings decodes a JSON array of strings: nil for null, an empty
// slice for [] (as encoding/json).
func decodeStrings(value []byte) ([]string, error) {
	if string(value) == "null" {
		return nil, nil
	}
	out := []string{}
	it := rawjson.NewArray(value)
	for it.Next() {
		s, err := rawjson.String(it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, it.Err()
}
