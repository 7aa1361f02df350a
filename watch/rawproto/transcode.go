package rawproto

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corekube/corekube/watch/rawjson"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A Transcoder turns the JSON encoding/json writes for one k8s.io/api type
// into the protobuf message gogo's generated Marshal writes for the same
// value, byte for byte, without decoding it into a Go value. The watch
// cache keeps its objects as JSON only; a protobuf LIST or watch of
// objects whose encoding it no longer holds would otherwise decode each
// one with encoding/json (most of the cost) to marshal it again.
//
// The plan is read once per type from the Go struct: each field's json
// name and its protobuf tag (number, wire type, pointer or not, repeated,
// map). What gogo writes follows from those: fields in number order;
// non-pointer strings, numbers, booleans and messages always, even when
// zero (so a member absent from the JSON is written as its zero value);
// pointers, slices, maps and []byte only when present (not null); maps
// as key-sorted entries {key = 1, value = 2}. Members inlined in JSON
// but nested in protobuf (a Volume's VolumeSource) are gathered from the
// enclosing object. Types with their own JSON form (Time, MicroTime,
// Quantity, IntOrString, Duration, FieldsV1, RawExtension) go through
// their own UnmarshalJSON and Marshal, so their rules stay theirs.
//
// Append fails on anything the plan does not expect (an unknown member,
// a malformed value); callers then decode and marshal the object the slow
// way, which reports the same input the same way.
type Transcoder struct {
	root *message
}

// ErrUnsupported reports a type the transcoder cannot plan for (a float,
// an interface, a custom JSON form it does not know): NewTranscoder's
// callers keep to decoding and marshalling.
var ErrUnsupported = errors.New("rawproto: type cannot be transcoded")

var (
	plansMu sync.Mutex
	plans   = map[reflect.Type]*Transcoder{}
)

// NewTranscoder returns the transcoder of t, a struct type with protobuf
// tags (e.g. v1.Pod). Plans are built once per type and shared.
func NewTranscoder(t reflect.Type) (*Transcoder, error) {
	plansMu.Lock()
	defer plansMu.Unlock()
	if tc, ok := plans[t]; ok {
		return tc, nil
	}
	b := planner{messages: map[reflect.Type]*message{}}
	root, err := b.message(t)
	if err != nil {
		return nil, fmt.Errorf("transcode %v: %w", t, err)
	}
	tc := &Transcoder{root: root}
	plans[t] = tc
	return tc, nil
}

// Append appends to dst the protobuf message of the object whose JSON is
// data (its kind and apiVersion, which protobuf carries in the envelope,
// are skipped).
func (tc *Transcoder) Append(dst, data []byte) ([]byte, error) {
	st := stateFree.Get().(*state)
	defer func() { st.reset(); stateFree.Put(st) }()
	sc := rawjson.Scanner{B: data}
	dst, err := st.appendObject(dst, tc.root, &sc)
	if err != nil {
		return dst, err
	}
	if sc.Space(); sc.I != len(data) {
		return dst, rawjson.ErrSyntax
	}
	return dst, nil
}

// valueKind is how a field's JSON value becomes protobuf.
type valueKind uint8

const (
	kindString   valueKind = iota // a string: bytes
	kindBytes                     // []byte, base64 in JSON: bytes
	kindBool                      // varint 0/1
	kindInt                       // signed integers: varint of the 64-bit two's complement
	kindUint                      // unsigned integers: varint
	kindMessage                   // a struct with protobuf tags: nested message
	kindTime                      // metav1.Time
	kindFieldsV1                  // metav1.FieldsV1: the raw JSON as its raw field
	kindOwnCodec                  // a type with its own UnmarshalJSON and Marshal
)

// field is one protobuf field of a message.
type field struct {
	num  int
	wire int
	kind valueKind
	bits int // integer size, for range checks

	optional bool // a pointer: written only when present and not null
	repeated bool // a slice (not []byte): one field per element
	isMap    bool // map entries {key = 1, value = 2}; val says the value

	// slot is the field's JSON member among the enclosing object's slots;
	// -1 for an inline field, whose members are the enclosing object's.
	slot   int
	inline *message

	msg   *message     // kindMessage
	typ   reflect.Type // kindOwnCodec: the value type
	cache *valueCache  // kindOwnCodec: encodings of repeated values
	val   *field       // isMap: the entry's value (num 2)

	zero []byte // the encoding of a zero value (non-pointer messages and own codecs)
}

