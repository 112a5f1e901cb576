package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/agentbe/agentbe-daemon/fsops"
	"golang.org/x/sys/unix"
)

// The journal is what lets a checkpoint after a few changes list only the
// directories that changed, rather than walk the whole workspace: an
// inotify watch on every directory a walk listed, and, from the events,
// the directories whose listing (names, or a child's content, size, mode
// or times) changed since a given moment. git's fsmonitor is the same
// idea. It is an optimisation a checkpoint takes only where it is sound,
// and everything it cannot vouch for is walked as before:
//
//   - inotify reports what the kernel does through this machine's mounts;
//     the workspace's file system must be a local one (localFS) and the
//     mount table unchanged since the base was walked (a mount over a
//     directory of the tree raises no event). A mount point's directory
//     is listed every time (a file mounted from outside is written
//     through its other path, whose directory raises the event), and a
//     walk that met one directory at two paths (bind-mounted in the tree:
//     one watch, whose events name one path) is no base.
//   - an event names the directory of the path written through: a file
//     with more than one link may be changed through another directory,
//     so a directory holding one is listed every time, as is one on
//     another device than the root (a mount point, or below one). A link
//     made since (link(2) raises no event in the linked file's directory)
//     is seen while it is there; a name made since and gone before the
//     walk's end may have been one, and ends the generation (made).
//   - a directory made or moved in since the base was watched by no one
//     until a walk lists it (a link made, written through and removed in
//     it raised no event), and its inode number and times may be those of
//     the one removed from its path: the next checkpoint of its scope
//     walks in full (fresh).
//   - a directory moved (IN_MOVE_SELF) leaves its watch naming the old
//     path; a full queue (IN_Q_OVERFLOW) loses events; an unmount ends
//     watches. Each ends the journal's generation, so the next checkpoint
//     of every scope walks in full (and watches again).
//   - writes through a shared writable mapping, and Linux AIO writes
//     (io_submit), raise no event of their own: what such a writer
//     changed is seen once it has unmapped and closed the file
//     (IN_CLOSE_WRITE), something else in its directory
//     changes, or at the next full walk; a loop device backed by a file
//     of the tree writes it with no event until it is detached. A write
//     names the path its descriptor was opened by: a hard link to a file
//     made from outside the tree after the base, and a descriptor opened
//     by a hard link since removed (the file keeping its path in the
//     tree), write it with no event in its directory.
//     Every maxGuided-th checkpoint of a scope walks in full, so what
//     these change is captured within that many checkpoints;
//     --checkpoint-journal=false walks in full every time for those who
//     need them seen sooner.
//
// A full walk watches the whole tree (watchTree) after its mark and
// before it lists anything: a directory watched only when the walk
// reaches it could host, meanwhile, a link written through to a file the
// walk has listed already, raising no event. A walk that still had to add
// a watch is no base. A scope whose tree is more than the journal may
// watch (its bound) gives its watches back and ends the generation
// (drop), and is walked in full without watching from then on (the
// store's unwatchable).
//
// A background goroutine reads the events as they come, so a busy
// workspace does not fill the kernel's queue between two checkpoints; mark
// reads what is queued at that moment, so a change made before a
// checkpoint began is in its dirty set.
type journal struct {
	fd *os.File

	mu sync.Mutex
	// gen changes whenever the journal can no longer vouch for what it did
	// not see (untrust); a base of another generation is walked in full.
	gen uint64
	// seq numbers the moments marks are taken at; an event read after a
	// mark gets a higher one.
	seq uint64
	// paths is each watch's directory, by absolute path; at most bound.
	paths map[int32]string
	bound int
	// dirty is each directory with an event, with the seq of its last one.
	dirty map[string]uint64
	// made is each name other than a directory's created (or moved in)
	// since the newest checkpoint of its scope, by absolute path, with the
	// seq of its event: it may be a hard link to a file in a directory
	// with no event (link(2) raises none there), and a write through it
	// shows only while the walk can see it linked. Such a name removed,
	// replaced or moved out of the tree ends the generation. moving holds
	// the cookie of each made name moved, until its IN_MOVED_TO.
	made   map[string]uint64
	moving map[uint32]bool
	// fresh is each directory created or moved in, by absolute path, with
	// the seq of its event: watched by no one until a walk lists it, so
	// what was done in it is unknown (a hard link made, written through and
	// removed), and whatever its inode and times (an inode number is
	// reused at once, and times are of the clock's tick) it may not be
	// the directory a base listed there. A walk from a base older than its
	// event is a full one.
	fresh map[string]uint64
	buf   []byte
}

