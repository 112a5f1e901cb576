package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unicode/utf8"
	"unsafe"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"golang.org/x/sys/unix"
)

// walked is the state of a workspace tree: its entries sorted by path (a
// directory before what it holds), and what was not captured, with why.
type walked struct {
	entries []Entry
	skipped map[string]string
	// peakHeld is the most directory descriptors the walk held for its
	// queue at once (TestWalkIsDeterministicAndHoldsBoundedDescriptors).
	peakHeld int
	// What a walk with a journal leaves for the next one (journal.go):
	// journaled when every directory listed was watched first (so the
	// walk can be a base), the root's identity, the directories to list
	// every time (volatile), and the watches a full walk set (watched),
	// and how many entries were taken from the guide's base (reused).
	journaled        bool
	rootDev, rootIno uint64
	volatile         []string
	watched          map[int32]bool
	reused           int
	// linked are the multiply-linked files listed, and newLink says one
	// of them was not among the guide's (a guided walk is then redone in
	// full).
	linked  map[fileID]bool
	newLink bool
	// newWatch says a directory listed was watched by no one before the
	// walk (journal.go's watchTree did not reach it): what was done in it
	// before the walk did raised no event, so the walk is no base, and a
	// guided one is redone in full.
	newWatch bool
	// unwatched says a directory could not be watched (the journal's
	// bound, the user's limit): the tree does not fit the journal.
	unwatched bool
	// listed counts the directories listed.
	listed int
}

// walkWorkers is how many directories a walk lists at once: the walk is
// one fstatat per entry, and listing directories side by side overlaps
// their system calls. At least 4 even on fewer cores (an fstatat of an
// inode not in the cache waits for the disk, and its thread gives its
// core to another worker meanwhile), at most 8, a bound on the threads
// one walk occupies. On the 2-core test machine 2, 4 and 8 workers walk
// the benchmark's tree within noise of each other.
func walkWorkers() int { return max(4, min(8, runtime.GOMAXPROCS(0))) }

// maxHeldDirs bounds the directory descriptors a walk keeps open for
// subdirectories waiting in its queue. Past it, a worker walks the
// subdirectories of the directory it listed itself, depth first, holding
// one descriptor per level (at most MaxDepth): so a walk holds at most
// maxHeldDirs + walkWorkers()·(MaxDepth+1) descriptors whatever the tree.
// A variable so a test can lower it.
var maxHeldDirs = 64

// MaxDepth and MaxPathBytes bound the entries a checkpoint captures: one
// deeper than MaxDepth components, or whose path is longer than
// MaxPathBytes (PATH_MAX less its NUL), is skipped with why, and nothing
// below it is walked. The walk itself goes down by descriptor, but what
// follows it names each entry by its path from the root (a diff's hash, a
// restore's writes: one openat per component, about 2.6 µs each here), and
// a manifest's size grows with the paths' lengths: MaxDepth keeps a tree of
// deep directories to a few times the cost of a usual one (real trees,
// node_modules and Java packages included, stay below 40).
const (
	MaxDepth     = 64
	MaxPathBytes = 4095
)

// ctxEvery is how many names of one directory a walk lists between two
// looks at its context: a directory is listed whole before the next one
// is taken, and one directory may hold millions of entries.
const ctxEvery = 256

// tooMany is the error of a walk past max entries (--checkpoint-max-files).
func tooMany(ws fsops.Workspace, max int) error {
	return &errcode.Error{Code: errcode.TooLarge, Op: "checkpoint", Path: ws.Root(),
		Msg:  "the selected part of the workspace holds more than --checkpoint-max-files (" + strconv.Itoa(max) + ") entries",
		Hint: "raise --checkpoint-max-files, or keep large generated trees out of the workspace"}
}

// tooDeep says why p is not captured, or "" when it is within MaxDepth and
// MaxPathBytes.
func tooDeep(p string) string {
	if len(p) > MaxPathBytes {
		return "a path longer than " + strconv.Itoa(MaxPathBytes) + " bytes"
	}
	if strings.Count(p, "/")+1 > MaxDepth {
		return "deeper than " + strconv.Itoa(MaxDepth) + " directories"
	}
	return ""
}