// message is the plan of one struct type.
type message struct {
	// keys maps a JSON member name, inlined members' included, to its slot;
	// -1 marks members protobuf does not carry (kind, apiVersion).
	keys   map[string]int
	nslots int
	fields []field // in number order

	// Set by finish: per slot, the field it feeds and that field's index
	// in fields (-1 inside an inlined struct, as hasInline says).
	slotField []*field
	slotIndex []int
	hasInline bool
}

// planner builds messages, each struct type once (types refer to
// themselves: JSONSchemaProps, for one, though no type this serves does).
type planner struct {
	messages map[reflect.Type]*message
}

var (
	timeType        = reflect.TypeFor[metav1.Time]()
	quantityType    = reflect.TypeFor[resource.Quantity]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
	fieldsV1Type    = reflect.TypeFor[metav1.FieldsV1]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	protoMarshalerT = reflect.TypeFor[interface{ Marshal() ([]byte, error) }]()
)

func (p *planner) message(t reflect.Type) (*message, error) {
	if m, ok := p.messages[t]; ok {
		if m == nil {
			return nil, fmt.Errorf("%w %v", ErrUnsupported, t)
		}
		return m, nil
	}
	p.messages[t] = nil
	m := &message{keys: map[string]int{}}
	if err := p.addFields(m, m, t); err != nil {
		return nil, err
	}
	sortFields(m.fields)
	m.finish()
	p.messages[t] = m
	return m, nil
}

// addFields plans t's fields into into (the message whose protobuf
// fields they are) with their JSON members in slots of owner (the JSON
// object they appear in: into itself, or the object a struct is inlined
// in).
func (p *planner) addFields(owner, into *message, t reflect.Type) error {
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("%w: %v is not a struct", ErrUnsupported, t)
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		jsonTag := sf.Tag.Get("json")
		name, _, _ := strings.Cut(jsonTag, ",")
		// encoding/json inlines an embedded struct without a name of its
		// own ("inline" is only a convention of k8s.io/api).
		inlined := sf.Anonymous && name == ""
		pbTag := sf.Tag.Get("protobuf")
		if !sf.IsExported() || name == "-" {
			if pbTag != "" {
				return fmt.Errorf("%w: %v.%s has a protobuf tag but no JSON", ErrUnsupported, t, sf.Name)
			}
			continue
		}
		if inlined {
			if sf.Type.Kind() != reflect.Struct {
				return fmt.Errorf("%w: %v.%s inlines a %v", ErrUnsupported, t, sf.Name, sf.Type)
			}
			if pbTag == "" {
				// kind and apiVersion: members of the JSON only.
				if err := p.skipMembers(owner, sf.Type); err != nil {
					return err
				}
				continue
			}
			num, err := parseTag(pbTag)
			if err != nil {
				return fmt.Errorf("%v.%s: %w", t, sf.Name, err)
			}
			sub := &message{}
			if err := p.addFields(owner, sub, sf.Type); err != nil {
				return err
			}
			sortFields(sub.fields)
			into.fields = append(into.fields, field{num: num, wire: wireBytes, kind: kindMessage, slot: -1, inline: sub})
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := owner.keys[name]; dup {
			return fmt.Errorf("%w: %v has two members %q", ErrUnsupported, t, name)
		}
		if pbTag == "" {
			owner.keys[name] = -1 // JSON only
			continue
		}
		slot := owner.nslots
		owner.keys[name] = slot
		owner.nslots++
		f, err := p.field(sf.Type, pbTag)
		if err != nil {
			return fmt.Errorf("%v.%s: %w", t, sf.Name, err)
		}
		f.slot = slot
		into.fields = append(into.fields, f)
	}
	return nil
}

// skipMembers marks the JSON members of an inlined struct without
// protobuf fields as members to skip.
func (p *planner) skipMembers(owner *message, t reflect.Type) error {
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" || sf.Anonymous {
			return fmt.Errorf("%w: %v.%s", ErrUnsupported, t, sf.Name)
		}
		owner.keys[name] = -1
	}
	return nil
}

