package fsops

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// errRootEscape is the (unexported) error os.Root reports when a path or a
// symlink on the way would leave the root. We obtain the very value once so
// errors.Is works; the string comparison is a fallback should that ever fail.
var errRootEscape = func() error {
	r, err := os.OpenRoot("/")
	if err != nil {
		return nil
	}
	defer r.Close()
	_, err = r.Lstat("../x")
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return nil
}()

const rootEscapeText = "path escapes from parent"

// isEscape reports whether err is os.Root's "path escapes" refusal.
func isEscape(err error) bool {
	if err == nil {
		return false
	}
	if errRootEscape != nil && errors.Is(err, errRootEscape) {
		return true
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err != nil && pe.Err.Error() == rootEscapeText
	}
	return err.Error() == rootEscapeText
}

// mapErr turns an error from the os layer into the *errcode.Error every
// Workspace method returns. op is the operation ("read", "write", ...) and p
// the path exactly as the caller gave it. An *errcode.Error passes through.
func mapErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	var ce *errcode.Error
	if errors.As(err, &ce) {
		return err
	}
	if isEscape(err) {
		e := escapeError(op, p)
		e.Err = err
		return e
	}
	e := &errcode.Error{Op: op, Path: p, Err: err}
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		e.Code, e.Msg = errcode.NotFound, "no such file or directory: "+p
	case errors.Is(err, fs.ErrExist), errno == syscall.ENOTEMPTY:
		if errno == syscall.ENOTEMPTY {
			e.Code, e.Msg = errcode.AlreadyExists, "directory not empty: "+p+" (remove it recursively, or pick another name)"
		} else {
			e.Code, e.Msg = errcode.AlreadyExists, "already exists: "+p
		}
	case errno == syscall.ENOTDIR:
		e.Code, e.Msg = errcode.NotADirectory, "not a directory: a component of "+p+" is a file"
	case errno == syscall.EISDIR:
		e.Code, e.Msg = errcode.IsADirectory, "is a directory: "+p
	case errors.Is(err, fs.ErrPermission), errno == syscall.EROFS:
		e.Code, e.Msg = errcode.PermissionDenied, "permission denied: "+p
	case errno == syscall.ELOOP:
		e.Code, e.Msg = errcode.InvalidArgument, "too many levels of symbolic links: "+p
	case errno == syscall.ENAMETOOLONG:
		e.Code, e.Msg = errcode.InvalidArgument, "file name too long: "+p
	case errno == syscall.EINVAL:
		e.Code, e.Msg = errcode.InvalidArgument, "invalid argument: "+p+": "+err.Error()
	case errno == syscall.ENOSPC, errno == syscall.EDQUOT:
		e.Code, e.Msg = errcode.WriteFailed, "no space left on device writing "+p
	default:
		switch op {
		case "read", "readlines", "readdir", "stat", "lstat", "tree", "search", "grep":
			e.Code = errcode.ReadFailed
		default:
			e.Code = errcode.WriteFailed
		}
		e.Msg = op + " failed: " + err.Error()
	}
	return e
}

// notFound is a NotFound error that still satisfies errors.Is(err, fs.ErrNotExist).
func notFound(op, p string) error {
	return &errcode.Error{Code: errcode.NotFound, Op: op, Path: p, Msg: "no such file or directory: " + p, Err: fs.ErrNotExist}
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