// walk lists the tree below rel (rel itself included unless it is the
// root) through ws, without following symlinks, reading no file. It stops
// with ctx's error when ctx is done and refuses a tree of more than max
// entries naming --checkpoint-max-files. Directories are listed by a few
// workers (walkWorkers) from one queue, so what the walk holds is bounded
// by the tree's entries, not its depth. Where ws has a directory
// (fsops.Workspace's OpenDir), each directory is opened from its parent's
// descriptor (openat with O_NOFOLLOW, one whatever its depth), read with
// getdents, and each entry stat-ed relative to it (fstatat without
// following links), so the walk's cost is linear in the tree and no path
// is resolved again; a parent's descriptor is shared by its subdirectories
// waiting in the queue and closed after the last one is opened (at most
// maxHeldDirs such). The entries come out sorted by path, the same
// whatever order the workers took.
func (s *Store) walk(ctx context.Context, ws fsops.Workspace, rel string, max int) (walked, error) {
	return s.walkSized(ctx, ws, rel, max, 0)
}

// walkSized is walk with room made for about n entries at once (the
// previous checkpoint's count), so the list is not copied as it grows.
func (s *Store) walkSized(ctx context.Context, ws fsops.Workspace, rel string, max, n int) (walked, error) {
	return s.walkJournaled(ctx, ws, rel, max, n, nil, nil)
}

// walkJournaled is walkSized that, with a journal j (and a walk of the
// whole tree), watches each directory before listing it, and, with a
// guide g whose root is the one walked, lists only the directories g
// names and takes the rest from g's base.
func (s *Store) walkJournaled(ctx context.Context, ws fsops.Workspace, rel string, max, n int, j *journal, g *guide) (walked, error) {
	w := walked{skipped: map[string]string{}, entries: getBlocks(min(n, max) + 1)}
	if rel != "." {
		fi, err := ws.Lstat(rel)
		if err != nil {
			if errcode.Is(err, errcode.NotFound) || errcode.Is(err, errcode.PathEscapeAttempt) {
				// Absent, or below a link leading out: nothing of the
				// workspace is there.
				return w, nil
			}
			return w, err
		}
		fi.Path = rel
		e, why := entryOf(ws, fi)
		if why != "" {
			w.skipped[rel] = why
			return w, nil
		}
		if max < 1 {
			return w, tooMany(ws, s.opts.MaxFiles)
		}
		w.entries = append(w.entries, e)
		if e.Type != TypeDir {
			return w, nil
		}
	}
	wk := &walker{ctx: ctx, ws: ws, rel: rel, max: max, maxFiles: s.opts.MaxFiles, listed: s.opts.listed, w: w, blocks: map[string][2]int{}}
	wk.taken.Store(int64(len(w.entries)))
	wk.cond = sync.NewCond(&wk.mu)
	root := startDir(ws, rel)
	wk.queue = []dirItem{{rel: rel, fd: root}}
	if j != nil && rel == "." && root >= 0 && localFS(root) {
		var st unix.Stat_t
		if unix.Fstat(root, &st) == nil {
			wk.j, wk.abs = j, ws.Root()
			wk.w.journaled, wk.w.rootDev, wk.w.rootIno = true, uint64(st.Dev), uint64(st.Ino)
			wk.w.watched = map[int32]bool{}
			if g != nil && g.rootDev == wk.w.rootDev && g.rootIno == wk.w.rootIno {
				wk.g, wk.reused = g, map[string][2]int{}
			}
		}
	}
	var wg sync.WaitGroup
	for range walkWorkers() {
		wg.Add(1)
		go func() { defer wg.Done(); wk.run() }()
	}
	wg.Wait()
	// What a failure left queued still holds descriptors.
	for _, it := range wk.queue {
		wk.release(it.parent)
		if it.fd >= 0 {
			unix.Close(it.fd)
		}
	}
	if wk.failed != nil {
		return wk.w, wk.failed
	}
	w = wk.w
	w.peakHeld = wk.peakHeld
	w.entries = wk.inOrder()
	putBlocks(wk.w.entries)
	if wk.g != nil {
		// The base's skipped entries below the directories taken from it.
		for p, why := range wk.g.skipped {
			for d := p; ; {
				i := strings.LastIndexByte(d, '/')
				if i < 0 {
					break
				}
				d = d[:i]
				if _, ok := wk.reused[d]; ok {
					w.skipped[p] = why
					break
				}
			}
		}
	}
	return w, nil
}

