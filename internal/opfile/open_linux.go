package opfile

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// procFD is the directory that names this process's descriptors; the
// tests point it at a missing one to stand for a system without /proc.
var procFD = "/proc/self/fd/"

// openRegular opens name for reading, without blocking, and only when it
// is a regular file: what else the name leads to is never opened, even a
// device or FIFO swapped in under it since read's stat (by a user who
// controls a name on the way: a sticky directory's, a link). Opening is
// what a device acts on (a watchdog arms, a tape rewinds, a modem line
// rises) and what wakes a writer waiting at a FIFO.
//
// The name is first opened O_PATH: the kernel resolves it, following its
// symlinks as any open does (the operator's names lead through links, a
// Kubernetes Secret's key among them, and the walk judges each; so no
// O_NOFOLLOW), to a descriptor that names the file and calls no driver's
// or FIFO's open. That descriptor's fstat says what the file is. Only a
// regular file is opened for reading, and through /proc/self/fd/N, which
// leads to the file the O_PATH descriptor holds, not through the name
// again, which could have changed since. (openat with an empty path and
// AT_EMPTY_PATH does not reopen a descriptor: open(2) takes no such flag,
// and its bit is O_DSYNC's.) Both descriptors must be the same file.
//
// Where /proc is not mounted (a chroot, a container made without it),
// the name is opened again with O_NONBLOCK, as off Linux: a device or
// FIFO swapped in between the two opens is opened before it is refused,
// and a swap for another regular file is refused (ErrChanged). Refusing
// every read there instead would stop the daemon from starting at all
// for want of /proc, while what the fallback leaves open needs a swap in
// that window and only ever ends in a refusal.
func openRegular(name string) (*os.File, fs.FileInfo, error) {
	pfd, err := unix.Open(name, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(pfd)
	if whileOpen != nil {
		whileOpen(name)
	}
	var pst unix.Stat_t
	if err := unix.Fstat(pfd, &pst); err != nil {
		return nil, nil, err
	}
	if pst.Mode&unix.S_IFMT != unix.S_IFREG {
		// Named by the os package's own reading of the same file (fsops
		// keeps the one mapping of st_mode to fs.FileMode bits), through
		// /proc: a stat, which opens nothing.
		if fi, err := os.Stat(procFD + strconv.Itoa(pfd)); err == nil {
			return nil, nil, notRegular(fi.Mode())
		}
		return nil, nil, errors.New("not a regular file")
	}
	const flags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY | syscall.O_CLOEXEC
	f, err := os.OpenFile(procFD+strconv.Itoa(pfd), flags, 0)
	if err != nil && errors.Is(err, fs.ErrNotExist) && !procMounted() {
		f, err = os.OpenFile(name, flags, 0)
	}
	if err != nil {
		return nil, nil, unwrap(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, unwrap(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || uint64(st.Dev) != uint64(pst.Dev) || uint64(st.Ino) != uint64(pst.Ino) || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, ErrChanged
	}
	return f, fi, nil
}

// procMounted reports whether procFD is there: a descriptor's entry in it
// is missing only when it is not (a /proc not mounted, or not this
// process's pid namespace's).
func procMounted() bool {
	_, err := os.Stat(strings.TrimSuffix(procFD, "/"))
	return err == nil
}
