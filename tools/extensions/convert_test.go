package extensions

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.starlark.net/starlark"
)

func TestJSONRoundTrip(t *testing.T) {
	for _, tc := range []struct{ in, out string }{
		{`null`, `null`},
		{`true`, `true`},
		{`9007199254740993`, `9007199254740993`}, // beyond 2^53, exact
		{`-123456789012345678901234567890`, `-123456789012345678901234567890`},
		{`1.5`, `1.5`},
		{`1e3`, `1000`},
		{`"h\u00e9\n"`, `"hé\n"`},
		{`[1,[2,{"a":null}]]`, `[1,[2,{"a":null}]]`},
		{`{"b":1,"a":{"c":[true,false]}}`, `{"a":{"c":[true,false]},"b":1}`},
		{`{}`, `{}`},
		{`[]`, `[]`},
	} {
		v, err := FromJSON([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		out, err := ToJSON(v)
		if err != nil || string(out) != tc.out {
			t.Errorf("%s → %s → %s (%v); want %s", tc.in, v, out, err, tc.out)
		}
	}
	for _, bad := range []string{`{"a":}`, `[1,2`, `1 2`, `[1]]`, `{}}`, strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)} {
		if _, err := FromJSON([]byte(bad)); err == nil {
			t.Errorf("FromJSON(%.40q) accepted", bad)
		}
	}
	for _, v := range []starlark.Value{starlark.Float(math.NaN()), starlark.Float(math.Inf(1)), starlark.NewSet(1), starlark.NewBuiltin("f", nil)} {
		if _, err := ToJSON(v); err == nil {
			t.Errorf("ToJSON(%s) accepted", v.Type())
		}
	}
	d := starlark.NewDict(1)
	d.SetKey(starlark.MakeInt(1), starlark.None)
	if _, err := ToJSON(d); err == nil || !strings.Contains(err.Error(), "not a string") {
		t.Errorf("an int key: %v", err)
	}
}

// FuzzJSON: what FromJSON takes is one JSON value, and whatever valid JSON
// comes in, it converts to Starlark and back to the same JSON value.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",null,true]}`, `12345678901234567890`, `-0`, `[[[]]]`, `"\ud83d\ude00"`, `{}}`, `[1] 2`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := FromJSON(data)
		if err == nil && !json.Valid(data) {
			t.Fatalf("took %q, which is not one JSON value, as %s", data, v)
		}
		var want any
		if json.Unmarshal(data, &want) != nil {
			return
		}
		if err != nil {
			return // deeper than maxDepth, or a float out of range
		}
		out, err := ToJSON(v)
		if err != nil {
			t.Fatalf("%s converted but does not convert back: %v", data, err)
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s → invalid JSON %s", data, out)
		}
		if !reflect.DeepEqual(want, got) { // numerically: -0 and 0 are the same number
			t.Fatalf("%s → %s", data, out)
		}
	})
}

// TestJSONIntDigitsBounded: an integer of more than MaxIntDigits digits is
// refused before it is read (reading one costs time quadratic in its
// length, outside the call's deadline), in a call's arguments too; one of
// MaxIntDigits digits is exact.
func TestJSONIntDigitsBounded(t *testing.T) {
	at := "-" + strings.Repeat("9", MaxIntDigits)
	v, err := FromJSON([]byte(at))
	if err != nil {
		t.Fatalf("%d digits: %v", MaxIntDigits, err)
	}
	if out, _ := ToJSON(v); string(out) != at {
		t.Errorf("%d digits did not round-trip", MaxIntDigits)
	}
	for _, bad := range []string{strings.Repeat("9", MaxIntDigits+1), "[-" + strings.Repeat("1", 1_000_000) + "]"} {
		if _, err := FromJSON([]byte(bad)); err == nil || !strings.Contains(err.Error(), "MaxIntDigits") {
			t.Errorf("%d bytes of digits: %v", len(bad), err)
		}
	}
	f := start(t, map[string]string{"bench.star": benchExt}, nil)
	t0 := time.Now()
	txt, isErr, _ := f.call(t, "bench__loop", `{"n": `+strings.Repeat("1", 1_000_000)+`}`)
	if !isErr || !strings.Contains(txt, "MaxIntDigits") {
		t.Errorf("a million-digit argument: %q %v", txt, isErr)
	}
	t.Logf("a million-digit argument answered in %v", time.Since(t0))
}
