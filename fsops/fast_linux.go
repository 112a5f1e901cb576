//go:build linux

package fsops

import (
	"bytes"
	"encoding/binary"
	"os"
	"path"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Linux fast paths. Each does with one kernel-confined call what the os.Root
// walk does with one call per path component, and hands anything it cannot
// settle to the os.Root path, which stays the reference behaviour.

// dirFD is a workspace directory held open as a plain fd for openat2.
type dirFD struct {
	f  *os.File
	rc syscall.RawConn
}

func openDirFD(r *os.Root) *dirFD {
	if openat2Missing.Load() {
		return nil
	}
	f, err := r.Open(".")
	if err != nil {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil
	}
	return &dirFD{f: f, rc: rc}
}

// openat2Missing is set once openat2 is found unsupported (old kernels,
// some sandboxes), so reads stop trying it.
var openat2Missing atomic.Bool

// openHow confines openat2 the way os.Root confines its walk: the kernel
// resolves the path beneath the directory, follows only symlinks that stay
// beneath it (absolute ones are refused) and no /proc magic links.
var openHow = unix.OpenHow{
	Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK,
	Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
}

// pathHow is openHow for an O_PATH handle (existence and confinement only).
var pathHow = unix.OpenHow{
	Flags:   unix.O_PATH | unix.O_CLOEXEC,
	Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
}

// reopenDirFD opens the workspace directory again from its descriptor
// (openat of "." beneath it: one system call, the very directory the handle
// holds), or returns nil when there is none (openat2 missing, the
// workspace closed): OpenDir then opens it through the handle. Not a dup:
// a duplicate would share the directory offset with every other one, and a
// caller that lists the directory through it (the checkpoint walk) would
// move it for all.
func (w *dirWS) reopenDirFD() *os.File {
	d := w.dirf.Load()
	if d == nil {
		return nil
	}
	nfd := -1
	if d.rc.Control(func(fd uintptr) {
		nfd, _ = unix.Openat(int(fd), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}) != nil || nfd < 0 {
		return nil
	}
	return os.NewFile(uintptr(nfd), w.root)
}

// readFast is the read hot path: one openat2 call (instead of an openat per
// path component), fstat, read, close. It reports ok only for a regular file
// it read whole (or found over max: data nil, size set); on any failure it
// reports !ok and the caller takes the os.Root path, which produces the
// canonical errors (escape, not found, directory) and the absolute-link
// fallback. The fd is used under RawConn.Control, so a concurrent Close
// cannot recycle it mid-call.
func (w *dirWS) readFast(rel string, max int64) (data []byte, size int64, ok bool) {
	d := w.dirf.Load()
	if d == nil || rel == "." {
		return nil, 0, false
	}
	fd := -1
	var oerr error
	if d.rc.Control(func(dirfd uintptr) {
		fd, oerr = openat2(int(dirfd), rel, &openHow)
	}) != nil || oerr != nil {
		if oerr == unix.ENOSYS {
			openat2Missing.Store(true)
		}
		return nil, 0, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, 0, false
	}
	if st.Size > max {
		return nil, st.Size, true
	}
	data, err := readWhole(fdReader(fd), st.Size, max, nil)
	switch {
	case err == errGrew:
		return nil, int64(len(data)), true
	case err != nil:
		return nil, 0, false
	}
	return data, int64(len(data)), true
}

// linksInsideFast reports true when one openat2 (O_PATH, beneath) shows
// that no symlink on rel's way leads out: it succeeded, or a missing
// component stopped it before any link could. false means "ask os.Root".
func (w *dirWS) linksInsideFast(rel string) bool {
	d := w.dirf.Load()
	if d == nil {
		return false
	}
	fd := -1
	var oerr error
	if d.rc.Control(func(dirfd uintptr) {
		fd, oerr = openat2(int(dirfd), rel, &pathHow)
	}) != nil {
		return false
	}
	if oerr == nil {
		unix.Close(fd)
		return true
	}
	if oerr == unix.ENOSYS {
		openat2Missing.Store(true)
	}
	return oerr == unix.ENOENT || oerr == unix.ENOTDIR
}

// direntTypes lists the directory fd with getdents, typing entries from
// d_type. (os.File.ReadDir on a file opened in a Root stats every entry; a
// grep walk needs only the type.) An entry of unknown type is stat-ed
// relative to the directory.
func direntTypes(fd int) ([]grepEntry, error) {
	var out []grepEntry
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		b := buf[:n]
		for len(b) >= 19 {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			typ := b[18]
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			s := string(name)
			if s == "." || s == ".." {
				continue
			}
			if typ == unix.DT_UNKNOWN {
				var st unix.Stat_t
				if unix.Fstatat(fd, s, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
					continue
				}
				switch st.Mode & unix.S_IFMT {
				case unix.S_IFDIR:
					typ = unix.DT_DIR
				case unix.S_IFREG:
					typ = unix.DT_REG
				case unix.S_IFLNK:
					typ = unix.DT_LNK
				}
			}
			out = append(out, grepEntry{name: s, dir: typ == unix.DT_DIR, regular: typ == unix.DT_REG, symlink: typ == unix.DT_LNK})
		}
	}
}

func (d *dirFD) close() { d.f.Close() }

// statFast stats rel with openat2 (O_PATH, beneath; O_NOFOLLOW for lstat)
// and statx, which also reports the birth time. !ok means "ask os.Root".
func (w *dirWS) statFast(rel string, follow bool) (Info, bool) {
	d := w.dirf.Load()
	if d == nil {
		return Info{}, false
	}
	how := pathHow
	if !follow {
		how.Flags |= unix.O_NOFOLLOW
	}
	fd := -1
	var oerr error
	if d.rc.Control(func(dirfd uintptr) {
		fd, oerr = openat2(int(dirfd), rel, &how)
	}) != nil || oerr != nil {
		if oerr == unix.ENOSYS {
			openat2Missing.Store(true)
		}
		return Info{}, false
	}
	defer unix.Close(fd)
	var st unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &st) != nil {
		return Info{}, false
	}
	ts := func(t unix.StatxTimestamp) time.Time { return time.Unix(t.Sec, int64(t.Nsec)) }
	info := Info{
		Name: path.Base(rel), Path: rel, Size: int64(st.Size), Mode: unixMode(uint32(st.Mode)),
		ModTime: ts(st.Mtime), AccessTime: ts(st.Atime), ChangeTime: ts(st.Ctime),
		UID: st.Uid, GID: st.Gid, Nlink: uint64(st.Nlink),
		dev: unix.Mkdev(st.Dev_major, st.Dev_minor), ino: st.Ino,
	}
	if rel == "." {
		info.Name = "."
	}
	if st.Mask&unix.STATX_BTIME != 0 {
		info.BirthTime = ts(st.Btime)
	}
	return info, true
}

// openat2 is unix.Openat2, tried again on EAGAIN: with RESOLVE_BENEATH the
// kernel abandons a lookup through ".." when a rename or mount happened
// anywhere on the system meanwhile, and asks the caller to retry.
func openat2(dirfd int, rel string, how *unix.OpenHow) (int, error) {
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, rel, how)
		if err != unix.EAGAIN || i == 16 {
			return fd, err
		}
	}
}