// field plans one field of Go type t with the protobuf tag tag.
func (p *planner) field(t reflect.Type, tag string) (field, error) {
	num, err := parseTag(tag)
	if err != nil {
		return field{}, err
	}
	f := field{num: num}
	switch {
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		f.kind, f.wire = kindBytes, wireBytes
		return f, nil
	case t.Kind() == reflect.Pointer:
		f.optional = true
		t = t.Elem()
		if t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			return field{}, fmt.Errorf("%w: pointer to %v", ErrUnsupported, t)
		}
	case t.Kind() == reflect.Slice:
		f.repeated = true
		t = t.Elem()
		if t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 || t.Kind() == reflect.Map {
			return field{}, fmt.Errorf("%w: slice of %v", ErrUnsupported, t)
		}
		if t.Kind() == reflect.Slice {
			f.kind, f.wire = kindBytes, wireBytes
			return f, nil
		}
	case t.Kind() == reflect.Map:
		// Entries are {key = 1, value = 2}; k8s.io/api's tags leave the
		// entry's tags out.
		if t.Key().Kind() != reflect.String {
			return field{}, fmt.Errorf("%w: map %v", ErrUnsupported, t)
		}
		f.isMap, f.wire = true, wireBytes
		vt := t.Elem()
		val := field{num: 2}
		switch {
		case vt.Kind() == reflect.Slice && vt.Elem().Kind() == reflect.Uint8:
			val.kind, val.wire = kindBytes, wireBytes
		case vt.Kind() == reflect.Slice && reflect.PointerTo(vt).Implements(protoMarshalerT):
			// A named list that is a message of its own (a CSR's
			// ExtraValue): encoding/json reads it, gogo writes it.
			val.kind, val.typ, val.wire = kindOwnCodec, vt, wireBytes
		case vt.Kind() == reflect.Pointer || vt.Kind() == reflect.Map || vt.Kind() == reflect.Slice:
			return field{}, fmt.Errorf("%w: map of %v", ErrUnsupported, vt)
		default:
			if err := p.scalar(&val, vt); err != nil {
				return field{}, fmt.Errorf("map value: %w", err)
			}
		}
		f.val = &val
		return f, nil
	}
	if err := p.scalar(&f, t); err != nil {
		return field{}, err
	}
	return f, nil
}

// scalar sets f's kind (and plan) for a value of type t: not a pointer,
// slice or map.
func (p *planner) scalar(f *field, t reflect.Type) error {
	switch {
	case t == timeType:
		f.kind = kindTime
	case t == fieldsV1Type:
		f.kind = kindFieldsV1
	case reflect.PointerTo(t).Implements(jsonUnmarshaler):
		if !reflect.PointerTo(t).Implements(protoMarshalerT) {
			return fmt.Errorf("%w: %v has its own JSON but no protobuf Marshal", ErrUnsupported, t)
		}
		f.kind, f.typ = kindOwnCodec, t
		if t == quantityType || t == intOrStringType {
			f.cache = valueCacheOf(t, toProtobuf)
		}
	case reflect.PointerTo(t).Implements(textUnmarshaler):
		return fmt.Errorf("%w: %v reads its JSON as text", ErrUnsupported, t)
	case t.Kind() == reflect.Struct:
		m, err := p.message(t)
		if err != nil {
			return err
		}
		f.kind, f.msg = kindMessage, m
	case t.Kind() == reflect.String:
		f.kind = kindString
	case t.Kind() == reflect.Bool:
		f.kind = kindBool
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		f.kind, f.bits = kindInt, t.Bits()
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		f.kind, f.bits = kindUint, t.Bits()
	default:
		return fmt.Errorf("%w: %v", ErrUnsupported, t)
	}
	f.wire = wireFor(t)
	if f.kind == kindMessage || f.kind == kindTime || f.kind == kindFieldsV1 || f.kind == kindOwnCodec {
		// What gogo writes for a zero value of t: its own Marshal says.
		zero, err := reflect.New(t).Interface().(interface{ Marshal() ([]byte, error) }).Marshal()
		if err != nil {
			return fmt.Errorf("marshal a zero %v: %w", t, err)
		}
		f.zero = zero
	}
	return nil
}

const wireVarint = 0

// wireFor is the wire type of a value of type t (not a pointer, slice or
// map) as gogo writes it.
func wireFor(t reflect.Type) int {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return wireVarint
	}
	return wireBytes
}

