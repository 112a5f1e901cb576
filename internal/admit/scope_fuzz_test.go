package admit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
)

// FuzzScopePath: whatever X-Scope-Path a caller sends, with or without a
// token scope, the workspace it is given holds a directory inside the root
// and inside its token's scope, links followed (the root has one leading
// out of it and one leading out of the token's scope), and reads no file
// outside them.
func FuzzScopePath(f *testing.F) {
	for _, s := range []string{"", "/a/b", "a", "..", "a/../b", "/../x", "out", "tok/up", "tok/up/b", "up", "up/b", "//a//b/", "./a", "a/./b", "%2e%2e", "a\x00b", "/"} {
		f.Add(uint8(0), s)
		f.Add(uint8(1), s)
	}
	base := f.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "a", "b"), filepath.Join(root, "tok", "in"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for _, l := range [][2]string{{"../outside", "root/out"}, {"../a", "root/tok/up"}} {
		if err := os.Symlink(l[0], filepath.Join(base, l[1])); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("SECRET"), 0o600); err != nil {
		f.Fatal(err)
	}
	// Outside the token scope "tok", inside the root.
	if err := os.WriteFile(filepath.Join(root, "a", "other"), []byte("OTHER"), 0o600); err != nil {
		f.Fatal(err)
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer ws.Close()
	realRoot, err := filepath.EvalSymlinks(ws.Root())
	if err != nil {
		f.Fatal(err)
	}
	within := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	f.Fuzz(func(t *testing.T, which uint8, sp string) {
		n, ok := NormalizeScope(sp)
		if !ok {
			if !strings.Contains(sp, "..") {
				t.Fatalf("NormalizeScope(%q) refused without a ..", sp)
			}
			return
		}
		if strings.Contains(n, "..") || strings.HasPrefix(n, "/") {
			t.Fatalf("NormalizeScope(%q) = %q", sp, n)
		}
		c := Caller{Requested: n}
		if which%2 == 1 {
			c.Identity = httpguard.Identity{Name: "t", Scope: "tok"}
		}
		scoped, release, err := c.Workspace(ws)
		if err != nil {
			return
		}
		defer release()
		// Root is only a name (fsops.Workspace); what the scope holds is
		// its handle, which OpenDir hands to commands.
		limit := realRoot
		if c.Identity.Scope != "" {
			limit = filepath.Join(realRoot, c.Identity.Scope)
		}
		if d, err := scoped.OpenDir(); err == nil {
			got, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(d.Fd())))
			d.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !within(got, limit) {
				t.Fatalf("scope %q (token scope %q) holds %s, outside %s", sp, c.Identity.Scope, got, limit)
			}
		}
		for _, p := range []string{"secret", "../secret", "../outside/secret", "out/secret", "other", "up/other", "../a/other", "/a/other"} {
			if b, err := scoped.ReadFile(p); err == nil && (string(b) == "SECRET" || c.Identity.Scope != "" && string(b) == "OTHER") {
				t.Fatalf("scope %q (token scope %q): %s read %s", sp, c.Identity.Scope, p, b)
			}
		}
	})
}
