package registry

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestValidNameIsThePattern holds ValidName (a tool name: letters, digits,
// '_', '.', '-', at most 64) to the pattern ^[A-Za-z0-9_.-]{1,64}$, which it
// checks with a loop: every byte alone, lengths 0 to 66, and random strings
// over a mixed alphabet.
func TestValidNameIsThePattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	check := func(name string) {
		t.Helper()
		if got, want := ValidName(name) == nil, pattern.MatchString(name); got != want {
			t.Fatalf("ValidName(%q) accepts = %v, the pattern = %v", name, got, want)
		}
	}
	for b := range 256 {
		check(string([]byte{byte(b)}))
		check("a" + string([]byte{byte(b)}) + "z")
	}
	for n := range 67 {
		check(strings.Repeat("x", n))
	}
	const alphabet = "aZ09_.-/ \n\x00é$^"
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(70))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		check(string(b))
	}
}

// FuzzValidNameIsThePattern: ValidName accepts exactly what
// ^[A-Za-z0-9_.-]{1,64}$ matches, on any input, invalid UTF-8 and lengths
// past the bound included.
func FuzzValidNameIsThePattern(f *testing.F) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	for _, s := range []string{"", "a", "a.b-c_d", strings.Repeat("x", 64), strings.Repeat("x", 65), "a\n", "\xff", "é", "a b", strings.Repeat("é", 32)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := ValidName(name) == nil, pattern.MatchString(name); got != want {
			t.Fatalf("ValidName(%q) accepts = %v, the pattern = %v", name, got, want)
		}
	})
}
