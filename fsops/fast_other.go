//go:build !linux

package fsops

import (
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// Without Linux's openat2 and getdents every access takes the os.Root path.

type dirFD struct{}

func openDirFD(*os.Root) *dirFD { return nil }

func (w *dirWS) reopenDirFD() *os.File { return nil }

func (w *dirWS) readFast(string, int64) ([]byte, int64, bool) { return nil, 0, false }

func (w *dirWS) linksInsideFast(string) bool { return false }

func (w *dirWS) statFast(string, bool) (Info, bool) { return Info{}, false }

// direntTypes lists the directory fd, typing each entry with fstatat
// relative to the directory.
func direntTypes(fd int) ([]grepEntry, error) {
	nfd, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(nfd), ".")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]grepEntry, 0, len(names))
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		t := st.Mode & unix.S_IFMT
		out = append(out, grepEntry{name: n, dir: t == unix.S_IFDIR, regular: t == unix.S_IFREG, symlink: t == unix.S_IFLNK})
	}
	return out, nil
}

func (d *dirFD) close() {}
