//go:build unix

package opfile

import (
	"io/fs"
	"syscall"
)

// owner is the uid and gid of fi; ok is false where the system does not
// say.
func owner(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// links is fi's number of hard links; 1 where the system does not say.
func links(fi fs.FileInfo) uint64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 1
	}
	return uint64(st.Nlink)
}