// blocksPool holds the lists the walk's workers add their directories'
// blocks to (walker.w.entries until inOrder), reused by the next walk
// rather than allocated (and collected) for each: a checkpoint of ten
// thousand entries would otherwise make a megabyte of garbage twice. A
// pool, since walks of different workspaces may run at once (a diff
// beside a checkpoint): each takes its own.
var blocksPool sync.Pool // of *[]Entry

func getBlocks(n int) []Entry {
	if b, ok := blocksPool.Get().(*[]Entry); ok && cap(*b) >= n {
		return (*b)[:0]
	}
	return make([]Entry, 0, n)
}

// putBlocks gives a list back, cleared: what its entries named (their
// paths) is not kept alive by the pool.
func putBlocks(b []Entry) {
	clear(b)
	b = b[:0]
	blocksPool.Put(&b)
}

// inOrder is the walk's entries sorted by path, assembled from the
// directories' blocks (each sorted by name as it was listed) rather than
// sorted whole: sorting ten thousand entries of about 120 bytes each
// costs more than the rest of the walk's own work. A directory's subtree
// is contiguous in path order and sits where its path followed by "/"
// would: after an entry "a.b" but before "a0", since '.' < '/' < '0'.
func (wk *walker) inOrder() []Entry {
	src := wk.w.entries
	out := make([]Entry, 0, len(src)+wk.w.reused)
	if wk.rel != "." && len(src) > 0 {
		out = append(out, src[0]) // rel itself, before all below it
	}
	var emit func(dir string)
	emit = func(dir string) {
		if r, ok := wk.reused[dir]; ok {
			out = append(out, wk.g.prev[r[0]:r[1]]...)
			return
		}
		b, ok := wk.blocks[dir]
		if !ok {
			return
		}
		es := src[b[0]:b[1]]
		var subs []string
		for i := range es {
			if es[i].Type == TypeDir {
				if _, ok := wk.blocks[es[i].Path]; ok {
					subs = append(subs, es[i].Path)
				} else if _, ok := wk.reused[es[i].Path]; ok {
					subs = append(subs, es[i].Path)
				}
			}
		}
		slices.SortFunc(subs, func(x, y string) int { return compareSlash(x, y+"/") })
		j := 0
		for i := range es {
			for j < len(subs) && compareSlash(subs[j], es[i].Path) < 0 {
				emit(subs[j])
				j++
			}
			out = append(out, es[i])
		}
		for ; j < len(subs); j++ {
			emit(subs[j])
		}
	}
	emit(wk.rel)
	return out
}

// compareSlash compares x+"/" with y, without building x+"/".
func compareSlash(x, y string) int {
	if len(y) <= len(x) || y[:len(x)] != x {
		if c := strings.Compare(x, y[:min(len(x), len(y))]); c != 0 {
			return c
		}
		if len(y) <= len(x) {
			return 1 // y is a prefix of x, so shorter than x+"/"
		}
	}
	return strings.Compare("/", y[len(x):])
}

// scratch is one worker's buffers, reused for every directory it lists,
// and by later walks (scratchPool).
type scratch struct {
	buf   []byte  // getdents'
	es    []Entry // a directory's entries until they join the walk's list
	order []int32 // their order by path
	// names is where the entries' paths are written, each one string
	// pointing into it (unsafe.String) rather than one allocation per
	// entry. Only appended to: the bytes before len(names) belong to
	// strings handed out, and are never written again; past cap, a new
	// chunk is taken and the old one lives as long as its strings do.
	names []byte
}

