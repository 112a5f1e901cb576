package fsops

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// TestReadOnlyRefusesEveryChange: each method of Workspace that changes
// the tree is refused with PERMISSION_DENIED and changes nothing, reads
// work, scopes stay read-only; and every method of the interface is
// classified here, so a new one cannot slip through as a write.
func TestReadOnlyRefusesEveryChange(t *testing.T) {
	root := t.TempDir()
	must(t, os.WriteFile(filepath.Join(root, "f.txt"), []byte("hello\n"), 0o644))
	must(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "sub/g.txt"), []byte("g\n"), 0o644))
	ro := ReadOnly(newDirWS(t, root))
	sub, err := ro.Scope("sub")
	must(t, err)

	writes := map[string]func(ws Workspace) error{
		"WriteFile": func(ws Workspace) error { return ws.WriteFile("f.txt", []byte("x")) },
		"Edit": func(ws Workspace) error {
			_, err := ws.Edit("f.txt", []Edit{{OldText: "hello", NewText: "bye"}}, false)
			return err
		},
		"Mkdir":    func(ws Workspace) error { return ws.Mkdir("d", true) },
		"Move":     func(ws Workspace) error { return ws.Move("f.txt", "m.txt") },
		"Rename":   func(ws Workspace) error { return ws.Rename("f.txt", "r.txt") },
		"Remove":   func(ws Workspace) error { return ws.Remove("f.txt", RemoveOptions{Force: true}) },
		"Touch":    func(ws Workspace) error { return ws.Touch("t.txt") },
		"Chmod":    func(ws Workspace) error { return ws.Chmod("f.txt", 0o600) },
		"Chtimes":  func(ws Workspace) error { return ws.Chtimes("f.txt", time.Unix(0, 0), time.Unix(0, 0)) },
		"Truncate": func(ws Workspace) error { return ws.Truncate("f.txt", 0) },
		"Symlink":  func(ws Workspace) error { return ws.Symlink("f.txt", "l") },
		"OpenFile": func(ws Workspace) error {
			_, err := ws.OpenFile("f.txt", os.O_WRONLY, 0)
			return err
		},
		"OpenDir": func(ws Workspace) error {
			_, err := ws.OpenDir()
			return err
		},
	}
	reads := map[string]bool{"Root": true, "Resolve": true, "Rel": true, "Scope": true, "Stat": true, "Lstat": true,
		"Exists": true, "ReadFile": true, "ReadLines": true, "ReadDir": true, "ReadDirTypes": true, "Tree": true,
		"Search": true, "Grep": true, "Readlink": true, "StatFS": true, "Close": true}
	it := reflect.TypeFor[Workspace]()
	for i := range it.NumMethod() {
		m := it.Method(i).Name
		if _, w := writes[m]; !w && !reads[m] {
			t.Errorf("Workspace.%s is new: classify it here (and refuse it in ReadOnly if it changes anything)", m)
		}
	}
	for name, do := range writes {
		for _, ws := range []Workspace{ro, sub} {
			if err := do(ws); !errcode.Is(err, errcode.PermissionDenied) {
				t.Errorf("%s on a read-only workspace: %v", name, err)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "f.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("the file changed: %q %v", b, err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 2 {
		t.Fatalf("the root changed: %v", ents)
	}
	if b, err := sub.ReadFile("g.txt"); err != nil || string(b) != "g\n" {
		t.Fatalf("read through the read-only scope: %q %v", b, err)
	}
	if res, err := ro.Edit("f.txt", []Edit{{OldText: "hello", NewText: "bye"}}, true); err != nil || res.Diff == "" {
		t.Fatalf("a dry-run edit: %+v %v", res, err)
	}
	f, err := ro.OpenFile("f.txt", os.O_RDONLY, 0)
	must(t, err)
	f.Close()
}
