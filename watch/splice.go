package watch

import (
	"strconv"

	"github.com/corekube/corekube/watch/rawjson"
)

// metaBeforeResourceVersion are the ObjectMeta fields encoding/json writes
// before resourceVersion (the struct's field order).
var metaBeforeResourceVersion = [...]string{"name", "generateName", "namespace", "selfLink", "uid"}

// spliceResourceVersion returns data, the JSON of an object stored without
// metadata.resourceVersion, with "resourceVersion":"<rev>" inserted where
// encoding/json writes it: after name, generateName, namespace, selfLink
// and uid. Stored values are json.Marshal of the typed object, so the
// result is the bytes json.Marshal gives for the object read back, without
// decoding it. The field (and the comma that goes with it) is inserted at
// offset at of data: out[at:at+len(out)-len(data)]. ok is false when data
// is not an object with a metadata object, or already carries a
// resourceVersion.
func spliceResourceVersion(data []byte, rev int64) (out []byte, at int, ok bool) {
	s := rawjson.Scanner{B: data}
	s.Space()
	if !s.Byte('{') {
		return nil, 0, false
	}
	for {
		s.Space()
		key, ok := s.Str()
		if !ok {
			return nil, 0, false
		}
		s.Space()
		if !s.Byte(':') {
			return nil, 0, false
		}
		s.Space()
		if string(key) == "metadata" {
			break
		}
		if !s.Value() {
			return nil, 0, false
		}
		s.Space()
		if !s.Byte(',') {
			return nil, 0, false
		}
	}
	if !s.Byte('{') {
		return nil, 0, false
	}
	// Find the first field encoding/json writes after resourceVersion, or
	// the end of metadata.
	first := true
	for {
		s.Space()
		at := s.I
		if s.Peek() == '}' {
			return insertResourceVersion(data, at, rev, !first, false), at, true
		}
		key, ok := s.Str()
		if !ok || string(key) == "resourceVersion" {
			return nil, 0, false
		}
		before := false
		for _, k := range metaBeforeResourceVersion {
			if string(key) == k {
				before = true
				break
			}
		}
		if !before {
			return insertResourceVersion(data, at, rev, false, true), at, true
		}
		first = false
		s.Space()
		if !s.Byte(':') {
			return nil, 0, false
		}
		s.Space()
		if !s.Value() {
			return nil, 0, false
		}
		s.Space()
		if s.Peek() == ',' {
			s.I++
		}
	}
}

// insertResourceVersion inserts the field at offset at, with a comma before
// or after it.
func insertResourceVersion(data []byte, at int, rev int64, commaBefore, commaAfter bool) []byte {
	out := make([]byte, 0, len(data)+len(`,"resourceVersion":"",`)+20)
	out = append(out, data[:at]...)
	if commaBefore {
		out = append(out, ',')
	}
	out = append(out, `"resourceVersion":"`...)
	out = strconv.AppendInt(out, rev, 10)
	out = append(out, '"')
	if commaAfter {
		out = append(out, ',')
	}
	return append(out, data[at:]...)
}