// namesChunk is the size of a scratch's chunk of paths: a few hundred
// paths each.
const namesChunk = 16 << 10

var scratchPool = sync.Pool{New: func() any { return &scratch{buf: make([]byte, 32<<10)} }}

// path is dir's prefix followed by name, written into sc.names.
func (sc *scratch) path(prefix string, name []byte) string {
	n := len(prefix) + len(name)
	if cap(sc.names)-len(sc.names) < n {
		sc.names = make([]byte, 0, max(namesChunk, n))
	}
	at := len(sc.names)
	sc.names = append(sc.names, prefix...)
	sc.names = append(sc.names, name...)
	return unsafe.String(&sc.names[at], n)
}

// walker is one walk's shared state; mu guards all but the settings.
type walker struct {
	ctx      context.Context
	ws       fsops.Workspace
	rel      string
	max      int
	maxFiles int
	listed   func(dir string) // Options.listed

	mu       sync.Mutex
	cond     *sync.Cond
	queue    []dirItem
	active   int // workers listing a directory taken from the queue
	held     int // descriptors kept open for queued subdirectories
	peakHeld int
	failed   error
	w        walked
	// taken and skippedN mirror len(w.entries) and len(w.skipped) for
	// the workers listing a directory without mu: one directory listed
	// whole could otherwise hold and stat any number of entries (and
	// skipped ones, which the manifest keeps) before the walk's count is
	// checked, past --checkpoint-max-files and the call's deadline.
	taken, skippedN atomic.Int64
	// blocks are where each listed directory's entries, sorted by path,
	// lie in w.entries (inOrder).
	blocks map[string][2]int

	// With a journal (walkJournaled): j watches each directory before it
	// is listed, abs is the root's absolute path; with a guide g, reused
	// holds where, in g's base, the entries below each directory taken
	// from it lie.
	j      *journal
	abs    string
	g      *guide
	reused map[string][2]int
}

// dirItem is a directory waiting to be listed: opened already (fd, the
// walk's first), or to be opened from its parent's descriptor (parent),
// or, with neither, to be listed by its path (a workspace without a
// directory, such as a memory one).
type dirItem struct {
	rel    string
	fd     int
	parent *heldDir
}

// heldDir is a listed directory's descriptor, kept open while
// subdirectories of it wait in the queue (refs of them).
type heldDir struct {
	fd   int
	refs int
}

// release drops one reference to h; wk.mu is held.
func (wk *walker) release(h *heldDir) {
	if h != nil {
		if h.refs--; h.refs == 0 {
			unix.Close(h.fd)
			wk.held--
		}
	}
}

// run is one worker: it takes directories from the queue until the walk
// is done or failed.
func (wk *walker) run() {
	sc := scratchPool.Get().(*scratch)
	defer func() {
		clear(sc.es[:cap(sc.es)]) // the pool keeps no path alive through them
		sc.es = sc.es[:0]
		scratchPool.Put(sc)
	}()
	wk.mu.Lock()
	defer wk.mu.Unlock()
	for {
		for len(wk.queue) == 0 && wk.active > 0 && wk.failed == nil {
			wk.cond.Wait()
		}
		if len(wk.queue) == 0 || wk.failed != nil {
			wk.cond.Broadcast()
			return
		}
		it := wk.queue[len(wk.queue)-1]
		wk.queue = wk.queue[:len(wk.queue)-1]
		wk.active++
		fd, err := it.fd, error(nil)
		if it.parent != nil {
			fd, err = openDirAt(it.parent.fd, it.rel)
			wk.release(it.parent)
		}
		wk.mu.Unlock()
		wk.visit(it.rel, fd, err, sc)
		wk.mu.Lock()
		wk.active--
		wk.cond.Broadcast()
	}
}