// parseTag reads the field number of a protobuf struct tag
// ("bytes,1,opt,name=metadata"). The rest of the tag is not read: the
// wire type follows from the Go type (some of k8s.io/api's tags say
// "bytes" for integers that gogo writes as varints), and every slice
// but []byte is a repeated field (some are tagged "opt").
func parseTag(tag string) (int, error) {
	parts := strings.Split(tag, ",")
	if len(parts) < 2 {
		return 0, fmt.Errorf("%w: protobuf tag %q", ErrUnsupported, tag)
	}
	num, err := strconv.Atoi(parts[1])
	if err != nil || num <= 0 {
		return 0, fmt.Errorf("%w: protobuf tag %q", ErrUnsupported, tag)
	}
	return num, nil
}

func sortFields(fs []field) {
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].num < fs[j].num })
}

// finish indexes m's slots once its fields are sorted: the plan of the
// field each JSON member feeds, and its position among m's own fields
// (-1 for the members of an inlined struct).
func (m *message) finish() {
	m.slotField = make([]*field, m.nslots)
	m.slotIndex = make([]int, m.nslots)
	var walk func(fs []field, own bool)
	walk = func(fs []field, own bool) {
		for i := range fs {
			f := &fs[i]
			if f.inline != nil {
				m.hasInline = true
				walk(f.inline.fields, false)
				continue
			}
			m.slotField[f.slot] = f
			m.slotIndex[f.slot] = -1
			if own {
				m.slotIndex[f.slot] = i
			}
		}
	}
	walk(m.fields, true)
}

// always reports whether gogo writes f even when it holds a zero value.
func (f *field) always() bool {
	return !f.optional && !f.repeated && !f.isMap && f.kind != kindBytes
}

// span is where a member's fields were written in dst; end < 0 when the
// member is absent.
type span struct{ start, end int }

// state is one Append's scratch: the spans of the members of the objects
// being read (a stack) and a buffer to reorder an object's fields in.
type state struct {
	spans   []span
	entries []entry
	scratch []byte
	bytes   []byte // a []byte field decoded
}

// entry is one map entry written, for maps that need sorting.
type entry struct {
	key        []byte
	start, end int
}

var stateFree = sync.Pool{New: func() any { return &state{spans: make([]span, 0, 256)} }}

func (st *state) reset() {
	st.spans, st.entries = st.spans[:0], st.entries[:0]
	if cap(st.scratch) > 64<<10 {
		st.scratch = nil // one huge object does not pin its buffer
	}
}

// appendObject appends the fields of message m from the JSON object at
// sc, in one pass. Each member is written as it is read; when the members
// come in field number order (most structs declare their fields in
// number order, and encoding/json writes them in declaration order) the
// zero values of absent fields are written between them and the message
// is done. Otherwise (a later field numbered lower, members of an inlined
// struct) the fields are put in order afterwards from their spans.
func (st *state) appendObject(dst []byte, m *message, sc *rawjson.Scanner) ([]byte, error) {
	sc.Space()
	if !sc.Byte('{') {
		return dst, rawjson.ErrSyntax
	}
	objStart := len(dst)
	base := len(st.spans)
	st.spans = slices.Grow(st.spans, m.nslots)[:base+m.nslots]
	for i := base; i < len(st.spans); i++ {
		st.spans[i] = span{-1, -1}
	}
	defer func() { st.spans = st.spans[:base] }()
	ordered := !m.hasInline
	next := 0 // in m.fields, while ordered
	sc.Space()
	for more := !sc.Byte('}'); more; {
		sc.Space()
		key, ok := sc.Str()
		if !ok {
			return dst, rawjson.ErrSyntax
		}
		sc.Space()
		if !sc.Byte(':') {
			return dst, rawjson.ErrSyntax
		}
		sc.Space()
		slot, ok := m.keys[string(key)]
		switch {
		case !ok:
			return dst, fmt.Errorf("rawproto: unexpected member %q", key)
		case slot < 0:
			if !sc.Value() {
				return dst, rawjson.ErrSyntax
			}
		default:
			if st.spans[base+slot].end >= 0 {
				return dst, fmt.Errorf("rawproto: member %q twice", key)
			}
			if ordered {
				if i := m.slotIndex[slot]; i < next {
					ordered = false
				} else {
					dst = appendZeros(dst, m.fields[next:i])
					next = i + 1
				}
			}
			f := m.slotField[slot]
			start := len(dst)
			var err error
			if dst, err = st.appendMember(dst, f, sc); err != nil {
				return dst, fmt.Errorf("%s: %w", key, err)
			}
			st.spans[base+slot] = span{start, len(dst)}
		}
		if more, ok = afterElement(sc, '}'); !ok {
			return dst, rawjson.ErrSyntax
		}
	}
	if ordered {
		return appendZeros(dst, m.fields[next:]), nil
	}
	st.scratch = append(st.scratch[:0], dst[objStart:]...)
	return st.assemble(dst[:objStart], m.fields, base, objStart), nil
}

