// Package rawjson walks JSON that encoding/json wrote without decoding it:
// it finds an object's members and an array's elements as sub-slices of the
// input and skips everything else at the speed of a byte loop. The watch
// cache splices resourceVersions with it; the registry uses it to decode
// only the parts of an object a Table or PartialObjectMetadata needs.
//
// It checks structure only as far as it needs to find boundaries; the
// values it returns are still to be decoded (encoding/json validates them
// then). Input that is not what encoding/json writes may be misread but
// never reads out of bounds.
package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
)

// ErrSyntax reports input whose structure the scanner cannot follow.
var ErrSyntax = errors.New("rawjson: malformed JSON")

// Object steps through the members of a JSON object without allocating:
//
//	it := rawjson.NewObject(data)
//	for it.Next() {
//		use(it.Key(), it.Value())
//	}
//	if err := it.Err(); err != nil { ... }
//
// null is an empty object.
type Object struct {
	s          Scanner
	key, value []byte
	err        error
	started    bool
	done       bool
}

// NewObject returns an iterator over the members of data.
func NewObject(data []byte) Object { return Object{s: Scanner{B: data}} }

// Next moves to the next member and reports whether there is one.
func (o *Object) Next() bool {
	if o.done {
		return false
	}
	s := &o.s
	s.Space()
	if !o.started {
		o.started = true
		if s.Literal("null") {
			return o.end(nil)
		}
		if !s.Byte('{') {
			return o.end(ErrSyntax)
		}
		s.Space()
		if s.Byte('}') {
			return o.end(nil)
		}
	} else {
		if s.Byte('}') {
			return o.end(nil)
		}
		if !s.Byte(',') {
			return o.end(ErrSyntax)
		}
		s.Space()
	}
	key, ok := s.Str()
	if !ok {
		return o.end(ErrSyntax)
	}
	s.Space()
	if !s.Byte(':') {
		return o.end(ErrSyntax)
	}
	s.Space()
	start := s.I
	if !s.Value() {
		return o.end(ErrSyntax)
	}
	o.key, o.value = key, s.B[start:s.I]
	return true
}

func (o *Object) end(err error) bool {
	o.done, o.err, o.key, o.value = true, err, nil, nil
	return false
}

// Key is the current member's raw key (escapes left as they are).
func (o *Object) Key() []byte { return o.key }

// Value is the current member's raw value.
func (o *Object) Value() []byte { return o.value }

// Err is what stopped the iteration early, nil at the end of the object.
func (o *Object) Err() error { return o.err }

// Array steps through the elements of a JSON array as Object does through
// members; null is an empty array.
type Array struct {
	s       Scanner
	value   []byte
	err     error
	started bool
	done    bool
}

// NewArray returns an iterator over the elements of data.
func NewArray(data []byte) Array { return Array{s: Scanner{B: data}} }

// Next moves to the next element and reports whether there is one.
func (a *Array) Next() bool {
	if a.done {
		return false
	}
	s := &a.s
	s.Space()
	if !a.started {
		a.started = true
		if s.Literal("null") {
			return a.end(nil)
		}
		if !s.Byte('[') {
			return a.end(ErrSyntax)
		}
		s.Space()
		if s.Byte(']') {
			return a.end(nil)
		}
	} else {
		if s.Byte(']') {
			return a.end(nil)
		}
		if !s.Byte(',') {
			return a.end(ErrSyntax)
		}
		s.Space()
	}
	start := s.I
	if !s.Value() {
		return a.end(ErrSyntax)
	}
	a.value = s.B[start:s.I]
	return true
}

func (a *Array) end(err error) bool {
	a.done, a.err, a.value = true, err, nil
	return false
}

// Value is the current element's raw value.
func (a *Array) Value() []byte { return a.value }

// Err is what stopped the iteration early, nil at the end of the array.
func (a *Array) Err() error { return a.err }

// Member returns the raw value of the member key of the JSON object data,
// nil when it has none.
func Member(data []byte, key string) ([]byte, error) {
	it := NewObject(data)
	for it.Next() {
		if string(it.Key()) == key {
			return it.Value(), nil
		}
	}
	return nil, it.Err()
}

