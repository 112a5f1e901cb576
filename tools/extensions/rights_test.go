package extensions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckDirRefusesCodeOthersCanChange: the directory of code the daemon
// runs is judged as every file that grants rights (opfile.CheckModes): a
// directory others may write, a .star file others may write, and (as root)
// a .star file another user owns, planted in a sticky directory open to
// all, are each refused naming the file and the fix; a private directory
// of 0644 files passes.
func TestCheckDirRefusesCodeOthersCanChange(t *testing.T) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	star := filepath.Join(dir, "notes.star")
	must(os.WriteFile(star, []byte("x = 1\n"), 0o644))
	if err := CheckDir(dir); err != nil {
		t.Fatalf("a private directory: %v", err)
	}
	must(os.Chmod(star, 0o666))
	if err := CheckDir(dir); err == nil || !strings.Contains(err.Error(), star+": is writable by its group or by others") || !strings.Contains(err.Error(), "chmod go-w "+star) {
		t.Fatalf("a world-writable .star: %v", err)
	}
	must(os.Chmod(star, 0o644))
	must(os.Chmod(dir, 0o777))
	if err := CheckDir(dir); err == nil || !strings.Contains(err.Error(), "chmod go-w "+dir) {
		t.Fatalf("a world-writable directory: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a file to another user (CI runs as root)")
	}
	must(os.Chmod(dir, 0o777|os.ModeSticky))
	if err := CheckDir(dir); err != nil {
		t.Fatalf("a sticky directory of the operator's files: %v", err)
	}
	planted := filepath.Join(dir, "planted.star")
	must(os.WriteFile(planted, []byte("x = 1\n"), 0o644))
	must(os.Chown(planted, 65534, 65534))
	if err := CheckDir(dir); err == nil || !strings.Contains(err.Error(), planted+": is owned by uid 65534") || !strings.Contains(err.Error(), "chown root "+planted) {
		t.Fatalf("a .star another user put in a sticky directory: %v", err)
	}
}