// openDirAt opens the subdirectory rel (its last component) of the
// directory parent, never following a link; wk.mu may be held (one
// openat).
func openDirAt(parent int, rel string) (int, error) {
	for {
		fd, err := unix.Openat(parent, path.Base(rel), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			if err != nil {
				return -1, &os.PathError{Op: "openat", Path: rel, Err: err}
			}
			return fd, nil
		}
	}
}

// visit lists the directory dir (by fd when fd ≥ 0, else by its path
// through the workspace), adds what it holds to the walk, and hands its
// subdirectories to the queue, or, when the walk holds maxHeldDirs
// descriptors already, walks them itself depth first. It closes fd. openErr
// is the error of opening dir.
func (wk *walker) visit(dir string, fd int, openErr error, sc *scratch) {
	var (
		es      []Entry
		subdirs []string
		skipped map[string]string
	)
	err := openErr
	var (
		wd       int32
		added    bool
		watchErr error
		linked   []fileID
	)
	if err == nil {
		if cerr := wk.ctx.Err(); cerr != nil {
			err = ctxErr("checkpoint", cerr)
		} else if fd >= 0 {
			if wk.j != nil {
				// Before listing: a change after this is an event, one
				// before it is in the listing.
				wd, added, watchErr = wk.j.watch(fd, abs(wk.abs, dir))
			}
			es, subdirs, skipped, linked, err = wk.listFD(fd, dir, sc)
			if wk.listed != nil {
				wk.listed(dir)
			}
			sc.es = es[:0] // copied into the walk's list below, then reused
		} else {
			watchErr = errNoDescriptor
			es, subdirs, skipped, err = wk.listByPath(dir)
		}
	}
	// With a guide, the subdirectories nothing changed below are taken
	// from its base rather than listed.
	var reuse []string
	var reuseAt [][2]int
	reusedN := 0
	if wk.g != nil && err == nil {
		kept := subdirs[:0]
		for i := range es {
			if es[i].Type != TypeDir {
				continue
			}
			if lo, hi, ok := wk.g.subtree(&es[i]); ok {
				reuse = append(reuse, es[i].Path)
				reuseAt = append(reuseAt, [2]int{lo, hi})
				reusedN += hi - lo
			} else {
				kept = append(kept, es[i].Path)
			}
		}
		subdirs = kept
	}
	if err != nil && dir != wk.rel && (errcode.Is(err, errcode.NotFound) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)) {
		// Removed (or replaced by a link or a file) since its parent was
		// listed.
		err, es, subdirs = nil, nil, nil
	}
	if _, ok := err.(*os.PathError); ok {
		err = &errcode.Error{Code: errcode.ReadFailed, Op: "checkpoint", Path: dir, Msg: err.Error(), Err: err}
	}
	// The block's order by path: indices sorted, not the 120-byte entries.
	order := sc.order[:0]
	for i := range es {
		order = append(order, int32(i))
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(es[a].Path, es[b].Path) })
	sc.order = order
	inline := false
	wk.mu.Lock()
	switch {
	case wk.failed != nil:
	case err != nil:
		wk.failed = err
	case len(wk.w.entries)+wk.w.reused+len(es)+reusedN > wk.max, len(wk.w.skipped)+len(skipped) > wk.max:
		wk.failed = tooMany(wk.ws, wk.maxFiles)
	default:
		lo := len(wk.w.entries)
		for _, i := range order {
			wk.w.entries = append(wk.w.entries, es[i])
		}
		wk.blocks[dir] = [2]int{lo, len(wk.w.entries)}
		wk.w.listed++
		for p, why := range skipped {
			wk.w.skipped[p] = why
		}
		for k, d := range reuse {
			wk.reused[d] = reuseAt[k]
		}
		wk.w.reused += reusedN
		if wk.j != nil {
			switch {
			case watchErr != nil:
				wk.w.journaled = false
				wk.w.unwatched = wk.w.unwatched || watchErr != errNoDescriptor
			case wk.w.watched[wd]:
				// One directory at two paths (a bind mount in the
				// tree): its events can name only one of them.
				wk.w.journaled = false
			default:
				wk.w.watched[wd] = true
				wk.w.newWatch = wk.w.newWatch || added
			}
			if len(linked) > 0 {
				wk.w.volatile = append(wk.w.volatile, dir)
				if wk.w.linked == nil {
					wk.w.linked = map[fileID]bool{}
				}
				for _, id := range linked {
					wk.w.linked[id] = true
					if wk.g != nil && !wk.g.linked[id] {
						wk.w.newLink = true
					}
				}
				if len(wk.w.linked) > maxLinked {
					wk.w.journaled = false
				}
			}
			for i := range es {
				if es[i].Type == TypeDir && es[i].Dev != wk.w.rootDev {
					wk.w.volatile = append(wk.w.volatile, es[i].Path)
				}
			}
		}
		wk.taken.Store(int64(len(wk.w.entries) + wk.w.reused))
		wk.skippedN.Store(int64(len(wk.w.skipped)))
		switch {
		case len(subdirs) == 0:
		case fd < 0:
			for _, d := range subdirs {
				wk.queue = append(wk.queue, dirItem{rel: d, fd: -1})
			}
		case wk.held < maxHeldDirs:
			h := &heldDir{fd: fd, refs: len(subdirs)}
			fd = -1 // the queue holds it now
			wk.held++
			wk.peakHeld = max(wk.peakHeld, wk.held)
			for _, d := range subdirs {
				wk.queue = append(wk.queue, dirItem{rel: d, fd: -1, parent: h})
			}
		default:
			inline = true
		}
	}
	wk.cond.Broadcast()
	wk.mu.Unlock()
	if inline {
		// Depth first from here, one descriptor per level: the depth is
		// bounded (MaxDepth), the queue's held descriptors are not.
		for _, d := range subdirs {
			wk.mu.Lock()
			stop := wk.failed != nil
			wk.mu.Unlock()
			if stop {
				break
			}
			cfd, cerr := openDirAt(fd, d)
			wk.visit(d, cfd, cerr, sc)
		}
	}
	if fd >= 0 {
		unix.Close(fd)
	}
}

