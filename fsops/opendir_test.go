//go:build linux

package fsops

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenDirIsItsOwn: OpenDir hands out the workspace's directory (a
// scope's own), each time as a file of its own: listing the directory
// through one leaves the next one's offset alone, closing one leaves the
// others and the workspace working, and a closed workspace hands out none.
func TestOpenDirIsItsOwn(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"a", "b", "sub/c"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(n)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := NewDir(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := ws.Scope("sub")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ws   Workspace
		dir  string
		want []string
	}{{ws, root, []string{"a", "b", "sub"}}, {sub, filepath.Join(root, "sub"), []string{"c"}}} {
		var want unix.Stat_t
		if err := unix.Stat(c.dir, &want); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			f, err := c.ws.OpenDir()
			if err != nil {
				t.Fatalf("OpenDir %d of %s: %v", i, c.dir, err)
			}
			var st unix.Stat_t
			if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Dev != want.Dev || st.Ino != want.Ino {
				t.Fatalf("OpenDir of %s is another file (%v)", c.dir, err)
			}
			names, err := f.Readdirnames(-1)
			f.Close()
			slices.Sort(names)
			if err != nil || !slices.Equal(names, c.want) {
				t.Fatalf("listing %d of %s through OpenDir: %v %v, want %v", i, c.dir, names, err, c.want)
			}
		}
	}
	if _, err := ws.Stat("a"); err != nil {
		t.Fatalf("the workspace after its OpenDir files were closed: %v", err)
	}
	ws.Close()
	if f, err := ws.OpenDir(); err == nil {
		f.Close()
		t.Fatal("OpenDir of a closed workspace")
	}
}
