package opfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
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

// setACL gives p a POSIX access ACL (system.posix_acl_access): owner rw
// (rwx for a directory), the named user uid the same, the owning group
// and others read, and a mask that lets the named user write, so the
// mode's group bits (the mask) show write. It skips where the file system
// takes no ACL.
func setACL(t *testing.T, p string, uid uint32, dir bool) {
	t.Helper()
	rw := uint16(6)
	if dir {
		rw = 7
	}
	const undefined = 0xffffffff
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{
		{0x01, rw, undefined}, // ACL_USER_OBJ
		{0x02, rw, uid},       // ACL_USER
		{0x04, 4, undefined},  // ACL_GROUP_OBJ r
		{0x10, rw, undefined}, // ACL_MASK
		{0x20, 4, undefined},  // ACL_OTHER r
	} {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	if err := unix.Setxattr(p, "system.posix_acl_access", b, 0); err != nil {
		if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
			t.Skipf("the file system of %s takes no POSIX ACL: %v", p, err)
		}
		t.Fatal(err)
	}
}

// TestReadRefusesWriteGrantedByAnACL: a POSIX ACL lets a named user write
// a file or directory without a mode bit of its own; the mode's group bits
// then show the ACL's mask. A file, or a directory on its path, whose
// owning group is one the rule allows to write (root's, or the owner's
// private group) but whose ACL lets nobody write, is refused naming that
// user; the same ACL naming the owner itself reads.
func TestReadRefusesWriteGrantedByAnACL(t *testing.T) {
	me := os.Geteuid()
	// The owning group of the test's files is one the rule allows: root's
	// as root, otherwise this user's, made its private group.
	if me != 0 {
		name := "me" + strconv.Itoa(me)
		fakeAccounts(t, name+":x:"+strconv.Itoa(me)+":"+strconv.Itoa(os.Getegid())+"::/:/bin/sh\n", name+":x:"+strconv.Itoa(os.Getegid())+":\n")
	}
	for _, where := range []string{"file", "directory"} {
		dir := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "approvals.json")
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		target := p
		if where == "directory" {
			target = dir
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(target, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		setACL(t, target, uint32(me), where == "directory")
		if _, err := Read(p, 1<<10); err != nil {
			t.Errorf("%s: an ACL naming the owner itself: %v", where, err)
		}
		setACL(t, target, nobody, where == "directory")
		_, err := Read(p, 1<<10)
		if err == nil || !strings.Contains(err.Error(), "user 65534 through an ACL may write it") {
			t.Errorf("%s: an ACL letting nobody write: %v, want a refusal naming user 65534 through an ACL", where, err)
		}
	}
}
