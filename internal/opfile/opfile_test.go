package opfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadRefusesWhatIsNotAnOperatorFile: a FIFO (no writer: the read
// would wait for ever), /dev/zero (endless), a directory, a sparse file
// past the bound, a file its group or others may write, a file in a
// directory others may write (as named, or through a symlink) are each
// refused with the reason; a plain 0600 or 0644 file in a
// private directory, or in a sticky world-writable one, reads whole.
func TestReadRefusesWhatIsNotAnOperatorFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, perm os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("content\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	inOpen := filepath.Join(open, "tokens")
	os.WriteFile(inOpen, []byte("x"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(inOpen, link)
	sticky := filepath.Join(dir, "sticky")
	os.Mkdir(sticky, 0o700)
	os.Chmod(sticky, 0o777|os.ModeSticky)
	inSticky := filepath.Join(sticky, "tokens")
	os.WriteFile(inSticky, []byte("content\n"), 0o600)

	for _, c := range []struct {
		name, path, want string
	}{
		{"fifo", fifo, "not a regular file (a FIFO)"},
		{"dev zero", "/dev/zero", "not a regular file (a character device)"},
		{"directory", dir, "not a regular file (a directory)"},
		{"1 GiB sparse", sparse, "larger than 1024 bytes"},
		{"world-writable", write("ww", 0o666), "writable by its group or by others"},
		{"group-writable", write("gw", 0o620), "writable by its group or by others"},
		{"in an open directory", inOpen, "which its group or others may write"},
		{"symlink into an open directory", link, "which its group or others may write"},
		{"missing", filepath.Join(dir, "none"), "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(c.path, 1024)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ...%s", err, c.want)
			}
		})
	}
	for _, p := range []string{write("ok600", 0o600), write("ok644", 0o644), inSticky} {
		b, err := Read(p, 1024)
		if err != nil || string(b) != "content\n" {
			t.Fatalf("%s: %q, %v", p, b, err)
		}
	}
}
