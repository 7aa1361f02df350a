package registry

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/corekube/corekube/storage"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
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
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", s.info.Kind, err)
	}
	return data, nil
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

func (s *Store) setTypeMeta(obj runtime.Object) {
	obj.GetObjectKind().SetGroupVersionKind(s.info.GroupVersion().WithKind(s.info.Kind))
}