// afterElement reads what follows a member of a JSON object or an element
// of an array closed by closing: a comma (more is true) or the closing
// byte; ok is false for anything else. It leaves the white space after
// a comma to the loop (skipping it here would make the function too
// costly to inline, and it runs once per element).
func afterElement(sc *rawjson.Scanner, closing byte) (more, ok bool) {
	sc.Space()
	if c := sc.Peek(); c == ',' || c == closing {
		sc.I++
		return c == ',', true
	}
	return false, false
}

// appendZeros appends the zero values of the fields gogo always writes.
func appendZeros(dst []byte, fs []field) []byte {
	for i := range fs {
		if fs[i].always() {
			dst = appendZero(dst, &fs[i])
		}
	}
	return dst
}

// assemble appends fields fs in number order from the spans starting at
// base, whose bytes are in st.scratch from offset off.
func (st *state) assemble(dst []byte, fs []field, base, off int) []byte {
	for i := range fs {
		f := &fs[i]
		if f.inline != nil {
			start := len(dst)
			dst = appendKey(dst, f.num, wireBytes)
			dst = st.assemble(dst, f.inline.fields, base, off)
			dst = prefixLength(dst, start)
			continue
		}
		sp := st.spans[base+f.slot]
		switch {
		case sp.end >= 0:
			dst = append(dst, st.scratch[sp.start-off:sp.end-off]...)
		case f.always():
			dst = appendZero(dst, f)
		}
	}
	return dst
}

// appendMember appends field f from the JSON member value at sc.
func (st *state) appendMember(dst []byte, f *field, sc *rawjson.Scanner) ([]byte, error) {
	if sc.Literal("null") {
		if f.always() {
			return appendNull(dst, f)
		}
		return dst, nil // nil pointer, slice, map
	}
	switch {
	case f.repeated:
		if !sc.Byte('[') {
			return dst, rawjson.ErrSyntax
		}
		sc.Space()
		for more := !sc.Byte(']'); more; {
			sc.Space()
			var err error
			if dst, err = st.appendValue(dst, f, sc); err != nil {
				return dst, err
			}
			var ok bool
			if more, ok = afterElement(sc, ']'); !ok {
				return dst, rawjson.ErrSyntax
			}
		}
		return dst, nil
	case f.isMap:
		return st.appendMap(dst, f, sc)
	}
	return st.appendValue(dst, f, sc)
}

// appendNull appends what a JSON null leaves in a field gogo always
// writes: encoding/json leaves the zero value, except for types with an
// UnmarshalJSON of their own, which it asks.
func appendNull(dst []byte, f *field) ([]byte, error) {
	if f.kind == kindOwnCodec {
		return appendOwnCodec(dst, f, []byte("null"))
	}
	return appendZero(dst, f), nil
}

// appendZero appends the zero value of a field gogo always writes.
func appendZero(dst []byte, f *field) []byte {
	dst = appendKey(dst, f.num, f.wire)
	if f.wire == wireVarint {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(f.zero)))
	return append(dst, f.zero...)
}

