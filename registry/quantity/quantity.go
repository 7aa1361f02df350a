// Package quantity keeps the cost of resource quantities bounded.
//
// apimachinery's resource.Quantity holds "1e100000000" cheaply (an int64
// and a scale), but comparing it with a quantity of another scale, adding
// to it, or parsing a quantity of more than 18 digits or below a nano with
// such an exponent computes 10^exponent as a big integer: minutes of CPU
// and hundreds of MB for one request (kube-apiserver v1.32 does exactly
// that in its pod validation, ValidateNonnegativeQuantity, and in its QoS
// computation). corekube compares quantities by their canonical digits and
// exponent instead (Cmp, SumsEqual), and refuses, before decoding a body,
// the quantity strings whose very parsing would be that costly (Costly,
// CheckJSON, CheckUnstructured).
package quantity

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxExponent bounds the decimal exponent of the quantities whose parsing
// goes through arbitrary precision (more than 18 significant digits, or
// finer than a nano): beyond it the parse alone rescales by 10^exponent.
// Quantities of at most 18 digits and any int32 exponent stay cheap and
// are accepted as kube accepts them.
const MaxExponent = 1000

// Cmp compares a and b as resource.Quantity.Cmp does, without ever
// scaling one to the other's exponent: signs, then the position of the
// leading digit, then the digits.
func Cmp(a, b resource.Quantity) int {
	sa, sb := a.Sign(), b.Sign()
	if sa != sb || sa == 0 {
		return cmp.Compare(sa, sb)
	}
	da, ea := canonical(a)
	db, eb := canonical(b)
	c := cmp.Compare(int64(len(da))+int64(ea), int64(len(db))+int64(eb))
	if c == 0 {
		c = compareDigits(da, db)
	}
	return c * sa
}

// canonical is q's absolute value as digits (no leading zero) times
// 10^exponent.
func canonical(q resource.Quantity) ([]byte, int32) {
	digits, exp := q.AsCanonicalBytes(nil)
	digits = bytes.TrimPrefix(digits, []byte("-"))
	trimmed := bytes.TrimLeft(digits, "0")
	return trimmed, exp
}

// compareDigits compares two digit strings of the same magnitude (their
// leading digits at the same power of ten): the shorter is padded with
// zeros.
func compareDigits(a, b []byte) int {
	for i := 0; i < max(len(a), len(b)); i++ {
		x, y := byte('0'), byte('0')
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return cmp.Compare(x, y)
		}
	}
	return 0
}

// maxSpread bounds the exponents SumsEqual adds exactly (10^4000 is a
// 13,000-bit integer: microseconds).
const maxSpread = 4000

// SumsEqual reports whether the quantities of a add up to those of b, as
// summing each list with Quantity.Add and comparing would, but at a
// bounded cost: exactly when all the exponents lie within a few thousand
// of each other (every real request does); beyond that, only lists that
// hold the same quantities count as equal.
func SumsEqual(a, b []resource.Quantity) bool {
	type term struct {
		neg    bool
		digits []byte
		exp    int32
	}
	var terms [2][]term
	minExp, maxExp := int64(0), int64(0)
	first := true
	for i, list := range [][]resource.Quantity{a, b} {
		for _, q := range list {
			if q.Sign() == 0 {
				continue
			}
			d, e := canonical(q)
			terms[i] = append(terms[i], term{q.Sign() < 0, d, e})
			if first || int64(e) < minExp {
				minExp = int64(e)
			}
			if first || int64(e) > maxExp {
				maxExp = int64(e)
			}
			first = false
		}
	}
	if maxExp-minExp <= maxSpread {
		var sums [2]big.Int
		for i := range terms {
			for _, t := range terms[i] {
				v, ok := new(big.Int).SetString(string(t.digits), 10)
				if !ok {
					return false
				}
				if shift := int64(t.exp) - minExp; shift > 0 {
					v.Mul(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(shift), nil))
				}
				if t.neg {
					v.Neg(v)
				}
				sums[i].Add(&sums[i], v)
			}
		}
		return sums[0].Cmp(&sums[1]) == 0
	}
	key := func(t term) string { return fmt.Sprintf("%t %s %d", t.neg, t.digits, t.exp) }
	var keys [2][]string
	for i := range terms {
		for _, t := range terms[i] {
			keys[i] = append(keys[i], key(t))
		}
		slices.Sort(keys[i])
	}
	return slices.Equal(keys[0], keys[1])
}

