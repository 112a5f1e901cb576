//go:build linux

package fsops

import (
	"io/fs"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sysInfo fills the fields of info that only the platform's stat has.
func sysInfo(info *Info, fi fs.FileInfo) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	info.AccessTime = time.Unix(int64(st.Atim.Sec), int64(st.Atim.Nsec))
	info.ChangeTime = time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec))
	info.UID, info.GID, info.Nlink = st.Uid, st.Gid, uint64(st.Nlink)
	info.dev, info.ino = uint64(st.Dev), uint64(st.Ino)
}

func fsStats(st *unix.Statfs_t) FSStats {
	return FSStats{
		BlockSize: uint64(st.Bsize), FragmentSize: uint64(st.Frsize),
		Blocks: st.Blocks, BlocksFree: st.Bfree, BlocksAvail: st.Bavail,
		Files: st.Files, FilesFree: st.Ffree, FilesAvail: st.Ffree, NameMax: uint64(st.Namelen),
	}
}
