package fsops

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// This file: the POSIX primitives the SFTP server needs (open files,
// attributes, links, statfs).

func (w *dirWS) OpenFile(p string, flag int, perm fs.FileMode) (File, error) {
	write := flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0
	o := opOpen
	if write {
		o = opOpenWrite
	}
	f, err := do(w, o, p, write, true, func(r *os.Root, rel string) (*os.File, error) {
		if flag&os.O_CREATE != 0 {
			if d := path.Dir(rel); d != "." {
				if err := w.mkdirs(r, d); err != nil {
					return nil, err
				}
			}
			return w.createFile(r, rel, flag|openNoWait, perm)
		}
		return r.OpenFile(rel, flag|openNoWait, perm)
	})
	if err != nil {
		if errors.Is(err, syscall.ENXIO) {
			// O_NONBLOCK's answer for a FIFO without a reader (opened for
			// writing), a socket, or a device without its unit.
			return nil, errNotFileOrDir("open", p)
		}
		return nil, err
	}
	if err := checkOpened(f); err != nil {
		f.Close()
		if err == errSpecialFile {
			return nil, errNotFileOrDir("open", p)
		}
		return nil, mapErr(o, p, err)
	}
	rel, _ := w.rel(p)
	df := &dirFile{f: f, p: p, rel: rel}
	if write && w.opts.Fsync {
		// Durable on close (SFTP's CLOSE is the client's acknowledgement):
		// the data, then the entry, and for a create the directories the
		// open may have made.
		created := flag&os.O_CREATE != 0
		df.durable = func() error {
			if err := w.syncFile(f); err != nil {
				return err
			}
			r, err := w.handle(false)
			if err != nil {
				return err
			}
			return w.syncDirs(r, parentDirs(rel, created)...)
		}
	}
	return df, nil
}

// openNoWait is added to the flags of every open of a file a client named
// that is not read whole (OpenFile, Truncate, Touch): O_NONBLOCK, so that
// opening a FIFO (which waits for the other end) or a device that waits for
// its line never blocks a thread; O_NOCTTY, so that a terminal device never
// becomes the daemon's controlling terminal. OpenFile and Truncate then
// check what they opened by type (checkOpened).
const openNoWait = syscall.O_NONBLOCK | syscall.O_NOCTTY

var errSpecialFile = errors.New("not a regular file or directory")

// checkOpened accepts a file opened with openNoWait only if it is a
// regular file or a directory, and takes O_NONBLOCK off a regular file
// again: some network and FUSE file systems honour it on regular files and
// would answer EAGAIN. Anything else (FIFO, socket, device) is
// errSpecialFile: the caller closes it.
func checkOpened(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		return nil
	case !fi.Mode().IsRegular():
		return errSpecialFile
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) { serr = unix.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}

// errNotFileOrDir refuses to open FIFOs, sockets and devices: an open or a
// read of one could wait for a peer forever, or talk to hardware.
func errNotFileOrDir(op, p string) error {
	return hinted(errcode.InvalidArgument, op, p, "not a regular file or directory", "FIFOs, sockets and devices cannot be opened")
}

func (w *dirWS) Chmod(p string, mode fs.FileMode) error {
	return w.run(opChmod, p, false, true, func(r *os.Root, rel string) error {
		return r.Chmod(rel, SafeMode(mode))
	})
}

func (w *dirWS) Chtimes(p string, atime, mtime time.Time) error {
	return w.run(opChtimes, p, false, true, func(r *os.Root, rel string) error {
		return r.Chtimes(rel, atime, mtime)
	})
}

