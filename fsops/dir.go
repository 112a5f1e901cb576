package fsops

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// DefaultMaxReadSize is the default Options.MaxReadSize (10 MiB).
const DefaultMaxReadSize = 10 << 20

// Options configure a Workspace.
type Options struct {
	// MaxReadSize caps whole-file reads (ReadFile, Edit); larger files fail
	// with errcode.TooLarge and must be paged with ReadLines. 0 means
	// DefaultMaxReadSize; a negative value means no limit.
	MaxReadSize int64
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

// maxSymlinks bounds the links the absolute-link fallback follows (as the
// kernel's ELOOP limit does).
const maxSymlinks = 40

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
		return nil, mapErr("open", root, err)
	}
	if fi, err := os.Stat(real); err != nil {
		return nil, mapErr("open", root, err)
	} else if !fi.IsDir() {
		return nil, errcode.New(errcode.NotADirectory, "open", root, "workspace root is not a directory")
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, mapErr("open", root, err)
	}
	w := &dirWS{root: real, opts: opts}
	if given != real {
		w.alias = given
	}
	w.r.Store(r)
	w.dirf.Store(openDirFD(r))
	return w, nil
}

func (w *dirWS) Root() string  { return w.root }
func (w *dirWS) CanExec() bool { return true }

func (w *dirWS) OpenDir() (*os.File, error) {
	r, err := w.handle(false)
	if err != nil {
		return nil, mapErr("open", ".", err)
	}
	f, err := r.Open(".")
	if err != nil {
		return nil, mapErr("open", ".", err)
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
			return "", mapErr("resolve", p, err)
		}
		if err == nil {
			if err := w.checkLinks(r, rel); err != nil {
				return "", mapErr("resolve", p, err)
			}
		}
	}
	if rel == "." {
		return w.root, nil
	}
	return w.root + "/" + rel, nil
}

// checkLinks reports an escape if an existing symlink on rel's way, the last
// one included, leads out. One lstat walk in the common case: os.Root follows
// the intermediate links and refuses escaping ones; a final link is checked
// with stat; the hand-resolution is only for absolute links os.Root refuses.
// A missing or otherwise unusable path is not an escape.
func (w *dirWS) checkLinks(r *os.Root, rel string) error {
	if w.linksInsideFast(rel) {
		return nil
	}
	fi, err := r.Lstat(rel)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		_, err = r.Stat(rel)
	}
	if isEscape(err) {
		_, err = w.followLinks(r, rel, true)
		if isEscape(err) {
			return err
		}
	}
	return nil
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
	r, err := pr.OpenRoot(rel)
	if isEscape(err) {
		if rel2, ferr := w.parent.followLinks(pr, rel, true); ferr == nil && rel2 != rel {
			r, err = pr.OpenRoot(rel2)
		}
	}
	return r, err
}

func (w *dirWS) mkdirAll(r *os.Root, rel string) error {
	err := r.MkdirAll(rel, 0o755)
	if isEscape(err) {
		if rel2, ferr := w.followLinks(r, rel, true); ferr == nil && rel2 != rel {
			err = r.MkdirAll(rel2, 0o755)
		} else if ferr != nil {
			err = ferr
		}
	}
	return err
}

// followLinks resolves the symlinks of rel by hand, for the one case os.Root
// refuses although the link stays inside: an absolute target (os.Root never
// follows absolute links). An absolute target inside the workspace becomes the
// equivalent relative path; anything leading out is an escape. The result is
// only a rewritten name: it is opened through os.Root again, so a link swapped
// meanwhile is still confined by the kernel-facing walk. A missing component
// ends the walk (the rest is kept lexically). With followFinal false the last
// component is not followed (lstat semantics).
func (w *dirWS) followLinks(r *os.Root, rel string, followFinal bool) (string, error) {
	if rel == "." {
		return rel, nil
	}
	parts := strings.Split(rel, "/")
	var done []string
	links := 0
	missing := false
	for i := 0; i < len(parts); i++ {
		c := parts[i]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", &fs.PathError{Op: "resolve", Path: rel, Err: errRootEscapeOr()}
			}
			done = done[:len(done)-1]
			continue
		}
		last := i == len(parts)-1
		if missing || (last && !followFinal) {
			done = append(done, c)
			continue
		}
		cand := strings.Join(append(done, c), "/")
		fi, err := r.Lstat(cand)
		if err != nil {
			if isNotExist(err) {
				missing = true
				done = append(done, c)
				continue
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		links++
		if links > maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: rel, Err: syscall.ELOOP}
		}
		target, err := r.Readlink(cand)
		if err != nil {
			return "", err
		}
		rest := parts[i+1:]
		if strings.HasPrefix(target, "/") {
			t := path.Clean(target)
			switch {
			case within(w.root, t):
				t = relTo(w.root, t)
			case w.alias != "" && within(w.alias, t):
				t = relTo(w.alias, t)
			default:
				return "", &fs.PathError{Op: "resolve", Path: rel, Err: errRootEscapeOr()}
			}
			done = done[:0]
			target = t
		}
		parts = append(strings.Split(target, "/"), rest...)
		i = -1
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}

