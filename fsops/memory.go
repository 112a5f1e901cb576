package fsops

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// memStore is the state of a memory workspace and all its scopes: file
// contents keyed by their path relative to the top root. Directories are
// implicit: a directory exists while some key lies below it.
type memStore struct {
	mu      sync.RWMutex
	files   map[string]*memEntry
	created time.Time
}

type memEntry struct {
	data         []byte
	mode         fs.FileMode
	mtime, atime time.Time
	ctime        time.Time
}

// memWS is the memory implementation (`--backend memory`). It has no exec
// and no symlinks; mkdir is a no-op, readdir lists by key prefix.
type memWS struct {
	s      *memStore
	root   string // virtual absolute root (top root joined with prefix)
	prefix string // key prefix of this scope ("" at the top)
	opts   Options
}

// NewMemory returns an empty in-memory Workspace whose virtual root is root
// (made absolute if it is not). Path rules and error codes are those of the
// directory implementation.
func NewMemory(root string, opts Options) Workspace {
	root = path.Clean("/" + root)
	return &memWS{s: &memStore{files: map[string]*memEntry{}, created: time.Now()}, root: root, opts: opts}
}

func (m *memWS) Root() string { return m.root }
func (m *memWS) Close() error { return nil }

func (m *memWS) rel(p string) (string, error) { return resolveRel(m.root, p) }

// key maps a workspace-relative path to a store key.
func (m *memWS) key(rel string) string {
	if m.prefix == "" {
		if rel == "." {
			return ""
		}
		return rel
	}
	if rel == "." {
		return m.prefix
	}
	return m.prefix + "/" + rel
}

func (m *memWS) Resolve(p string) (string, error) { return ResolvePath(m.root, p) }

func (m *memWS) Rel(p string) (string, error) { return m.rel(p) }

func (m *memWS) Scope(p string) (Workspace, error) {
	rel, err := m.rel(p)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return m, nil
	}
	return &memWS{s: m.s, root: path.Join(m.root, rel), prefix: m.key(rel), opts: m.opts}, nil
}

// isDirKey reports whether key is an implicit directory (locked by caller).
func (s *memStore) isDirKey(key string) bool {
	if key == "" {
		return true
	}
	pre := key + "/"
	for k := range s.files {
		if strings.HasPrefix(k, pre) {
			return true
		}
	}
	return false
}

// fileAncestor returns the first ancestor of key that is a file (locked).
func (s *memStore) fileAncestor(key string) (string, bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			if _, ok := s.files[key[:i]]; ok {
				return key[:i], true
			}
		}
	}
	return "", false
}

func (m *memWS) info(rel, key string) (Info, bool) {
	name := path.Base(rel)
	if e, ok := m.s.files[key]; ok {
		return Info{Name: name, Path: rel, Size: int64(len(e.data)), Mode: e.mode, ModTime: e.mtime, AccessTime: e.atime, ChangeTime: e.ctime, Nlink: 1}, true
	}
	if m.s.isDirKey(key) {
		t := m.s.created
		return Info{Name: name, Path: rel, Mode: fs.ModeDir | 0o755, ModTime: t, AccessTime: t, ChangeTime: t, Nlink: 2}, true
	}
	return Info{}, false
}

func (m *memWS) statRel(op, p, rel string) (Info, error) {
	m.s.mu.RLock()
	defer m.s.mu.RUnlock()
	if a, ok := m.s.fileAncestor(m.key(rel)); ok && a != "" {
		return Info{}, hinted(errcode.NotADirectory, op, p, "not a directory", HintComponentIsFile)
	}
	info, ok := m.info(rel, m.key(rel))
	if !ok {
		return Info{}, notFound(op, p)
	}
	return info, nil
}

func (m *memWS) Stat(p string) (Info, error) {
	rel, err := m.rel(p)
	if err != nil {
		return Info{}, err
	}
	return m.statRel("stat", p, rel)
}

func (m *memWS) Lstat(p string) (Info, error) { return m.Stat(p) }

func (m *memWS) Exists(p string) (bool, error) {
	rel, err := m.rel(p)
	if err != nil {
		return false, err
	}
	_, err = m.statRel("stat", p, rel)
	return err == nil, nil
}

