//go:build linux && !amd64 && !arm64

package checkpoint

import "golang.org/x/sys/unix"

// fstatatName stats the entry named by name (NUL-terminated) relative to
// the directory dirfd, without following a final link (see
// fstatat_fast.go; here through unix.Fstatat, whose system call differs
// by architecture).
func fstatatName(dirfd int, name []byte, st *unix.Stat_t) error {
	for {
		err := unix.Fstatat(dirfd, string(name[:len(name)-1]), st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			return err
		}
	}
}