// errNoDescriptor is why a directory listed by its path (no descriptor)
// is not watched: a walk through one is no journal's base.
var errNoDescriptor = errors.New("listed by path")

// maxDirty bounds the directories the journal remembers as changed: past
// it (a tree rewritten whole), the journal forgets them and the next
// checkpoint of each scope walks in full.
const maxDirty = 1 << 16

// maxWatches bounds the directories one journal watches: each watch holds
// a little kernel memory and its inode in the cache, and the user's watches
// are shared with every other program it runs (fs.inotify.max_user_watches:
// an editor's file watcher, another daemon), so a journal takes at most a
// quarter of them (watchBound). A tree with more directories is walked in
// full every time.
const maxWatches = 1 << 16

// watchBound is the watches a journal may hold: maxWatches, or a quarter
// of the user's limit when that is less.
func watchBound() int {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		return maxWatches
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 4 {
		return maxWatches
	}
	return min(maxWatches, n/4)
}

// watchMask is what a directory's watch reports: every change to its
// listing or to a child's content or metadata, the close of a child opened
// for writing (the one event a write through a shared mapping raises,
// once the writer has unmapped and closed it), and the directory's own
// move.
const watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_MOVE_SELF | unix.IN_DELETE_SELF | unix.IN_ONLYDIR

// newJournal starts a journal, or returns nil when inotify cannot be had
// (the user's instances are used up): checkpoints then walk in full.
func newJournal() *journal {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	j := &journal{fd: os.NewFile(uintptr(fd), "inotify"), paths: map[int32]string{}, dirty: map[string]uint64{},
		buf: make([]byte, 64<<10), bound: watchBound()}
	go j.run()
	return j
}

// run reads events until the journal is closed. Reads happen only under
// j.mu (readLocked), so a mark never misses a batch another reader holds.
func (j *journal) run() {
	rc, err := j.fd.SyscallConn()
	if err != nil {
		return
	}
	for {
		err := rc.Read(func(uintptr) bool {
			j.mu.Lock()
			defer j.mu.Unlock()
			j.readLocked()
			return false // wait until readable again
		})
		if err != nil {
			return // closed
		}
	}
}

// readLocked reads every event queued now (the descriptor does not block)
// and records them; j.mu is held.
func (j *journal) readLocked() {
	for {
		n, err := unix.Read(int(j.fd.Fd()), j.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		j.record(j.buf[:n])
	}
}

// record applies one read's events; j.mu is held.
func (j *journal) record(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:]))
		mask := binary.NativeEndian.Uint32(b[4:])
		cookie := binary.NativeEndian.Uint32(b[8:])
		n := int(binary.NativeEndian.Uint32(b[12:]))
		if unix.SizeofInotifyEvent+n > len(b) {
			j.untrust()
			return
		}
		name := b[unix.SizeofInotifyEvent : unix.SizeofInotifyEvent+n]
		b = b[unix.SizeofInotifyEvent+n:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0, mask&unix.IN_UNMOUNT != 0, mask&unix.IN_MOVE_SELF != 0:
			j.untrust()
			continue
		case mask&unix.IN_IGNORED != 0:
			delete(j.paths, wd)
			continue
		}
		dir, ok := j.paths[wd]
		if !ok {
			continue
		}
		if len(name) > 0 && mask&unix.IN_ISDIR == 0 && !j.follow(abs(dir, string(name)), mask, cookie) {
			j.untrust()
			continue
		}
		if len(name) > 0 && mask&unix.IN_ISDIR != 0 && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
			if j.fresh == nil {
				j.fresh = map[string]uint64{}
			}
			j.fresh[abs(dir, string(name))] = j.seq
		}
		if len(name) == 0 {
			// The directory's own change (its mode, its removal): its
			// entry is in its parent's listing.
			if i := strings.LastIndexByte(dir, '/'); i > 0 {
				dir = dir[:i]
			}
		}
		j.dirty[dir] = j.seq
		if len(j.dirty)+len(j.fresh) > maxDirty {
			j.untrust()
		}
	}
}

