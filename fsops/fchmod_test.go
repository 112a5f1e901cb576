package fsops

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Fchmod sets the mode of the open file, not of whatever its name holds
// now, and never sets setuid or setgid (SafeMode); on both workspaces.
func TestFchmodSetsTheOpenFile(t *testing.T) {
	if got := SafeMode(0o755 | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky | fs.ModeDir); got != 0o755|fs.ModeSticky {
		t.Errorf("SafeMode = %v, want the permission and sticky bits only", got)
	}
	root := t.TempDir()
	for name, ws := range map[string]Workspace{"dir": newDirWS(t, root), "memory": NewMemory("/w", Options{})} {
		t.Run(name, func(t *testing.T) {
			if err := ws.WriteFile("other", []byte("o")); err != nil {
				t.Fatal(err)
			}
			f, err := ws.OpenFile("f", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var before fs.FileMode
			if name == "dir" {
				// The name now holds another file: the descriptor still
				// names the one opened.
				st, err := os.Stat(filepath.Join(root, "other"))
				if err != nil {
					t.Fatal(err)
				}
				before = st.Mode()
				if err := os.Rename(filepath.Join(root, "other"), filepath.Join(root, "f")); err != nil {
					t.Fatal(err)
				}
			}
			if err := Fchmod(f, 0o755|fs.ModeSetuid); err != nil {
				t.Fatal(err)
			}
			fi, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode.Perm() != 0o755 || fi.Mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
				t.Errorf("the open file's mode is %v, want 0755 without setuid", fi.Mode)
			}
			if name == "dir" {
				if st, _ := os.Stat(filepath.Join(root, "f")); st.Mode() != before {
					t.Errorf("the file now named f became %v", st.Mode())
				}
			}
		})
	}
	var plain struct{ File }
	if err := Fchmod(plain, 0o644); err == nil {
		t.Error("Fchmod of a File without Chmod succeeded")
	}
}

// TestChmodNeverSetsSetuid: the directory workspace's Chmod applies
// SafeMode itself, so a caller that passes a client's or a snapshot's mode
// as it came cannot make a setuid or setgid file of the daemon's user.
func TestChmodNeverSetsSetuid(t *testing.T) {
	root := t.TempDir()
	ws := newDirWS(t, root)
	if err := ws.WriteFile("f", []byte("#!/bin/sh\n")); err != nil {
		t.Fatal(err)
	}
	if err := ws.Chmod("f", 0o755|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(root, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 || st.Mode().Perm() != 0o755 {
		t.Fatalf("after Chmod(4755|setgid|sticky): %v, want 0755 (and sticky) without setuid or setgid", st.Mode())
	}
}
