package sshws

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"time"

	"github.com/pkg/sftp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// sftpHandlers serve pkg/sftp's request server from a Workspace: every file
// operation goes through fsops, which resolves and confines the path.
//
// Paths. The request server cleans every path lexically against the start
// directory "/" before a handler sees it, so the SFTP view is chrooted at the
// workspace, exactly like OpenSSH's ChrootDirectory: "/" is the workspace
// root and ".." cannot climb above it ("../../etc/passwd" is
// "<root>/etc/passwd"). The cleaned path then goes to the Workspace as a
// client path, under the rules of PROTOCOL.md: the absolute host paths the
// agent-backend clients send ("<root>/a/b") name what they say, other
// absolute paths are taken relative to the root. Symlinks are the
// Workspace's business: one whose target leaves the workspace is refused
// with PathEscapeAttempt, which we report as PERMISSION_DENIED.
type sftpHandlers struct {
	ws fsops.Workspace
}

func newSFTPHandlers(ws fsops.Workspace) *sftpHandlers { return &sftpHandlers{ws: ws} }

func (h *sftpHandlers) handlers() sftp.Handlers {
	return sftp.Handlers{FileGet: h, FilePut: h, FileCmd: h, FileList: h}
}

// The optional interfaces that unlock read-write handles, posix-rename,
// statvfs, lstat, readlink and realpath.
var (
	_ sftp.OpenFileWriter       = (*sftpHandlers)(nil)
	_ sftp.PosixRenameFileCmder = (*sftpHandlers)(nil)
	_ sftp.StatVFSFileCmder     = (*sftpHandlers)(nil)
	_ sftp.LstatFileLister      = (*sftpHandlers)(nil)
	_ sftp.ReadlinkFileLister   = (*sftpHandlers)(nil)
	_ sftp.RealPathFileLister   = (*sftpHandlers)(nil)
)

// Fileread opens a file for reading. The handle reads with ReadAt straight
// from the file, so a large download is streamed, never loaded.
func (h *sftpHandlers) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	f, err := h.ws.OpenFile(r.Filepath, os.O_RDONLY, 0)
	if err != nil {
		return nil, sftpErr(err)
	}
	return errFile{f}, nil
}

// Filewrite opens a file for writing (OPEN with WRITE, CREAT, TRUNC, APPEND
// or EXCL, without READ).
func (h *sftpHandlers) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	return h.open(r)
}

// OpenFile opens a file for reading and writing (OPEN with READ and a write
// flag; pkg/sftp's Client.Create does this).
func (h *sftpHandlers) OpenFile(r *sftp.Request) (sftp.WriterAtReaderAt, error) {
	return h.open(r)
}

