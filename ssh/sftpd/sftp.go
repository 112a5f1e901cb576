package sftpd

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// sftpHandlers are the SFTP operations on a Workspace, one method per
// decision, called by the SFTP server (server.go) with paths already
// cleaned: every file operation goes through fsops, which resolves and
// confines the path.
//
// Paths. The server cleans every path lexically against the start
// directory "/" before a handler sees it, so the SFTP view is chrooted at the
// workspace, exactly like OpenSSH's ChrootDirectory: "/" is the workspace
// root and ".." cannot climb above it ("../../etc/passwd" is
// "<root>/etc/passwd"). The cleaned path then goes to the Workspace as a
// client path, under the rules of docs/protocol.md: the absolute host paths the
// agent-backend clients send ("<root>/a/b") name what they say, other
// absolute paths are taken relative to the root. Symlinks are the
// Workspace's business: one whose target leaves the workspace is refused
// with PathEscapeAttempt, which we report as PERMISSION_DENIED.
//
// Every error a handler returns is a statusError (sftpErr), carrying the
// status code it is answered with.
type sftpHandlers struct {
	ws fsops.Workspace
}

func newSFTPHandlers(ws fsops.Workspace) *sftpHandlers { return &sftpHandlers{ws: ws} }

// sftpFile is an open file handle's file.
type sftpFile interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
}

// open serves OPEN. pflags say how: any of WRITE, APPEND, CREAT or TRUNC
// opens for writing (and reading too with READ; pkg/sftp's Client.Create
// does this), READ alone for reading; neither is refused. Reads stream with
// ReadAt straight from the file, so a large download is never loaded.
func (h *sftpHandlers) open(p string, pflags uint32) (sftpFile, error) {
	if pflags&(fxfWrite|fxfAppend|fxfCreat|fxfTrunc) == 0 {
		if pflags&fxfRead == 0 {
			return nil, statusError{stFailure, "bad file flags"}
		}
		f, err := h.ws.OpenFile(p, os.O_RDONLY, 0)
		if err != nil {
			return nil, sftpErr(err)
		}
		return errFile{f}, nil
	}
	flag := os.O_WRONLY
	if pflags&fxfRead != 0 {
		flag = os.O_RDWR
	}
	if pflags&fxfCreat != 0 {
		flag |= os.O_CREATE
	}
	if pflags&fxfTrunc != 0 {
		flag |= os.O_TRUNC
	}
	if pflags&fxfExcl != 0 {
		flag |= os.O_EXCL
	}
	// New files are 0644. The mode a client may send with OPEN is ignored,
	// as pkg/sftp's request server ignores it (it cannot decode it);
	// OpenSSH's sftp sets the mode afterwards with SETSTAT when it matters.
	perm := fs.FileMode(0o644)
	// APPEND is not passed down as O_APPEND: Go refuses WriteAt on an
	// O_APPEND file, and SFTP writes at offsets. appendFile puts every
	// write at the current end instead, which is what sshd's sftp-server
	// (and POSIX O_APPEND) do whatever offset the client sent.
	f, err := h.ws.OpenFile(p, flag, perm)
	if err != nil {
		return nil, sftpErr(err)
	}
	if pflags&fxfAppend != 0 {
		return appendFile{errFile{f}}, nil
	}
	return errFile{f}, nil
}

// errFile maps the errors of an open file to SFTP statuses, keeping io.EOF
// as is (READ past the end must answer SSH_FX_EOF).
type errFile struct{ f fsops.File }

func (e errFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := e.f.ReadAt(p, off)
	if err != nil && err != io.EOF {
		err = sftpErr(err)
	}
	return n, err
}

func (e errFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := e.f.WriteAt(p, off)
	return n, sftpErr(err)
}

func (e errFile) Close() error { return sftpErr(e.f.Close()) }

// appendFile writes at the end. A session's requests are served one at a
// time, so the size cannot change between Stat and WriteAt through this
// session.
type appendFile struct{ errFile }

func (a appendFile) WriteAt(p []byte, _ int64) (int, error) {
	st, err := a.f.Stat()
	if err != nil {
		return 0, sftpErr(err)
	}
	return a.errFile.WriteAt(p, st.Size)
}

// rename serves RENAME and posix-rename@openssh.com.
//
// SFTP v3 says RENAME fails when the target exists, and sshd's sftp-server
// does so. The reference daemon replaces the target (fs.rename), and the
// agent-backend clients' rename() relies on that, so we replace too;
// posix-rename is the same operation.
func (h *sftpHandlers) rename(src, dst string) error {
	return sftpErr(h.ws.Rename(src, dst))
}

// mkdir serves MKDIR. Its attributes are ignored; the Workspace's default
// mode applies.
func (h *sftpHandlers) mkdir(p string) error { return sftpErr(h.ws.Mkdir(p, false)) }

// remove serves REMOVE, which is unlink: directories need RMDIR.
func (h *sftpHandlers) remove(p string) error {
	info, err := h.ws.Lstat(p)
	if err != nil {
		return sftpErr(err)
	}
	if info.IsDir() {
		return statusError{stFailure, "remove " + quote(p) + ": is a directory (use rmdir)"}
	}
	return sftpErr(h.ws.Remove(p, fsops.RemoveOptions{}))
}

