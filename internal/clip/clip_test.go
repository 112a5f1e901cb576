package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 0, ""},
		{"abc", 3, "abc"},
		{"abc", 5, "abc"},
		{"abcd", 3, "abc…"},
		{"abc", 0, "…"},
		{"abc", -1, "…"},
		{"aé", 2, "a…"},   // é is 2 bytes: cutting at 2 would split it
		{"aé", 3, "aé"},   // fits
		{"a€b", 3, "a…"},  // € is 3 bytes
		{"a€b", 4, "a€…"}, // the cut falls after €
		{"日本語", 4, "日…"},
	} {
		if got := String(c.s, c.n); got != c.want {
			t.Errorf("String(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// TestStringKeepsUTF8: whatever n, a valid string cut stays valid and its
// kept part is at most n bytes.
func TestStringKeepsUTF8(t *testing.T) {
	s := strings.Repeat("aé€😀", 20)
	for n := 0; n <= len(s)+1; n++ {
		got := String(s, n)
		if !utf8.ValidString(got) {
			t.Fatalf("String(s, %d) = %q: not valid UTF-8", n, got)
		}
		kept := strings.TrimSuffix(got, Marker)
		if len(kept) > n || !strings.HasPrefix(s, kept) {
			t.Fatalf("String(s, %d) kept %q", n, kept)
		}
	}
}
