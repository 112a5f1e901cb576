package fsops

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// OpenDirAt goes down one real directory at a time: a link (even one to a
// directory inside), a file, "..", "." and a name with a slash are refused,
// and ListDir lists what it opened as ReadDir does.
func TestOpenDirAtFollowsNoLink(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "a", "f"), []byte("x"), 0o644)
	os.Symlink("c", filepath.Join(root, "a", "link"))
	ws := newDirWS(t, root)
	top, err := ws.OpenDir()
	if err != nil {
		t.Fatal(err)
	}
	defer top.Close()
	a, err := OpenDirAt(top, "a", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got, err := ListDir(a, "a")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ws.ReadDir("a")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("ListDir: %d entries, ReadDir: %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Path != want[i].Path || got[i].Mode != want[i].Mode || got[i].ID() != want[i].ID() {
			t.Errorf("ListDir %+v, ReadDir %+v", got[i], want[i])
		}
	}
	for _, name := range []string{"link", "f", "..", ".", "b/..", ""} {
		if d, err := OpenDirAt(a, name, "a/"+name); err == nil {
			d.Close()
			t.Errorf("OpenDirAt(a, %q) opened it", name)
		}
	}
	if _, err := OpenDirAt(a, "gone", "a/gone"); !errcode.Is(err, errcode.NotFound) {
		t.Errorf("OpenDirAt of a missing name: %v, want NOT_FOUND", err)
	}
}