// readRel returns a copy-free view of a file's bytes (callers must not
// mutate it; writes replace the slice).
func (m *memWS) readRel(op, p, rel string) ([]byte, error) {
	m.s.mu.RLock()
	defer m.s.mu.RUnlock()
	key := m.key(rel)
	e, ok := m.s.files[key]
	if !ok {
		if m.s.isDirKey(key) {
			return nil, hinted(errcode.IsADirectory, op, p, "is a directory", "use a directory listing instead")
		}
		return nil, notFound(op, p)
	}
	return e.data, nil
}

func (m *memWS) ReadFile(p string) ([]byte, error) {
	rel, err := m.rel(p)
	if err != nil {
		return nil, err
	}
	data, err := m.readRel("read", p, rel)
	if err != nil {
		return nil, err
	}
	if max := m.opts.maxRead(); int64(len(data)) > max {
		return nil, tooLarge("read", p, int64(len(data)), max)
	}
	return append([]byte(nil), data...), nil
}

func (m *memWS) ReadLines(_ context.Context, p string, lr LineRange) (Lines, error) {
	if err := lr.check("readlines", p); err != nil {
		return Lines{}, err
	}
	rel, err := m.rel(p)
	if err != nil {
		return Lines{}, err
	}
	data, err := m.readRel("readlines", p, rel)
	if err != nil {
		return Lines{}, err
	}
	// data is never mutated in place (writes install a new slice), so the
	// lines may alias it.
	return pageString(bytesToString(data), lr), nil
}

// writeKey installs data at key (locked by caller), checking the shape of
// the tree: no file may sit where a directory is needed and vice versa.
func (m *memWS) writeKey(op, p, key string, data []byte) error {
	if key == "" || key == m.prefix {
		return errcode.New(errcode.IsADirectory, op, p, "is a directory")
	}
	if _, ok := m.s.fileAncestor(key); ok {
		return hinted(errcode.NotADirectory, op, p, "not a directory", HintComponentIsFile)
	}
	now := time.Now()
	if e, ok := m.s.files[key]; ok {
		e.data, e.mtime, e.ctime = data, now, now
		return nil
	}
	if m.s.isDirKey(key) {
		return errcode.New(errcode.IsADirectory, op, p, "is a directory")
	}
	m.s.files[key] = &memEntry{data: data, mode: 0o644, mtime: now, atime: now, ctime: now}
	return nil
}

func (m *memWS) WriteFile(p string, data []byte) error {
	rel, err := m.rel(p)
	if err != nil {
		return err
	}
	cp := append([]byte(nil), data...)
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	return m.writeKey("write", p, m.key(rel), cp)
}

func (m *memWS) Edit(p string, edits []Edit, dryRun bool) (EditResult, error) {
	return editFile(m, p, edits, dryRun, m.opts.maxRead())
}

// Mkdir is a no-op (directories are implicit), except that it refuses to
// shadow a file.
func (m *memWS) Mkdir(p string, parents bool) error {
	rel, err := m.rel(p)
	if err != nil {
		return err
	}
	m.s.mu.RLock()
	defer m.s.mu.RUnlock()
	key := m.key(rel)
	if _, ok := m.s.files[key]; ok {
		return errcode.New(errcode.AlreadyExists, "mkdir", p, "already exists as a file")
	}
	if _, ok := m.s.fileAncestor(key); ok {
		return hinted(errcode.NotADirectory, "mkdir", p, "not a directory", HintComponentIsFile)
	}
	return nil
}

func (m *memWS) ReadDir(p string) ([]Info, error) {
	rel, err := m.rel(p)
	if err != nil {
		return nil, err
	}
	out, err := m.list(rel)
	return out, mapErr(opReadDir, p, err)
}

// ReadDirTypes is ReadDir with only names and types: the memory tree has no
// stat to save, so it is ReadDir's answer trimmed to what the contract sets.
func (m *memWS) ReadDirTypes(p string) ([]Info, error) {
	infos, err := m.ReadDir(p)
	for i, in := range infos {
		infos[i] = Info{Name: in.Name, Path: in.Path, Mode: in.Mode.Type()}
	}
	return infos, err
}