// Costly reports whether parsing s as a quantity would compute with a
// power of ten beyond MaxExponent: an exponent ("e" or "E" and digits)
// whose magnitude exceeds it, on a number of more than 18 digits or one
// that ends below a nano. Strings that are not quantities are not costly
// (their parse fails at once).
func Costly(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	num, denom := 0, 0
	seenDot := false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			if seenDot {
				denom++
			} else {
				num++
			}
			continue
		case c == '.' && !seenDot:
			seenDot = true
			continue
		}
		break
	}
	if num+denom == 0 || i+1 >= len(s) || (s[i] != 'e' && s[i] != 'E') {
		return false
	}
	exp, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil {
		return false // ParseQuantity refuses it at once
	}
	if exp > -MaxExponent && exp < MaxExponent {
		return false
	}
	return num+denom > 18 || exp-int64(denom) < -9
}

// mayBeCostly is a quick scan of an encoded body for what Costly could
// refuse: an "e" or "E" followed by a sign or not and at least four
// digits. Bodies without one (nearly all) need no closer look.
func mayBeCostly(data []byte) bool {
	for i := 0; i < len(data); i++ {
		if data[i] != 'e' && data[i] != 'E' {
			continue
		}
		j := i + 1
		if j < len(data) && (data[j] == '-' || data[j] == '+') {
			j++
		}
		n := 0
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
			n++
		}
		if n >= 4 {
			return true
		}
	}
	return false
}

// Error is a quantity refused before decoding: where it was and what.
type Error struct {
	Path  string
	Value string
}

func (e *Error) Error() string {
	v := e.Value
	if len(v) > 64 {
		v = v[:64] + "..."
	}
	return fmt.Sprintf("%s: quantity %q is out of range: a quantity of more than 18 digits or finer than 1n may not have an exponent beyond ±%d", e.Path, v, MaxExponent)
}

var quantityType = reflect.TypeOf(resource.Quantity{})

// CheckBytes looks at a protobuf body for a costly quantity, without
// knowing where quantities are (it cannot be walked without decoding it,
// which is the cost): a Quantity is encoded as its string in field 1
// (tag 0x0a, a length, the bytes), so every such field holding exactly a
// costly quantity is refused, wherever it is.
func CheckBytes(data []byte) error {
	if !mayBeCostly(data) {
		return nil
	}
	for i := 0; i+1 < len(data); i++ {
		if data[i] != 0x0a {
			continue
		}
		n, w := binary.Uvarint(data[i+1:])
		if w <= 0 || n == 0 || n > 4096 || uint64(len(data)-(i+1+w)) < n {
			continue
		}
		start := i + 1 + w
		if s := string(data[start : start+int(n)]); Costly(s) {
			return &Error{Path: "body", Value: s}
		}
	}
	return nil
}

// CheckJSON refuses a JSON body that holds a costly quantity where t (the
// Go type the body decodes into) has a resource.Quantity. Most bodies cost
// one quick scan.
func CheckJSON(data []byte, t reflect.Type) error {
	if !mayBeCostly(data) || !hasQuantity(t, map[reflect.Type]bool{}) {
		return nil
	}
	var v any
	if err := jsonUnmarshal(data, &v); err != nil {
		return nil // the decoder reports it
	}
	return walk(v, t, "")
}

// CheckUnstructured is CheckJSON for an object already decoded into maps.
func CheckUnstructured(obj map[string]any, t reflect.Type) error {
	if !hasQuantity(t, map[reflect.Type]bool{}) {
		return nil
	}
	return walk(obj, t, "")
}

// hasQuantity: values of type t can hold a resource.Quantity.
func hasQuantity(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == quantityType {
		return true
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return hasQuantity(t.Elem(), seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() && hasQuantity(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// walk checks v, decoded JSON, where the Go type t would hold it.
func walk(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == quantityType {
		if s, ok := v.(string); ok && Costly(s) {
			return &Error{Path: strings.TrimPrefix(path, "."), Value: s}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		items, _ := v.([]any)
		for i, item := range items {
			if err := walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, _ := v.(map[string]any)
		for k, item := range m {
			if err := walk(item, t.Elem(), path+"."+k); err != nil {
				return err
			}
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		return walkStruct(m, t, path)
	}
	return nil
}

// walkStruct walks the JSON members of struct type t (inlined embedded
// structs included).
func walkStruct(m map[string]any, t reflect.Type, path string) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || !hasQuantity(f.Type, map[reflect.Type]bool{}) {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if err := walkStruct(m, ft, path); err != nil {
					return err
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		if item, ok := m[name]; ok {
			if err := walk(item, f.Type, path+"."+name); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonUnmarshal decodes JSON (numbers as json.Number: only strings
// matter here).
func jsonUnmarshal(data []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return d.Decode(v)
}
