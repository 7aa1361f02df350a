package rawproto

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A JSONTranscoder turns the protobuf message gogo's generated Marshal
// writes for one k8s.io/api type into the JSON encoding/json writes for
// the value gogo's Unmarshal decodes from it, byte for byte, without
// decoding it into a Go value. Objects are stored in etcd as protobuf
// while the watch cache keeps JSON: every value read from etcd would
// otherwise be decoded by gogo and marshalled by encoding/json, whose
// reflection is most of the cost.
//
// The plan is read once per type from the Go struct, as Transcoder's is:
// each field's protobuf number and each JSON member's name, omitempty and
// place. A message is read in two steps: its fields are indexed first
// (gogo writes them in number order, encoding/json writes members in
// struct order, and repeated fields occur once per element), then the
// members are written in struct order from the index. What Unmarshal
// leaves for a field the message lacks follows from the Go type: zero
// values for strings, numbers and structs, nil for pointers, slices, maps
// and []byte (which omitempty then omits, and encoding/json writes as
// null otherwise). Members inlined in JSON but nested in protobuf (a
// Volume's VolumeSource) are written among the enclosing object's.
// Times are formatted as their MarshalJSON does; other types with their
// own JSON form (Quantity, IntOrString, ...) are decoded by their own
// Unmarshal and written by encoding/json, so their rules stay theirs.
//
// AppendJSON fails on anything the plan does not expect (an unknown
// field number, a wrong wire type, a field that gogo would merge or
// overwrite because it occurs twice, truncated input); callers then
// decode and marshal the object the slow way.
type JSONTranscoder struct {
	root *jsonMessage
}

var (
	jsonPlansMu sync.Mutex
	jsonPlans   = map[reflect.Type]*JSONTranscoder{}
)

// NewJSONTranscoder returns the JSON transcoder of t, a struct type with
// protobuf tags (e.g. v1.Pod). Plans are built once per type and shared.
// Types it cannot plan for (floats, interfaces, JSON forms it does not
// know) are ErrUnsupported.
func NewJSONTranscoder(t reflect.Type) (*JSONTranscoder, error) {
	jsonPlansMu.Lock()
	defer jsonPlansMu.Unlock()
	if tc, ok := jsonPlans[t]; ok {
		return tc, nil
	}
	p := jsonPlanner{messages: map[reflect.Type]*jsonMessage{}}
	root, err := p.message(t)
	if err != nil {
		return nil, fmt.Errorf("transcode %v to JSON: %w", t, err)
	}
	tc := &JSONTranscoder{root: root}
	jsonPlans[t] = tc
	return tc, nil
}

// AppendJSON appends to dst the JSON of the object whose protobuf message
// (no "k8s\x00" envelope) is msg, with apiVersion and kind as its
// TypeMeta members. On error dst is returned as it was.
func (tc *JSONTranscoder) AppendJSON(dst, msg []byte, apiVersion, kind string) ([]byte, error) {
	if len(msg) > maxMessage {
		return dst, fmt.Errorf("rawproto: message of %d bytes", len(msg))
	}
	st := jsonStateFree.Get().(*jsonState)
	defer func() { st.reset(); jsonStateFree.Put(st) }()
	orig := len(dst)
	meta := typeMetaValues{kind: kind, apiVersion: apiVersion}
	dst = append(dst, '{')
	dst, _, err := st.appendMembers(dst, tc.root, msg, true, &meta)
	if err != nil {
		return dst[:orig], err
	}
	return append(dst, '}'), nil
}

// maxMessage bounds a message so that offsets fit the index's int32s.
const maxMessage = 1<<31 - 1

// JSON-specific value kinds, after Transcoder's.
const (
	kindMicroTime valueKind = iota + kindOwnCodec + 1 // metav1.MicroTime
)

var (
	microTimeType   = reflect.TypeFor[metav1.MicroTime]()
	typeMetaType    = reflect.TypeFor[metav1.TypeMeta]()
	jsonMarshalerT  = reflect.TypeFor[json.Marshaler]()
	textMarshalerT  = reflect.TypeFor[encoding.TextMarshaler]()
	protoUnmarshalT = reflect.TypeFor[interface{ Unmarshal([]byte) error }]()
)

// jsonField is one protobuf field of a message as the JSON side needs it.
type jsonField struct {
	num  int
	wire int // the wire type of one value (a repeated varint may also come packed)
	kind valueKind
	bits int // integer size: gogo keeps the varint's low bits

	optional bool // a pointer: nil when absent
	repeated bool // a slice (not []byte): one field per element
	isMap    bool // entries {key = 1, value = 2}; val says the value

	msg   *jsonMessage // kindMessage
	typ   reflect.Type // kindOwnCodec: the value type
	inMap bool         // kindOwnCodec: a map value, which encoding/json cannot address
	cache *valueCache  // kindOwnCodec: JSON of values that repeat
	val   *jsonField   // isMap: the entry's value (num 2)
}

// jsonMember is one JSON member of an object, in struct order.
type jsonMember struct {
	field     int32 // index in the message's fields; -1 for TypeMeta's
	inline    bool  // field is a message whose members are the object's
	meta      uint8 // TypeMeta's members: metaKind or metaAPIVersion
	omitEmpty bool

	// What an absent field writes, when it is not a struct's zero value
	// (absentValue): nothing, or absentJSON. Most members of most objects
	// are absent: this spares them the work of a member.
	absent     uint8
	absentJSON string

	name string // `"name":`, escaped as encoding/json does
}

const (
	absentValue = iota
	absentOmit
	absentLiteral
)

const (
	metaKind = iota + 1
	metaAPIVersion
)

