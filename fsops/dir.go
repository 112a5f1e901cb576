package fsops

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// The directory workspace is split by concern: this file has its lifecycle
// and scopes; dir_links.go the absolute-link fallback every access takes
// (inRoot); dir_read.go the reads; dir_write.go the writes; dir_posix.go the
// POSIX primitives of the SFTP server.

// DefaultMaxReadSize is the default Options.MaxReadSize (10 MiB).
const DefaultMaxReadSize = 10 << 20

// Options configure a Workspace.
type Options struct {
	// MaxReadSize caps whole-file reads (ReadFile, Edit); larger files fail
	// with errcode.TooLarge and must be paged with ReadLines. 0 means
	// DefaultMaxReadSize; a negative value means no limit.
	MaxReadSize int64
	// Fsync makes writes durable before they return (durable.go): file
	// data and the directory entries a write changed are fsynced. Scopes
	// inherit it.
	Fsync bool
	// Owner, when set, is given every file, directory and symlink the
	// workspace creates, and a file it replaces whole keeps its owner
	// (owner.go): a root daemon's --run-as user, so that its commands can
	// change what the file tools made. Scopes inherit it; the memory
	// workspace has no owners.
	Owner *Owner
}

func (o Options) maxRead() int64 {
	switch {
	case o.MaxReadSize == 0:
		return DefaultMaxReadSize
	case o.MaxReadSize < 0:
		return 1<<63 - 1
	}
	return o.MaxReadSize
}

// dirWS is the directory implementation. Every access goes through one
// *os.Root per workspace (opened once, shared by all goroutines), so the kernel
// resolves each path component relative to an open directory and refuses a
// symlink that leads out: there is no check-then-use window to race.
type dirWS struct {
	root  string // absolute real path of this workspace (a scope: parent.root/scopeRel)
	alias string // the root as the caller spelled it, if it differs (symlinked root)
	opts  Options

	parent   *dirWS // set for scopes
	scopeRel string // the scope's path inside parent

	r        atomic.Pointer[os.Root] // nil until a scope's directory is opened
	dirf     atomic.Pointer[dirFD]   // the same directory as an fd, for the openat2 read path
	mu       sync.Mutex              // serialises opening / creating a scope's directory
	closed   atomic.Bool
	creates  atomic.Int32 // how many times this scope created its directory (tests)
	children sync.Map     // *dirWS scopes to close with this workspace
}

// NewDir returns a Workspace rooted at the existing directory root, which must
// be absolute. Symlinks in root itself are resolved once, so Root() is the real
// path; absolute client paths spelled with the original root are still
// recognised as inside. Close releases the directory handle.
func NewDir(root string, opts Options) (Workspace, error) {
	if !filepath.IsAbs(root) {
		return nil, errcode.New(errcode.InvalidConfiguration, "open", root, "workspace root must be an absolute path")
	}
	given := filepath.Clean(root)
	real, err := filepath.EvalSymlinks(given)
	if err != nil {
		return nil, mapErr(opOpen, root, err)
	}
	if fi, err := os.Stat(real); err != nil {
		return nil, mapErr(opOpen, root, err)
	} else if !fi.IsDir() {
		return nil, errcode.New(errcode.NotADirectory, "open", root, "workspace root is not a directory")
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, mapErr(opOpen, root, err)
	}
	w := &dirWS{root: real, opts: opts}
	if given != real {
		w.alias = given
	}
	w.r.Store(r)
	w.dirf.Store(openDirFD(r))
	return w, nil
}

func (w *dirWS) Root() string { return w.root }

func (w *dirWS) OpenDir() (*os.File, error) {
	r, err := w.handle(false)
	if err != nil {
		return nil, mapErr(opOpen, ".", err)
	}
	if f := w.reopenDirFD(); f != nil {
		// The directory the handle holds, opened again from its open
		// descriptor: one system call where an open through the handle
		// takes several (exec opens it for every command).
		return f, nil
	}
	f, err := r.Open(".")
	if err != nil {
		return nil, mapErr(opOpen, ".", err)
	}
	return f, nil
}

