package fsops

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// A write that fails midway leaves the old content and no temp file.
func TestAtomicWriteInjectedFailure(t *testing.T) {
	root := t.TempDir()
	ws := newDirWS(t, root)
	must(t, ws.WriteFile("d/f.txt", []byte("old content\n")))
	must(t, os.Chmod(filepath.Join(root, "d/f.txt"), 0o600))

	boom := errors.New("disk on fire")
	writeHook = func(f *os.File, data []byte) error {
		if _, err := f.Write(data[:len(data)/2]); err != nil {
			return err
		}
		return boom
	}
	defer func() { writeHook = nil }()

	for _, p := range []string{"d/f.txt", "d/new.txt"} {
		err := ws.WriteFile(p, []byte("new content that is longer\n"))
		e := wantCode(t, err, errcode.WriteFailed)
		if !errors.Is(err, boom) || e.Path != p {
			t.Errorf("error %v should wrap the cause and name %q", err, p)
		}
	}
	_, err := ws.Edit("d/f.txt", []Edit{{OldText: "old", NewText: "new"}}, false)
	wantCode(t, err, errcode.WriteFailed)

	got, err := os.ReadFile(filepath.Join(root, "d/f.txt"))
	must(t, err)
	if string(got) != "old content\n" {
		t.Errorf("old content lost: %q", got)
	}
	ents, err := os.ReadDir(filepath.Join(root, "d"))
	must(t, err)
	if len(ents) != 1 || ents[0].Name() != "f.txt" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only f.txt (no temp files)", names)
	}

	// Without the failure the write replaces the file and keeps its mode.
	writeHook = nil
	must(t, ws.WriteFile("d/f.txt", []byte("replaced")))
	fi, err := os.Stat(filepath.Join(root, "d/f.txt"))
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after replace = %v, want 0600", fi.Mode().Perm())
	}
}
