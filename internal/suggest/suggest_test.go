package suggest

import (
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	flags := []string{"root", "port", "bind", "auth-token", "auth-token-file", "scope-path", "tokens", "isolation"}
	for _, tc := range []struct {
		typed, want string
	}{
		{"prot", "port"},             // swapped letters: one edit
		{"por", "port"},              // one letter missing
		{"ports", "port"},            // one letter too many
		{"auth_token", "auth-token"}, // '_' for '-'
		{"AuthTokenFile", "auth-token-file"},
		{"auth-tokne-file", "auth-token-file"}, // swap in a long name
		{"isolaton", "isolation"},
		{"isolatoin-mode", ""}, // too far
		{"scopepath", "scope-path"},
		{"token", "tokens"},
		{"xyz", ""},
		{"", ""},
		{"bnd", "bind"},
		{"bd", ""}, // two edits from bind in a short name
		{strings.Repeat("p", 10000), ""},
	} {
		if got := Closest(tc.typed, flags); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.typed, got, tc.want)
		}
	}
	// The nearest wins over the earlier.
	if got := Closest("tokns", []string{"tokens-x", "tokens"}); got != "tokens" {
		t.Errorf("nearest: got %q, want tokens", got)
	}
	// Of two as near, the earlier.
	if got := Closest("cat", []string{"bat", "hat"}); got != "bat" {
		t.Errorf("tie: got %q, want bat", got)
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"a", "", 1},
		{"", "abc", 3},
		{"port", "port", 0},
		{"prot", "port", 1},
		{"ca", "abc", 3}, // OSA, not Damerau: no edit of a swapped pair
		{"kitten", "sitting", 3},
		{"comand", "command", 1},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

func FuzzDistance(f *testing.F) {
	f.Add("port", "prot")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := Distance(a, b)
		if d < 0 || d > max(len(a), len(b)) {
			t.Fatalf("Distance(%q, %q) = %d out of range", a, b, d)
		}
		if (d == 0) != (a == b) && len(a) <= 256 && len(b) <= 256 {
			t.Fatalf("Distance(%q, %q) = %d", a, b, d)
		}
	})
}
