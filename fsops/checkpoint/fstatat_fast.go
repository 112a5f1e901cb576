//go:build linux && (amd64 || arm64)

package checkpoint

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// fstatatName stats the entry named by name (NUL-terminated: its last
// byte is 0, as getdents writes it) relative to the directory dirfd,
// without following a final link. It is unix.Fstatat without the copy of
// the name that one makes per call: the walk stats every entry of the
// tree, and the name is already NUL-terminated in getdents' buffer.
func fstatatName(dirfd int, name []byte, st *unix.Stat_t) error {
	for {
		_, _, e := unix.Syscall6(unix.SYS_NEWFSTATAT, uintptr(dirfd), uintptr(unsafe.Pointer(&name[0])),
			uintptr(unsafe.Pointer(st)), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}
