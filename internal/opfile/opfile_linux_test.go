package opfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// TestNotRegularIsNeverOpened: a name that is a FIFO or a device is
// refused before it is opened, not after. Opening is what a device acts
// on (a watchdog arms, a tape rewinds on close, a modem line rises), and
// a FIFO's open releases a writer waiting for a reader, which then finds
// its reader gone. An inotify watch on the node sees every open; none may
// come, from Read or ReadRegular, for the node named or a symlink to it.
func TestNotRegularIsNeverOpened(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	in, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(in)
	if _, err := syscall.InotifyAddWatch(in, fifo, syscall.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{fifo, link} {
		if _, err := ReadRegular(name, 1024); err == nil || !strings.Contains(err.Error(), "a FIFO") {
			t.Errorf("ReadRegular(%s): %v, want a refusal naming a FIFO", name, err)
		}
		if _, err := Read(name, 1024); err == nil || !strings.Contains(err.Error(), "a FIFO") {
			t.Errorf("Read(%s): %v, want a refusal naming a FIFO", name, err)
		}
	}
	buf := make([]byte, 4096)
	n, err := syscall.Read(in, buf)
	if err != syscall.EAGAIN {
		opens := 0
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&syscall.IN_OPEN != 0 {
				opens++
			}
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
		t.Fatalf("the FIFO was opened %d times before it was refused (read %d, %v); it must be judged before any open", opens, n, err)
	}
}

// TestReadRegularBoundsAndGeneratedFiles: the bound is the read's, not
// the size's: a file of exactly max bytes reads whole and one byte more is
// refused; a /proc file (regular, size 0, its content made as it is read)
// is read to the bound like any other; /dev/stdin, a symlink to a pipe, is
// refused as one; an empty file reads as empty (its callers refuse an
// empty token with the file's name).
func TestReadRegularBoundsAndGeneratedFiles(t *testing.T) {
	dir := t.TempDir()
	at := filepath.Join(dir, "at")
	over := filepath.Join(dir, "over")
	empty := filepath.Join(dir, "empty")
	os.WriteFile(at, bytes.Repeat([]byte("a"), 100), 0o600)
	os.WriteFile(over, bytes.Repeat([]byte("a"), 101), 0o600)
	os.WriteFile(empty, nil, 0o600)
	if b, err := ReadRegular(at, 100); err != nil || len(b) != 100 {
		t.Errorf("a file of exactly the bound: %d bytes, %v", len(b), err)
	}
	if _, err := ReadRegular(over, 100); err == nil || !strings.Contains(err.Error(), "larger than 100 bytes") {
		t.Errorf("one byte over the bound: %v", err)
	}
	if b, err := ReadRegular(empty, 100); err != nil || len(b) != 0 {
		t.Errorf("an empty file: %q, %v", b, err)
	}
	if fi, err := os.Stat("/proc/self/status"); err != nil || fi.Size() != 0 {
		t.Skipf("/proc/self/status is not a size-0 generated file here (%v)", err)
	}
	if b, err := ReadRegular("/proc/self/status", 1<<20); err != nil || !bytes.Contains(b, []byte("Pid:")) {
		t.Errorf("/proc/self/status (size 0): %q, %v", b, err)
	}
	if _, err := ReadRegular("/proc/self/status", 16); err == nil || !strings.Contains(err.Error(), "larger than 16 bytes") {
		t.Errorf("/proc/self/status past a bound of 16: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	stdin := filepath.Join(dir, "stdin")
	os.Symlink("/proc/self/fd/"+strconv.Itoa(int(r.Fd())), stdin)
	if _, err := ReadRegular(stdin, 100); err == nil || !strings.Contains(err.Error(), "a FIFO") {
		t.Errorf("a symlink to a pipe (as /dev/stdin is): %v", err)
	}
}