// String returns the JSON string value as a Go string (null is ""). A
// string without escapes costs one allocation; one with escapes (rare in what encoding/json
// writes) is left to encoding/json.
func String(value []byte) (string, error) {
	if string(value) == "null" {
		return "", nil
	}
	if len(value) < 2 || value[0] != '"' || value[len(value)-1] != '"' {
		return "", ErrSyntax
	}
	inner := value[1 : len(value)-1]
	for _, c := range inner {
		if c == '\\' || c < 0x20 {
			var s string
			err := json.Unmarshal(value, &s)
			return s, err
		}
	}
	return string(inner), nil
}

// Unescape returns a raw key or string content (between the quotes) as a
// Go string; only contents with escapes go through encoding/json.
func Unescape(raw []byte) (string, error) {
	for _, c := range raw {
		if c == '\\' {
			quoted := make([]byte, 0, len(raw)+2)
			quoted = append(append(append(quoted, '"'), raw...), '"')
			var s string
			err := json.Unmarshal(quoted, &s)
			return s, err
		}
	}
	return string(raw), nil
}

// Bool returns the JSON boolean value (null is false).
func Bool(value []byte) (bool, error) {
	switch string(value) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	return false, ErrSyntax
}

// Scanner steps through JSON one token at a time. B is the input and I
// the offset of the next byte.
type Scanner struct {
	B []byte
	I int
}

// Peek returns the next byte, 0 at the end.
func (s *Scanner) Peek() byte {
	if s.I < len(s.B) {
		return s.B[s.I]
	}
	return 0
}

// Space skips white space.
func (s *Scanner) Space() {
	for s.I < len(s.B) {
		switch s.B[s.I] {
		case ' ', '\t', '\n', '\r':
			s.I++
		default:
			return
		}
	}
}

// Byte consumes c if it is next.
func (s *Scanner) Byte(c byte) bool {
	if s.Peek() != c {
		return false
	}
	s.I++
	return true
}

// Literal consumes lit if it is next.
func (s *Scanner) Literal(lit string) bool {
	if len(s.B)-s.I < len(lit) || string(s.B[s.I:s.I+len(lit)]) != lit {
		return false
	}
	s.I += len(lit)
	return true
}

// Str reads a string and returns its raw contents, escapes left as they
// are.
func (s *Scanner) Str() ([]byte, bool) {
	if !s.Byte('"') {
		return nil, false
	}
	start := s.I
	// Most strings are short keys and names: a plain loop finds their end
	// sooner than a call to the vectorized IndexByte, which takes over for
	// long ones.
	for i := s.I; i < len(s.B) && i < start+16; i++ {
		switch s.B[i] {
		case '"':
			s.I = i + 1
			return s.B[start:i], true
		case '\\':
			i = len(s.B) // escapes: the general loop below
		}
	}
	for {
		// IndexByte is vectorized: strings are most of what is skipped.
		n := bytes.IndexByte(s.B[s.I:], '"')
		if n < 0 {
			s.I = len(s.B)
			return nil, false
		}
		s.I += n + 1
		// The quote ends the string unless an odd number of backslashes
		// escapes it.
		bs := 0
		for j := s.I - 2; j >= start && s.B[j] == '\\'; j-- {
			bs++
		}
		if bs%2 == 0 {
			return s.B[start : s.I-1], true
		}
	}
}

// structural marks the bytes Value stops at inside objects and arrays.
var structural = [256]bool{'"': true, '{': true, '[': true, '}': true, ']': true}

// Value skips one value.
func (s *Scanner) Value() bool {
	switch s.Peek() {
	case '"':
		_, ok := s.Str()
		return ok
	case '{', '[':
		depth := 0
		for s.I < len(s.B) {
			c := s.B[s.I]
			if !structural[c] {
				s.I++
				continue
			}
			switch c {
			case '"':
				if _, ok := s.Str(); !ok {
					return false
				}
				continue
			case '{', '[':
				depth++
			default: // '}', ']'
				depth--
				if depth == 0 {
					s.I++
					return true
				}
			}
			s.I++
		}
		return false
	case 0:
		return false
	default: // number, true, false, null
		start := s.I
		for s.I < len(s.B) {
			switch s.B[s.I] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.I > start
			}
			s.I++
		}
		return s.I > start
	}
}