// list returns the immediate children of rel: the first key segment after
// the prefix, a directory when more segments follow.
func (m *memWS) list(rel string) ([]Info, error) {
	m.s.mu.RLock()
	defer m.s.mu.RUnlock()
	key := m.key(rel)
	if _, ok := m.s.files[key]; ok && key != "" {
		return nil, &fs.PathError{Op: "readdir", Path: rel, Err: syscall.ENOTDIR}
	}
	pre := ""
	if key != "" {
		pre = key + "/"
	}
	kids := map[string]bool{} // name → is a directory
	for k := range m.s.files {
		if !strings.HasPrefix(k, pre) {
			continue
		}
		rest := k[len(pre):]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			kids[rest[:i]] = true
		} else if !kids[rest] {
			kids[rest] = false
		}
	}
	if len(kids) == 0 && key != "" && key != m.prefix {
		return nil, &fs.PathError{Op: "readdir", Path: rel, Err: fs.ErrNotExist}
	}
	names := make([]string, 0, len(kids))
	for n := range kids {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]Info, 0, len(names))
	t := m.s.created
	for _, n := range names {
		crel := joinRel(rel, n)
		if e, ok := m.s.files[pre+n]; ok && !kids[n] {
			out = append(out, Info{Name: n, Path: crel, Size: int64(len(e.data)), Mode: e.mode, ModTime: e.mtime, AccessTime: e.atime, ChangeTime: e.ctime, Nlink: 1})
			continue
		}
		// Known to be a directory from the keys below it: no second scan.
		out = append(out, Info{Name: n, Path: crel, Mode: fs.ModeDir | 0o755, ModTime: t, AccessTime: t, ChangeTime: t, Nlink: 2})
	}
	return out, nil
}

func (m *memWS) Tree(ctx context.Context, p string, opts TreeOptions) ([]TreeNode, error) {
	return buildTree(ctx, m, p, opts)
}

func (m *memWS) Search(ctx context.Context, p, pattern string, opts SearchOptions) ([]string, error) {
	return search(ctx, m, p, pattern, opts)
}

func (m *memWS) Grep(ctx context.Context, opts GrepOptions) (GrepResult, error) {
	return grep(ctx, m, opts)
}

func (m *memWS) wRel(p string) (string, error)    { return m.rel(p) }
func (m *memWS) wList(rel string) ([]Info, error) { return m.list(rel) }
func (m *memWS) wStat(rel string) (Info, error) {
	m.s.mu.RLock()
	defer m.s.mu.RUnlock()
	info, ok := m.info(rel, m.key(rel))
	if !ok {
		return Info{}, &fs.PathError{Op: "stat", Path: rel, Err: fs.ErrNotExist}
	}
	return info, nil
}
func (m *memWS) wRead(rel string, max int64) ([]byte, error) {
	data, err := m.readRel("read", rel, rel)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, errGrew
	}
	return data, nil
}

func (m *memWS) Move(src, dst string) error {
	if ok, err := m.Exists(src); err != nil {
		return withOp(err, opMove)
	} else if !ok {
		return &errcode.Error{Code: errcode.NotFound, Op: "move", Path: src, Msg: "source does not exist", Err: fs.ErrNotExist}
	}
	if ok, err := m.Exists(dst); err != nil {
		return withOp(err, opMove)
	} else if ok {
		return hinted(errcode.AlreadyExists, "move", dst, "destination already exists", "remove it first or choose another name")
	}
	return m.rename("move", src, dst)
}

func (m *memWS) Rename(src, dst string) error { return m.rename("rename", src, dst) }