// symlink serves SYMLINK. target is the link's content, raw (it is data,
// not a path to clean); link is the new link's cleaned path. OpenSSH sends
// SYMLINK's two paths in the reverse of the draft's order; the server
// decodes them as OpenSSH (and pkg/sftp) do, so target is the first.
func (h *sftpHandlers) symlink(target, link string) error {
	return sftpErr(h.ws.Symlink(target, link))
}

// link serves hardlink@openssh.com.
func (h *sftpHandlers) link() error {
	return statusError{stOpUnsupported, "hard links are not supported"}
}

// setstat serves SETSTAT and FSETSTAT (on the handle's path).
func (h *sftpHandlers) setstat(p string, a sftpAttrs) error {
	if a.flags&attrSize != 0 {
		if err := h.ws.Truncate(p, int64(a.size)); err != nil {
			return sftpErr(err)
		}
	}
	if a.flags&attrPermissions != 0 {
		if err := h.ws.Chmod(p, fs.FileMode(a.perm)&fs.ModePerm); err != nil {
			return sftpErr(err)
		}
	}
	if a.flags&attrACModTime != 0 {
		if err := h.ws.Chtimes(p, time.Unix(int64(a.atime), 0), time.Unix(int64(a.mtime), 0)); err != nil {
			return sftpErr(err)
		}
	}
	// UidGid is ignored, as the reference does: ownership inside the
	// workspace is the workspace's to give (the daemon's, or under --run-as
	// that user's for what it creates, fsops/owner.go), and `sftp put -p`
	// sends it on every upload.
	return nil
}

// rmdir serves RMDIR: an empty directory is removed; a file or the root is
// refused.
func (h *sftpHandlers) rmdir(p string) error {
	info, err := h.ws.Lstat(p)
	if err != nil {
		return sftpErr(err)
	}
	if !info.IsDir() {
		return statusError{stFailure, "rmdir " + quote(p) + ": not a directory"}
	}
	if rel, err := h.ws.Rel(p); err == nil && rel == "." {
		return statusError{stPermissionDenied, "rmdir " + quote(p) + ": the workspace root cannot be removed"}
	}
	// Not recursive: a non-empty directory fails (ENOTEMPTY) and nothing
	// is removed.
	return sftpErr(h.ws.Remove(p, fsops.RemoveOptions{}))
}

// statVFS serves statvfs@openssh.com (`df` in OpenSSH's sftp).
func (h *sftpHandlers) statVFS(p string) (fsops.FSStats, error) {
	if _, err := h.ws.Stat(p); err != nil {
		return fsops.FSStats{}, sftpErr(err)
	}
	st, err := h.ws.StatFS()
	if err != nil {
		return fsops.FSStats{}, sftpErr(err)
	}
	return st, nil
}

// list serves OPENDIR: the entries, sorted by name, without "." and "..".
func (h *sftpHandlers) list(p string) ([]fsops.Info, error) {
	infos, err := h.ws.ReadDir(p)
	return infos, sftpErr(err)
}

// stat serves STAT and FSTAT (on the handle's path): a final symlink is
// followed if it stays inside.
func (h *sftpHandlers) stat(p string) (fsops.Info, error) {
	info, err := h.ws.Stat(p)
	return info, sftpErr(err)
}

// lstat serves LSTAT: a final symlink is described, not followed.
func (h *sftpHandlers) lstat(p string) (fsops.Info, error) {
	info, err := h.ws.Lstat(p)
	return info, sftpErr(err)
}

// readlink returns a link's target as the workspace reports it.
func (h *sftpHandlers) readlink(p string) (string, error) {
	target, err := h.ws.Readlink(p)
	return target, sftpErr(err)
}

// realPath canonicalizes a path in the SFTP view: "/" is the workspace root,
// so OpenSSH's sftp starts there and shows workspace-relative paths, as the
// reference daemon does. The path need not exist (clients realpath a
// destination before creating it), but it must stay inside the workspace.
// It gets the path as the client sent it.
func (h *sftpHandlers) realPath(p string) (string, error) {
	if p == "" {
		p = "."
	}
	if !path.IsAbs(p) {
		p = "/" + p
	}
	rel, err := h.ws.Rel(path.Clean(p))
	if err != nil {
		return "", sftpErr(err)
	}
	if rel == "." {
		return "/", nil
	}
	return "/" + rel, nil
}

// statusError is an error with the SFTP status it must be reported as.
// The server answers STATUS code with Error() as the message.
type statusError struct {
	code uint32 // stNoSuchFile, stFailure, ...
	msg  string
}

func (e statusError) Error() string { return e.msg }

// sftpErr maps a workspace error to its SFTP status, once, for every
// handler: missing → NO_SUCH_FILE; escape or permission → PERMISSION_DENIED;
// unsupported → OP_UNSUPPORTED; everything else FAILURE. The message is the
// workspace error's Sentence: the fact, the path the client gave, the hint.
func sftpErr(err error) error {
	if err == nil {
		return nil
	}
	var se statusError
	if errors.As(err, &se) {
		return err
	}
	var status uint32 = stFailure
	switch errcode.Of(err) {
	case errcode.NotFound:
		status = stNoSuchFile
	case errcode.PathEscapeAttempt, errcode.PermissionDenied:
		status = stPermissionDenied
	case errcode.NotImplemented:
		status = stOpUnsupported
	default:
		switch {
		case errors.Is(err, fs.ErrNotExist):
			status = stNoSuchFile
		case errors.Is(err, fs.ErrPermission):
			status = stPermissionDenied
		}
	}
	return statusError{status, errcode.Sentence(err)}
}

func quote(p string) string { return `"` + p + `"` }