// listFD lists the open directory fd, whose path is dir: getdents into
// sc.buf, one fstatat per entry relative to fd without following links
// (the name stat-ed is the one getdents wrote). The entries are appended
// to sc.es[:0]; their paths are written into sc.names, so an entry costs
// no allocation of its own.
func (wk *walker) listFD(fd int, dir string, sc *scratch) (_ []Entry, subdirs []string, skipped map[string]string, linked []fileID, err error) {
	buf, es := sc.buf, sc.es[:0]
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
	}
	var st unix.Stat_t
	seen := 0
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, nil, nil, nil, &os.PathError{Op: "getdents", Path: dir, Err: err}
		}
		if n <= 0 {
			break
		}
		err = dirents(buf[:n], func(cname []byte, _ byte) error {
			name := cname[:len(cname)-1]
			seen++
			if err := wk.bound(seen, len(es), len(skipped)); err != nil {
				return err
			}
			if fstatatName(fd, cname, &st) != nil {
				return nil // vanished meanwhile
			}
			p := sc.path(prefix, name)
			e, why := entryOfStat(wk.ws, p, &st)
			if why != "" {
				if skipped == nil {
					skipped = map[string]string{}
				}
				// Kept in the manifest: its own copy, not the chunk's.
				skipped[strings.Clone(p)] = why
				return nil
			}
			es = append(es, e)
			if e.Type == TypeDir {
				subdirs = append(subdirs, p)
			} else if e.Type == TypeFile && st.Nlink > 1 {
				// Written through another link, it raises no event here.
				linked = append(linked, fileID{e.Dev, e.Ino})
			}
			return nil
		})
		if err == errBadDirent {
			return nil, nil, nil, nil, &os.PathError{Op: "getdents", Path: dir, Err: syscall.EIO}
		}
		if err != nil {
			return nil, nil, nil, nil, err
		}
	}
	return es, subdirs, skipped, linked, nil
}