// untrust ends the generation: what the journal did not see may have
// changed anywhere. j.mu is held.
func (j *journal) untrust() {
	j.gen++
	clear(j.dirty)
	clear(j.made)
	clear(j.moving)
	clear(j.fresh)
}

// follow applies an event on the name p, other than a directory's, to
// the names made since their scope's checkpoint, and returns false when a
// made name is gone (removed, replaced, or moved away: moving, until its
// IN_MOVED_TO), or past maxDirty of them. j.mu is held.
func (j *journal) follow(p string, mask, cookie uint32) bool {
	if j.made == nil {
		j.made, j.moving = map[string]uint64{}, map[uint32]bool{}
	}
	_, made := j.made[p]
	switch {
	case mask&unix.IN_CREATE != 0:
		j.made[p] = j.seq
	case mask&unix.IN_MOVED_TO != 0:
		if made {
			return false // what it named is replaced
		}
		delete(j.moving, cookie)
		j.made[p] = j.seq
	case mask&unix.IN_MOVED_FROM != 0 && made:
		delete(j.made, p)
		j.moving[cookie] = true
	case mask&unix.IN_DELETE != 0 && made:
		return false
	}
	return len(j.made) <= maxDirty
}

// settle forgets the made names below root whose events are at most
// m's: a walk of root from m listed their directories. j.mu is not held.
func (j *journal) settle(root string, m journalMark) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for p, seq := range j.made {
		if _, ok := below(p, root); ok && seq <= m.seq {
			delete(j.made, p)
		}
	}
}

// current reads what is queued and reports whether m is still of the
// journal's generation: a walk guided from a base can then vouch for
// what it took from it (a made name gone while it walked may have been
// the link a file it took was written through).
func (j *journal) current(m journalMark) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.readLocked()
	if len(j.moving) > 0 {
		j.untrust() // moved out of the tree
	}
	return j.gen == m.gen
}

// journalMark is a moment in the journal: every event read before it has
// a seq at most seq.
type journalMark struct{ gen, seq uint64 }

// mark reads what is queued and returns the moment after it.
func (j *journal) mark() journalMark {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.readLocked()
	if len(j.moving) > 0 {
		j.untrust() // a made name moved out of the tree
	}
	m := journalMark{gen: j.gen, seq: j.seq}
	j.seq++
	return m
}

// dirtySince returns the directories below root (root included, "." for
// it) with an event after since, as paths relative to root, and false
// when since is of an earlier generation or a directory below root was
// created or moved in after it (fresh).
func (j *journal) dirtySince(root string, since journalMark) ([]string, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.gen != since.gen {
		return nil, false
	}
	for d, seq := range j.fresh {
		if _, ok := below(d, root); ok && seq > since.seq {
			return nil, false
		}
	}
	var out []string
	for d, seq := range j.dirty {
		if seq <= since.seq {
			continue
		}
		if rel, ok := below(d, root); ok {
			out = append(out, rel)
		}
	}
	return out, true
}

// watch adds (or renews) the watch of the open directory fd, whose path is
// abs, and returns it, and whether it is new (the directory was watched
// by no one). It fails past j.bound or the user's limit.
func (j *journal) watch(fd int, abs string) (int32, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.paths) >= j.bound {
		return 0, false, unix.ENOSPC
	}
	// Through the descriptor: the directory the walk opened, whatever
	// its path names now.
	wd, err := unix.InotifyAddWatch(int(j.fd.Fd()), "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
	if err != nil {
		return 0, false, err
	}
	_, had := j.paths[int32(wd)]
	j.paths[int32(wd)] = abs
	return int32(wd), !had, nil
}

