package daemon

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// MarkInheritedCloseOnExec marks every descriptor from 3 up close-on-exec.
// A launcher (a shell, a supervisor, a CI runner, the npm client's spawn)
// may leave descriptors open without FD_CLOEXEC; the daemon never uses
// them, and without this every command, bwrap included, would inherit them:
// a socket or a file of the launcher, outside anything the sandbox allows.
// The daemon's own descriptors are all opened close-on-exec by Go, and what
// systemd passes on purpose (the notify socket, credentials) are paths in
// the environment, not descriptors; the daemon does not take sockets by
// socket activation (LISTEN_FDS), so no descriptor is kept.
//
// main calls it first, before anything opens a file. It uses
// close_range(CLOSE_RANGE_CLOEXEC) (Linux 5.11) and otherwise walks
// /proc/self/fd.
func MarkInheritedCloseOnExec() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	return markCloseOnExecByProc()
}

// markCloseOnExecByProc is MarkInheritedCloseOnExec without close_range.
func markCloseOnExecByProc() error {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < 3 {
			continue
		}
		// EBADF: closed since the listing; nothing to mark.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && err != unix.EBADF {
			return err
		}
	}
	return nil
}