// errBadDirent is dirents' error for a record that does not fit.
var errBadDirent = errors.New("a getdents record that does not fit its buffer")

// dirents calls fn for each entry of b, what one getdents wrote (struct
// linux_dirent64: ino u64, off s64, reclen u16, type u8, name), but . and
// ..: its name with its NUL (for fstatat, which takes it as it is) and its
// type (DT_*, DT_UNKNOWN where the file system does not say). It stops at
// fn's first error, and fails with errBadDirent on a record that does not
// fit. The one reader of the records: the walk's listing and the journal's
// watchTree.
func dirents(b []byte, fn func(cname []byte, typ byte) error) error {
	for off := 0; off < len(b); {
		if off+19 >= len(b) {
			return errBadDirent
		}
		reclen := int(binary.NativeEndian.Uint16(b[off+16:]))
		if reclen < 20 || off+reclen > len(b) {
			return errBadDirent
		}
		typ, name := b[off+18], b[off+19:off+reclen]
		off += reclen
		i := bytes.IndexByte(name, 0)
		if i < 0 {
			return errBadDirent
		}
		if i == 0 || name[0] == '.' && (i == 1 || i == 2 && name[1] == '.') {
			continue
		}
		if err := fn(name[:i+1], typ); err != nil {
			return err
		}
	}
	return nil
}

// bound is the walk's limits checked while one directory is listed, at
// its seen-th name (from 1), with n entries and k skipped ones of it so
// far: the call's context every ctxEvery names, and max against what the
// walk took already and this directory adds, entries and skipped ones
// each. A directory past it alone stops here, one entry past the limit,
// rather than after it was stat-ed whole. It is the early check; visit's,
// under the walker's lock, is the exact one: workers listing directories
// side by side see each other's entries in taken only once visit has
// taken them.
func (wk *walker) bound(seen, n, k int) error {
	if seen%ctxEvery == 0 {
		if err := wk.ctx.Err(); err != nil {
			return ctxErr("checkpoint", err)
		}
	}
	if int64(n)+wk.taken.Load() > int64(wk.max) || int64(k)+wk.skippedN.Load() > int64(wk.max) {
		return tooMany(wk.ws, wk.maxFiles)
	}
	return nil
}