// watchTree watches every directory of the tree at the open directory fd,
// whose path is p, listing only names: it runs before a full walk, after
// the walk's mark, so that a directory the walk reaches late is watched
// already, and what is done in it meanwhile raises events (a hard link
// made there, written through and removed, would raise none, and the file
// written may lie in a directory the walk listed already). A directory it
// misses (made meanwhile, past its bound or MaxDepth) gets its watch from
// the walk, which is then no base (walked.newWatch). It stops at the
// first watch it cannot add, and reports whether it reached the end.
func (j *journal) watchTree(fd int, p string, depth int, buf []byte) bool {
	if _, _, err := j.watch(fd, p); err != nil {
		return false
	}
	if depth >= MaxDepth {
		return true
	}
	var names []string
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		if dirents(buf[:n], func(cname []byte, typ byte) error {
			if typ == unix.DT_UNKNOWN {
				var st unix.Stat_t
				if fstatatName(fd, cname, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
					typ = unix.DT_DIR
				}
			}
			if typ == unix.DT_DIR {
				names = append(names, string(cname[:len(cname)-1]))
			}
			return nil
		}) != nil {
			return true // the walk reports it
		}
	}
	for _, name := range names {
		c, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // gone, or no directory: the walk sees what it is
		}
		ok := j.watchTree(c, abs(p, name), depth+1, buf)
		unix.Close(c)
		if !ok {
			return false
		}
	}
	return true
}

// forget removes the watches of directories below root (root included)
// that a full walk of root did not watch again (seen): those moved out of
// the tree or gone.
func (j *journal) forget(root string, seen map[int32]bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for wd, p := range j.paths {
		if _, ok := below(p, root); seen[wd] || !ok {
			continue
		}
		unix.InotifyRmWatch(int(j.fd.Fd()), uint32(wd))
		delete(j.paths, wd)
	}
}

// drop removes every watch of directories below root (root included) and
// ends the generation: a tree the journal cannot hold whole gives its
// watches back to the scopes that fit (and the user's other programs),
// and a base of another scope relying on one of them walks in full.
func (j *journal) drop(root string) {
	j.forget(root, nil)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.untrust()
}

func (j *journal) close() { j.fd.Close() }

// below returns p relative to root ("." for root itself) when p is root or
// below it.
func below(p, root string) (string, bool) {
	if p == root {
		return ".", true
	}
	if root == "/" {
		return p[1:], len(p) > 1 && p[0] == '/'
	}
	rel, ok := strings.CutPrefix(p, root)
	if !ok || len(rel) < 2 || rel[0] != '/' {
		return "", false
	}
	return rel[1:], true
}

// abs is the absolute path of rel below root.
func abs(root, rel string) string {
	switch {
	case rel == ".":
		return root
	case root == "/":
		return "/" + rel
	}
	return root + "/" + rel
}

// localFS reports whether the file system of the open fd reports through
// inotify every change made to it: a local disk or memory one. A network
// or FUSE file system changed by another machine or process raises no
// event here.
func localFS(fd int) bool {
	var sf unix.Statfs_t
	if unix.Fstatfs(fd, &sf) != nil {
		return false
	}
	switch uint32(sf.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, unix.RAMFS_MAGIC, 0x2fc12fc1 /* zfs */ :
		return true
	}
	return false
}

// guide is what a walk after a base checkpoint knows from the journal:
// the directories to list again, and the base's entries to take for the
// rest.
type guide struct {
	prev    []Entry           // the base's entries, sorted by path
	skipped map[string]string // the base's skipped entries
	// list holds the directories to list again (changed since the base,
	// or volatile: a multiply-linked file in them, or on another device),
	// and each of their ancestors.
	list    map[string]bool
	rootDev uint64
	rootIno uint64
	// linked are the multiply-linked files the base saw, each in a
	// directory listed every time; one not among them (newly linked)
	// may have another path in a directory the guide takes from the
	// base.
	linked map[fileID]bool
}

// newGuide builds the guide of a walk from the base b (whose entries are
// base's) and the directories changed since (dirty, relative to the root).
func newGuide(base *Manifest, b *journalBase, dirty []string) *guide {
	g := &guide{prev: base.Entries, skipped: base.Skipped, list: map[string]bool{".": true}, rootDev: b.rootDev, rootIno: b.rootIno, linked: b.linked}
	add := func(d string) {
		for d != "." && d != "" && !g.list[d] {
			g.list[d] = true
			i := strings.LastIndexByte(d, '/')
			if i < 0 {
				break
			}
			d = d[:i]
		}
	}
	for _, d := range dirty {
		add(d)
	}
	for _, d := range b.volatile {
		add(d)
	}
	return g
}

