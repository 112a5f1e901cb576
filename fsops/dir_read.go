package fsops

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// This file: reads (stat, whole files, lines, listings) and the walker
// methods tree, search and grep are built on.

func (w *dirWS) Stat(p string) (Info, error) { return w.stat(opStat, p, true) }

func (w *dirWS) Lstat(p string) (Info, error) { return w.stat(opLstat, p, false) }

// stat reports the path as requested (not where links led).
func (w *dirWS) stat(o op, p string, follow bool) (Info, error) {
	if rel, err := w.rel(p); err == nil {
		if info, ok := w.statFast(rel, follow); ok {
			return info, nil
		}
	}
	statf := (*os.Root).Lstat
	if follow {
		statf = (*os.Root).Stat
	}
	fi, err := do(w, o, p, false, follow, statf)
	if err != nil {
		return Info{}, err
	}
	rel, _ := w.rel(p)
	return infoFrom(rel, fi), nil
}

func (w *dirWS) Exists(p string) (bool, error) {
	_, err := w.Stat(p)
	if err == nil {
		return true, nil
	}
	if errcode.Is(err, errcode.NotFound) || errcode.Is(err, errcode.NotADirectory) {
		return false, nil
	}
	return false, err
}

// open opens p for reading, the path of ReadFile and ReadLines when the
// openat2 fast path cannot settle it.
func (w *dirWS) open(o op, p string) (*os.File, error) {
	return do(w, o, p, false, true, openRead)
}

// openRead opens for reading without blocking on a FIFO (reads then check
// the type: only regular files and directories are accepted).
func openRead(r *os.Root, rel string) (*os.File, error) {
	return r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// openDir opens a directory for listing. O_DIRECTORY makes the kernel
// refuse anything else (ENOTDIR) before opening it, so a FIFO or a device
// put where a directory was expected is never opened, and never waited on.
func openDir(r *os.Root, rel string) (*os.File, error) {
	return r.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY, 0)
}

// errNotRegular refuses FIFOs, sockets and devices, which a read could wait
// on or never finish.
func errNotRegular(op, p string) error {
	return hinted(errcode.InvalidArgument, op, p, "not a regular file", "FIFOs, sockets and devices cannot be read")
}

// openRegular opens p and checks that it is not a directory.
func (w *dirWS) openRegular(o op, p string) (*os.File, int64, error) {
	f, err := w.open(o, p)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, mapErr(o, p, err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, 0, hinted(errcode.IsADirectory, o.name, p, "is a directory", "use a directory listing instead")
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, errNotRegular(o.name, p)
	}
	return f, fi.Size(), nil
}

func (w *dirWS) ReadFile(p string) ([]byte, error) {
	max := w.opts.maxRead()
	if rel, err := w.rel(p); err == nil {
		if data, size, ok := w.readFast(rel, max); ok {
			if size > max {
				return nil, tooLarge("read", p, size, max)
			}
			return data, nil
		}
	}
	f, size, err := w.openRegular(opRead, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > max {
		return nil, tooLarge("read", p, size, max)
	}
	data, err := readWhole(f, size, max, nil)
	if err != nil {
		return nil, mapErr(opRead, p, err)
	}
	return data, nil
}

var errGrew = errors.New("file grew past the read limit while being read")

// readWhole is the one whole-file read loop (ReadFile, ReadLines, the
// walker's wRead, grep's rootDir.read and the openat2 fast path): it reads
// r, whose fstat size is size, into buf (reused when it is large enough) in
// one allocation when the size is right. It stops at the size fstat
// reported, without another read to see EOF (a file growing meanwhile is
// read as it was when opened), or at EOF for files that report no size
// (/proc). Past max bytes it returns what it read and errGrew.
func readWhole[R io.Reader](r R, size, max int64, buf []byte) ([]byte, error) {
	if int64(cap(buf)) < size+1 {
		buf = make([]byte, 0, size+1)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if size > 0 && int64(len(buf)) >= size {
			return buf, nil
		}
		if int64(len(buf)) > max {
			return buf, errGrew
		}
	}
}

// fdReader reads a raw file descriptor for readWhole: EINTR is retried and
// a read of 0 bytes is io.EOF.
type fdReader int

func (fd fdReader) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(fd), b)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func tooLarge(op, p string, size, max int64) error {
	return errcode.New(errcode.TooLarge, op, p,
		"file is %d bytes, over the %d-byte limit for whole-file reads; use offset/limit to page through it (read_text_file), or grep to find what you need", size, max)
}

// streamThreshold: files up to this size are paged from one buffer; larger
// ones are scanned line by line so paging works on files of any size.
const streamThreshold = 4 << 20

