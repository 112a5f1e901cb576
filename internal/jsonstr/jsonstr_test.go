package jsonstr

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestAppend holds Append to encoding/json.Marshal, and AppendNoHTML to a
// json.Encoder with SetEscapeHTML(false), on edge cases and on random
// strings (bytes from every class: ASCII, controls, HTML characters,
// multi-byte runes, U+2028, invalid UTF-8).
func TestAppend(t *testing.T) {
	cases := []string{"", "plain", `q"b\`, "\b\f\n\r\t\x00\x1f\x7f", "<a href='x'>&</a>", "é✓😀", "\u2028\u2029", "\xff\xfe", "a\xc3", "\xed\xa0\x80"}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", " ", "\"", "\\", "\n", "\x01", "<", "&", "é", "😀", "\u2028", "\xff", "\xe2\x80", "~", "\x7f"}
	for range 5000 {
		var s string
		for range rng.IntN(20) {
			s += alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, s)
	}
	for _, s := range cases {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s want %s", s, got, want)
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(s)
		if got, want := AppendNoHTML(nil, s), strings.TrimSuffix(b.String(), "\n"); string(got) != want {
			t.Fatalf("no HTML escapes, %q: got %s want %s", s, got, want)
		}
	}
}

func FuzzAppend(f *testing.F) {
	f.Add("a<b>\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s want %s", s, got, want)
		}
	})
}