func (m *memWS) rename(op, src, dst string) error {
	srel, err := m.rel(src)
	if err != nil {
		return err
	}
	drel, err := m.rel(dst)
	if err != nil {
		return err
	}
	if srel == "." || drel == "." {
		return errcode.New(errcode.InvalidArgument, op, src, "cannot move the workspace root itself")
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	sk, dk := m.key(srel), m.key(drel)
	if sk == dk {
		return nil
	}
	if strings.HasPrefix(dk, sk+"/") {
		return errcode.New(errcode.InvalidArgument, op, dst, "cannot move %s into itself", src)
	}
	if _, ok := m.s.fileAncestor(dk); ok {
		return hinted(errcode.NotADirectory, op, dst, "not a directory", HintComponentIsFile)
	}
	if e, ok := m.s.files[sk]; ok {
		if m.s.isDirKey(dk) {
			return errcode.New(errcode.IsADirectory, op, dst, "is a directory")
		}
		delete(m.s.files, sk)
		m.s.files[dk] = e
		return nil
	}
	if !m.s.isDirKey(sk) {
		return notFound(op, src)
	}
	if _, ok := m.s.files[dk]; ok {
		return hinted(errcode.NotADirectory, op, dst, "not a directory", HintPathIsFile)
	}
	if m.s.isDirKey(dk) {
		return errcode.New(errcode.AlreadyExists, op, dst, "directory not empty")
	}
	pre := sk + "/"
	moved := map[string]*memEntry{}
	for k, e := range m.s.files {
		if strings.HasPrefix(k, pre) {
			moved[dk+"/"+k[len(pre):]] = e
			delete(m.s.files, k)
		}
	}
	for k, e := range moved {
		m.s.files[k] = e
	}
	return nil
}

func (m *memWS) Remove(p string, opts RemoveOptions) error {
	rel, err := m.rel(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return errcode.New(errcode.InvalidArgument, "rm", p, "refusing to remove the workspace root itself; remove its entries instead")
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	key := m.key(rel)
	n := 0
	if _, ok := m.s.files[key]; ok {
		delete(m.s.files, key)
		n++
	} else if m.s.isDirKey(key) {
		if !opts.Recursive {
			return hinted(errcode.AlreadyExists, "rm", p, "directory not empty", "remove it recursively")
		}
		pre := key + "/"
		for k := range m.s.files {
			if strings.HasPrefix(k, pre) {
				delete(m.s.files, k)
				n++
			}
		}
	}
	if n == 0 && !opts.Force {
		return notFound("rm", p)
	}
	return nil
}

func (m *memWS) Touch(p string) error {
	rel, err := m.rel(p)
	if err != nil {
		return err
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	key := m.key(rel)
	if _, ok := m.s.files[key]; ok || m.s.isDirKey(key) {
		return nil // never truncates
	}
	return m.writeKey("touch", p, key, []byte{})
}

func (m *memWS) OpenFile(p string, flag int, perm fs.FileMode) (File, error) {
	rel, err := m.rel(p)
	if err != nil {
		return nil, err
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	key := m.key(rel)
	e, ok := m.s.files[key]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, errcode.New(errcode.AlreadyExists, "open", p, "already exists")
	case !ok && m.s.isDirKey(key):
		if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			return nil, errcode.New(errcode.IsADirectory, "open", p, "is a directory")
		}
		return nil, hinted(errcode.IsADirectory, "open", p, "is a directory", "directories cannot be opened in a memory workspace; list them")
	case !ok && flag&os.O_CREATE == 0:
		return nil, notFound("open", p)
	case !ok:
		if err := m.writeKey("open", p, key, []byte{}); err != nil {
			return nil, err
		}
		e = m.s.files[key]
		if perm != 0 {
			e.mode = perm.Perm()
		}
	}
	if flag&os.O_TRUNC != 0 && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		e.data, e.mtime = []byte{}, time.Now()
	}
	return &memFile{s: m.s, e: e, p: p, rel: rel, flag: flag}, nil
}

func (m *memWS) withEntry(op, p string, f func(e *memEntry)) error {
	rel, err := m.rel(p)
	if err != nil {
		return err
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	key := m.key(rel)
	if e, ok := m.s.files[key]; ok {
		f(e)
		return nil
	}
	if m.s.isDirKey(key) {
		return nil // implicit directories have synthetic metadata
	}
	return notFound(op, p)
}

func (m *memWS) Chmod(p string, mode fs.FileMode) error {
	return m.withEntry("chmod", p, func(e *memEntry) { e.mode = mode.Perm(); e.ctime = time.Now() })
}

func (m *memWS) Chtimes(p string, atime, mtime time.Time) error {
	return m.withEntry("chtimes", p, func(e *memEntry) {
		if !atime.IsZero() {
			e.atime = atime
		}
		if !mtime.IsZero() {
			e.mtime = mtime
		}
	})
}

func (m *memWS) Truncate(p string, size int64) error {
	if size < 0 {
		return errcode.New(errcode.InvalidArgument, "truncate", p, "negative size %d", size)
	}
	return m.withEntry("truncate", p, func(e *memEntry) { e.data = resize(e.data, size); e.mtime = time.Now() })
}

func resize(b []byte, size int64) []byte {
	nb := make([]byte, size)
	copy(nb, b)
	return nb
}

func (m *memWS) Symlink(target, link string) error {
	return errcode.New(errcode.NotImplemented, "symlink", link, "symlinks are not supported by the memory backend")
}

func (m *memWS) Readlink(p string) (string, error) {
	return "", errcode.New(errcode.NotImplemented, "readlink", p, "symlinks are not supported by the memory backend")
}

func (m *memWS) StatFS() (FSStats, error) {
	return FSStats{}, errcode.New(errcode.NotImplemented, "statfs", ".", "statfs is not supported by the memory backend")
}

// memFile is an open file of a memory workspace. It works on the entry it
// opened, like a Unix file descriptor survives a rename of its file.
type memFile struct {
	s      *memStore
	e      *memEntry
	p, rel string
	flag   int
	off    int64
	closed atomic.Bool
}

func (f *memFile) ReadAt(b []byte, off int64) (int, error) {
	f.s.mu.RLock()
	defer f.s.mu.RUnlock()
	if f.closed.Load() {
		return 0, errcode.New(errcode.InvalidArgument, "read", f.p, "file is closed")
	}
	if off >= int64(len(f.e.data)) {
		return 0, io.EOF
	}
	n := copy(b, f.e.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(b []byte, off int64) (int, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if f.closed.Load() {
		return 0, errcode.New(errcode.InvalidArgument, "write", f.p, "file is closed")
	}
	if f.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return 0, errcode.New(errcode.PermissionDenied, "write", f.p, "file is open read-only")
	}
	end := off + int64(len(b))
	data := f.e.data
	if end > int64(len(data)) {
		data = resize(data, end)
	} else {
		data = append([]byte(nil), data...) // readers may hold the old slice
	}
	copy(data[off:], b)
	f.e.data, f.e.mtime = data, time.Now()
	return len(b), nil
}

func (f *memFile) Read(b []byte) (int, error) {
	n, err := f.ReadAt(b, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) Write(b []byte) (int, error) {
	if f.flag&os.O_APPEND != 0 {
		f.s.mu.RLock()
		f.off = int64(len(f.e.data))
		f.s.mu.RUnlock()
	}
	n, err := f.WriteAt(b, f.off)
	f.off += int64(n)
	return n, err
}

func (f *memFile) Close() error { f.closed.Store(true); return nil }

func (f *memFile) Stat() (Info, error) {
	f.s.mu.RLock()
	defer f.s.mu.RUnlock()
	return Info{Name: path.Base(f.rel), Path: f.rel, Size: int64(len(f.e.data)), Mode: f.e.mode, ModTime: f.e.mtime, AccessTime: f.e.atime, ChangeTime: f.e.ctime, Nlink: 1}, nil
}

func (f *memFile) Truncate(size int64) error {
	if size < 0 {
		return errcode.New(errcode.InvalidArgument, "truncate", f.p, "negative size %d", size)
	}
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.e.data, f.e.mtime = resize(f.e.data, size), time.Now()
	return nil
}

func (f *memFile) Sync() error { return nil }

// Chmod sets the open file's mode (fsops.Fchmod).
func (f *memFile) Chmod(mode fs.FileMode) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	if f.closed.Load() {
		return errcode.New(errcode.InvalidArgument, "chmod", f.p, "file is closed")
	}
	f.e.mode = mode.Perm()
	f.e.ctime = time.Now()
	return nil
}

func (m *memWS) OpenDir() (*os.File, error) {
	return nil, errcode.New(errcode.NotImplemented, "open", ".", "a memory workspace has no directory to hand to a command")
}