// subtree returns where the entries below the directory e lie in the
// base, when they can be taken from it rather than walked: nothing below
// e changed since the base (no event, nothing volatile), and e is the
// directory the base listed there (same device, inode, mode, and times;
// a directory moved back into place has a new ctime).
func (g *guide) subtree(e *Entry) (lo, hi int, ok bool) {
	if g.list[e.Path] || e.Dev != g.rootDev || e.CTime == 0 {
		return 0, 0, false
	}
	i, found := slices.BinarySearchFunc(g.prev, e.Path, func(x Entry, p string) int { return strings.Compare(x.Path, p) })
	if !found {
		return 0, 0, false
	}
	p := &g.prev[i]
	if p.Type != TypeDir || p.Dev != e.Dev || p.Ino != e.Ino || p.Mode != e.Mode || p.MTime != e.MTime || p.CTime != e.CTime {
		return 0, 0, false
	}
	// e's subtree is the entries from e.Path+"/" up to e.Path+"0" ('0'
	// follows '/').
	rest := g.prev[i+1:]
	lo = i + 1 + sort.Search(len(rest), func(k int) bool { return pastSlash(e.Path, rest[k].Path, '/') })
	hi = i + 1 + sort.Search(len(rest), func(k int) bool { return pastSlash(e.Path, rest[k].Path, '0') })
	return lo, hi, true
}

// pastSlash reports whether x ≥ p+string(c), without building it.
func pastSlash(p, x string, c byte) bool {
	n := min(len(p), len(x))
	if d := strings.Compare(x[:n], p[:n]); d != 0 {
		return d > 0
	}
	if len(x) <= len(p) {
		return false // x ≤ p < p+c
	}
	return x[len(p)] >= c
}

// journalBase is what a scope's newest checkpoint needs of the journal to
// serve as the base of a guided walk.
type journalBase struct {
	id       string // the checkpoint
	mark     journalMark
	rootDev  uint64
	rootIno  uint64
	volatile []string
	linked   map[fileID]bool // the multiply-linked files the walk saw
	mounts   []byte          // /proc/self/mountinfo as the walk began
	// guided counts the guided walks since the scope's last full one
	// (maxGuided).
	guided int
}

// maxGuided bounds the guided walks of a scope between two full ones:
// what the journal cannot see (a write through a mapping still held, a
// hard link made from outside the tree, a descriptor that outlived its
// link) stays unseen for at most that many checkpoints of the scope, and
// a full walk costs as a checkpoint without the journal does.
const maxGuided = 16

// fileID is a file's device and inode.
type fileID struct{ dev, ino uint64 }

// maxLinked bounds the multiply-linked files a journal base remembers:
// past it, the walk is no base.
const maxLinked = 1 << 16

// readMountTable is the process's mount table as the kernel writes it: a
// guided walk needs the one its base was walked under (a mount over a
// directory of the tree raises no event).
// A variable so a test can change the table.
var readMountTable = func() ([]byte, error) {
	return os.ReadFile("/proc/self/mountinfo")
}

// watchTree watches the workspace's tree with j (journal.watchTree) before
// a full walk, where the walk would be journaled (a local file system).
func watchTree(ws fsops.Workspace, j *journal) {
	fd := startDir(ws, ".")
	if fd < 0 {
		return
	}
	defer unix.Close(fd)
	if localFS(fd) {
		j.watchTree(fd, ws.Root(), 0, make([]byte, 32<<10))
	}
}

// mountPointsBelow returns the mount points of the mount table mounts
// (/proc/self/mountinfo) strictly below root, relative to it, and false
// when root's real path cannot be had.
func mountPointsBelow(mounts []byte, root string) ([]string, bool) {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, false
	}
	var out []string
	for _, line := range bytes.Split(mounts, []byte{'\n'}) {
		// id parent major:minor root mount-point options ...
		fields := bytes.Fields(line)
		if len(fields) < 5 {
			continue
		}
		if rel, ok := below(unescapeMount(fields[4]), real); ok && rel != "." {
			out = append(out, rel)
		}
	}
	return out, true
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+3 < len(b) {
			if n, err := strconv.ParseUint(string(b[i+1:i+4]), 8, 8); err == nil {
				out = append(out, byte(n))
				i += 3
				continue
			}
		}
		out = append(out, b[i])
	}
	return string(out)
}
