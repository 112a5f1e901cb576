package httpguard

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestTokenNameIsThePattern holds the token file's name rule (docs/security.md:
// letters, digits, '.', '_', '-', at most 64) to the pattern
// ^[A-Za-z0-9._-]{1,64}$, which validTokenName checks with a loop: every byte
// alone, lengths 0 to 66, random strings over a mixed alphabet, and a name
// ParseTokens refuses with the rule's message.
func TestTokenNameIsThePattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	check := func(name string) {
		t.Helper()
		if got, want := validTokenName(name), pattern.MatchString(name); got != want {
			t.Fatalf("validTokenName(%q) = %v, the pattern = %v", name, got, want)
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
	_, err := ParseTokens("t.json", []byte(`{"tokens":[{"name":"a b","sha256":"`+strings.Repeat("0", 64)+`","scope":"/"}]}`))
	if err == nil || !strings.Contains(err.Error(), `name "a b" must be 1 to 64 letters`) {
		t.Fatalf("ParseTokens with a bad name: %v", err)
	}
}

// FuzzTokenNameIsThePattern: validTokenName agrees with
// ^[A-Za-z0-9._-]{1,64}$ on any input, invalid UTF-8 and lengths past the
// bound included (the pattern counts runes, the loop bytes: the class is
// ASCII, so a name the pattern matches has as many of each).
func FuzzTokenNameIsThePattern(f *testing.F) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	for _, s := range []string{"", "a", "a.b-c_d", strings.Repeat("x", 64), strings.Repeat("x", 65), "a\n", "\xff", "é", "a b", strings.Repeat("é", 32)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := validTokenName(name), pattern.MatchString(name); got != want {
			t.Fatalf("validTokenName(%q) = %v, the pattern = %v", name, got, want)
		}
	})
}