// jsonMessage is the plan of one struct type.
type jsonMessage struct {
	fields  []jsonField  // in number order
	byKey   []int16      // a field's key (number<<3 | wire type) -> 1 + its index in fields; 0 if unexpected
	members []jsonMember // in struct order, inlined structs as one member
}

type jsonPlanner struct {
	messages map[reflect.Type]*jsonMessage
}

func (p *jsonPlanner) message(t reflect.Type) (*jsonMessage, error) {
	if m, ok := p.messages[t]; ok {
		return m, nil // a type that refers to itself gets the plan being built
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: %v is not a struct", ErrUnsupported, t)
	}
	m := &jsonMessage{}
	p.messages[t] = m
	// Members name their field by number until the fields are sorted.
	var nums []int
	for i := range t.NumField() {
		sf := t.Field(i)
		jsonTag := sf.Tag.Get("json")
		name, opts, _ := strings.Cut(jsonTag, ",")
		pbTag := sf.Tag.Get("protobuf")
		if !sf.IsExported() {
			if sf.Anonymous || pbTag != "" {
				// encoding/json inlines the exported fields of an unexported
				// embedded struct; gogo writes tagged fields.
				return nil, fmt.Errorf("%w: %v.%s is unexported", ErrUnsupported, t, sf.Name)
			}
			continue
		}
		if jsonTag == "-" {
			if pbTag != "" {
				return nil, fmt.Errorf("%w: %v.%s has a protobuf tag but no JSON", ErrUnsupported, t, sf.Name)
			}
			continue
		}
		for opt := range strings.SplitSeq(opts, ",") {
			if opt != "" && opt != "omitempty" && opt != "inline" {
				// ",string" and the like change the JSON form.
				return nil, fmt.Errorf("%w: %v.%s has json option %q", ErrUnsupported, t, sf.Name, opt)
			}
		}
		omitEmpty := strings.Contains(","+opts+",", ",omitempty,")
		if sf.Anonymous && name == "" {
			// encoding/json inlines an embedded struct without a name of
			// its own ("inline" is only a convention of k8s.io/api).
			if sf.Type.Kind() != reflect.Struct {
				return nil, fmt.Errorf("%w: %v.%s inlines a %v", ErrUnsupported, t, sf.Name, sf.Type)
			}
			if pbTag == "" {
				if sf.Type != typeMetaType {
					return nil, fmt.Errorf("%w: %v.%s inlines %v without protobuf", ErrUnsupported, t, sf.Name, sf.Type)
				}
				members, err := typeMetaMembers()
				if err != nil {
					return nil, err
				}
				m.members = append(m.members, members...)
				continue
			}
			num, err := parseTag(pbTag)
			if err != nil {
				return nil, fmt.Errorf("%v.%s: %w", t, sf.Name, err)
			}
			sub, err := p.message(sf.Type)
			if err != nil {
				return nil, err
			}
			m.fields = append(m.fields, jsonField{num: num, wire: wireBytes, kind: kindMessage, msg: sub})
			m.members = append(m.members, jsonMember{inline: true})
			nums = append(nums, num)
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if !validJSONName(name) {
			return nil, fmt.Errorf("%w: %v.%s has json name %q", ErrUnsupported, t, sf.Name, name)
		}
		if pbTag == "" {
			return nil, fmt.Errorf("%w: %v.%s has JSON but no protobuf", ErrUnsupported, t, sf.Name)
		}
		f, err := p.field(sf.Type, pbTag)
		if err != nil {
			return nil, fmt.Errorf("%v.%s: %w", t, sf.Name, err)
		}
		if omitEmpty && !f.optional && !f.repeated && !f.isMap && f.kind != kindBytes && !omittable(f.kind) {
			// omitempty never omits a struct, but would a value of a kind
			// with its own JSON form that is not a struct.
			if sf.Type.Kind() != reflect.Struct {
				return nil, fmt.Errorf("%w: %v.%s: omitempty on %v", ErrUnsupported, t, sf.Name, sf.Type)
			}
		}
		m.fields = append(m.fields, f)
		m.members = append(m.members, jsonMember{
			name:      string(appendJSONString(nil, []byte(name))) + ":",
			omitEmpty: omitEmpty,
		})
		nums = append(nums, f.num)
	}
	// Resolve members' fields to indices in number order.
	order := make([]int, len(m.fields))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return m.fields[a].num - m.fields[b].num })
	sorted := make([]jsonField, len(m.fields))
	where := make([]int, len(m.fields)) // original index -> sorted index
	for to, from := range order {
		sorted[to] = m.fields[from]
		where[from] = to
	}
	maxNum := 0
	for i := 1; i < len(sorted); i++ {
		if sorted[i].num == sorted[i-1].num {
			return nil, fmt.Errorf("%w: %v numbers two fields %d", ErrUnsupported, t, sorted[i].num)
		}
	}
	if len(sorted) > 0 {
		maxNum = sorted[len(sorted)-1].num
	}
	if maxNum > 1<<16 {
		return nil, fmt.Errorf("%w: %v has field number %d", ErrUnsupported, t, maxNum)
	}
	m.fields = sorted
	if len(sorted) >= 1<<15-1 {
		return nil, fmt.Errorf("%w: %v has %d fields", ErrUnsupported, t, len(sorted))
	}
	m.byKey = make([]int16, (maxNum+1)<<3)
	for i := range sorted {
		f := &sorted[i]
		m.byKey[f.num<<3|f.wire] = int16(i + 1)
		if f.repeated && f.wire == wireVarint {
			m.byKey[f.num<<3|wireBytes] = int16(i + 1) // packed
		}
	}
	next := 0
	for i := range m.members {
		if m.members[i].meta != 0 {
			m.members[i].field = -1
			continue
		}
		m.members[i].field = int32(where[next])
		next++
		if !m.members[i].inline {
			m.members[i].absent, m.members[i].absentJSON = absentOf(&m.members[i], &m.fields[m.members[i].field])
		}
	}
	if err := checkNames(t, m, map[string]bool{}, 0); err != nil {
		return nil, err
	}
	return m, nil
}

