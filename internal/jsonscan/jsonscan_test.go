package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

var values = []string{
	`"a"`, `""`, `"\""`, `"\\"`, `"a\\\"b"`, `"\\\\"`, `"é\u00e9"`,
	`0`, `-1.5e10`, `true`, `false`, `null`,
	`{}`, `[]`, `{"a":[1,{"b":"}"}],"c":"]"}`, `[[["\\\"]"]]]`, `{"k\"}":"v{"}`,
}

// TestValue: each value is found whole, and what follows it is left.
func TestValue(t *testing.T) {
	for _, v := range values {
		for _, after := range []string{"", ",", `,"x":1}`, "]", " \n"} {
			val, rest, ok := Value([]byte(v + after))
			if !ok || string(val) != v || string(rest) != after {
				t.Errorf("Value(%q): %q %q %v; want %q %q", v+after, val, rest, ok, v, after)
			}
		}
	}
}

// TestValueRefusesCutInput: a string or container the input ends inside,
// or no value at all, is not a value.
func TestValueRefusesCutInput(t *testing.T) {
	for _, in := range []string{``, `"`, `"a`, `"a\"`, `{`, `{"a":"}`, `[1,2`, `,`, `]`, ` 1`} {
		if val, rest, ok := Value([]byte(in)); ok {
			t.Errorf("Value(%q) = %q %q, true; want false", in, val, rest)
		}
	}
}

// FuzzValue holds Value to encoding/json: a valid JSON value (without
// surrounding space) is found whole, followed by anything that starts with
// a delimiter; on any input Value returns a prefix and its rest, or false.
func FuzzValue(f *testing.F) {
	for _, v := range values {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		val, rest, ok := Value(in)
		if ok && !bytes.Equal(append(append([]byte{}, val...), rest...), in) {
			t.Fatalf("Value(%q): %q + %q is not the input", in, val, rest)
		}
		if !json.Valid(in) || len(bytes.TrimSpace(in)) != len(in) {
			return
		}
		in2 := append(append([]byte{}, in...), ",x"...)
		val, rest, ok = Value(in2)
		if !ok || !bytes.Equal(val, in) || string(rest) != ",x" {
			t.Fatalf("Value(%q): %q %q %v; want the value %q", in2, val, rest, ok, in)
		}
	})
}

// TestKeys: the keys of an object as written (escapes decoded, case kept,
// repeats each given), its values whole, a stop when f says so, nothing
// for a value that is not an object, and false for an object cut short.
func TestKeys(t *testing.T) {
	type kv struct{ k, v string }
	walk := func(obj string, stopAt string) ([]kv, bool) {
		var got []kv
		ok := Keys([]byte(obj), func(k string, v []byte) bool {
			got = append(got, kv{k, string(v)})
			return k != stopAt
		})
		return got, ok
	}
	got, ok := walk(` { "a" : 1, "A":{"x":[1,"}"]}, "\u0062":"s", "a":null }`, "")
	want := []kv{{"a", "1"}, {"A", `{"x":[1,"}"]}`}, {"b", `"s"`}, {"a", "null"}}
	if !ok || len(got) != len(want) {
		t.Fatalf("got %v %v, want %v", got, ok, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("key %d: %v, want %v", i, got[i], want[i])
		}
	}
	if got, ok := walk(`{"a":1,"stop":2,"c":3}`, "stop"); !ok || len(got) != 2 {
		t.Errorf("stopped walk: %v %v", got, ok)
	}
	for _, notObject := range []string{`[1,2]`, `"s"`, `7`, ``} {
		if got, ok := walk(notObject, ""); !ok || len(got) != 0 {
			t.Errorf("%q: %v %v, want no keys", notObject, got, ok)
		}
	}
	for _, cut := range []string{`{"a"`, `{"a":`, `{"a":[1,`, `{"a" 1}`, `{"a`} {
		if _, ok := walk(cut, ""); ok {
			t.Errorf("%q: ok, want false", cut)
		}
	}
}