// Close releases the directory handle of this workspace and of every scope
// made from it. It is idempotent; later calls on the workspace fail.
func (w *dirWS) Close() error {
	if w.closed.Swap(true) {
		return nil
	}
	if w.parent != nil {
		w.parent.children.Delete(w)
	}
	w.children.Range(func(k, _ any) bool {
		k.(*dirWS).Close()
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := w.dirf.Swap(nil); d != nil {
		d.close() // the fd is closed once no read holds it (RawConn refcount)
	}
	if r := w.r.Swap(nil); r != nil {
		return r.Close()
	}
	return nil
}

// rel resolves a client path to a path relative to this workspace.
func (w *dirWS) rel(p string) (string, error) {
	if w.alias != "" && len(p) > 0 && p[0] == '/' {
		// A client that knows the root by its symlinked name.
		if c := path.Clean(p); within(w.alias, c) {
			p = w.root + c[len(w.alias):]
		}
	}
	return resolveRel(w.root, p)
}

func (w *dirWS) Resolve(p string) (string, error) {
	rel, err := w.rel(p)
	if err != nil {
		return "", err
	}
	// Check the symlinks on the way: the existing part of the path must stay
	// inside (a missing tail is fine, it may be about to be created).
	if rel != "." {
		r, err := w.handle(false)
		if err != nil && !isNotExist(err) {
			return "", mapErr(opResolve, p, err)
		}
		if err == nil {
			if err := w.checkLinks(r, rel); err != nil {
				return "", mapErr(opResolve, p, err)
			}
		}
	}
	if rel == "." {
		return w.root, nil
	}
	return w.root + "/" + rel, nil
}
func (w *dirWS) Rel(p string) (string, error) {
	abs, err := w.Resolve(p)
	if err != nil {
		return "", err
	}
	return relTo(w.root, abs), nil
}

func (w *dirWS) Scope(p string) (Workspace, error) {
	rel, err := w.rel(p)
	if err != nil {
		return nil, err
	}
	if w.closed.Load() {
		return nil, errClosed("scope", p)
	}
	// Even the scope "." is a workspace of its own (with its own handle), so
	// closing it never closes the parent.
	s := &dirWS{root: path.Join(w.root, rel), opts: w.opts, parent: w, scopeRel: rel}
	w.children.Store(s, struct{}{})
	return s, nil
}

func errClosed(op, p string) error {
	return &errcode.Error{Code: errcode.ConnectionClosed, Op: op, Path: p, Msg: "workspace is closed", Err: fs.ErrClosed}
}

// handle returns this workspace's *os.Root. A scope opens its directory on
// first use; with create (every write) it first creates it, once: concurrent
// first writers wait on mu and find the directory already open.
func (w *dirWS) handle(create bool) (*os.Root, error) {
	if r := w.r.Load(); r != nil {
		return r, nil
	}
	if w.closed.Load() || w.parent == nil {
		return nil, errClosed("open", ".")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.r.Load(); r != nil {
		return r, nil
	}
	if w.closed.Load() {
		return nil, errClosed("open", ".")
	}
	pr, err := w.parent.handle(create)
	if err != nil {
		return nil, err
	}
	r, err := w.openIn(pr, w.scopeRel)
	if err != nil && create && isNotExist(err) {
		w.creates.Add(1)
		if err = w.parent.mkdirAll(pr, w.scopeRel); err != nil {
			return nil, err
		}
		r, err = w.openIn(pr, w.scopeRel)
	}
	if err != nil {
		return nil, err
	}
	w.dirf.Store(openDirFD(r))
	w.r.Store(r)
	return r, nil
}

// openIn opens the scope directory inside its parent's root, taking the
// absolute-symlink fallback like every other access.
func (w *dirWS) openIn(pr *os.Root, rel string) (*os.Root, error) {
	return inRoot(w.parent, pr, rel, true, (*os.Root).OpenRoot)
}

// mkdirAll creates rel and its missing parents, taking the fallback.
func (w *dirWS) mkdirAll(r *os.Root, rel string) error {
	_, err := inRoot(w, r, rel, true, func(r *os.Root, rel string) (struct{}, error) {
		return struct{}{}, w.mkdirs(r, rel)
	})
	return err
}

// infoFrom converts an fs.FileInfo (from os.Root) into an Info.
func infoFrom(rel string, fi fs.FileInfo) Info {
	info := Info{Name: fi.Name(), Path: rel, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
	if rel == "." {
		info.Name = "."
	} else {
		info.Name = path.Base(rel)
	}
	sysInfo(&info, fi)
	return info
}

// infoFromStat converts a raw stat (from fstatat) into an Info.
func infoFromStat(name, rel string, st *unix.Stat_t) Info {
	return Info{
		Name: name, Path: rel, Size: st.Size, Mode: unixMode(uint32(st.Mode)),
		ModTime:    time.Unix(int64(st.Mtim.Sec), int64(st.Mtim.Nsec)),
		AccessTime: time.Unix(int64(st.Atim.Sec), int64(st.Atim.Nsec)),
		ChangeTime: time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec)),
		UID:        st.Uid, GID: st.Gid, Nlink: uint64(st.Nlink),
		dev: uint64(st.Dev), ino: uint64(st.Ino),
	}
}

// unixMode converts st_mode bits into an fs.FileMode.
func unixMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
