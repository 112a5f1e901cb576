package client

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTokenFileNeitherWaitsNorSwallows: RemoteOptions.TokenFile naming a
// FIFO fails at once instead of holding the connect (and its DialTimeout)
// until someone writes, and one over 64 KiB fails instead of being read
// whole and sent as a header; each error names the file.
func TestTokenFileNeitherWaitsNorSwallows(t *testing.T) {
	fifo, big := hostileTokenFiles(t)
	for _, c := range []struct{ name, want string }{{fifo, "a FIFO"}, {big, "larger than"}} {
		if tok, err := readTokenFile(c.name); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("readTokenFile(%s): %d bytes, %v; want an error naming the file and %q", c.name, len(tok), err, c.want)
		}
	}
}

// hostileTokenFiles makes, in a fresh directory, a FIFO and a 2 MiB file,
// each named as a token file by mistake or by someone else: a read must
// fail at once naming the file ("a FIFO", "larger than"), not wait for a
// writer or take the file whole. So that a reader that does wait fails
// the test rather than hanging it, a writer comes along after a while and
// hands the FIFO "late-token".
func hostileTokenFiles(t *testing.T) (fifo, big string) {
	t.Helper()
	dir := t.TempDir()
	fifo, big = filepath.Join(dir, "fifo"), filepath.Join(dir, "big")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, bytes.Repeat([]byte("t"), 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	late := time.AfterFunc(3*time.Second, func() {
		// Non-blocking: with no reader waiting (the read refused the
		// FIFO), there is no one to hand it to.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Write([]byte("late-token\n"))
			f.Close()
		}
	})
	t.Cleanup(func() { late.Stop() })
	return fifo, big
}
