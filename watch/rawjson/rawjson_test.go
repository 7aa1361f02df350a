package rawjson

import (
	"encoding/json"
	"testing"
)

func TestObjectAndArray(t *testing.T) {
	data := []byte(` { "a" : "x\"}]" , "b":{"c":[1,{"d":"\\"}],"e":null},"f":[ ],"g":-1.5e3,"h":true } `)
	want := map[string]string{"a": `"x\"}]"`, "b": `{"c":[1,{"d":"\\"}],"e":null}`, "f": `[ ]`, "g": `-1.5e3`, "h": `true`}
	got := map[string]string{}
	it := NewObject(data)
	for it.Next() {
		got[string(it.Key())] = string(it.Value())
	}
	if it.Err() != nil || len(got) != len(want) {
		t.Fatalf("got %v, %v", got, it.Err())
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %s, want %s", k, got[k], v)
		}
	}
	var elems []string
	arr := NewArray([]byte(`[1, "a,]", {"x":[2]}, null]`))
	for arr.Next() {
		elems = append(elems, string(arr.Value()))
	}
	if arr.Err() != nil || len(elems) != 4 || elems[1] != `"a,]"` || elems[2] != `{"x":[2]}` {
		t.Errorf("elements %q, %v", elems, arr.Err())
	}
	for _, empty := range []string{`null`, `{}`, ` { } `} {
		it := NewObject([]byte(empty))
		if it.Next() || it.Err() != nil {
			t.Errorf("%s: not empty", empty)
		}
	}
	for _, bad := range []string{``, `[]`, `{"a"}`, `{"a":1,}`, `{"a":"x`, `{"a":1 "b":2}`, `{"a":{}`} {
		it := NewObject([]byte(bad))
		for it.Next() {
		}
		if it.Err() == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestStrings(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote`, "back\\slash", "\u2028<&>\x01", "ünï"} {
		raw, _ := json.Marshal(s)
		got, err := String(raw)
		if err != nil || got != s {
			t.Errorf("String(%s) = %q, %v", raw, got, err)
		}
		if got, err := Unescape(raw[1 : len(raw)-1]); err != nil || got != s {
			t.Errorf("Unescape(%s) = %q, %v", raw, got, err)
		}
		sc := Scanner{B: append(raw, ',')}
		if inner, ok := sc.Str(); !ok || string(inner) != string(raw[1:len(raw)-1]) {
			t.Errorf("Str(%s) = %s, %v", raw, inner, ok)
		}
	}
	if s, err := String([]byte("null")); s != "" || err != nil {
		t.Errorf("String(null) = %q, %v", s, err)
	}
	if _, err := String([]byte("1")); err == nil {
		t.Error("String(1) did not fail")
	}
	if v, err := Member([]byte(`{"a":1,"b":[2]}`), "b"); err != nil || string(v) != "[2]" {
		t.Errorf("Member = %s, %v", v, err)
	}
}