func (h *sftpHandlers) open(r *sftp.Request) (sftp.WriterAtReaderAt, error) {
	pf := r.Pflags()
	flag := os.O_WRONLY
	if pf.Read {
		flag = os.O_RDWR
	}
	if pf.Creat {
		flag |= os.O_CREATE
	}
	if pf.Trunc {
		flag |= os.O_TRUNC
	}
	if pf.Excl {
		flag |= os.O_EXCL
	}
	// New files are 0644. The mode a client may send with OPEN is not
	// available: pkg/sftp keeps the open flags in Request.Flags, where the
	// attribute flags would be, so the attributes cannot be decoded.
	// OpenSSH's sftp sets the mode afterwards with SETSTAT when it matters.
	perm := fs.FileMode(0o644)
	// APPEND is not passed down as O_APPEND: Go refuses WriteAt on an
	// O_APPEND file, and pkg/sftp writes only through WriteAt. appendFile
	// puts every write at the current end instead, which is what sshd's
	// sftp-server (and POSIX O_APPEND) do whatever offset the client sent.
	f, err := h.ws.OpenFile(r.Filepath, flag, perm)
	if err != nil {
		return nil, sftpErr(err)
	}
	if pf.Append {
		return &appendFile{errFile: errFile{f}}, nil
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

type appendFile struct {
	errFile
	mu sync.Mutex
}

func (a *appendFile) WriteAt(p []byte, _ int64) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, err := a.f.Stat()
	if err != nil {
		return 0, sftpErr(err)
	}
	return a.errFile.WriteAt(p, st.Size)
}

// Filecmd serves the requests that answer with a status only.
func (h *sftpHandlers) Filecmd(r *sftp.Request) error {
	switch r.Method {
	case "Setstat":
		return sftpErr(h.setstat(r))
	case "Rename":
		// SFTP v3 says RENAME fails when the target exists, and sshd's
		// sftp-server does so. The reference daemon replaces the target
		// (fs.rename), and the agent-backend clients' rename() relies on
		// that, so we replace too; posix-rename is the same operation.
		return sftpErr(h.ws.Rename(r.Filepath, r.Target))
	case "Rmdir":
		return sftpErr(h.rmdir(r.Filepath))
	case "Mkdir":
		// MKDIR's attributes are dropped by pkg/sftp; the Workspace's
		// default mode applies.
		return sftpErr(h.ws.Mkdir(r.Filepath, false))
	case "Remove":
		// REMOVE is unlink: directories need RMDIR.
		info, err := h.ws.Lstat(r.Filepath)
		if err != nil {
			return sftpErr(err)
		}
		if info.IsDir() {
			return statusError{sftp.ErrSSHFxFailure, "remove " + quote(r.Filepath) + ": is a directory (use rmdir)"}
		}
		return sftpErr(h.ws.Remove(r.Filepath, fsops.RemoveOptions{}))
	case "Symlink":
		// pkg/sftp passes the link's target raw in Filepath (it is data, not
		// a path to clean) and the new link in Target.
		return sftpErr(h.ws.Symlink(r.Filepath, r.Target))
	case "Link":
		return statusError{sftp.ErrSSHFxOpUnsupported, "hard links are not supported"}
	}
	return statusError{sftp.ErrSSHFxOpUnsupported, "unsupported request " + r.Method}
}

func (h *sftpHandlers) setstat(r *sftp.Request) error {
	flags, attrs := r.AttrFlags(), r.Attributes()
	if flags.Size {
		if err := h.ws.Truncate(r.Filepath, int64(attrs.Size)); err != nil {
			return err
		}
	}
	if flags.Permissions {
		if err := h.ws.Chmod(r.Filepath, fs.FileMode(attrs.Mode)&fs.ModePerm); err != nil {
			return err
		}
	}
	if flags.Acmodtime {
		if err := h.ws.Chtimes(r.Filepath, time.Unix(int64(attrs.Atime), 0), time.Unix(int64(attrs.Mtime), 0)); err != nil {
			return err
		}
	}
	// UidGid is ignored, as the reference does: ownership inside the
	// workspace is the daemon's, and `sftp put -p` sends it on every upload.
	return nil
}

// rmdir removes an empty directory; a file or the root is refused.
func (h *sftpHandlers) rmdir(p string) error {
	info, err := h.ws.Lstat(p)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return statusError{sftp.ErrSSHFxFailure, "rmdir " + quote(p) + ": not a directory"}
	}
	if rel, err := h.ws.Rel(p); err == nil && rel == "." {
		return statusError{sftp.ErrSSHFxPermissionDenied, "rmdir " + quote(p) + ": the workspace root cannot be removed"}
	}
	// Not recursive: a non-empty directory fails (ENOTEMPTY) and nothing
	// is removed.
	return h.ws.Remove(p, fsops.RemoveOptions{})
}

// PosixRename is posix-rename@openssh.com: rename replacing the target.
func (h *sftpHandlers) PosixRename(r *sftp.Request) error {
	return sftpErr(h.ws.Rename(r.Filepath, r.Target))
}

// StatVFS is statvfs@openssh.com (`df` in OpenSSH's sftp).
func (h *sftpHandlers) StatVFS(r *sftp.Request) (*sftp.StatVFS, error) {
	if _, err := h.ws.Stat(r.Filepath); err != nil {
		return nil, sftpErr(err)
	}
	st, err := h.ws.StatFS()
	if err != nil {
		return nil, sftpErr(err)
	}
	return &sftp.StatVFS{
		Bsize: st.BlockSize, Frsize: st.FragmentSize,
		Blocks: st.Blocks, Bfree: st.BlocksFree, Bavail: st.BlocksAvail,
		Files: st.Files, Ffree: st.FilesFree, Favail: st.FilesAvail,
		Namemax: st.NameMax,
	}, nil
}