// absentOf is what member mem writes when its field f is absent: what
// gogo's Unmarshal leaves (nil, or a zero value) as encoding/json writes
// it.
func absentOf(mem *jsonMember, f *jsonField) (uint8, string) {
	switch {
	case f.optional || f.repeated || f.isMap || f.kind == kindBytes:
		if mem.omitEmpty {
			return absentOmit, ""
		}
		return absentLiteral, "null"
	case omittable(f.kind):
		if mem.omitEmpty {
			return absentOmit, ""
		}
		switch f.kind {
		case kindString:
			return absentLiteral, `""`
		case kindBool:
			return absentLiteral, "false"
		}
		return absentLiteral, "0"
	}
	return absentValue, "" // a struct: what its Unmarshal leaves from nothing
}

// checkNames refuses a type whose JSON names a member twice (an inlined
// struct's member shadowed by the outer one's): encoding/json's rules for
// those are not followed here.
func checkNames(t reflect.Type, m *jsonMessage, seen map[string]bool, depth int) error {
	if depth > 8 {
		return fmt.Errorf("%w: %v inlines too deep", ErrUnsupported, t)
	}
	for _, mem := range m.members {
		if mem.inline {
			if err := checkNames(t, m.fields[mem.field].msg, seen, depth+1); err != nil {
				return err
			}
			continue
		}
		if seen[mem.name] {
			return fmt.Errorf("%w: %v has two members %s", ErrUnsupported, t, mem.name)
		}
		seen[mem.name] = true
	}
	return nil
}

// typeMetaMembers are kind and apiVersion as TypeMeta declares them.
func typeMetaMembers() ([]jsonMember, error) {
	var members []jsonMember
	for i := range typeMetaType.NumField() {
		sf := typeMetaType.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		mem := jsonMember{name: `"` + name + `":`, omitEmpty: opts == "omitempty", field: -1}
		switch sf.Name {
		case "Kind":
			mem.meta = metaKind
		case "APIVersion":
			mem.meta = metaAPIVersion
		default:
			return nil, fmt.Errorf("%w: TypeMeta.%s", ErrUnsupported, sf.Name)
		}
		members = append(members, mem)
	}
	return members, nil
}

// validJSONName is encoding/json's isValidTag: a name it would not take
// is replaced by the Go field's.
func validJSONName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'):
			return false
		}
	}
	return true
}

// omittable reports whether omitempty can drop a non-pointer value of
// kind k: strings, numbers and booleans when zero.
func omittable(k valueKind) bool {
	return k == kindString || k == kindBool || k == kindInt || k == kindUint
}

// field plans one field of Go type t with the protobuf tag tag.
func (p *jsonPlanner) field(t reflect.Type, tag string) (jsonField, error) {
	num, err := parseTag(tag)
	if err != nil {
		return jsonField{}, err
	}
	f := jsonField{num: num}
	switch {
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		if err := plainBytes(t); err != nil {
			return jsonField{}, err
		}
		f.kind, f.wire = kindBytes, wireBytes
		return f, nil
	case t.Kind() == reflect.Pointer:
		f.optional = true
		t = t.Elem()
		if t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			return jsonField{}, fmt.Errorf("%w: pointer to %v", ErrUnsupported, t)
		}
	case t.Kind() == reflect.Slice:
		if hasOwnJSON(t) {
			return jsonField{}, fmt.Errorf("%w: %v has its own JSON", ErrUnsupported, t)
		}
		f.repeated = true
		t = t.Elem()
		if t.Kind() == reflect.Pointer || t.Kind() == reflect.Map ||
			t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 {
			return jsonField{}, fmt.Errorf("%w: slice of %v", ErrUnsupported, t)
		}
		if t.Kind() == reflect.Slice {
			if err := plainBytes(t); err != nil {
				return jsonField{}, err
			}
			f.kind, f.wire = kindBytes, wireBytes
			return f, nil
		}
	case t.Kind() == reflect.Map:
		// Entries are {key = 1, value = 2}; encoding/json writes a key of
		// string kind as the string itself, sorted bytewise.
		if t.Key().Kind() != reflect.String || hasOwnJSON(t) {
			return jsonField{}, fmt.Errorf("%w: map %v", ErrUnsupported, t)
		}
		f.isMap, f.wire = true, wireBytes
		vt := t.Elem()
		val := jsonField{num: 2, inMap: true}
		switch {
		case vt.Kind() == reflect.Slice && vt.Elem().Kind() == reflect.Uint8:
			if err := plainBytes(vt); err != nil {
				return jsonField{}, err
			}
			val.kind, val.wire = kindBytes, wireBytes
		case vt.Kind() == reflect.Slice && reflect.PointerTo(vt).Implements(protoUnmarshalT):
			// A named list that is a message of its own (a CSR's
			// ExtraValue): gogo reads it, encoding/json writes it.
			val.kind, val.typ, val.wire = kindOwnCodec, vt, wireBytes
		case vt.Kind() == reflect.Pointer || vt.Kind() == reflect.Map || vt.Kind() == reflect.Slice:
			return jsonField{}, fmt.Errorf("%w: map of %v", ErrUnsupported, vt)
		default:
			if err := p.scalar(&val, vt); err != nil {
				return jsonField{}, fmt.Errorf("map value: %w", err)
			}
		}
		f.val = &val
		return f, nil
	}
	if err := p.scalar(&f, t); err != nil {
		return jsonField{}, err
	}
	return f, nil
}

