//go:build linux

package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/sandbox/policy"
)

// workdir is where one command runs, as names and as descriptors. The
// names are what the command is told (PWD, HOME, the mount point under
// bwrap); the descriptors are what the kernel is given. A path validated by
// name and later handed to bwrap or chdir by name is resolved again, and a
// process in the workspace can swap a directory for a symlink to anywhere on
// the host in between; a descriptor cannot be swapped. So the boundary is
// opened once, beneath a confined handle, and from then on only the
// descriptor is used:
//
//   - bwrap binds it with --bind-fd (bwrap mounts the directory the
//     descriptor holds and closes it before the command starts);
//   - software and none modes start the command in it: the child's chdir is
//     to /proc/self/fd/N, the kernel's name for that very open directory.
type workdir struct {
	boundary, dir string   // clean absolute names
	bfd           *os.File // the boundary directory
	dfd           *os.File // the working directory: bfd, or a directory opened beneath it
	extra         []*os.File
}

// openBeneath opens dir, a directory at or below the boundary, beneath the
// boundary's descriptor; nil if it cannot. It is closed with w.
func (w *workdir) openBeneath(dir string) *os.File {
	if !policy.Within(w.boundary, dir) {
		return nil
	}
	r, err := os.OpenRoot(procPath(w.bfd))
	if err != nil {
		return nil
	}
	defer r.Close()
	f, err := r.OpenFile(relTo(w.boundary, dir), os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil
	}
	w.extra = append(w.extra, f)
	return f
}

// reopenDir opens d, an open directory, again: openat of "." beneath it,
// the very directory d is, as a file of its own (close-on-exec, its own
// offset: not a dup, which would share it).
func reopenDir(d *os.File) (*os.File, error) {
	rc, err := d.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd := -1
	var oerr error
	if err := rc.Control(func(fd uintptr) {
		nfd, oerr = unix.Openat(int(fd), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}); err != nil {
		return nil, err
	}
	if oerr != nil {
		return nil, &fs.PathError{Op: "openat", Path: d.Name(), Err: oerr}
	}
	return os.NewFile(uintptr(nfd), d.Name()), nil
}

// pipe makes a pipe for a child's stdio. Our end (the read end with
// oursReads, else the write end) is non-blocking and registered with Go's
// poller; the child's end is neither. os.Pipe registers both ends, and
// os/exec then sets the child's end back to blocking: on a path taken for
// every stream of every command, a handful of system calls for nothing.
func pipe(oursReads bool) (ours, theirs *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	o, t := p[0], p[1]
	if !oursReads {
		o, t = t, o
	}
	// F_SETFL 0 clears O_NONBLOCK: the child's stdio blocks, as a
	// program expects (the access mode is not changed by F_SETFL).
	if _, err := unix.FcntlInt(uintptr(t), unix.F_SETFL, 0); err != nil {
		unix.Close(o)
		unix.Close(t)
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(o), "|0"), os.NewFile(uintptr(t), "|1"), nil
}

// close releases the descriptors. The child has its own copies by then.
func (w *workdir) close() {
	for _, f := range w.extra {
		f.Close()
	}
	w.extra = nil
	if w.dfd != nil && w.dfd != w.bfd {
		w.dfd.Close()
	}
	if w.bfd != nil {
		w.bfd.Close()
	}
}

// procPath is the name under which a child process reaches f while it still
// shares our descriptor table's copy (before exec).
func procPath(f *os.File) string {
	return "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
}

// openWorkdir opens the boundary and the working directory of a request
// whose names prepare has checked. The boundary comes from req.Workspace
// when set (the file door's own handle), else from beneath the executor's
// root handle; the working directory is opened beneath the boundary's
// descriptor. Both must be directories.
func (e *executor) openWorkdir(req *Request, dir, boundary string) (*workdir, error) {
	wd := &workdir{boundary: boundary, dir: dir}
	var err error
	known := false // wd.bfd is known to be a directory
	switch {
	case req.Workspace != nil:
		wd.bfd, err = req.Workspace.OpenDir()
	case boundary == e.root:
		// The directory rootH holds, open since New, opened again from
		// its descriptor: one system call where an open beneath rootH
		// takes several.
		wd.bfd, err = reopenDir(e.rootDir)
		known = true
	default:
		// O_DIRECTORY: a FIFO by that name must not block us.
		wd.bfd, err = e.rootH.OpenFile(relTo(e.root, boundary), os.O_RDONLY|syscall.O_DIRECTORY, 0)
	}
	if errors.Is(err, fs.ErrClosed) {
		return nil, errClosed() // Close ran: the root handle is gone
	}
	if err != nil {
		return nil, dirError(boundary, err)
	}
	if !known {
		if err := isDir(wd.bfd, boundary); err != nil {
			wd.close()
			return nil, err
		}
	}
	wd.dfd = wd.bfd
	if dir != boundary {
		r, err := os.OpenRoot(procPath(wd.bfd))
		if err == nil {
			wd.dfd, err = r.OpenFile(relTo(boundary, dir), os.O_RDONLY|syscall.O_DIRECTORY, 0)
			r.Close()
		}
		if err != nil {
			wd.dfd = nil
			wd.close()
			return nil, dirError(dir, err)
		}
		if err := isDir(wd.dfd, dir); err != nil {
			wd.close()
			return nil, err
		}
	}
	return wd, nil
}

func isDir(f *os.File, name string) error {
	fi, err := f.Stat()
	if err != nil {
		return dirError(name, err)
	}
	if !fi.IsDir() {
		return dirError(name, syscall.ENOTDIR)
	}
	return nil
}

// dirError says why a working directory cannot be used. A symlink that
// leads out of the workspace is an escape; anything else means there is no
// usable directory by that name.
func dirError(name string, err error) error {
	var ce *errcode.Error
	if errors.As(err, &ce) {
		if ce.Code == errcode.PathEscapeAttempt {
			return &errcode.Error{Code: errcode.PathEscapeAttempt, Op: "exec", Path: name, Msg: "working directory leads out of the workspace", Err: err}
		}
		return &errcode.Error{Code: errcode.NotFound, Op: "exec", Path: name, Msg: "working directory does not exist", Err: err}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err.Error() == "path escapes from parent" {
		return &errcode.Error{Code: errcode.PathEscapeAttempt, Op: "exec", Path: name, Msg: "working directory leads out of the workspace", Err: err}
	}
	return &errcode.Error{Code: errcode.NotFound, Op: "exec", Path: name, Msg: "working directory does not exist", Err: err}
}

// relTo is p relative to base, both clean and absolute with p at or below
// base ("." for base itself).
func relTo(base, p string) string {
	if p == base {
		return "."
	}
	if base == "/" {
		return p[1:]
	}
	return p[len(base)+1:]
}
