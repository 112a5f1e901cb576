package resolvepath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzResolveIsWhereCreated: the path Resolve gives, before anything is
// made, is where the file lands when its directories are made and it is
// created (os.MkdirAll, then os.WriteFile, as the daemon makes its state
// and log files), links and ".." walked by the kernel; and Within says
// inside exactly when that is in the workspace.
func FuzzResolveIsWhereCreated(f *testing.F) {
	for _, s := range []string{"out/x", "out/abs/a/b", "out/rel", "out/dangling", "out/deep/../x", "out/new/../deep/../y", "ws/sub/up/z",
		"out/missing/../abs/k", "out/./abs//m/", "out/file/below", "out/deep/../../out/q", "ws/sub/../../out/deep/../r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		if rel == "" || len(rel) > 120 || strings.ContainsRune(rel, 0) || strings.HasPrefix(rel, "/") {
			return
		}
		base, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		ws := filepath.Join(base, "ws")
		for _, d := range []string{filepath.Join(ws, "sub"), filepath.Join(base, "out")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(base, "out", "file"), nil, 0o600)
		for name, target := range map[string]string{"out/abs": ws, "out/rel": "../ws/sub", "out/dangling": "../ws/not-yet",
			"out/deep": "../ws/sub", "ws/sub/up": "../../out"} {
			if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
				t.Fatal(err)
			}
		}
		p := base + "/" + rel
		want, err := Resolve(p)
		if err != nil || !under(base, want) || !under(base, filepath.Clean(p)) {
			return // only what stays in this test's directory is made
		}
		inside, err := Within(ws, p)
		if err != nil {
			t.Fatal(err)
		}
		if os.MkdirAll(filepath.Dir(p), 0o755) != nil || os.WriteFile(p, []byte("x"), 0o600) != nil {
			return // the kernel cannot make it (below a file, a dangling link as a directory, a name too long)
		}
		got, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("Resolve(%q) = %s; created, it is %s", rel, want, got)
		}
		if inside != under(ws, got) {
			t.Fatalf("Within(ws, %q) = %v; created, it is %s", rel, inside, got)
		}
	})
}
