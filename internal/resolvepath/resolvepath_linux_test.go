package resolvepath

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWithinBindMount: the workspace mounted a second time elsewhere is
// the same directory (needs the privilege to mount; skipped without).
func TestWithinBindMount(t *testing.T) {
	base := t.TempDir()
	ws, other := filepath.Join(base, "ws"), filepath.Join(base, "other")
	for _, d := range []string{ws, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mount(ws, other, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount here: %v", err)
	}
	defer syscall.Unmount(other, syscall.MNT_DETACH)
	if got, err := Within(ws, filepath.Join(other, "policy.json")); err != nil || !got {
		t.Errorf("a file below a bind mount of the workspace: %v, %v; want inside", got, err)
	}
}

// TestWithinBindMountOfAPart: a part of the workspace mounted elsewhere (a
// bind mount of ws/sub, as a container's subPath of the workspace's volume
// makes) leads into the workspace: a file below it, existing or to be
// created, is inside, and so is the part's own directory; a directory
// mounted beside it is not. Walking up from the mount never meets the
// workspace, so the paths alone cannot tell (needs the privilege to
// mount; skipped without).
func TestWithinBindMountOfAPart(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, part, other := filepath.Join(base, "ws"), filepath.Join(base, "etc-agentbe"), filepath.Join(base, "other")
	for _, d := range []string{filepath.Join(ws, "sub", "deeper"), part, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "sub", "token"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(filepath.Join(ws, "sub"), part, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount here: %v", err)
	}
	defer syscall.Unmount(part, syscall.MNT_DETACH)
	for _, c := range []struct {
		p      string
		inside bool
	}{
		{filepath.Join(part, "token"), true},
		{filepath.Join(part, "deeper", "audit.log"), true},
		{part, true},
		{filepath.Join(other, "token"), false},
		{filepath.Join(base, "token"), false},
	} {
		if got, err := Within(ws, c.p); err != nil || got != c.inside {
			t.Errorf("Within(ws, %s) = %v, %v; want %v", c.p, got, err, c.inside)
		}
	}
	// The other way round: the workspace named through the mount of its
	// part holds what lies below that part where it first was.
	if got, err := Within(part, filepath.Join(ws, "sub", "token")); err != nil || !got {
		t.Errorf("Within(the part's mount, the part's file): %v, %v; want inside", got, err)
	}
}

// TestMountTableEscapes: a mount point with a space is written \040 in the
// table, and read back as the space.
func TestMountTableEscapes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mountinfo")
	line := `36 35 98:0 /srv/my\040site /mnt/a\040b rw,noatime master:1 - ext4 /dev/root rw` + "\n"
	if err := os.WriteFile(p, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, err := readMounts(p)
	if err != nil || len(ms) != 1 || ms[0].Root != "/srv/my site" || ms[0].Point != "/mnt/a b" || ms[0].Dev != "98:0" {
		t.Fatalf("readMounts: %+v, %v", ms, err)
	}
	if dev, path, ok := onFilesystem("/mnt/a b/x", ms); !ok || dev != "98:0" || path != "/srv/my site/x" {
		t.Errorf("onFilesystem: %s %s %v", dev, path, ok)
	}
}
