//go:build unix

package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// HostileFiles makes, in a fresh directory, a FIFO and a 2 MiB file, each
// named as a token file by mistake or by someone else: a read must fail at
// once naming the file ("a FIFO", "larger than"), not wait for a writer or
// take the file whole. The FIFO's late writer (FIFO) hands it
// "late-token".
func HostileFiles(t testing.TB) []HostileFile {
	t.Helper()
	dir := t.TempDir()
	fifo, big := filepath.Join(dir, "fifo"), filepath.Join(dir, "big")
	FIFO(t, fifo, "late-token\n")
	if err := os.WriteFile(big, bytes.Repeat([]byte("t"), 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	return []HostileFile{{fifo, "a FIFO"}, {big, "larger than"}}
}

// FIFO makes a FIFO at path, for a test that a read refuses one at once
// instead of waiting for a writer. So that a reader that does wait fails
// the test rather than hanging it, a writer comes along after 3 s and
// hands it late (no writer comes once the test has ended).
func FIFO(t testing.TB, path, late string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	w := time.AfterFunc(3*time.Second, func() {
		// Non-blocking: with no reader waiting (the read refused the
		// FIFO), there is no one to hand it to.
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Write([]byte(late))
			f.Close()
		}
	})
	t.Cleanup(func() { w.Stop() })
}