// appendValue appends f's key and one value read at sc (an element of a
// repeated field, a map value or a single field); null is the zero
// value, as encoding/json leaves it.
func (st *state) appendValue(dst []byte, f *field, sc *rawjson.Scanner) ([]byte, error) {
	if sc.Literal("null") {
		if f.kind == kindBytes {
			return append(appendKey(dst, f.num, wireBytes), 0), nil
		}
		return appendNull(dst, f)
	}
	switch f.kind {
	case kindString:
		s, err := readString(sc)
		if err != nil {
			return dst, err
		}
		return appendBytesField(dst, f.num, s), nil
	case kindBytes:
		s, err := readString(sc)
		if err != nil {
			return dst, err
		}
		// The decoded length is known only once decoded (padding).
		st.bytes, err = base64.StdEncoding.AppendDecode(st.bytes[:0], s)
		if err != nil {
			return dst, err
		}
		return appendBytesField(dst, f.num, st.bytes), nil
	case kindBool:
		var b uint64
		switch {
		case sc.Literal("true"):
			b = 1
		case sc.Literal("false"):
		default:
			return dst, rawjson.ErrSyntax
		}
		return binary.AppendUvarint(appendKey(dst, f.num, wireVarint), b), nil
	case kindInt:
		n, err := parseInt(number(sc), f.bits)
		if err != nil {
			return dst, err
		}
		return binary.AppendUvarint(appendKey(dst, f.num, wireVarint), uint64(n)), nil
	case kindUint:
		n, err := strconv.ParseUint(string(number(sc)), 10, f.bits)
		if err != nil {
			return dst, err
		}
		return binary.AppendUvarint(appendKey(dst, f.num, wireVarint), n), nil
	case kindMessage:
		start := len(dst)
		dst = appendKey(dst, f.num, wireBytes)
		dst, err := st.appendObject(dst, f.msg, sc)
		if err != nil {
			return dst, err
		}
		return prefixLength(dst, start), nil
	}
	start := sc.I
	if !sc.Value() {
		return dst, rawjson.ErrSyntax
	}
	v := sc.B[start:sc.I]
	switch f.kind {
	case kindTime:
		t, err := parseTime(v)
		if err != nil {
			return dst, err
		}
		dst = appendKey(dst, f.num, wireBytes)
		if t.IsZero() {
			return append(dst, 0), nil
		}
		// Timestamp{seconds = 1, nanos = 2}: Time carries whole seconds.
		sec := uint64(t.Unix())
		dst = binary.AppendUvarint(dst, uint64(2+uvarintLen(sec)+1))
		dst = binary.AppendUvarint(append(dst, 1<<3|wireVarint), sec)
		return append(dst, 2<<3|wireVarint, 0), nil
	case kindFieldsV1:
		// FieldsV1{raw = 1}: the member's JSON as UnmarshalJSON keeps it.
		dst = appendKey(dst, f.num, wireBytes)
		dst = binary.AppendUvarint(dst, uint64(FieldSize(len(v))))
		return AppendField(dst, 1, v), nil
	case kindOwnCodec:
		return appendOwnCodec(dst, f, v)
	}
	return dst, fmt.Errorf("rawproto: kind %d", f.kind)
}

// appendOwnCodec appends a value of a type with its own JSON form: read
// by its UnmarshalJSON (or encoding/json), written by its Marshal.
func appendOwnCodec(dst []byte, f *field, v []byte) ([]byte, error) {
	if f.cache != nil {
		if data, ok := f.cache.load(v); ok {
			return appendBytesField(dst, f.num, data), nil
		}
	}
	pv := reflect.New(f.typ).Interface()
	if u, ok := pv.(json.Unmarshaler); ok {
		if err := u.UnmarshalJSON(v); err != nil {
			return dst, err
		}
	} else if err := json.Unmarshal(v, pv); err != nil {
		return dst, err
	}
	data, err := pv.(interface{ Marshal() ([]byte, error) }).Marshal()
	if err != nil {
		return dst, err
	}
	if f.cache != nil {
		f.cache.store(v, data)
	}
	return appendBytesField(dst, f.num, data), nil
}

// appendBytesField appends a length-delimited field.
func appendBytesField(dst []byte, num int, data []byte) []byte {
	dst = appendKey(dst, num, wireBytes)
	dst = binary.AppendUvarint(dst, uint64(len(data)))
	return append(dst, data...)
}

// number returns the JSON number token at sc (empty if there is none).
func number(sc *rawjson.Scanner) []byte {
	start := sc.I
	for sc.I < len(sc.B) {
		switch c := sc.B[sc.I]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			sc.I++
			continue
		}
		break
	}
	return sc.B[start:sc.I]
}