// hasOwnJSON reports whether encoding/json asks t (or *t) for its JSON.
func hasOwnJSON(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return pt.Implements(jsonMarshalerT) || pt.Implements(textMarshalerT)
}

// plainBytes refuses a []byte type that encoding/json would not write as
// base64.
func plainBytes(t reflect.Type) error {
	if hasOwnJSON(t) || hasOwnJSON(t.Elem()) {
		return fmt.Errorf("%w: %v has its own JSON", ErrUnsupported, t)
	}
	return nil
}

// scalar sets f's kind (and plan) for a value of type t: not a pointer,
// slice or map.
func (p *jsonPlanner) scalar(f *jsonField, t reflect.Type) error {
	switch {
	case t == timeType:
		f.kind = kindTime
	case t == microTimeType:
		f.kind = kindMicroTime
	case t == fieldsV1Type:
		f.kind = kindFieldsV1
	case reflect.PointerTo(t).Implements(jsonMarshalerT):
		if !reflect.PointerTo(t).Implements(protoUnmarshalT) {
			return fmt.Errorf("%w: %v has its own JSON but no protobuf Unmarshal", ErrUnsupported, t)
		}
		f.kind, f.typ = kindOwnCodec, t
		if t == quantityType || t == intOrStringType {
			// Their MarshalJSON has a value receiver: the same JSON
			// wherever the value is.
			f.cache = valueCacheOf(t, toJSON)
		}
	case reflect.PointerTo(t).Implements(textMarshalerT):
		return fmt.Errorf("%w: %v writes its JSON as text", ErrUnsupported, t)
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
	return nil
}

// occurrence is one field of a message being read: its value (a varint's
// bytes, or a length-delimited field's contents) and the field's index in
// the plan.
type occurrence struct {
	start, end int32
	field      int32
	wire       uint8
}

// fieldRun is where a field's occurrences are among the message's, once
// they are sorted by field.
type fieldRun struct{ first, n int32 }

// mapEntry is one entry of a map being written.
type mapEntry struct {
	key, val []byte
	hasVal   bool
}

// jsonState is one AppendJSON's scratch: stacks of the occurrences and
// runs of the messages being written (nested messages push above their
// parent's), and of map entries.
type jsonState struct {
	occs    []occurrence
	runs    []fieldRun
	entries []mapEntry
	own     []byte
}

var jsonStateFree = sync.Pool{New: func() any {
	return &jsonState{occs: make([]occurrence, 0, 256), runs: make([]fieldRun, 0, 256)}
}}

func (st *jsonState) reset() {
	st.occs, st.runs, st.entries = st.occs[:0], st.runs[:0], st.entries[:0]
	if cap(st.occs) > 1<<16 {
		st.occs = nil // one huge object does not pin its index
	}
}

var (
	errTruncated = errors.New("rawproto: truncated message")
	errVarint    = errors.New("rawproto: malformed varint")
)

// uvarint reads the varint at b[i:]. It takes at most 10 bytes, the last
// one 0 or 1, as binary.Uvarint does (gogo takes more; never writes it).
func uvarint(b []byte, i int) (uint64, int, error) {
	if i < len(b) && b[i] < 0x80 {
		return uint64(b[i]), i + 1, nil
	}
	return uvarintSlow(b, i)
}

func uvarintSlow(b []byte, i int) (uint64, int, error) {
	var v uint64
	for shift := uint(0); i < len(b); shift += 7 {
		c := b[i]
		i++
		if c < 0x80 {
			if shift == 63 && c > 1 {
				return 0, i, errVarint
			}
			return v | uint64(c)<<shift, i, nil
		}
		if shift == 63 {
			return 0, i, errVarint
		}
		v |= uint64(c&0x7f) << shift
	}
	return 0, i, errTruncated
}

// index reads the fields of message msg of plan m onto st.occs and their
// runs onto st.runs, returning where m's runs start there. The caller
// pops both stacks (to the lengths it saw before) when done with m.
func (st *jsonState) index(m *jsonMessage, msg []byte) (int, error) {
	base := len(st.occs)
	sorted := true
	last := int32(-1)
	for i := 0; i < len(msg); {
		key, next, err := uvarint(msg, i)
		if err != nil {
			return 0, err
		}
		if key >= uint64(len(m.byKey)) || m.byKey[key] == 0 {
			return 0, fmt.Errorf("rawproto: unexpected field %d (wire type %d)", key>>3, key&7)
		}
		fi, wire := int32(m.byKey[key]-1), int(key&7)
		start := next
		switch wire {
		case wireVarint:
			if _, next, err = uvarint(msg, next); err != nil {
				return 0, err
			}
		default: // wireBytes
			var n uint64
			if n, start, err = uvarint(msg, next); err != nil {
				return 0, err
			}
			if n > uint64(len(msg)-start) {
				return 0, errTruncated
			}
			next = start + int(n)
		}
		if fi < last {
			sorted = false
		}
		last = fi
		st.occs = append(st.occs, occurrence{start: int32(start), end: int32(next), field: fi, wire: uint8(wire)})
		i = next
	}
	occs := st.occs[base:]
	if !sorted {
		// Elements of a repeated field keep their order.
		slices.SortStableFunc(occs, func(a, b occurrence) int { return int(a.field - b.field) })
	}
	runBase := len(st.runs)
	st.runs = slices.Grow(st.runs, len(m.fields))[:runBase+len(m.fields)]
	clear(st.runs[runBase:])
	for i := range occs {
		r := &st.runs[runBase+int(occs[i].field)]
		if r.n == 0 {
			r.first = int32(base + i)
		}
		r.n++
	}
	return runBase, nil
}

// typeMetaValues are the root object's kind and apiVersion.
type typeMetaValues struct{ kind, apiVersion string }

// appendMembers appends the members of the object of plan m whose message
// is msg, after a comma unless first (members of an inlined struct follow
// the enclosing object's). It returns whether the object still has no
// member. meta is the root object's TypeMeta, nil below it.
func (st *jsonState) appendMembers(dst []byte, m *jsonMessage, msg []byte, first bool, meta *typeMetaValues) ([]byte, bool, error) {
	occBase, runBase := len(st.occs), len(st.runs)
	dst, first, err := st.appendIndexed(dst, m, msg, first, meta)
	st.occs, st.runs = st.occs[:occBase], st.runs[:runBase]
	return dst, first, err
}

// appendIndexed is appendMembers, leaving m's index on the stacks.
func (st *jsonState) appendIndexed(dst []byte, m *jsonMessage, msg []byte, first bool, meta *typeMetaValues) ([]byte, bool, error) {
	runs, err := st.index(m, msg)
	if err != nil {
		return dst, first, err
	}
	for i := range m.members {
		mem := &m.members[i]
		if mem.field >= 0 && st.runs[runs+int(mem.field)].n == 0 && mem.absent != absentValue {
			if mem.absent == absentLiteral {
				if !first {
					dst = append(dst, ',')
				}
				first = false
				dst = append(append(dst, mem.name...), mem.absentJSON...)
			}
			continue
		}
		if mem.meta != 0 {
			var v string
			if meta != nil {
				v = meta.kind
				if mem.meta == metaAPIVersion {
					v = meta.apiVersion
				}
			}
			if v == "" && mem.omitEmpty {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(append(dst, mem.name...), v)
			continue
		}
		f := &m.fields[mem.field]
		r := st.runs[runs+int(mem.field)]
		if mem.inline {
			var sub []byte
			switch r.n {
			case 0:
			case 1:
				o := st.occs[r.first]
				sub = msg[o.start:o.end]
			default:
				return dst, first, fmt.Errorf("rawproto: field %d twice", f.num)
			}
			if dst, first, err = st.appendMembers(dst, f.msg, sub, first, meta); err != nil {
				return dst, first, err
			}
			continue
		}
		if dst, first, err = st.appendMember(dst, mem, f, r, msg, first); err != nil {
			return dst, first, fmt.Errorf("%s %w", mem.name, err)
		}
	}
	return dst, first, nil
}

// appendMember appends the member mem, field f, whose occurrences in msg
// are r.
func (st *jsonState) appendMember(dst []byte, mem *jsonMember, f *jsonField, r fieldRun, msg []byte, first bool) ([]byte, bool, error) {
	occs := st.occs[r.first : r.first+r.n]
	name := func(dst []byte) []byte {
		if !first {
			dst = append(dst, ',')
		}
		return append(dst, mem.name...)
	}
	var err error
	switch {
	case f.repeated:
		n, err := elements(occs, msg, f)
		if err != nil {
			return dst, first, err
		}
		if n == 0 {
			// Absent (or packed and empty): a nil slice.
			if mem.omitEmpty {
				return dst, first, nil
			}
			return append(name(dst), "null"...), false, nil
		}
		dst = append(name(dst), '[')
		firstElem := true
		for _, o := range occs {
			if o.wire == wireBytes && f.wire == wireVarint {
				for i := int(o.start); i < int(o.end); {
					var v uint64
					if v, i, err = uvarint(msg[:o.end], i); err != nil {
						return dst, false, err
					}
					if !firstElem {
						dst = append(dst, ',')
					}
					firstElem = false
					dst = appendVarint(dst, f, v)
				}
				continue
			}
			if !firstElem {
				dst = append(dst, ',')
			}
			firstElem = false
			if dst, err = st.appendValue(dst, f, msg[o.start:o.end]); err != nil {
				return dst, false, err
			}
		}
		return append(dst, ']'), false, nil
	case f.isMap:
		if len(occs) == 0 {
			// Absent: a nil map.
			if mem.omitEmpty {
				return dst, first, nil
			}
			return append(name(dst), "null"...), false, nil
		}
		// Present: at least one entry, so never empty.
		dst, err = st.appendMap(name(dst), f, occs, msg)
		return dst, false, err
	case len(occs) > 1:
		// gogo would keep the last value, or merge messages.
		return dst, first, fmt.Errorf("rawproto: field %d twice", f.num)
	case len(occs) == 0:
		switch mem.absent {
		case absentOmit:
			return dst, first, nil
		case absentLiteral:
			return append(name(dst), mem.absentJSON...), false, nil
		}
		// A struct: what its Unmarshal leaves from nothing.
		dst, err = st.appendValue(name(dst), f, nil)
		return dst, false, err
	}
	o := occs[0]
	v := msg[o.start:o.end]
	if mem.omitEmpty && !f.optional {
		switch f.kind {
		case kindString, kindBytes:
			if len(v) == 0 {
				return dst, first, nil
			}
		case kindInt, kindUint, kindBool:
			n, _, err := uvarint(v, 0)
			if err != nil {
				return dst, first, err
			}
			if truncate(f, n) == 0 {
				return dst, first, nil
			}
		}
	}
	dst, err = st.appendValue(name(dst), f, v)
	return dst, false, err
}

// elements counts the values of repeated field f in its occurrences: one
// each, or the varints of a packed one.
func elements(occs []occurrence, msg []byte, f *jsonField) (int, error) {
	n := 0
	for _, o := range occs {
		if o.wire == wireBytes && f.wire == wireVarint {
			packed := msg[o.start:o.end]
			for _, c := range packed {
				if c < 0x80 {
					n++
				}
			}
			if len(packed) > 0 && packed[len(packed)-1] >= 0x80 {
				return 0, errTruncated
			}
			continue
		}
		n++
	}
	return n, nil
}

// truncate is what gogo keeps of varint v in an integer field of f.bits
// (a bool keeps v != 0).
func truncate(f *jsonField, v uint64) uint64 {
	switch {
	case f.kind == kindBool:
		if v != 0 {
			return 1
		}
		return 0
	case f.bits < 64:
		return v & (1<<f.bits - 1)
	}
	return v
}

// appendVarint appends the JSON of an integer or boolean field's varint.
func appendVarint(dst []byte, f *jsonField, v uint64) []byte {
	switch f.kind {
	case kindBool:
		if v != 0 {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case kindUint:
		return strconv.AppendUint(dst, truncate(f, v), 10)
	}
	// Signed: the low bits, sign-extended.
	shift := 64 - f.bits
	return strconv.AppendInt(dst, int64(v<<shift)>>shift, 10)
}

// appendValue appends the JSON of one value of f (an element, a map value
// or a single field) whose protobuf value is v: a varint's bytes or a
// length-delimited field's contents. nil is an absent message.
func (st *jsonState) appendValue(dst []byte, f *jsonField, v []byte) ([]byte, error) {
	switch f.kind {
	case kindString:
		return appendJSONString(dst, v), nil
	case kindBytes:
		dst = append(dst, '"')
		return append(base64.StdEncoding.AppendEncode(dst, v), '"'), nil
	case kindBool, kindInt, kindUint:
		n, end, err := uvarint(v, 0)
		if err != nil {
			return dst, err
		}
		if end != len(v) {
			return dst, errVarint
		}
		return appendVarint(dst, f, n), nil
	case kindMessage:
		dst = append(dst, '{')
		dst, _, err := st.appendMembers(dst, f.msg, v, true, nil)
		return append(dst, '}'), err
	case kindTime, kindMicroTime:
		return appendTime(dst, v, f.kind == kindMicroTime)
	case kindFieldsV1:
		return appendFieldsV1(dst, v)
	case kindOwnCodec:
		return st.appendOwnCodec(dst, f, v)
	}
	return dst, fmt.Errorf("rawproto: kind %d", f.kind)
}

// appendMap appends the JSON object of map field f from its entries, one
// per occurrence, sorted by key as encoding/json sorts them.
func (st *jsonState) appendMap(dst []byte, f *jsonField, occs []occurrence, msg []byte) ([]byte, error) {
	base := len(st.entries)
	defer func() { st.entries = st.entries[:base] }()
	sorted := true
	for _, o := range occs {
		e, err := readEntry(msg[o.start:o.end], f.val)
		if err != nil {
			return dst, err
		}
		if n := len(st.entries); n > base && bytes.Compare(e.key, st.entries[n-1].key) <= 0 {
			sorted = false
		}
		st.entries = append(st.entries, e)
	}
	entries := st.entries[base:]
	if !sorted {
		slices.SortStableFunc(entries, func(a, b mapEntry) int { return bytes.Compare(a.key, b.key) })
		for i := 1; i < len(entries); i++ {
			if bytes.Equal(entries[i].key, entries[i-1].key) {
				// gogo keeps the last; gogo never writes two.
				return dst, fmt.Errorf("rawproto: map key %q twice", entries[i].key)
			}
		}
	}
	dst = append(dst, '{')
	var err error
	for i := range entries {
		e := &entries[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendJSONString(dst, e.key), ':')
		switch {
		case e.hasVal:
			dst, err = st.appendValue(dst, f.val, e.val)
		case f.val.kind == kindBytes || f.val.kind == kindString:
			// gogo's value starts as []byte{} or "".
			dst = append(dst, `""`...)
		case f.val.kind == kindBool:
			dst = append(dst, "false"...)
		case f.val.kind == kindInt || f.val.kind == kindUint:
			dst = append(dst, '0')
		default:
			// gogo's value starts as &T{}, into which it unmarshals
			// nothing.
			dst, err = st.appendValue(dst, f.val, nil)
		}
		if err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// readEntry reads a map entry {key = 1 (string), value = 2}.
func readEntry(b []byte, val *jsonField) (mapEntry, error) {
	var e mapEntry
	hasKey := false
	for i := 0; i < len(b); {
		key, next, err := uvarint(b, i)
		if err != nil {
			return e, err
		}
		num, wire := key>>3, int(key&7)
		start, end := next, next
		switch wire {
		case wireVarint:
			if _, end, err = uvarint(b, next); err != nil {
				return e, err
			}
		case wireBytes:
			var n uint64
			if n, start, err = uvarint(b, next); err != nil {
				return e, err
			}
			if n > uint64(len(b)-start) {
				return e, errTruncated
			}
			end = start + int(n)
		default:
			return e, fmt.Errorf("rawproto: map entry field %d has wire type %d", num, wire)
		}
		switch {
		case num == 1 && wire == wireBytes && !hasKey:
			e.key, hasKey = b[start:end], true
		case num == 2 && wire == val.wire && !e.hasVal:
			e.val, e.hasVal = b[start:end], true
		default:
			return e, fmt.Errorf("rawproto: map entry field %d (wire type %d)", num, wire)
		}
		i = end
	}
	return e, nil
}

// readTimestamp reads a Timestamp{seconds = 1, nanos = 2}.
func readTimestamp(b []byte) (sec int64, nanos int32, err error) {
	var seen [3]bool
	for i := 0; i < len(b); {
		key, next, err := uvarint(b, i)
		if err != nil {
			return 0, 0, err
		}
		num := key >> 3
		if key&7 != wireVarint || num < 1 || num > 2 || seen[num] {
			return 0, 0, fmt.Errorf("rawproto: Timestamp field %d (wire type %d)", num, key&7)
		}
		seen[num] = true
		v, end, err := uvarint(b, next)
		if err != nil {
			return 0, 0, err
		}
		if num == 1 {
			sec = int64(v)
		} else {
			nanos = int32(v)
		}
		i = end
	}
	return sec, nanos, nil
}

// appendTime appends a metav1.Time (or MicroTime) as its Unmarshal and
// MarshalJSON leave it: nothing is the zero time, null; Time drops the
// nanoseconds, MicroTime keeps whole microseconds; both are written in
// UTC.
func appendTime(dst, v []byte, micro bool) ([]byte, error) {
	if len(v) == 0 {
		return append(dst, "null"...), nil
	}
	sec, nanos, err := readTimestamp(v)
	if err != nil {
		return dst, err
	}
	var t time.Time
	if micro {
		t = time.Unix(sec, int64(time.Duration(nanos).Truncate(time.Microsecond)))
	} else {
		t = time.Unix(sec, 0)
	}
	if t.IsZero() {
		return append(dst, "null"...), nil
	}
	layout := time.RFC3339
	if micro {
		layout = metav1.RFC3339Micro
	}
	dst = append(dst, '"')
	return append(t.UTC().AppendFormat(dst, layout), '"'), nil
}

// appendFieldsV1 appends a metav1.FieldsV1 {raw = 1} as MarshalJSON and
// encoding/json write it: null without raw, else raw compacted (and its
// HTML characters escaped), an error when it is not valid JSON. Raw that
// MarshalJSON would read as CBOR is left to it.
func appendFieldsV1(dst, v []byte) ([]byte, error) {
	var raw []byte
	hasRaw := false
	for i := 0; i < len(v); {
		key, next, err := uvarint(v, i)
		if err != nil {
			return dst, err
		}
		if key != 1<<3|wireBytes || hasRaw {
			return dst, fmt.Errorf("rawproto: FieldsV1 field %d (wire type %d)", key>>3, key&7)
		}
		n, start, err := uvarint(v, next)
		if err != nil {
			return dst, err
		}
		if n > uint64(len(v)-start) {
			return dst, errTruncated
		}
		raw, hasRaw = v[start:start+int(n)], true
		i = start + int(n)
	}
	if !hasRaw {
		return append(dst, "null"...), nil
	}
	if len(raw) > 0 {
		switch c := raw[0]; {
		case c == 0xf6, c >= 0xa0 && c <= 0xbf, c >= 0xc6 && c <= 0xdb:
			return dst, errors.New("rawproto: FieldsV1 holds CBOR")
		}
	}
	if compactSeen.has(raw) {
		return append(dst, raw...), nil
	}
	start := len(dst)
	dst, err := appendCompactJSON(dst, raw)
	if err == nil && bytes.Equal(dst[start:], raw) {
		compactSeen.add(raw)
	}
	return dst, err
}

// compactSeen holds raw FieldsV1 JSON found to be what encoding/json
// writes as it is (valid, compact, nothing to escape), which is what kube
// stores: the managedFields of objects made from one template repeat
// across them, and checking them is otherwise most of the cost of an
// object's JSON. It stops growing at compactSeenMax bytes.
var compactSeen = seenSet{m: map[string]struct{}{}}

const (
	compactSeenMax      = 1 << 20
	compactSeenMaxEntry = 4 << 10
)

type seenSet struct {
	mu    sync.RWMutex
	m     map[string]struct{}
	bytes int
}

func (s *seenSet) has(b []byte) bool {
	if len(b) > compactSeenMaxEntry {
		return false
	}
	s.mu.RLock()
	_, ok := s.m[string(b)]
	s.mu.RUnlock()
	return ok
}

func (s *seenSet) add(b []byte) {
	if len(b) > compactSeenMaxEntry {
		return
	}
	s.mu.Lock()
	if s.bytes+len(b) <= compactSeenMax {
		if _, ok := s.m[string(b)]; !ok {
			s.m[string(b)] = struct{}{}
			s.bytes += len(b)
		}
	}
	s.mu.Unlock()
}

// appendOwnCodec appends a value of a type with its own JSON form: read
// by its Unmarshal, written by encoding/json (which asks its MarshalJSON
// and compacts what it returns).
func (st *jsonState) appendOwnCodec(dst []byte, f *jsonField, v []byte) ([]byte, error) {
	if f.cache != nil {
		if data, ok := f.cache.load(v); ok {
			return append(dst, data...), nil
		}
	}
	pv := reflect.New(f.typ)
	if f.inMap && f.typ.Kind() == reflect.Slice {
		// gogo unmarshals a map's value into &T{}: for a named list (a
		// CSR's ExtraValue) an empty list, not nil, even with no items.
		pv.Elem().Set(reflect.MakeSlice(f.typ, 0, 0))
	}
	if err := pv.Interface().(interface{ Unmarshal([]byte) error }).Unmarshal(v); err != nil {
		return dst, err
	}
	var x any = pv.Interface()
	if f.inMap {
		// A map's values are not addressable: encoding/json does not use
		// methods with pointer receivers on them.
		x = pv.Elem().Interface()
	}
	data, err := json.Marshal(x)
	if err != nil {
		return dst, err
	}
	if f.cache != nil {
		f.cache.store(v, data)
	}
	return append(dst, data...), nil
}

// jsonSafe marks the ASCII bytes encoding/json writes in a string as they
// are (HTML-safe: not <, > or &).
var jsonSafe = func() (safe [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		safe[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return safe
}()

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json writes a string (with
// escapeHTML, as json.Marshal does): quotes and backslashes escaped,
// control characters as \b \f \n \r \t or \u00XX, <, > and & as \u003c
// and the like, U+2028 and U+2029 escaped, each byte of invalid UTF-8
// as \ufffd.
func appendJSONString[S []byte | string](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(len(s), i+utf8.UTFMax)]))
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

var errInvalidJSON = errors.New("rawproto: invalid JSON in FieldsV1")

// maxJSONDepth bounds the nesting appendCompactJSON follows, below
// encoding/json's own limit (10000): deeper input is an error here.
const maxJSONDepth = 1000

// appendCompactJSON appends src as encoding/json writes the output of a
// MarshalJSON: white space outside strings dropped, <, >, & and U+2028,
// U+2029 escaped, and an error (dst as it was) unless src is one valid
// JSON value, by the grammar encoding/json's scanner checks (which takes
// any byte from 0x20 up in strings, valid UTF-8 or not).
func appendCompactJSON(dst, src []byte) ([]byte, error) {
	c := compactor{src: src, dst: dst}
	i := c.space(0)
	i, ok := c.value(i, 0)
	if ok {
		i = c.space(i)
		ok = i == len(src)
	}
	if !ok {
		return dst, errInvalidJSON
	}
	return append(c.dst, src[c.start:]...), nil
}

// compactor copies src to dst a run at a time: start is where the run
// not yet copied begins.
type compactor struct {
	src, dst []byte
	start    int
}

// flush copies the run up to i and starts the next at next.
func (c *compactor) flush(i, next int) {
	c.dst = append(c.dst, c.src[c.start:i]...)
	c.start = next
}

// space skips white space at i, which compacting drops.
func (c *compactor) space(i int) int {
	if i < len(c.src) && c.src[i] > ' ' {
		return i
	}
	return c.spaceSlow(i)
}

func (c *compactor) spaceSlow(i int) int {
	j := i
	for j < len(c.src) {
		switch c.src[j] {
		case ' ', '\t', '\n', '\r':
			j++
			continue
		}
		break
	}
	if j > i {
		c.flush(i, j)
	}
	return j
}

// value reads the value at i and returns the offset after it.
func (c *compactor) value(i, depth int) (int, bool) {
	src := c.src
	if i >= len(src) {
		return i, false
	}
	switch b := src[i]; {
	case b == '{', b == '[':
		if depth >= maxJSONDepth {
			return i, false
		}
		closing := byte('}')
		if b == '[' {
			closing = ']'
		}
		i = c.space(i + 1)
		if i < len(src) && src[i] == closing {
			return i + 1, true
		}
		for {
			var ok bool
			if b == '{' {
				if i >= len(src) || src[i] != '"' {
					return i, false
				}
				if i, ok = c.str(i); !ok {
					return i, false
				}
				if i = c.space(i); i >= len(src) || src[i] != ':' {
					return i, false
				}
				i = c.space(i + 1)
			}
			if i, ok = c.value(i, depth+1); !ok {
				return i, false
			}
			if i = c.space(i); i >= len(src) {
				return i, false
			}
			switch src[i] {
			case ',':
				i = c.space(i + 1)
				continue
			case closing:
				return i + 1, true
			}
			return i, false
		}
	case b == '"':
		return c.str(i)
	case b == 't':
		return jsonLiteral(src, i, "true")
	case b == 'f':
		return jsonLiteral(src, i, "false")
	case b == 'n':
		return jsonLiteral(src, i, "null")
	case b == '-' || b >= '0' && b <= '9':
		return jsonNumber(src, i)
	}
	return i, false
}

func jsonLiteral(src []byte, i int, lit string) (int, bool) {
	if len(src)-i >= len(lit) && string(src[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// jsonNumber reads a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func jsonNumber(src []byte, i int) (int, bool) {
	digits := func(i int) (int, bool) {
		j := i
		for j < len(src) && src[j] >= '0' && src[j] <= '9' {
			j++
		}
		return j, j > i
	}
	if src[i] == '-' {
		i++
	}
	if i >= len(src) {
		return i, false
	}
	var ok bool
	if src[i] == '0' {
		i++
	} else if i, ok = digits(i); !ok {
		return i, false
	}
	if i < len(src) && src[i] == '.' {
		if i, ok = digits(i + 1); !ok {
			return i, false
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i, ok = digits(i); !ok {
			return i, false
		}
	}
	return i, true
}

// strPlain marks the bytes a string holds that compacting copies as they
// are: not the end of the string, an escape, a control character, an
// HTML character or the first byte of U+2028 and U+2029.
var strPlain = func() (plain [256]bool) {
	for c := 0x20; c < 256; c++ {
		plain[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' && c != 0xE2
	}
	return plain
}()

// str reads the string at i (its opening quote) and returns the offset
// after its closing one.
func (c *compactor) str(i int) (int, bool) {
	src := c.src
	i++
	for i < len(src) {
		b := src[i]
		if strPlain[b] {
			i++
			continue
		}
		switch {
		case b == '"':
			return i + 1, true
		case b == '\\':
			if i+1 >= len(src) {
				return i, false
			}
			switch src[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(src)-i < 6 {
					return i, false
				}
				for _, h := range src[i+2 : i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return i, false
					}
				}
				i += 6
			default:
				return i, false
			}
		case b < 0x20:
			return i, false
		case b == 0xE2:
			if i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8 {
				c.flush(i, i+3)
				c.dst = append(c.dst, '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xF])
				i += 3
				continue
			}
			i++
		default: // <, >, &
			c.flush(i, i+1)
			c.dst = append(c.dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			i++
		}
	}
	return i, false
}
