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

// FuzzString: a string that fits is kept whole; one that does not keeps a
// prefix of at most n bytes followed by Marker; for a valid string, the
// longest such prefix that ends on a rune boundary, so the cut stays valid.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "abc", "aé", "a€b", "日本語", "\xff\xfe", "a\xe2\x82"} {
		f.Add(s, 2)
	}
	f.Add("abc", -1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= len(s) + 3
		got := String(s, n)
		if len(s) <= n {
			if got != s {
				t.Fatalf("String(%q, %d) = %q; it fits", s, n, got)
			}
			return
		}
		kept, ok := strings.CutSuffix(got, Marker)
		if !ok || len(kept) > max(n, 0) || !strings.HasPrefix(s, kept) {
			t.Fatalf("String(%q, %d) = %q", s, n, got)
		}
		if !utf8.ValidString(s) {
			return // no runes to keep whole: stray continuation bytes are all dropped back to a start byte
		}
		if !utf8.ValidString(got) {
			t.Fatalf("String(%q, %d) = %q: not valid UTF-8", s, n, got)
		}
		// Longest: the next rune boundary after the kept part is past n.
		next := len(kept) + 1
		for next < len(s) && !utf8.RuneStart(s[next]) {
			next++
		}
		if next <= n {
			t.Fatalf("String(%q, %d) = %q; %q fits too", s, n, got, s[:next])
		}
	})
}