func (w *dirWS) Truncate(p string, size int64) error {
	if size < 0 {
		return errcode.New(errcode.InvalidArgument, "truncate", p, "negative size %d", size)
	}
	return w.run(opTruncate, p, true, true, func(r *os.Root, rel string) error {
		f, err := r.OpenFile(rel, os.O_WRONLY|openNoWait, 0)
		if err != nil {
			return err
		}
		if err := checkOpened(f); err != nil {
			f.Close()
			if err == errSpecialFile {
				err = &fs.PathError{Op: "truncate", Path: rel, Err: syscall.EINVAL}
			}
			return err
		}
		err = f.Truncate(size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// Symlink creates link pointing at target. The target is a client path
// resolved like any other, a relative one from the directory the link
// really lands in: the link's parent is resolved through the root first,
// every symlink on its way followed, since a relative target is resolved by
// the kernel from there, not from the lexical parent the client named. The
// target must stay inside from that directory, symlinks on its own way
// included, and is stored as a relative link so os.Root can follow it. The
// link is then made in that very directory, reached again one component at
// a time without following any symlink, so a link swapped in meanwhile
// cannot move it elsewhere.
func (w *dirWS) Symlink(target, link string) error {
	lrel, err := w.rel(link)
	if err != nil {
		return err
	}
	if target == "" {
		return errcode.New(errcode.InvalidArgument, "symlink", link, "empty symlink target")
	}
	if lrel == "." {
		return hinted(errcode.AlreadyExists, "symlink", link, "already exists", "the workspace root")
	}
	var trel string // an absolute target, relative to the root
	if strings.HasPrefix(target, "/") {
		if trel, err = w.rel(target); err != nil {
			return withOp(err, opSymlink)
		}
	}
	r, err := w.handle(true)
	if err != nil {
		return mapErr(opSymlink, link, err)
	}
	dir, name := path.Dir(lrel), path.Base(lrel)
	for attempt := 0; ; attempt++ {
		// Where the link lands: dir with every symlink resolved (inside).
		rdir, err := w.resolveLinks(r, dir)
		if err != nil {
			return mapErr(opSymlink, link, err)
		}
		stored := path.Clean(target)
		if trel != "" {
			stored, _ = filepath.Rel(rdir, trel)
			stored = filepath.ToSlash(stored)
		}
		// What the kernel will resolve: the stored target from rdir, symlinks
		// on its way followed.
		if _, err := w.resolveLinks(r, rdir+"/"+stored); err != nil {
			if e := mapErr(opSymlink, target, err); errcode.Is(e, errcode.PathEscapeAttempt) {
				return e
			}
			return mapErr(opSymlink, link, err)
		}
		err = symlinkIn(r, rdir, name, stored, w.opts.Owner)
		if (err == syscall.ENOTDIR || err == syscall.ELOOP) && attempt < 2 {
			continue // a component of rdir became a link meanwhile: resolve again
		}
		if err != nil {
			return mapErr(opSymlink, link, &fs.PathError{Op: "symlinkat", Path: lrel, Err: err})
		}
		return nil
	}
}

// symlinkIn creates the link name -> target in the directory dir of r (a
// clean relative path without symlinks, "." for r itself), opening each
// component with O_NOFOLLOW|O_DIRECTORY: a component that is a symlink
// (or no directory) fails with ELOOP or ENOTDIR instead of being followed.
func symlinkIn(r *os.Root, dir, name, target string, owner *Owner) error {
	f, err := r.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	cerr := sc.Control(func(rootfd uintptr) {
		cur := int(rootfd)
		defer func() {
			if cur != int(rootfd) {
				unix.Close(cur)
			}
		}()
		if dir != "." {
			for _, c := range strings.Split(dir, "/") {
				fd, err := unix.Openat(cur, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					serr = err
					return
				}
				if cur != int(rootfd) {
					unix.Close(cur)
				}
				cur = fd
			}
		}
		if serr = unix.Symlinkat(target, cur, name); serr == nil {
			serr = ownLinkAt(owner, cur, name, target)
		}
	})
	if cerr != nil {
		return cerr
	}
	return serr
}

// Readlink returns the target of the link p as stored when it is relative and
// stays inside (judged from the directory the link really is in), or as the
// absolute path when it is absolute and inside; a link leading out is an
// escape error.
func (w *dirWS) Readlink(p string) (string, error) {
	return do(w, opReadlink, p, false, false, func(r *os.Root, rel string) (string, error) {
		t, err := r.Readlink(rel)
		if err != nil {
			return "", err
		}
		var abs string
		if strings.HasPrefix(t, "/") {
			abs = path.Clean(t)
		} else {
			// Relative to the directory the link really is in (its parent
			// path resolved through the root), as the kernel reads it.
			dir, err := w.resolveLinks(r, path.Dir(rel))
			if err != nil {
				return "", err
			}
			abs = path.Join(w.root, dir, t)
		}
		if !within(w.root, abs) && !(w.alias != "" && within(w.alias, path.Clean(t))) {
			return "", &fs.PathError{Op: "readlink", Path: rel, Err: errRootEscapeOr()}
		}
		return t, nil
	})
}

func (w *dirWS) StatFS() (FSStats, error) {
	r, err := w.handle(false)
	if err != nil {
		return FSStats{}, mapErr(opStatFS, ".", err)
	}
	f, err := r.Open(".")
	if err != nil {
		return FSStats{}, mapErr(opStatFS, ".", err)
	}
	defer f.Close()
	sc, err := f.SyscallConn()
	if err != nil {
		return FSStats{}, mapErr(opStatFS, ".", err)
	}
	var st unix.Statfs_t
	var serr error
	if err := sc.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), &st) }); err != nil {
		return FSStats{}, mapErr(opStatFS, ".", err)
	}
	if serr != nil {
		return FSStats{}, mapErr(opStatFS, ".", serr)
	}
	return fsStats(&st), nil
}

// dirFile is an open file of a directory workspace.
type dirFile struct {
	f   *os.File
	p   string
	rel string
	// durable, with Options.Fsync on a file opened for writing, syncs it
	// and its directory entry; Close runs it first.
	durable func() error
}

func (d *dirFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := d.f.ReadAt(b, off)
	if err != nil && err != io.EOF {
		err = mapErr(opRead, d.p, err)
	}
	return n, err
}

func (d *dirFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := d.f.WriteAt(b, off)
	return n, mapErr(opWrite, d.p, err)
}

func (d *dirFile) Read(b []byte) (int, error) {
	n, err := d.f.Read(b)
	if err != nil && err != io.EOF {
		err = mapErr(opRead, d.p, err)
	}
	return n, err
}

func (d *dirFile) Write(b []byte) (int, error) {
	n, err := d.f.Write(b)
	return n, mapErr(opWrite, d.p, err)
}

func (d *dirFile) Close() error {
	var serr error
	if d.durable != nil {
		serr, d.durable = d.durable(), nil
	}
	err := d.f.Close()
	if errors.Is(err, fs.ErrClosed) {
		return nil // idempotent
	}
	if err == nil {
		err = serr
	}
	return mapErr(opClose, d.p, err)
}

func (d *dirFile) Stat() (Info, error) {
	fi, err := d.f.Stat()
	if err != nil {
		return Info{}, mapErr(opStat, d.p, err)
	}
	return infoFrom(d.rel, fi), nil
}

func (d *dirFile) Truncate(size int64) error { return mapErr(opTruncate, d.p, d.f.Truncate(size)) }
func (d *dirFile) Sync() error               { return mapErr(opSync, d.p, d.f.Sync()) }

// Chmod sets the open file's mode through its descriptor (fsops.Fchmod).
func (d *dirFile) Chmod(mode fs.FileMode) error { return mapErr(opChmod, d.p, d.f.Chmod(mode)) }
