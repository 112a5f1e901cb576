package fsops

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// ownerOf is the uid and gid of the entry at full (not following a final
// symlink).
func ownerOf(t *testing.T, full string) Owner {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(full, &st); err != nil {
		t.Fatal(err)
	}
	return Owner{int(st.Uid), int(st.Gid)}
}

// TestOwnerOfCreatedEntries: with Options.Owner (a root daemon's --run-as
// user), every file, directory and symlink the workspace creates is the
// owner's, through every operation that creates one, and a file replaced
// whole keeps the owner it had; an entry that existed keeps its owner.
func TestOwnerOfCreatedEntries(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "giving a file to another user needs root (the tests run as root in CI)")
	}
	agent := Owner{UID: 65534, GID: 65533}
	root := Owner{0, 0}
	other := Owner{1234, 1235}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"roots.txt": "r", "theirs.txt": "t", "moved.txt": "m", "dangling": "->made-by-link.txt"})
	must(t, os.Chown(filepath.Join(dir, "theirs.txt"), other.UID, other.GID))
	ws, err := NewDir(dir, Options{Owner: &agent})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()

	must(t, ws.WriteFile("new/deep/f.txt", []byte("x")))
	must(t, ws.WriteFile("roots.txt", []byte("r2")))
	must(t, ws.WriteFile("theirs.txt", []byte("t2")))
	if _, err := ws.Edit("theirs.txt", []Edit{{OldText: "t2", NewText: "t3"}}, false); err != nil {
		t.Fatal(err)
	}
	must(t, ws.Mkdir("d1/d2", true))
	must(t, ws.Mkdir("d3", false))
	must(t, ws.Touch("t/touched"))
	must(t, ws.Touch("roots.txt"))
	f, err := ws.OpenFile("sftp/up.bin", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	must(t, err)
	must(t, f.Close())
	f, err = ws.OpenFile("roots.txt", os.O_WRONLY|os.O_CREATE, 0o644)
	must(t, err)
	must(t, f.Close())
	f, err = ws.OpenFile("excl.bin", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	must(t, err)
	must(t, f.Close())
	must(t, ws.Symlink("new/deep/f.txt", "ln"))
	must(t, ws.Move("moved.txt", "m/n/moved.txt"))
	sc, err := ws.Scope("scope/inner")
	must(t, err)
	must(t, sc.WriteFile("s.txt", []byte("s")))

	want := map[string]Owner{
		"new": agent, "new/deep": agent, "new/deep/f.txt": agent,
		"roots.txt": root, "theirs.txt": other,
		"d1": agent, "d1/d2": agent, "d3": agent,
		"t": agent, "t/touched": agent,
		"sftp": agent, "sftp/up.bin": agent, "excl.bin": agent,
		"ln": agent,
		"m":  agent, "m/n": agent, "m/n/moved.txt": root,
		"scope": agent, "scope/inner": agent, "scope/inner/s.txt": agent,
		".": root, "dangling": root,
	}
	for rel, w := range want {
		if got := ownerOf(t, filepath.Join(dir, rel)); got != w {
			t.Errorf("%s is owned by %d:%d, want %d:%d", rel, got.UID, got.GID, w.UID, w.GID)
		}
	}

	// Without an owner, what the daemon creates is its own.
	plain := newDirWS(t, dir)
	must(t, plain.WriteFile("plain/p.txt", []byte("p")))
	for _, rel := range []string{"plain", "plain/p.txt"} {
		if got := ownerOf(t, filepath.Join(dir, rel)); got != root {
			t.Errorf("without an owner, %s is owned by %d:%d, want the daemon's 0:0", rel, got.UID, got.GID)
		}
	}
}

// TestOwnerNotGivenOnFailure: a file tool whose new entry cannot be given
// to the owner (a file system that refuses chown, stood in for by
// failOwner) fails and leaves no entry behind that the commands could not
// change.
func TestOwnerNotGivenOnFailure(t *testing.T) {
	dir := t.TempDir()
	failOwner = syscall.EPERM
	defer func() { failOwner = nil }()
	ws, err := NewDir(dir, Options{Owner: &Owner{UID: 65534, GID: 65534}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteFile("a/f.txt", []byte("x")); err == nil {
		t.Fatal("WriteFile with an owner chown refuses succeeded")
	}
	if err := ws.Touch("t.txt"); err == nil {
		t.Fatal("Touch with an owner chown refuses succeeded")
	}
	if _, err := ws.OpenFile("o.bin", os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
		t.Fatal("OpenFile(O_CREATE) with an owner chown refuses succeeded")
	}
	if err := ws.Symlink("x", "ln"); err == nil {
		t.Fatal("Symlink with an owner chown refuses succeeded")
	}
	if err := ws.Mkdir("d", false); err == nil {
		t.Fatal("Mkdir with an owner chown refuses succeeded")
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind: %s", e.Name())
	}
}
