package fsops

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// Every operation takes the same fallback for an absolute symlink that
// stays inside (os.Root refuses them all), and the same refusal for one
// that leads out: the walker's listing included, so directory_tree and
// search descend into such a link as into a relative one.
func TestAbsoluteLinkFallbackEverywhere(t *testing.T) {
	root := t.TempDir()
	ws := newDirWS(t, root)
	real := ws.Root()
	must(t, ws.WriteFile("d/f.txt", []byte("hello\n")))
	must(t, os.Symlink(filepath.Join(real, "d"), filepath.Join(root, "abs")))      // absolute, inside
	must(t, os.Symlink(t.TempDir(), filepath.Join(root, "out")))                   // absolute, outside
	must(t, os.Symlink(filepath.Join(real, "d/f.txt"), filepath.Join(root, "af"))) // absolute, to a file

	ok := []struct {
		name string
		f    func() error
	}{
		{"ReadFile", func() error { _, err := ws.ReadFile("abs/f.txt"); return err }},
		{"ReadFile final link", func() error { _, err := ws.ReadFile("af"); return err }},
		{"Stat", func() error { _, err := ws.Stat("abs/f.txt"); return err }},
		{"ReadLines", func() error { _, err := ws.ReadLines(t.Context(), "abs/f.txt", LineRange{}); return err }},
		{"ReadDir", func() error { _, err := ws.ReadDir("abs"); return err }},
		{"ReadDirTypes", func() error { _, err := ws.ReadDirTypes("abs"); return err }},
		{"WriteFile", func() error { return ws.WriteFile("abs/g.txt", []byte("x")) }},
		{"Mkdir", func() error { return ws.Mkdir("abs/sub", true) }},
		{"Chmod", func() error { return ws.Chmod("abs/f.txt", 0o644) }},
		{"Readlink", func() error { _, err := ws.Readlink("af"); return err }},
		{"Rename", func() error { return ws.Rename("abs/g.txt", "abs/h.txt") }},
		{"Grep", func() error { _, err := ws.Grep(t.Context(), GrepOptions{Pattern: "hello", Path: "abs"}); return err }},
	}
	for _, tc := range ok {
		if err := tc.f(); err != nil {
			t.Errorf("%s through an absolute link inside: %v", tc.name, err)
		}
	}

	tree, err := ws.Tree(t.Context(), "abs", TreeOptions{})
	must(t, err)
	if len(tree) == 0 {
		t.Error("Tree of an absolute link inside lists nothing")
	}
	top, err := ws.Tree(t.Context(), ".", TreeOptions{})
	must(t, err)
	for _, n := range top {
		if n.Name == "abs" && len(n.Children) == 0 {
			t.Errorf("Tree does not descend into an absolute link inside: %+v", n)
		}
		if n.Name == "out" {
			t.Errorf("Tree lists a link leading out: %+v", n)
		}
	}
	found, err := ws.Search(t.Context(), "abs", "*.txt", SearchOptions{})
	must(t, err)
	if len(found) == 0 {
		t.Error("Search under an absolute link inside finds nothing")
	}

	refused := []struct {
		name string
		f    func() error
	}{
		{"ReadFile", func() error { _, err := ws.ReadFile("out/x"); return err }},
		{"Stat", func() error { _, err := ws.Stat("out"); return err }},
		{"ReadDir", func() error { _, err := ws.ReadDir("out"); return err }},
		{"WriteFile", func() error { return ws.WriteFile("out/x", nil) }},
		{"Tree", func() error { _, err := ws.Tree(t.Context(), "out", TreeOptions{}); return err }},
		{"Search", func() error { _, err := ws.Search(t.Context(), "out", "*", SearchOptions{}); return err }},
	}
	for _, tc := range refused {
		err := tc.f()
		if !errcode.Is(err, errcode.PathEscapeAttempt) {
			t.Errorf("%s through a link leading out: %v, want PATH_ESCAPE_ATTEMPT", tc.name, err)
		}
	}
}

// CanExec asks the workspace for its directory: a directory workspace, a
// scope not created yet and a wrapper that embeds one can run commands; a
// memory workspace and its scopes cannot.
func TestCanExec(t *testing.T) {
	dir := newDirWS(t, t.TempDir())
	scope, err := dir.Scope("not/yet")
	must(t, err)
	mem := NewMemory("/mem", Options{})
	memScope, err := mem.Scope("s")
	must(t, err)
	type wrapped struct{ Workspace }
	for _, tc := range []struct {
		name string
		ws   Workspace
		want bool
	}{
		{"dir", dir, true},
		{"scope not created yet", scope, true},
		{"wrapper", wrapped{dir}, true},
		{"memory", mem, false},
		{"memory scope", memScope, false},
		{"memory wrapper", wrapped{mem}, false},
	} {
		if got := CanExec(tc.ws); got != tc.want {
			t.Errorf("CanExec(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir.Root(), "not")); !os.IsNotExist(err) {
		t.Errorf("CanExec created the scope's directory: %v", err)
	}
}
