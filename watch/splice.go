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
	if !enterMetadata(&s) {
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

// enterMetadata moves s past the opening brace of the top-level object's
// metadata member; false when data is not an object with a metadata
// object.
func enterMetadata(s *rawjson.Scanner) bool {
	s.Space()
	if !s.Byte('{') {
		return false
	}
	for {
		s.Space()
		key, ok := s.Str()
		if !ok {
			return false
		}
		s.Space()
		if !s.Byte(':') {
			return false
		}
		s.Space()
		if string(key) == "metadata" {
			return s.Byte('{')
		}
		if !s.Value() {
			return false
		}
		s.Space()
		if !s.Byte(',') {
			return false
		}
	}
}

// cutResourceVersion returns data, an object's JSON, without its
// metadata.resourceVersion member, in a new slice: for encoding/json's
// output, what it writes for the object with no resourceVersion (an
// omitempty member, the comma that went with it). ok is false when data
// has no metadata object with a resourceVersion.
func cutResourceVersion(data []byte) (out []byte, ok bool) {
	s := rawjson.Scanner{B: data}
	if !enterMetadata(&s) {
		return nil, false
	}
	prevEnd := -1 // where the previous member's value ends
	for {
		s.Space()
		start := s.I
		key, ok := s.Str()
		if !ok {
			return nil, false
		}
		s.Space()
		if !s.Byte(':') {
			return nil, false
		}
		s.Space()
		if !s.Value() {
			return nil, false
		}
		end := s.I
		s.Space()
		comma := s.Peek() == ','
		if !comma && s.Peek() != '}' {
			return nil, false
		}
		if string(key) == "resourceVersion" {
			switch {
			case prevEnd >= 0: // the comma before it goes with it
				start = prevEnd
			case comma: // the first member: the comma after it
				s.I++
				s.Space()
				end = s.I
			}
			out = make([]byte, 0, len(data)-(end-start))
			return append(append(out, data[:start]...), data[end:]...), true
		}
		if !comma {
			return nil, false
		}
		s.I++
		prevEnd = end
	}
}
