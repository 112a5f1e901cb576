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

// op is a workspace operation as its errors name it (errcode.Error.Op),
// with the code a failure of it carries when the errno says nothing more
// specific: the caller knows whether it reads or writes, mapErr does not
// guess it from the name.
type op struct {
	name string
	fail errcode.Code
}

func readOp(name string) op  { return op{name, errcode.ReadFailed} }
func writeOp(name string) op { return op{name, errcode.WriteFailed} }

// The operations of this package. opOpen is an open for reading (and the
// opening of a workspace or scope directory); opOpenWrite one that may
// create or change the file.
var (
	opOpen      = readOp("open")
	opRead      = readOp("read")
	opReadLines = readOp("readlines")
	opReadDir   = readOp("readdir")
	opStat      = readOp("stat")
	opLstat     = readOp("lstat")
	opReadlink  = readOp("readlink")
	opResolve   = readOp("resolve")
	opStatFS    = readOp("statfs")
	opTree      = readOp("tree")
	opSearch    = readOp("search")
	opGrep      = readOp("grep")

	opOpenWrite = writeOp("open")
	opWrite     = writeOp("write")
	opEdit      = writeOp("edit")
	opMkdir     = writeOp("mkdir")
	opRm        = writeOp("rm")
	opMove      = writeOp("move")
	opRename    = writeOp("rename")
	opTouch     = writeOp("touch")
	opChmod     = writeOp("chmod")
	opChtimes   = writeOp("chtimes")
	opTruncate  = writeOp("truncate")
	opSymlink   = writeOp("symlink")
	opClose     = writeOp("close")
	opSync      = writeOp("sync")
)

// Facts of errors whose MCP tool text names the path inside the sentence
// rather than before the hint; internal/tooltext words them.
const (
	// HintComponentIsFile: ENOTDIR on the way to a path.
	HintComponentIsFile = "a component of the path is a file"
	// HintPathIsFile: the path itself is a file where a directory must be.
	HintPathIsFile = "the path is a file"
	// MsgNoSpace: ENOSPC or EDQUOT while writing.
	MsgNoSpace = "no space left on device"
	// MsgInvalidArgument: EINVAL; the Hint is the system's own text.
	MsgInvalidArgument = "invalid argument"
)

// mapErr turns an error from the os layer into the *errcode.Error every
// Workspace method returns. o is the operation, p the path exactly as the
// caller gave it. An *errcode.Error passes through. The message states the
// fact only: Error() names o and p.
func mapErr(o op, p string, err error) error {
	if err == nil {
		return nil
	}
	var ce *errcode.Error
	if errors.As(err, &ce) {
		return err
	}
	if isEscape(err) {
		e := escapeError(o.name, p)
		e.Err = err
		return e
	}
	e := &errcode.Error{Op: o.name, Path: p, Err: err}
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		e.Code, e.Msg = errcode.NotFound, "no such file or directory"
	case errno == syscall.ENOTEMPTY:
		e.Code, e.Msg, e.Hint = errcode.AlreadyExists, "directory not empty", "remove it recursively, or pick another name"
	case errors.Is(err, fs.ErrExist):
		e.Code, e.Msg = errcode.AlreadyExists, "already exists"
	case errno == syscall.ENOTDIR:
		e.Code, e.Msg, e.Hint = errcode.NotADirectory, "not a directory", HintComponentIsFile
	case errno == syscall.EISDIR:
		e.Code, e.Msg = errcode.IsADirectory, "is a directory"
	case errors.Is(err, fs.ErrPermission), errno == syscall.EROFS:
		e.Code, e.Msg = errcode.PermissionDenied, "permission denied"
	case errno == syscall.ELOOP:
		e.Code, e.Msg = errcode.InvalidArgument, "too many levels of symbolic links"
	case errno == syscall.ENAMETOOLONG:
		e.Code, e.Msg = errcode.InvalidArgument, "file name too long"
	case errno == syscall.EINVAL:
		e.Code, e.Msg, e.Hint = errcode.InvalidArgument, MsgInvalidArgument, sysText(err)
	case errno == syscall.ENOSPC, errno == syscall.EDQUOT:
		e.Code, e.Msg = errcode.WriteFailed, MsgNoSpace
	default:
		e.Code, e.Msg = o.fail, o.name+" failed: "+sysText(err)
	}
	return e
}

// sysText is the os layer's text of err without the path it names: the
// error already names the caller's path, and the os layer's is a host path
// for a file opened through os.Root (its Name is the root's host path
// joined with the file's), which no client may learn from an error (a
// scope-bound token's holder would learn where its scope is on the host).
func sysText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Op + ": " + le.Err.Error()
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Syscall + ": " + se.Err.Error()
	}
	return err.Error()
}

// notFound is a NotFound error that still satisfies errors.Is(err, fs.ErrNotExist).
func notFound(op, p string) error {
	return &errcode.Error{Code: errcode.NotFound, Op: op, Path: p, Msg: "no such file or directory", Err: fs.ErrNotExist}
}

// withOp reports err, a failure of an operation another is built on, as one
// of o: a new *errcode.Error wrapping it (see errcode.Error.WithOp); any
// other error is returned as it is.
func withOp(err error, o op) error {
	var e *errcode.Error
	if errors.As(err, &e) && e.Op != o.name {
		return e.WithOp(o.name)
	}
	return err
}

// hinted is an *errcode.Error with a hint: what to do, or what else is known.
func hinted(code errcode.Code, op, p, msg, hint string) *errcode.Error {
	return &errcode.Error{Code: code, Op: op, Path: p, Msg: msg, Hint: hint}
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