// parseInt is strconv.ParseInt(string(b), 10, bits) for JSON integers,
// without the string.
func parseInt(b []byte, bits int) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return strconv.ParseInt(string(b), 10, bits) // long or malformed: the library decides
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return strconv.ParseInt(string(b), 10, bits)
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	if bits < 64 && (n < -1<<(bits-1) || n >= 1<<(bits-1)) {
		return 0, &strconv.NumError{Func: "ParseInt", Num: string(b), Err: strconv.ErrRange}
	}
	return n, nil
}

// appendMap appends one entry message {key = 1, value = 2} per member of
// the JSON object at sc, in key order as gogo sorts them. encoding/json
// writes maps sorted so; anything else is sorted afterwards.
func (st *state) appendMap(dst []byte, f *field, sc *rawjson.Scanner) ([]byte, error) {
	if !sc.Byte('{') {
		return dst, rawjson.ErrSyntax
	}
	base := len(st.entries)
	defer func() { st.entries = st.entries[:base] }()
	mapStart := len(dst)
	sorted := true
	sc.Space()
	for more := !sc.Byte('}'); more; {
		sc.Space()
		key, err := readString(sc)
		if err != nil {
			return dst, err
		}
		sc.Space()
		if !sc.Byte(':') {
			return dst, rawjson.ErrSyntax
		}
		sc.Space()
		if n := len(st.entries); n > base && bytes.Compare(key, st.entries[n-1].key) <= 0 {
			sorted = false
		}
		start := len(dst)
		dst = appendKey(dst, f.num, wireBytes)
		dst = AppendField(dst, 1, key)
		if f.val.kind == kindBytes && sc.Literal("null") {
			// A nil []byte value: gogo writes the key only.
		} else if dst, err = st.appendValue(dst, f.val, sc); err != nil {
			return dst, err
		}
		dst = prefixLength(dst, start)
		st.entries = append(st.entries, entry{key, start, len(dst)})
		var ok bool
		if more, ok = afterElement(sc, '}'); !ok {
			return dst, rawjson.ErrSyntax
		}
	}
	if sorted {
		return dst, nil
	}
	entries := st.entries[base:]
	slices.SortStableFunc(entries, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
	for i := 1; i < len(entries); i++ {
		if bytes.Equal(entries[i].key, entries[i-1].key) {
			return dst, fmt.Errorf("rawproto: duplicate map key %q", entries[i].key)
		}
	}
	st.scratch = append(st.scratch[:0], dst[mapStart:]...)
	dst = dst[:mapStart]
	for _, e := range entries {
		dst = append(dst, st.scratch[e.start-mapStart:e.end-mapStart]...)
	}
	return dst, nil
}

// parseTime reads a metav1.Time as its UnmarshalJSON does, without the
// detour through encoding/json for a string without escapes.
func parseTime(v []byte) (metav1.Time, error) {
	var t metav1.Time
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && bytes.IndexByte(v, '\\') < 0 {
		pt, err := time.Parse(time.RFC3339, string(v[1:len(v)-1]))
		t.Time = pt
		return t, err
	}
	err := t.UnmarshalJSON(v)
	return t, err
}

// readString reads the JSON string at sc and returns its contents
// without escapes.
func readString(sc *rawjson.Scanner) ([]byte, error) {
	raw, ok := sc.Str()
	if !ok {
		return nil, rawjson.ErrSyntax
	}
	return unescape(raw)
}

// unescape returns the contents of a JSON string (raw, between its
// quotes) without escapes: raw itself when it has none.
func unescape(raw []byte) ([]byte, error) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw, nil
	}
	s, err := rawjson.Unescape(raw)
	return []byte(s), err
}

// appendKey appends a field's key: its number and wire type.
func appendKey(dst []byte, num, wire int) []byte {
	return binary.AppendUvarint(dst, uint64(num)<<3|uint64(wire))
}

// prefixLength turns the bytes after the key that starts at start into a
// length-delimited field: the body is moved up to make room for its
// length. Most bodies are shorter than 128 bytes (one byte of length).
func prefixLength(dst []byte, start int) []byte {
	keyEnd := start + 1
	for dst[keyEnd-1] >= 0x80 {
		keyEnd++
	}
	n := len(dst) - keyEnd
	l := uvarintLen(uint64(n))
	dst = slices.Grow(dst, l)[:len(dst)+l]
	copy(dst[keyEnd+l:], dst[keyEnd:keyEnd+n])
	binary.PutUvarint(dst[keyEnd:], uint64(n))
	return dst
}
