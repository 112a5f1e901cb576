package resolvepath

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolve(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	for _, d := range []string{ws, filepath.Join(base, "out"), filepath.Join(ws, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "out", "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"out/abs":      ws,                       // an absolute link to a directory
		"out/rel":      "../ws/sub",              // a relative one, climbing
		"out/dangling": "../ws/not-yet",          // to a file not made yet
		"out/chain":    "abs/sub",                // through another link
		"out/loop1":    "loop2",                  // a loop
		"out/loop2":    "loop1",                  //
		"ws/sub/up":    "../../out",              // from inside back out
		"out/dotdot":   "missing/../../ws/x.txt", // ".." after a missing name
		"out/deep":     "../ws/sub",              // a ".." after it is ws's, not out's
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ p, want string }{
		{filepath.Join(base, "out", "x"), filepath.Join(base, "out", "x")},
		{filepath.Join(base, "out", "abs", "a", "b"), filepath.Join(ws, "a", "b")},
		{filepath.Join(base, "out", "rel"), filepath.Join(ws, "sub")},
		{filepath.Join(base, "out", "dangling"), filepath.Join(ws, "not-yet")},
		{filepath.Join(base, "out", "chain", "k"), filepath.Join(ws, "sub", "k")},
		{filepath.Join(base, "out", "..", "ws", "x"), filepath.Join(ws, "x")},
		{filepath.Join(ws, "sub", "up", "y"), filepath.Join(base, "out", "y")},
		{filepath.Join(base, "out", "file", "below"), filepath.Join(base, "out", "file", "below")},
		{filepath.Join(base, "out", "dotdot"), filepath.Join(base, "ws", "x.txt")},
		// The kernel walks ".." from the link's target: out/deep/../x is
		// ws/x, where a lexical clean said out/x (outside).
		{filepath.Join(base, "out", "deep") + "/../x", filepath.Join(ws, "x")},
		{filepath.Join(base, "out", "new") + "/../deep/../y", filepath.Join(ws, "y")},
	} {
		got, err := Resolve(tc.p)
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%s) = %q, %v; want %q", tc.p, got, err, tc.want)
		}
	}
	if _, err := Resolve(filepath.Join(base, "out", "loop1")); err == nil {
		t.Errorf("a symlink loop resolved")
	}
	for _, tc := range []struct {
		p      string
		inside bool
	}{
		{ws, true},
		{filepath.Join(ws, "a"), true},
		{filepath.Join(base, "out", "abs"), true},
		{filepath.Join(base, "out", "dangling"), true},
		{filepath.Join(base, "out", "x"), false},
		{filepath.Join(base, "ws2"), false},
		{filepath.Join(ws, "sub", "up", "y"), false},
		{base, false},
		{filepath.Join(base, "out", "deep") + "/../audit.log", true},
	} {
		if got, err := Within(ws, tc.p); err != nil || got != tc.inside {
			t.Errorf("Within(%s, %s) = %v, %v; want %v", ws, tc.p, got, err, tc.inside)
		}
	}
	// A root not made yet: resolved as far as it exists.
	if got, err := Within(filepath.Join(base, "out", "abs", "new"), filepath.Join(ws, "new", "f")); err != nil || !got {
		t.Errorf("a missing root reached through a link: %v, %v", got, err)
	}
}