// listByPath lists dir through the workspace's ReadDir: a workspace
// without a directory (a memory one), or a walk whose way down holds a
// link.
func (wk *walker) listByPath(dir string) (es []Entry, subdirs []string, skipped map[string]string, err error) {
	list, err := wk.ws.ReadDir(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	for i, fi := range list {
		if err := wk.bound(i+1, len(es), len(skipped)); err != nil {
			return nil, nil, nil, err
		}
		fi.Path = path.Join(dir, fi.Name)
		e, why := entryOf(wk.ws, fi)
		if why != "" {
			if skipped == nil {
				skipped = map[string]string{}
			}
			skipped[fi.Path] = why
			continue
		}
		es = append(es, e)
		if e.Type == TypeDir {
			subdirs = append(subdirs, e.Path)
		}
	}
	return es, subdirs, skipped, nil
}

// startDir opens the directory rel of ws by descriptor, from the root
// down one component at a time, never following a link; -1 when ws has
// no directory or the way holds a link (then the walk lists by path, which
// follows a link inside the workspace as ReadDir does).
func startDir(ws fsops.Workspace, rel string) int {
	f, err := ws.OpenDir()
	if err != nil {
		return -1
	}
	// A descriptor of the walk's own, so its lifetime is the walk's.
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	f.Close()
	if err != nil {
		return -1
	}
	if rel == "." {
		return fd
	}
	so := ""
	for _, c := range strings.Split(rel, "/") {
		so = path.Join(so, c)
		next, err := openDirAt(fd, so)
		unix.Close(fd)
		if err != nil {
			return -1
		}
		fd = next
	}
	return fd
}

// entryOfStat describes the entry at path p from its fstatat, or says why
// it is not captured: entryOf without the fsops.Info between (no time.Time
// or FileMode conversions per entry).
func entryOfStat(ws fsops.Workspace, p string, st *unix.Stat_t) (Entry, string) {
	if !utf8.ValidString(p) {
		// The manifest is JSON, which would change the name.
		return Entry{}, "a name that is not valid UTF-8"
	}
	if why := tooDeep(p); why != "" {
		return Entry{}, why
	}
	// Setuid and setgid are never recorded, as entryOf.
	m := fs.FileMode(st.Mode & 0o777)
	if st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	e := Entry{Path: p, Mode: uint32(fsops.SafeMode(m))}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Type, e.Size, e.Dev, e.Ino = TypeFile, st.Size, uint64(st.Dev), uint64(st.Ino)
		e.MTime = int64(st.Mtim.Sec)*1e9 + int64(st.Mtim.Nsec)
		e.CTime = int64(st.Ctim.Sec)*1e9 + int64(st.Ctim.Nsec)
	case unix.S_IFDIR:
		// Its identity and times tell a guided walk (journal.go) it is
		// the directory the base listed there.
		e.Type, e.Dev, e.Ino = TypeDir, uint64(st.Dev), uint64(st.Ino)
		e.MTime = int64(st.Mtim.Sec)*1e9 + int64(st.Mtim.Nsec)
		e.CTime = int64(st.Ctim.Sec)*1e9 + int64(st.Ctim.Nsec)
	case unix.S_IFLNK:
		// Rare: the workspace reads the link and judges whether its
		// target leads out (relative to where the link really is).
		t, err := ws.Readlink(p)
		if err != nil {
			if errcode.Is(err, errcode.PathEscapeAttempt) {
				return e, "a symlink leading out of the workspace"
			}
			return e, "unreadable link: " + errcode.Sentence(err)
		}
		e.Type, e.Target = TypeSymlink, t
		e.Mode = 0
	default:
		return e, "not a file, directory or symlink: " + specialKind(st.Mode)
	}
	return e, ""
}

// specialKind names the type of a file a checkpoint does not capture,
// from its st_mode type bits (fsops.POSIXMode's, for an fsops.Info).
func specialKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "named pipe"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFCHR:
		return "character device"
	}
	return "a type this system does not name"
}

// entryOf describes one listed entry, or says why it is not captured.
func entryOf(ws fsops.Workspace, fi fsops.Info) (Entry, string) {
	if !utf8.ValidString(fi.Path) {
		// The manifest is JSON, which would change the name.
		return Entry{}, "a name that is not valid UTF-8"
	}
	if why := tooDeep(fi.Path); why != "" {
		return Entry{}, why
	}
	// Setuid and setgid are never recorded: the daemon restores files as
	// its own user (fsops.SafeMode).
	e := Entry{Path: fi.Path, Mode: uint32(fsops.SafeMode(fi.Mode))}
	switch {
	case fi.Mode.IsRegular():
		id := fi.ID()
		e.Type, e.Size, e.Dev, e.Ino, e.MTime = TypeFile, fi.Size, id.Dev, id.Ino, fi.ModTime.UnixNano()
		e.CTime = fi.ChangeTime.UnixNano()
	case fi.Mode.IsDir():
		e.Type = TypeDir
	case fi.Mode&fs.ModeSymlink != 0:
		t, err := ws.Readlink(fi.Path)
		if err != nil {
			if errcode.Is(err, errcode.PathEscapeAttempt) {
				return e, "a symlink leading out of the workspace"
			}
			return e, "unreadable link: " + errcode.Sentence(err)
		}
		e.Type, e.Target = TypeSymlink, t
		e.Mode = 0
	default:
		return e, "not a file, directory or symlink: " + specialKind(fsops.POSIXMode(fi.Mode))
	}
	return e, ""
}

func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
}