func (w *dirWS) ReadLines(ctx context.Context, p string, lr LineRange) (Lines, error) {
	if err := lr.check("readlines", p); err != nil {
		return Lines{}, err
	}
	if rel, err := w.rel(p); err == nil {
		if data, size, ok := w.readFast(rel, streamThreshold); ok && size <= streamThreshold {
			return pageString(bytesToString(data), lr), nil
		}
	}
	f, size, err := w.openRegular(opReadLines, p)
	if err != nil {
		return Lines{}, err
	}
	defer f.Close()
	if size <= streamThreshold {
		data, err := readWhole(f, size, streamThreshold*4, nil)
		if err == nil {
			return pageString(bytesToString(data), lr), nil
		}
		if err != errGrew {
			return Lines{}, mapErr(opReadLines, p, err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return Lines{}, mapErr(opReadLines, p, err)
		}
	}
	if size > MaxScanSize {
		return Lines{}, errcode.New(errcode.TooLarge, "readlines", p,
			"file is %d bytes; paging it by lines reads at most %d (MaxScanSize); use grep, or exec with head/tail/sed", size, int64(MaxScanSize))
	}
	ls, err := pageReader(ctx, f, lr)
	if err == errScanLimit {
		return Lines{}, errcode.New(errcode.TooLarge, "readlines", p,
			"file grew past %d bytes while it was paged (MaxScanSize); use grep, or exec with head/tail/sed", int64(MaxScanSize))
	}
	if err != nil {
		return Lines{}, mapErr(opReadLines, p, err)
	}
	return ls, nil
}

func (w *dirWS) ReadDir(p string) ([]Info, error) {
	return do(w, opReadDir, p, false, true, readDirAt)
}

func (w *dirWS) ReadDirTypes(p string) ([]Info, error) {
	return do(w, opReadDir, p, false, true, func(r *os.Root, rel string) ([]Info, error) {
		f, err := openListDir(r, rel)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		// Listed through the open directory's fd, typed from d_type: the
		// same confined listing grep walks with.
		ents, err := direntTypes(int(f.Fd()))
		if err != nil {
			return nil, err
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
		out := make([]Info, len(ents))
		for i, e := range ents {
			out[i] = Info{Name: e.name, Path: joinRel(rel, e.name), Mode: e.typeMode()}
		}
		return out, nil
	})
}

// openListDir opens the directory rel for listing (openDir), and checks
// that what it opened is one.
func openListDir(r *os.Root, rel string) (*os.File, error) {
	f, err := openDir(r, rel)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.IsDir() {
		err = &fs.PathError{Op: "readdir", Path: rel, Err: syscall.ENOTDIR}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readDirAt lists rel, stat-ing each entry relative to the open directory
// (fstatat) so no entry is looked up by a path outside the root's handle.
func readDirAt(r *os.Root, rel string) ([]Info, error) {
	f, err := openListDir(r, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return listOpened(f, rel)
}

// listOpened lists the open directory f, whose path in the workspace is
// rel, stat-ing each entry relative to it (fstatat).
func listOpened(f *os.File, rel string) ([]Info, error) {
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	sc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(names))
	var st unix.Stat_t
	cerr := sc.Control(func(fd uintptr) {
		for _, name := range names {
			if e := unix.Fstatat(int(fd), name, &st, unix.AT_SYMLINK_NOFOLLOW); e != nil {
				continue // vanished meanwhile
			}
			out = append(out, infoFromStat(name, joinRel(rel, name), &st))
		}
	})
	if cerr != nil {
		return nil, cerr
	}
	return out, nil
}

func joinRel(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

func (w *dirWS) Tree(ctx context.Context, p string, opts TreeOptions) ([]TreeNode, error) {
	return buildTree(ctx, w, p, opts)
}

func (w *dirWS) Search(ctx context.Context, p, pattern string, opts SearchOptions) ([]string, error) {
	return search(ctx, w, p, pattern, opts)
}

func (w *dirWS) Grep(ctx context.Context, opts GrepOptions) (GrepResult, error) {
	return grep(ctx, w, opts)
}

// walker methods (see walk.go): paths relative to this workspace.

func (w *dirWS) wRel(p string) (string, error) { return w.rel(p) }

func (w *dirWS) wList(rel string) ([]Info, error) {
	r, err := w.handle(false)
	if err != nil {
		return nil, err
	}
	return inRoot(w, r, rel, true, readDirAt)
}

func (w *dirWS) wStat(rel string) (Info, error) {
	r, err := w.handle(false)
	if err != nil {
		return Info{}, err
	}
	fi, err := inRoot(w, r, rel, true, (*os.Root).Stat)
	if err != nil {
		return Info{}, err
	}
	return infoFrom(rel, fi), nil
}

func (w *dirWS) wRead(rel string, max int64) ([]byte, error) {
	r, err := w.handle(false)
	if err != nil {
		return nil, err
	}
	f, err := inRoot(w, r, rel, true, openRead)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: rel, Err: syscall.EISDIR}
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: rel, Err: syscall.EINVAL}
	}
	if fi.Size() > max {
		return nil, errGrew
	}
	data, err := readWhole(f, fi.Size(), max, nil)
	if err != nil {
		return nil, err
	}
	return data, nil
}

// openGrepDir is grep's fast path: the directory is opened through os.Root
// (confined), then its files are opened relative to it by single names with
// O_NOFOLLOW, which cannot leave it; the listing's d_type spares a stat per
// entry.
func (w *dirWS) openGrepDir(rel string) (grepDir, error) {
	r, err := w.handle(false)
	if err != nil {
		return nil, err
	}
	f, err := inRoot(w, r, rel, true, openDir)
	if err != nil {
		return nil, err
	}
	d := &rootDir{f: f, fd: int(f.Fd())}
	if d.ents, err = direntTypes(d.fd); err != nil {
		f.Close()
		return nil, err
	}
	sort.Slice(d.ents, func(i, j int) bool { return d.ents[i].name < d.ents[j].name })
	return d, nil
}

type rootDir struct {
	f    *os.File
	fd   int
	ents []grepEntry
}

func (d *rootDir) entries() []grepEntry { return d.ents }
func (d *rootDir) close()               { d.f.Close() }

// read reads the regular file name of the directory into buf (grown as
// needed). O_NONBLOCK keeps a FIFO swapped in from blocking the open.
func (d *rootDir) read(name string, buf []byte, max int64) ([]byte, error) {
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, syscall.EINVAL
	}
	if st.Size > max {
		return nil, errGrew
	}
	data, err := readWhole(fdReader(fd), st.Size, max, buf)
	if err != nil {
		return nil, err
	}
	return data, nil
}
