//go:build linux

package fsops

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// TestWatchTree: a change below the watched directory is told with its
// path relative to it; a file, a path out of the workspace and the memory
// workspace are refused with what is wrong; moving the watched directory
// away ends the watch.
func TestWatchTree(t *testing.T) {
	root := t.TempDir()
	ws := newDirWS(t, root)
	must(t, os.MkdirAll(filepath.Join(root, "top/sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "top/f"), nil, 0o644))
	changes := make(chan Change, 16)
	gone := make(chan struct{})
	tw, err := WatchTree(ws, "top", TreeWatchOptions{}, func(c Change) { changes <- c }, func() {}, func() { close(gone) })
	must(t, err)
	defer tw.Close()
	if st, _ := ws.Stat("top"); tw.ID() != st.ID() || tw.Dirs() != 2 {
		t.Fatalf("ID %v (Stat %v), %d directories", tw.ID(), st.ID(), tw.Dirs())
	}
	must(t, os.WriteFile(filepath.Join(root, "top/sub/new"), []byte("x"), 0o644))
	select {
	case c := <-changes:
		if c.Path != "sub/new" || c.Op != "create" {
			t.Errorf("change %+v", c)
		}
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("no change reported")
	}
	for _, c := range []struct {
		ws   Workspace
		dir  string
		code errcode.Code
	}{
		{ws, "top/f", errcode.InvalidArgument},
		{ws, "../x", errcode.PathEscapeAttempt},
		{NewMemory("/m", Options{}), ".", errcode.NotImplemented},
	} {
		if _, err := WatchTree(c.ws, c.dir, TreeWatchOptions{}, func(Change) {}, func() {}, func() {}); !errcode.Is(err, c.code) {
			t.Errorf("WatchTree(%q) = %v, want %s", c.dir, err, c.code)
		}
	}
	// A read-only workspace (a read-only token's) is watched as well.
	ro, err := WatchTree(ReadOnly(ws), "top", TreeWatchOptions{}, func(c Change) { changes <- c }, func() {}, func() {})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(root, "top/ro-sees"), nil, 0o644))
	for seen := false; !seen; {
		select {
		case c := <-changes:
			seen = c.Path == "ro-sees"
		case <-time.After(10 * time.Second): // a hang guard
			t.Fatal("the read-only workspace's watch reported no change")
		}
	}
	ro.Close()
	must(t, os.Rename(filepath.Join(root, "top"), filepath.Join(t.TempDir(), "away")))
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("moving the watched directory away did not end the watch")
	}
}