func errRootEscapeOr() error {
	if errRootEscape != nil {
		return errRootEscape
	}
	return errors.New(rootEscapeText)
}

// run calls f with this workspace's root and rel; if os.Root refuses with an
// escape, it retries once with the absolute-link fallback of followLinks.
func (w *dirWS) run(op, p string, create, followFinal bool, f func(r *os.Root, rel string) error) error {
	rel, err := w.rel(p)
	if err != nil {
		return err
	}
	r, err := w.handle(create)
	if err != nil {
		return mapErr(op, p, err)
	}
	err = f(r, rel)
	if isEscape(err) {
		rel2, ferr := w.followLinks(r, rel, followFinal)
		if ferr != nil {
			return mapErr(op, p, ferr)
		}
		if rel2 != rel {
			err = f(r, rel2)
		}
	}
	return mapErr(op, p, err)
}

func (w *dirWS) Stat(p string) (Info, error) { return w.stat("stat", p, true) }

func (w *dirWS) Lstat(p string) (Info, error) { return w.stat("lstat", p, false) }

// stat reports the path as requested (not where links led).
func (w *dirWS) stat(op, p string, follow bool) (Info, error) {
	if rel, err := w.rel(p); err == nil {
		if info, ok := w.statFast(rel, follow); ok {
			return info, nil
		}
	}
	var fi fs.FileInfo
	err := w.run(op, p, false, follow, func(r *os.Root, rel string) error {
		var err error
		if follow {
			fi, err = r.Stat(rel)
		} else {
			fi, err = r.Lstat(rel)
		}
		return err
	})
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

// open opens rel for reading with the escape fallback; it is the hot path of
// ReadFile and ReadLines, so it avoids the closure of run.
func (w *dirWS) open(op, p string) (*os.File, error) {
	rel, err := w.rel(p)
	if err != nil {
		return nil, err
	}
	r, err := w.handle(false)
	if err != nil {
		return nil, mapErr(op, p, err)
	}
	f, err := openRead(r, rel)
	if isEscape(err) {
		rel2, ferr := w.followLinks(r, rel, true)
		if ferr != nil {
			return nil, mapErr(op, p, ferr)
		}
		if rel2 != rel {
			f, err = openRead(r, rel2)
		}
	}
	if err != nil {
		return nil, mapErr(op, p, err)
	}
	return f, nil
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
	return errcode.New(errcode.InvalidArgument, op, p, "not a regular file: %s (FIFOs, sockets and devices cannot be read)", p)
}

// openRegular opens p and checks that it is not a directory.
func (w *dirWS) openRegular(op, p string) (*os.File, int64, error) {
	f, err := w.open(op, p)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, mapErr(op, p, err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, 0, errcode.New(errcode.IsADirectory, op, p, "is a directory: %s (use a directory listing instead)", p)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, errNotRegular(op, p)
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
	f, size, err := w.openRegular("read", p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > max {
		return nil, tooLarge("read", p, size, max)
	}
	data, err := readAllSized(f, size, max)
	if err != nil {
		return nil, mapErr("read", p, err)
	}
	return data, nil
}

var errGrew = errors.New("file grew past the read limit while being read")

// readAllSized reads f, whose fstat size is size, in one allocation when the
// size is right (files in /proc report 0, so it still reads to EOF).
func readAllSized(f io.Reader, size, max int64) ([]byte, error) {
	buf := make([]byte, 0, size+1)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if size > 0 && int64(len(buf)) == size {
			// All fstat promised: the file as it was when opened, without
			// another read to see EOF.
			return buf, nil
		}
		if int64(len(buf)) > max {
			return nil, errGrew
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
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
	f, size, err := w.openRegular("readlines", p)
	if err != nil {
		return Lines{}, err
	}
	defer f.Close()
	if size <= streamThreshold {
		data, err := readAllSized(f, size, streamThreshold*4)
		if err == nil {
			return pageString(bytesToString(data), lr), nil
		}
		if err != errGrew {
			return Lines{}, mapErr("readlines", p, err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return Lines{}, mapErr("readlines", p, err)
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
		return Lines{}, mapErr("readlines", p, err)
	}
	return ls, nil
}

// writeHook, when set (tests only), replaces the write of the temp file's
// content so a test can make WriteFile fail midway.
var writeHook func(f *os.File, data []byte) error

func (w *dirWS) WriteFile(p string, data []byte) error {
	return w.run("write", p, true, true, func(r *os.Root, rel string) error {
		return w.atomicWrite(r, rel, data)
	})
}

// atomicWrite writes data to a temp file next to rel and renames it over rel,
// so readers see the old or the new content, never a mix, and a failure leaves
// the old file. The content is not fsynced: atomic against concurrent readers
// and our own failures, like the reference's writeFile, but not crash-durable.
func (w *dirWS) atomicWrite(r *os.Root, rel string, data []byte) error {
	if rel == "." {
		return &fs.PathError{Op: "write", Path: rel, Err: syscall.EISDIR}
	}
	perm := fs.FileMode(0o644)
	existing := false
	fi, err := r.Lstat(rel)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		// Write through the link (as writeFile does) rather than replace it.
		target, ferr := w.followLinks(r, rel, true)
		if ferr != nil {
			return ferr
		}
		rel = target
		if fi, err = r.Lstat(rel); err == nil {
			existing = true
		} else if !isNotExist(err) {
			return err
		}
	case err == nil:
		existing = true
	case isNotExist(err):
	default:
		return err
	}
	if existing {
		if fi.IsDir() {
			return &fs.PathError{Op: "write", Path: rel, Err: syscall.EISDIR}
		}
		perm = fi.Mode().Perm()
	}
	dir, base := path.Split(rel)
	if dir != "" {
		if err := r.MkdirAll(strings.TrimSuffix(dir, "/"), 0o755); err != nil {
			return err
		}
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	if len(base) > 200 {
		base = base[:200]
	}
	tmp := dir + "." + base + ".agentbe-tmp-" + hex.EncodeToString(rnd[:])
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if existing {
		f.Chmod(perm) // keep the old mode exactly (the umask applied to the create)
	}
	if writeHook != nil {
		err = writeHook(f, data)
	} else {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, rel)
	}
	if err != nil {
		r.Remove(tmp)
	}
	return err
}

func (w *dirWS) Edit(p string, edits []Edit, dryRun bool) (EditResult, error) {
	return editFile(w, p, edits, dryRun)
}

// editFile is Edit for any Workspace: read the whole file (bounded by the
// maximum read size), apply the edits, and write the result atomically
// unless it is a dry run or nothing changed.
func editFile(ws Workspace, p string, edits []Edit, dryRun bool) (EditResult, error) {
	orig, err := ws.ReadFile(p)
	if err != nil {
		return EditResult{}, relabel(err, "edit")
	}
	res, modified, changed, err := applyEdits(p, string(orig), edits, dryRun)
	if err != nil {
		return EditResult{}, err
	}
	if changed && !dryRun {
		if err := ws.WriteFile(p, []byte(modified)); err != nil {
			return EditResult{}, relabel(err, "edit")
		}
	}
	return res, nil
}

// relabel sets the Op of an *errcode.Error (for operations built on others).
func relabel(err error, op string) error {
	var e *errcode.Error
	if errors.As(err, &e) {
		e.Op = op
	}
	return err
}

func (w *dirWS) Mkdir(p string, parents bool) error {
	return w.run("mkdir", p, true, true, func(r *os.Root, rel string) error {
		if parents {
			if rel == "." {
				return nil
			}
			return r.MkdirAll(rel, 0o755)
		}
		return r.Mkdir(rel, 0o755)
	})
}

func (w *dirWS) ReadDir(p string) ([]Info, error) {
	var out []Info
	err := w.run("readdir", p, false, true, func(r *os.Root, rel string) error {
		var err error
		out, err = readDirAt(r, rel)
		return err
	})
	return out, err
}

func (w *dirWS) ReadDirTypes(p string) ([]Info, error) {
	var out []Info
	err := w.run("readdir", p, false, true, func(r *os.Root, rel string) error {
		f, err := openDir(r, rel)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return &fs.PathError{Op: "readdir", Path: rel, Err: syscall.ENOTDIR}
		}
		// Listed through the open directory's fd, typed from d_type: the
		// same confined listing grep walks with.
		ents, err := direntTypes(int(f.Fd()))
		if err != nil {
			return err
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
		out = make([]Info, len(ents))
		for i, e := range ents {
			out[i] = Info{Name: e.name, Path: joinRel(rel, e.name), Mode: e.typeMode()}
		}
		return nil
	})
	return out, err
}

// readDirAt lists rel, stat-ing each entry relative to the open directory
// (fstatat) so no entry is looked up by a path outside the root's handle.
func readDirAt(r *os.Root, rel string) ([]Info, error) {
	f, err := openDir(r, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: rel, Err: syscall.ENOTDIR}
	}
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
	return readDirAt(r, rel)
}

func (w *dirWS) wStat(rel string) (Info, error) {
	r, err := w.handle(false)
	if err != nil {
		return Info{}, err
	}
	fi, err := r.Stat(rel)
	if isEscape(err) {
		rel2, ferr := w.followLinks(r, rel, true)
		if ferr != nil {
			return Info{}, ferr
		}
		if rel2 != rel {
			fi, err = r.Stat(rel2)
		}
	}
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
	f, err := openRead(r, rel)
	if isEscape(err) {
		rel2, ferr := w.followLinks(r, rel, true)
		if ferr != nil {
			return nil, ferr
		}
		if rel2 != rel {
			f, err = openRead(r, rel2)
		}
	}
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
	return readAllSized(f, fi.Size(), max)
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
	f, err := openDir(r, rel)
	if isEscape(err) {
		rel2, ferr := w.followLinks(r, rel, true)
		if ferr != nil {
			return nil, ferr
		}
		if rel2 != rel {
			f, err = openDir(r, rel2)
		}
	}
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
	size := int(st.Size)
	if cap(buf) < size+1 {
		buf = make([]byte, 0, size+1)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		buf = buf[:len(buf)+n]
		// Stop at the size fstat reported (a file growing meanwhile is read
		// as it was), or at EOF for files that report no size.
		if n == 0 || (size > 0 && len(buf) >= size) {
			return buf, nil
		}
		if int64(len(buf)) > max {
			return nil, errGrew
		}
	}
}

func (w *dirWS) Move(src, dst string) error {
	if _, err := w.Lstat(src); err != nil {
		if errcode.Is(err, errcode.NotFound) {
			return &errcode.Error{Code: errcode.NotFound, Op: "move", Path: src, Msg: "source does not exist: " + src, Err: fs.ErrNotExist}
		}
		return relabel(err, "move")
	}
	switch _, err := w.Lstat(dst); {
	case err == nil:
		return errcode.New(errcode.AlreadyExists, "move", dst, "destination already exists: %s (remove it first or choose another name)", dst)
	case !errcode.Is(err, errcode.NotFound):
		return relabel(err, "move")
	}
	return relabel(w.rename("move", src, dst), "move")
}

func (w *dirWS) Rename(src, dst string) error { return w.rename("rename", src, dst) }

func (w *dirWS) rename(op, src, dst string) error {
	srel, err := w.rel(src)
	if err != nil {
		return err
	}
	drel, err := w.rel(dst)
	if err != nil {
		return err
	}
	if srel == "." || drel == "." {
		return errcode.New(errcode.InvalidArgument, op, src, "cannot move the workspace root itself")
	}
	r, err := w.handle(true)
	if err != nil {
		return mapErr(op, src, err)
	}
	// Intermediate links may be absolute-but-inside: resolve them by hand if
	// os.Root refuses; the final components are renamed, not followed.
	fix := func(rel, p string) (string, error) {
		if _, err := r.Lstat(rel); isEscape(err) {
			rel2, ferr := w.followLinks(r, rel, false)
			if ferr != nil {
				return "", mapErr(op, p, ferr)
			}
			return rel2, nil
		}
		return rel, nil
	}
	if srel, err = fix(srel, src); err != nil {
		return err
	}
	if drel, err = fix(drel, dst); err != nil {
		return err
	}
	if d := path.Dir(drel); d != "." {
		if err := w.mkdirAll(r, d); err != nil {
			return mapErr(op, dst, err)
		}
	}
	err = r.Rename(srel, drel)
	if err != nil {
		var le *os.LinkError
		if errors.As(err, &le) && isNotExist(err) {
			if _, serr := r.Lstat(srel); serr != nil {
				return mapErr(op, src, err)
			}
			return mapErr(op, dst, err)
		}
		if isEscape(err) {
			return mapErr(op, src+" -> "+dst, err)
		}
		return mapErr(op, dst, err)
	}
	return nil
}

func (w *dirWS) Remove(p string, opts RemoveOptions) error {
	rel, err := w.rel(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return errcode.New(errcode.InvalidArgument, "rm", p, "refusing to remove the workspace root itself; remove its entries instead")
	}
	return w.run("rm", p, false, false, func(r *os.Root, rel string) error {
		if _, err := r.Lstat(rel); err != nil {
			if opts.Force && isNotExist(err) {
				return nil
			}
			return err
		}
		if opts.Recursive {
			return r.RemoveAll(rel)
		}
		return r.Remove(rel)
	})
}

func (w *dirWS) Touch(p string) error {
	return w.run("touch", p, true, true, func(r *os.Root, rel string) error {
		if rel == "." {
			return nil
		}
		if d := path.Dir(rel); d != "." {
			if err := r.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if _, err := r.Stat(rel); err == nil {
			return nil // exists: touch never truncates (and opens nothing)
		}
		// No O_TRUNC: a file created meanwhile is not truncated either.
		f, err := r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|openNoWait, 0o644)
		if err != nil {
			if errors.Is(err, syscall.EISDIR) {
				return nil // touching a directory is fine
			}
			return err
		}
		return f.Close()
	})
}

func (w *dirWS) OpenFile(p string, flag int, perm fs.FileMode) (File, error) {
	var f *os.File
	write := flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0
	err := w.run("open", p, write, true, func(r *os.Root, rel string) error {
		if flag&os.O_CREATE != 0 {
			if d := path.Dir(rel); d != "." {
				if err := r.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
		}
		var err error
		f, err = r.OpenFile(rel, flag|openNoWait, perm)
		return err
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
		return nil, mapErr("open", p, err)
	}
	rel, _ := w.rel(p)
	return &dirFile{f: f, p: p, rel: rel}, nil
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
	return errcode.New(errcode.InvalidArgument, op, p,
		"not a regular file or directory: %s (FIFOs, sockets and devices cannot be opened)", p)
}

func (w *dirWS) Chmod(p string, mode fs.FileMode) error {
	return w.run("chmod", p, false, true, func(r *os.Root, rel string) error {
		return r.Chmod(rel, mode)
	})
}

func (w *dirWS) Chtimes(p string, atime, mtime time.Time) error {
	return w.run("chtimes", p, false, true, func(r *os.Root, rel string) error {
		return r.Chtimes(rel, atime, mtime)
	})
}

func (w *dirWS) Truncate(p string, size int64) error {
	if size < 0 {
		return errcode.New(errcode.InvalidArgument, "truncate", p, "negative size %d", size)
	}
	return w.run("truncate", p, true, true, func(r *os.Root, rel string) error {
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
		return errcode.New(errcode.AlreadyExists, "symlink", link, "already exists: %s (the workspace root)", link)
	}
	var trel string // an absolute target, relative to the root
	if strings.HasPrefix(target, "/") {
		if trel, err = w.rel(target); err != nil {
			return relabel(err, "symlink")
		}
	}
	r, err := w.handle(true)
	if err != nil {
		return mapErr("symlink", link, err)
	}
	dir, name := path.Dir(lrel), path.Base(lrel)
	for attempt := 0; ; attempt++ {
		// Where the link lands: dir with every symlink resolved (inside).
		rdir, err := w.followLinks(r, dir, true)
		if err != nil {
			return mapErr("symlink", link, err)
		}
		stored := path.Clean(target)
		if trel != "" {
			stored, _ = filepath.Rel(rdir, trel)
			stored = filepath.ToSlash(stored)
		}
		// What the kernel will resolve: the stored target from rdir, symlinks
		// on its way followed.
		if _, err := w.followLinks(r, rdir+"/"+stored, true); err != nil {
			if isEscape(err) {
				return escapeError("symlink", target)
			}
			return mapErr("symlink", link, err)
		}
		err = symlinkIn(r, rdir, name, stored)
		if (err == syscall.ENOTDIR || err == syscall.ELOOP) && attempt < 2 {
			continue // a component of rdir became a link meanwhile: resolve again
		}
		if err != nil {
			return mapErr("symlink", link, &fs.PathError{Op: "symlinkat", Path: lrel, Err: err})
		}
		return nil
	}
}

// symlinkIn creates the link name -> target in the directory dir of r (a
// clean relative path without symlinks, "." for r itself), opening each
// component with O_NOFOLLOW|O_DIRECTORY: a component that is a symlink
// (or no directory) fails with ELOOP or ENOTDIR instead of being followed.
func symlinkIn(r *os.Root, dir, name, target string) error {
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
		serr = unix.Symlinkat(target, cur, name)
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
	var out string
	err := w.run("readlink", p, false, false, func(r *os.Root, rel string) error {
		t, err := r.Readlink(rel)
		if err != nil {
			return err
		}
		var abs string
		if strings.HasPrefix(t, "/") {
			abs = path.Clean(t)
		} else {
			// Relative to the directory the link really is in (its parent
			// path resolved through the root), as the kernel reads it.
			dir, err := w.followLinks(r, path.Dir(rel), true)
			if err != nil {
				return err
			}
			abs = path.Join(w.root, dir, t)
		}
		if !within(w.root, abs) && !(w.alias != "" && within(w.alias, path.Clean(t))) {
			return &fs.PathError{Op: "readlink", Path: rel, Err: errRootEscapeOr()}
		}
		out = t
		return nil
	})
	return out, err
}

func (w *dirWS) StatFS() (FSStats, error) {
	r, err := w.handle(false)
	if err != nil {
		return FSStats{}, mapErr("statfs", ".", err)
	}
	f, err := r.Open(".")
	if err != nil {
		return FSStats{}, mapErr("statfs", ".", err)
	}
	defer f.Close()
	sc, err := f.SyscallConn()
	if err != nil {
		return FSStats{}, mapErr("statfs", ".", err)
	}
	var st unix.Statfs_t
	var serr error
	if err := sc.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), &st) }); err != nil {
		return FSStats{}, mapErr("statfs", ".", err)
	}
	if serr != nil {
		return FSStats{}, mapErr("statfs", ".", serr)
	}
	return fsStats(&st), nil
}

// dirFile is an open file of a directory workspace.
type dirFile struct {
	f   *os.File
	p   string
	rel string
}

func (d *dirFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := d.f.ReadAt(b, off)
	if err != nil && err != io.EOF {
		err = mapErr("read", d.p, err)
	}
	return n, err
}

func (d *dirFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := d.f.WriteAt(b, off)
	return n, mapErr("write", d.p, err)
}

func (d *dirFile) Read(b []byte) (int, error) {
	n, err := d.f.Read(b)
	if err != nil && err != io.EOF {
		err = mapErr("read", d.p, err)
	}
	return n, err
}

func (d *dirFile) Write(b []byte) (int, error) {
	n, err := d.f.Write(b)
	return n, mapErr("write", d.p, err)
}

func (d *dirFile) Close() error {
	err := d.f.Close()
	if errors.Is(err, fs.ErrClosed) {
		return nil // idempotent
	}
	return mapErr("close", d.p, err)
}

func (d *dirFile) Stat() (Info, error) {
	fi, err := d.f.Stat()
	if err != nil {
		return Info{}, mapErr("stat", d.p, err)
	}
	return infoFrom(d.rel, fi), nil
}

func (d *dirFile) Truncate(size int64) error { return mapErr("truncate", d.p, d.f.Truncate(size)) }
func (d *dirFile) Sync() error               { return mapErr("sync", d.p, d.f.Sync()) }

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
