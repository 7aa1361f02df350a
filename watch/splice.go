package watch

import "strconv"

// metaBeforeResourceVersion are the ObjectMeta fields encoding/json writes
// before resourceVersion (the struct's field order).
var metaBeforeResourceVersion = [...]string{"name", "generateName", "namespace", "selfLink", "uid"}

// spliceResourceVersion returns data, the JSON of an object stored without
// metadata.resourceVersion, with "resourceVersion":"<rev>" inserted where
// encoding/json writes it: after name, generateName, namespace, selfLink
// and uid. Stored values are json.Marshal of the typed object, so the
// result is the bytes json.Marshal gives for the object read back, without
// decoding it. ok is false when data is not an object with a metadata
// object, or already carries a resourceVersion.
func spliceResourceVersion(data []byte, rev int64) (out []byte, ok bool) {
	s := jsonScanner{b: data}
	s.space()
	if !s.byte('{') {
		return nil, false
	}
	for {
		s.space()
		key, ok := s.str()
		if !ok {
			return nil, false
		}
		s.space()
		if !s.byte(':') {
			return nil, false
		}
		s.space()
		if string(key) == "metadata" {
			break
		}
		if !s.value() {
			return nil, false
		}
		s.space()
		if !s.byte(',') {
			return nil, false
		}
	}
	if !s.byte('{') {
		return nil, false
	}
	// Find the first field encoding/json writes after resourceVersion, or
	// the end of metadata.
	first := true
	for {
		s.space()
		at := s.i
		if s.peek() == '}' {
			return insertResourceVersion(data, at, rev, !first, false), true
		}
		key, ok := s.str()
		if !ok || string(key) == "resourceVersion" {
			return nil, false
		}
		before := false
		for _, k := range metaBeforeResourceVersion {
			if string(key) == k {
				before = true
				break
			}
		}
		if !before {
			return insertResourceVersion(data, at, rev, false, true), true
		}
		first = false
		s.space()
		if !s.byte(':') {
			return nil, false
		}
		s.space()
		if !s.value() {
			return nil, false
		}
		s.space()
		if s.peek() == ',' {
			s.i++
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

// jsonScanner walks JSON just enough to find keys and skip values; it does
// not validate what it skips (the input is what encoding/json wrote).
type jsonScanner struct {
	b []byte
	i int
}

func (s *jsonScanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) byte(c byte) bool {
	if s.peek() != c {
		return false
	}
	s.i++
	return true
}

// str reads a string and returns its raw contents (escapes left as they
// are: the keys compared against have none).
func (s *jsonScanner) str() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
		case '"':
			s.i++
			return s.b[start : s.i-1], true
		default:
			s.i++
		}
	}
	return nil, false
}

// value skips one value.
func (s *jsonScanner) value() bool {
	switch s.peek() {
	case '"':
		_, ok := s.str()
		return ok
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, ok := s.str(); !ok {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			}
			s.i++
		}
		return false
	case 0:
		return false
	default: // number, true, false, null
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.i > start
			}
			s.i++
		}
		return false
	}
}
