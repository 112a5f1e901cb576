//go:build linux

package sandboxexec

import (
	"os"
	"slices"
	"syscall"
	"testing"
)

// TestArgvRoundTrip: what Argv writes, parse reads back, whatever the
// environment and arguments hold (empty strings, "--", names that look
// like counts).
func TestArgvRoundTrip(t *testing.T) {
	cases := []struct {
		path      string
		env, argv []string
	}{
		{"/bin/true", nil, []string{"true"}},
		{"./tool", []string{"A=1", "", "3"}, []string{"tool", "--", "", "2"}},
		{"/usr/bin/env", []string{"PATH=/usr/bin"}, []string{"env"}},
	}
	for _, c := range cases {
		args := Argv("agent-backend", c.path, c.env, c.argv)
		if args[1] != Arg {
			t.Fatalf("Argv(%q) = %q", c.path, args)
		}
		path, env, argv, err := parse(args[2:])
		if err != nil || path != c.path || !slices.Equal(env, c.env) || !slices.Equal(argv, c.argv) {
			t.Errorf("parse(Argv(%q, %q, %q)) = %q, %q, %q, %v", c.path, c.env, c.argv, path, env, argv, err)
		}
	}
}

// TestParseRefusesMalformed: a count that is not a number, negative, or
// larger than what follows is an error, never a slice out of range; and
// there must be a program.
func TestParseRefusesMalformed(t *testing.T) {
	for _, args := range [][]string{nil, {"/bin/true"}, {"/bin/true", "0"}, {"/bin/true", "x", "true"},
		{"/bin/true", "-1", "true"}, {"/bin/true", "2", "A=1", "true"}, {"/bin/true", "99999999999999999999", "true"}} {
		if _, _, _, err := parse(args); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("/bin/true", "1", "A=1", "true")
	f.Add("", "-3", "", "")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		path, env, argv, err := parse([]string{a, b, c, d})
		if err != nil {
			return
		}
		if path != a || len(argv) == 0 || len(env)+len(argv) != 2 {
			t.Fatalf("parse(%q %q %q %q) = %q %q %q", a, b, c, d, path, env, argv)
		}
	})
}

// TestFilterRoundTrip: the bytes EncodeFilter writes into the memfd are
// the program readFilter gives the kernel; a file of the wrong size is
// refused.
func TestFilterRoundTrip(t *testing.T) {
	prog := []Filter{{Code: 0x20, K: 4}, {Code: 0x15, Jt: 1, Jf: 0, K: 0xc000003e}, {Code: 0x06, K: 0x7fff0000}}
	f, err := os.CreateTemp(t.TempDir(), "filter")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(EncodeFilter(prog)); err != nil {
		t.Fatal(err)
	}
	got, err := readFilter(dup(t, f)) // readFilter closes what it is given
	if err != nil || !slices.Equal(got, prog) {
		t.Fatalf("readFilter = %v, %v; want %v", got, err, prog)
	}
	bad, _ := os.CreateTemp(t.TempDir(), "bad")
	bad.Write([]byte{1, 2, 3})
	if _, err := readFilter(dup(t, bad)); err == nil {
		t.Fatal("a 3-byte filter was accepted")
	}
}

func dup(t *testing.T, f *os.File) int {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return fd
}