// Filelist serves OPENDIR (List) and STAT.
func (h *sftpHandlers) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	switch r.Method {
	case "List":
		infos, err := h.ws.ReadDir(r.Filepath)
		if err != nil {
			return nil, sftpErr(err)
		}
		l := make(lister, len(infos))
		for i, info := range infos {
			l[i] = fileInfo{info}
		}
		return l, nil
	case "Stat":
		info, err := h.ws.Stat(r.Filepath)
		if err != nil {
			return nil, sftpErr(err)
		}
		return lister{fileInfo{info}}, nil
	}
	return nil, statusError{sftp.ErrSSHFxOpUnsupported, "unsupported request " + r.Method}
}

// Lstat serves LSTAT: a final symlink is described, not followed.
func (h *sftpHandlers) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	info, err := h.ws.Lstat(r.Filepath)
	if err != nil {
		return nil, sftpErr(err)
	}
	return lister{fileInfo{info}}, nil
}

// Readlink returns a link's target as the workspace reports it.
func (h *sftpHandlers) Readlink(p string) (string, error) {
	target, err := h.ws.Readlink(p)
	return target, sftpErr(err)
}

// RealPath canonicalizes a path in the SFTP view: "/" is the workspace root,
// so OpenSSH's sftp starts there and shows workspace-relative paths, as the
// reference daemon does. The path need not exist (clients realpath a
// destination before creating it), but it must stay inside the workspace.
func (h *sftpHandlers) RealPath(p string) (string, error) {
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

// lister is a fixed list of entries for READDIR and the STAT family.
type lister []os.FileInfo

func (l lister) ListAt(out []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(out, l[off:])
	if off+int64(n) >= int64(len(l)) {
		return n, io.EOF
	}
	return n, nil
}

// fileInfo presents an fsops.Info as the os.FileInfo pkg/sftp encodes,
// with the owner (sftp.FileInfoUidGid) for `ls -l`.
type fileInfo struct{ i fsops.Info }

func (f fileInfo) Name() string       { return f.i.Name }
func (f fileInfo) Size() int64        { return f.i.Size }
func (f fileInfo) Mode() fs.FileMode  { return f.i.Mode }
func (f fileInfo) ModTime() time.Time { return f.i.ModTime }
func (f fileInfo) IsDir() bool        { return f.i.IsDir() }
func (f fileInfo) Sys() any           { return nil }
func (f fileInfo) Uid() uint32        { return f.i.UID }
func (f fileInfo) Gid() uint32        { return f.i.GID }

// statusError is an error with the SFTP status it must be reported as.
// pkg/sftp finds the status with errors.As and sends Error() as the message.
type statusError struct {
	status error // one of sftp.ErrSSHFx*
	msg    string
}

func (e statusError) Error() string { return e.msg }
func (e statusError) Unwrap() error { return e.status }

// sftpErr maps a workspace error to its SFTP status, once, for every
// handler: missing → NO_SUCH_FILE; escape or permission → PERMISSION_DENIED;
// unsupported → OP_UNSUPPORTED; everything else FAILURE. The message is the
// workspace's, which names the operation and the path the client gave.
func sftpErr(err error) error {
	if err == nil {
		return nil
	}
	var se statusError
	if errors.As(err, &se) {
		return err
	}
	status := sftp.ErrSSHFxFailure
	switch errcode.Of(err) {
	case errcode.NotFound:
		status = sftp.ErrSSHFxNoSuchFile
	case errcode.PathEscapeAttempt, errcode.PermissionDenied:
		status = sftp.ErrSSHFxPermissionDenied
	case errcode.NotImplemented:
		status = sftp.ErrSSHFxOpUnsupported
	default:
		switch {
		case errors.Is(err, fs.ErrNotExist):
			status = sftp.ErrSSHFxNoSuchFile
		case errors.Is(err, fs.ErrPermission):
			status = sftp.ErrSSHFxPermissionDenied
		}
	}
	return statusError{status, err.Error()}
}

func quote(p string) string { return `"` + p + `"` }
