package opfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestNameSwappedForAFIFOIsNeverOpened: a name that is a regular file
// when Read and ReadRegular first stat it, and that another user
// (who controls a name on the way: a sticky directory, a link) swaps
// for a link to a FIFO before the open, is refused without the FIFO
// being opened: the name is opened O_PATH, which calls no driver's or
// FIFO's open, and is opened for reading only once its descriptor is a
// regular file. The FIFO stands for a device whose open acts (a
// watchdog armed, a tape rewound, a modem line raised): a writer's
// open(O_WRONLY|O_NONBLOCK) succeeds only while a reader has the FIFO
// open, so it tells, while read holds what it opened, whether read
// opened the FIFO.
func TestNameSwappedForAFIFOIsNeverOpened(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "token")
	defer func() { beforeOpen, whileOpen = nil, nil }()
	for _, r := range []struct {
		what string
		read func() error
	}{
		{"Read", func() error { _, err := Read(name, 1024); return err }},
		{"ReadRegular", func() error { _, err := ReadRegular(name, 1024); return err }},
	} {
		os.Remove(name)
		if err := os.WriteFile(name, []byte("token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		swapped, looked, readerOpen := false, false, false
		beforeOpen = func(n string) {
			if n != name {
				return
			}
			if err := os.Remove(name); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(fifo, name); err != nil {
				t.Error(err)
			}
			swapped = true
		}
		whileOpen = func(n string) {
			if n != name {
				return
			}
			looked = true
			fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
			switch {
			case err == nil:
				readerOpen = true
				syscall.Close(fd)
			case !errors.Is(err, syscall.ENXIO):
				t.Errorf("%s: a writer's open of the FIFO: %v, want ENXIO (no reader) or success", r.what, err)
			}
		}
		err := r.read()
		if !swapped || !looked {
			t.Fatalf("%s: the name was swapped %v and looked at while open %v; both seams must run", r.what, swapped, looked)
		}
		if err == nil || !strings.Contains(err.Error(), "a FIFO") {
			t.Errorf("%s of a name swapped for a link to a FIFO: %v, want a refusal naming a FIFO", r.what, err)
		}
		if readerOpen {
			t.Errorf("%s opened the FIFO swapped in under the name before refusing it (a writer found a reader); what is not a regular file must never be opened", r.what)
		}
	}
}

// TestReadReopensTheFileOpenedNotTheName: the file read is the one the
// O_PATH open found, reopened through /proc/self/fd, not the name
// opened again: a name swapped for another regular file after that open
// still reads the first (ReadRegular), and Read, which judges the way
// again after the open, refuses it as changed. Without /proc (procFD
// pointed at a missing directory) the name is opened again, and the
// swap is refused as changed by both.
func TestReadReopensTheFileOpenedNotTheName(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "token")
	other := filepath.Join(dir, "other")
	defer func() { whileOpen, procFD = nil, "/proc/self/fd/" }()
	for _, proc := range []bool{true, false} {
		procFD = "/proc/self/fd/"
		if !proc {
			procFD = filepath.Join(dir, "no-proc", "self", "fd") + "/"
		}
		for _, what := range []string{"Read", "ReadRegular"} {
			if err := os.WriteFile(name, []byte("first\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(other, []byte("second\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			read := func() ([]byte, error) {
				if what == "Read" {
					return Read(name, 1024)
				}
				return ReadRegular(name, 1024)
			}
			whileOpen = nil
			if b, err := read(); err != nil || string(b) != "first\n" {
				t.Fatalf("/proc %v, %s of a plain file: %q, %v", proc, what, b, err)
			}
			swapped := false
			whileOpen = func(n string) {
				if n == name {
					swapped = os.Rename(other, name) == nil
				}
			}
			b, err := read()
			if !swapped {
				t.Fatalf("/proc %v, %s: the name was not swapped", proc, what)
			}
			if proc && what == "ReadRegular" {
				if err != nil || string(b) != "first\n" {
					t.Errorf("/proc mounted, ReadRegular of a name swapped after its O_PATH open: %q, %v; want the file first opened", b, err)
				}
				continue
			}
			if !errors.Is(err, ErrChanged) {
				t.Errorf("/proc %v, %s of a name swapped after its first open: %q, %v; want ErrChanged", proc, what, b, err)
			}
		}
	}
}
