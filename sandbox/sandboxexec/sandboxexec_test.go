//go:build linux

package sandboxexec

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestArgvRoundTrip: what Argv writes, parse reads back, whatever the
// arguments hold (empty strings, "--", names that look like flags).
func TestArgvRoundTrip(t *testing.T) {
	for _, c := range []struct {
		path string
		argv []string
	}{
		{"/bin/true", []string{"true"}},
		{"./tool", []string{"tool", "--", "", "--refuse"}},
	} {
		args := Argv("agent-backend", c.path, c.argv)
		if args[1] != Arg {
			t.Fatalf("Argv(%q) = %q", c.path, args)
		}
		path, argv, err := parse(args[2:])
		if err != nil || path != c.path || !slices.Equal(argv, c.argv) {
			t.Errorf("parse(Argv(%q, %q)) = %q, %q, %v", c.path, c.argv, path, argv, err)
		}
	}
	for _, args := range [][]string{nil, {"/bin/true"}} {
		if _, _, err := parse(args); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
}

// TestEnvRoundTrip: EncodeEnv and what the trampoline reads back agree,
// empty values and "=" in values included; a file that does not end in
// NUL is refused.
func TestEnvRoundTrip(t *testing.T) {
	for _, env := range [][]string{nil, {"A=1"}, {"A=", "B=x=y", "PATH=/usr/bin:/bin", "E="}} {
		f, err := os.CreateTemp(t.TempDir(), "env")
		if err != nil {
			t.Fatal(err)
		}
		f.Write(EncodeEnv(env))
		got, err := readEnv(dup(t, f))
		if err != nil || !slices.Equal(got, env) {
			t.Errorf("readEnv(EncodeEnv(%q)) = %q, %v", env, got, err)
		}
	}
	if _, err := decodeEnv([]byte("A=1")); err == nil {
		t.Error("an environment without its final NUL was accepted")
	}
}

func FuzzDecodeEnv(f *testing.F) {
	f.Add([]byte("A=1\x00B=2\x00"))
	f.Add([]byte("\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := decodeEnv(b)
		if err != nil {
			return
		}
		if got := EncodeEnv(env); string(got) != string(b) {
			t.Fatalf("decodeEnv(%q) = %q, which encodes as %q", b, env, got)
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

// TestEnteredOnlyByMain: no init takes over a program's argv (a program
// that links this package, the client library's, is not a trampoline by
// accident), and Ready says whether main called Main: not in this test
// binary until Main returns, which it does at once outside a trampoline.
func TestEnteredOnlyByMain(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files++
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				t.Errorf("%s: func init: the trampoline is entered by Main only", name)
			}
		}
	}
	if files == 0 {
		t.Fatal("parsed no files")
	}
	if Ready() {
		t.Fatal("Ready before Main was called")
	}
	Main()
	if !Ready() {
		t.Fatal("not Ready after Main returned")
	}
}
