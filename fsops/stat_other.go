//go:build !linux

package fsops

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// sysInfo fills what the portable FileInfo lacks: nothing beyond times.
func sysInfo(info *Info, fi fs.FileInfo) {
	info.AccessTime, info.ChangeTime = fi.ModTime(), fi.ModTime()
}

func fsStats(st *unix.Statfs_t) FSStats {
	return FSStats{
		BlockSize: uint64(st.Bsize), FragmentSize: uint64(st.Bsize),
		Blocks: uint64(st.Blocks), BlocksFree: uint64(st.Bfree), BlocksAvail: uint64(st.Bavail),
		Files: uint64(st.Files), FilesFree: uint64(st.Ffree), FilesAvail: uint64(st.Ffree), NameMax: 255,
	}
}
