package fsops

import (
	"os"

	"golang.org/x/sys/unix"
)

// This file: the change of a new symlink's owner, which needs Linux's
// O_PATH (a descriptor of the link itself) and AT_EMPTY_PATH.

// ownLinkAt gives the symlink name in the directory dirfd, just made there
// pointing at target, to the owner: the link opened with O_PATH|O_NOFOLLOW
// and changed through that descriptor only if it is a symlink of the
// daemon's user with that target (else errTaken, and nothing is changed).
// Where the change fails the link is removed again.
func ownLinkAt(o *Owner, dirfd int, name, target string) error {
	if o == nil {
		return nil
	}
	if ownRace != nil {
		ownRace()
	}
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return errTaken
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	buf := make([]byte, len(target)+1)
	n, err := unix.Readlinkat(fd, "", buf)
	if st.Mode&unix.S_IFMT != unix.S_IFLNK || int(st.Uid) != os.Geteuid() || err != nil || string(buf[:n]) != target {
		return errTaken
	}
	if err := chown(func() error {
		return unix.Fchownat(fd, "", o.UID, o.GID, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW)
	}); err != nil {
		unix.Unlinkat(dirfd, name, 0)
		return err
	}
	return nil
}
