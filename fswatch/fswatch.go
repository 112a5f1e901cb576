// Package fswatch tells a client what changed under a directory of its
// workspace: the watch_changes tool (behind --watch-tools), a long poll
// with a cursor, so an agent or a UI can follow a build's output directory
// over stateless HTTP as well as over a session.
//
// The first call for a directory starts a watcher (inotify, on the
// directory and every directory below it) and returns
// the cursor of "now"; each later call with that cursor returns the
// changes after it, waiting up to its timeout for the first one. Changes
// to one path within the debounce window are one event. Everything is
// bounded: watchers (MaxWatchers, each ending after IdleTimeout without a
// poll), directories per watcher (MaxDirs), events kept per watcher
// (MaxEvents: an older cursor gets "truncated").
//
// Confinement: the watched directory is opened by the workspace (fsops:
// the caller's scope, no link out), and the watcher keeps that directory
// as an os.Root; every directory below it is opened through that root
// (which refuses a way out) and watched by its descriptor
// (inotify_add_watch on /proc/self/fd/N), never by a name resolved
// again. A directory swapped for a link between the listing and the open
// is refused by the root, or watched where the root says it is. Event
// paths are relative to the call's workspace.
package fswatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// Bounds; Options may lower or raise them.
const (
	DefaultMaxWatchers = 16
	DefaultMaxDirs     = 4096
	DefaultMaxEvents   = 1024
	DefaultIdleTimeout = 2 * time.Minute
	DefaultDebounce    = 100 * time.Millisecond
	DefaultMaxWait     = 60 * time.Second
)

// Options configure a Manager.
type Options struct {
	MaxWatchers, MaxDirs, MaxEvents int
	IdleTimeout, Debounce           time.Duration
}

// Event is one change.
type Event struct {
	Seq  int64     `json:"seq"`
	Path string    `json:"path"` // relative to the call's workspace, "/"-separated
	Op   string    `json:"op"`   // create, write, remove, rename, chmod (joined with "|" when coalesced)
	Time time.Time `json:"time"`
}

// Changes is what a poll returns.
type Changes struct {
	Cursor    int64   `json:"cursor"`
	Events    []Event `json:"events"`
	Truncated bool    `json:"truncated,omitempty"` // events after the given cursor were dropped (MaxEvents)
}

// Manager holds the watchers.
type Manager struct {
	opts     Options
	mu       sync.Mutex
	watchers map[dirID]*watcher // by the watched directory's identity
	closed   bool
}

// New returns a Manager.
func New(opts Options) *Manager {
	if opts.MaxWatchers <= 0 {
		opts.MaxWatchers = DefaultMaxWatchers
	}
	if opts.MaxDirs <= 0 {
		opts.MaxDirs = DefaultMaxDirs
	}
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = DefaultMaxEvents
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	return &Manager{opts: opts, watchers: map[dirID]*watcher{}}
}

// Poll returns the changes under dir (a path of ws) after cursor, waiting
// up to wait for one. cursor < 0 starts following: it returns the current
// cursor and no events at once.
func (m *Manager) Poll(ctx context.Context, ws fsops.Workspace, dir string, cursor int64, wait time.Duration) (Changes, error) {
	rel, err := ws.Rel(dir)
	if err != nil {
		return Changes{}, err
	}
	// The directory this caller's name leads to now, opened through its
	// workspace: a watcher is shared only by callers whose names lead to
	// the same directory (device and inode), whatever the names.
	top, id, err := openTop(ws, dir)
	if err != nil {
		return Changes{}, err
	}
	w, err := m.watcher(id, top)
	if err != nil {
		return Changes{}, err
	}
	return w.poll(ctx, rel, cursor, min(wait, DefaultMaxWait))
}

// dirID is a directory's identity.
type dirID struct{ dev, ino uint64 }

// openTop opens dir of ws as a root a watcher can keep: through the
// workspace (its confinement), then by descriptor; and says which
// directory it is.
func openTop(ws fsops.Workspace, dir string) (*os.Root, dirID, error) {
	notDir := &errcode.Error{Code: errcode.InvalidArgument, Op: "watch_changes", Path: dir, Msg: "not a directory of the workspace"}
	sc, err := ws.Scope(dir)
	if err != nil {
		return nil, dirID{}, err
	}
	defer sc.Close()
	f, err := sc.OpenDir()
	if err != nil {
		return nil, dirID{}, notDir
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, dirID{}, notDir
	}
	r, err := os.OpenRoot(fdPath(f))
	if err != nil {
		return nil, dirID{}, notDir
	}
	return r, dirID{uint64(st.Dev), st.Ino}, nil
}

func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// watcher returns the live watcher of directory id, or makes one on top
// (which it then owns; otherwise top is closed).
func (m *Manager) watcher(id dirID, top *os.Root) (*watcher, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		top.Close()
		return nil, errors.New("fswatch: closed")
	}
	if w := m.watchers[id]; w != nil && !w.ended() {
		top.Close()
		w.touch()
		return w, nil
	}
	if len(m.watchers) >= m.opts.MaxWatchers {
		for k, w := range m.watchers { // drop ended ones first
			if w.ended() {
				delete(m.watchers, k)
			}
		}
		if len(m.watchers) >= m.opts.MaxWatchers {
			top.Close()
			return nil, &errcode.Error{Code: errcode.TooLarge, Op: "watch_changes",
				Msg: fmt.Sprintf("%d directories are watched already (the limit); one ends %s after its last poll", m.opts.MaxWatchers, m.opts.IdleTimeout)}
		}
	}
	w, err := newWatcher(top, m.opts)
	if err != nil {
		top.Close()
		return nil, err
	}
	m.watchers[id] = w
	return w, nil
}

// Close ends every watcher.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	ws := m.watchers
	m.watchers = nil
	m.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
	return nil
}

// watcher is one watched directory tree.
type watcher struct {
	top  *os.Root // the watched directory, opened through the workspace
	opts Options
	ifd  *os.File // the inotify instance
	done chan struct{}

	mu       sync.Mutex
	dirs     map[int32]dirEntry // watch descriptor → where the directory is in the tree
	events   []Event            // the last MaxEvents, oldest first
	seq      int64              // the last event's
	dropped  int64              // the seq of the newest event dropped (0: none)
	changed  chan struct{}      // closed and replaced at each new event
	lastPoll time.Time
	idle     *time.Timer
	end      error // why it ended, once it has
}

// dirEntry is a watched directory: its parent's watch descriptor (-1 for
// the top) and its name there. Paths are built from the chain when an
// event needs one, so a deep tree costs a name per directory, not a path.
type dirEntry struct {
	parent int32
	name   string
}

// maxPath bounds the paths the watcher builds and reports: deeper
// directories are not watched.
const maxPath = 4096

// watchMask is what each directory is watched for.
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

func newWatcher(top *os.Root, opts Options) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, &errcode.Error{Code: errcode.TooLarge, Op: "watch_changes", Msg: "cannot create an inotify instance (fs.inotify.max_user_instances?)", Err: err}
	}
	w := &watcher{top: top, opts: opts, ifd: os.NewFile(uintptr(fd), "inotify"), done: make(chan struct{}),
		dirs: map[int32]dirEntry{}, changed: make(chan struct{}), lastPoll: time.Now()}
	if err := w.addTree(-1, "", "."); err != nil {
		w.ifd.Close()
		return nil, err
	}
	w.idle = time.AfterFunc(opts.IdleTimeout, w.checkIdle)
	go w.loop()
	return w, nil
}

// pathOf is the path of watch wd's directory relative to the top ("."
// for the top); false once the chain is broken (a directory removed).
// Held: w.mu.
func (w *watcher) pathOf(wd int32) (string, bool) {
	var parts []string
	for n := 0; wd != -1; n++ {
		e, ok := w.dirs[wd]
		if !ok || n > len(w.dirs) {
			return "", false
		}
		if e.parent != -1 {
			parts = append(parts, e.name)
		}
		wd = e.parent
	}
	if len(parts) == 0 {
		return ".", true
	}
	slices.Reverse(parts)
	return filepath.Join(parts...), true
}

// addTree watches rel (relative to top; name in parent) and the
// directories below it, each opened through top and watched by its
// descriptor.
func (w *watcher) addTree(parent int32, name, rel string) error {
	if len(rel) > maxPath {
		return nil // too deep to name: not watched
	}
	d, err := w.top.OpenFile(rel, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		if rel == "." {
			return err
		}
		return nil // gone meanwhile, a link, or not a directory: not watched
	}
	wd, err := w.addDir(d, parent, name, rel)
	if err != nil || wd < 0 {
		d.Close()
		return err
	}
	ents, _ := d.ReadDir(-1)
	d.Close()
	for _, e := range ents {
		if e.IsDir() { // from the listing: a link is not a directory here
			if err := w.addTree(wd, e.Name(), filepath.Join(rel, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// addDir watches the open directory d; wd -1 when it could not be.
func (w *watcher) addDir(d *os.File, parent int32, name, rel string) (int32, error) {
	w.mu.Lock()
	n := len(w.dirs)
	w.mu.Unlock()
	if n >= w.opts.MaxDirs {
		return -1, &errcode.Error{Code: errcode.TooLarge, Op: "watch_changes", Path: rel,
			Msg: fmt.Sprintf("more than %d directories below the watched one; watch a smaller part", w.opts.MaxDirs)}
	}
	wd, err := unix.InotifyAddWatch(int(w.ifd.Fd()), fdPath(d), watchMask)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return -1, &errcode.Error{Code: errcode.TooLarge, Op: "watch_changes", Path: rel, Msg: "the system's inotify watch limit is reached (fs.inotify.max_user_watches)"}
		}
		return -1, nil
	}
	w.mu.Lock()
	w.dirs[int32(wd)] = dirEntry{parent: parent, name: name}
	w.mu.Unlock()
	return int32(wd), nil
}

func (w *watcher) loop() {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.ifd.Read(buf)
		if err != nil {
			return // closed (stop), or the instance failed
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameLen := int(ev.Len)
			name := ""
			if nameLen > 0 && off+unix.SizeofInotifyEvent+nameLen <= n {
				raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen]
				if i := bytes.IndexByte(raw, 0); i >= 0 {
					raw = raw[:i]
				}
				name = string(raw)
			}
			off += unix.SizeofInotifyEvent + nameLen
			w.handle(ev.Wd, ev.Mask, name)
		}
	}
}

func (w *watcher) handle(wd int32, mask uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.mu.Lock()
		w.dropped = w.seq + 1 // everything up to the next event may be missing
		w.mu.Unlock()
		return
	}
	w.mu.Lock()
	e, watched := w.dirs[wd]
	if watched && e.parent == -1 && mask&(unix.IN_MOVE_SELF|unix.IN_DELETE_SELF) != 0 {
		// The watched directory itself left: what happens to it now is
		// not under the name it was watched by.
		w.mu.Unlock()
		w.stop()
		return
	}
	if mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF) != 0 {
		delete(w.dirs, wd)
	}
	dir, ok := w.pathOf(wd)
	w.mu.Unlock()
	if !watched || !ok || name == "" {
		return
	}
	rel := filepath.Join(dir, name)
	if len(rel) > maxPath {
		return
	}
	if mask&unix.IN_ISDIR != 0 {
		switch {
		case mask&unix.IN_MOVED_FROM != 0:
			w.unwatch(wd, name) // moved out of the tree, or about to reappear under MOVED_TO
		case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			_ = w.addTree(wd, name, rel) // a new directory: follow it too (an error is its limit)
		}
	}
	w.record(rel, opOf(mask))
}

// unwatch stops watching the directory name of parent and everything
// below it: a directory moved elsewhere is not followed there.
func (w *watcher) unwatch(parent int32, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gone []int32
	for wd, e := range w.dirs {
		if e.parent == parent && e.name == name {
			gone = append(gone, wd)
		}
	}
	for i := 0; i < len(gone); i++ { // and their descendants
		for wd, e := range w.dirs {
			if e.parent == gone[i] {
				gone = append(gone, wd)
			}
		}
	}
	for _, wd := range gone {
		delete(w.dirs, wd)
		_, _ = unix.InotifyRmWatch(int(w.ifd.Fd()), uint32(wd))
	}
}

// opOf names an inotify event's change.
func opOf(mask uint32) string {
	switch {
	case mask&unix.IN_CREATE != 0:
		return "create"
	case mask&unix.IN_MODIFY != 0:
		return "write"
	case mask&unix.IN_DELETE != 0:
		return "remove"
	case mask&(unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0:
		return "rename"
	}
	return "chmod"
}

// record adds one change, merged into the last event when it is the same
// path within the debounce window.
func (w *watcher) record(rel, op string) {
	now := time.Now()
	rel = filepath.ToSlash(rel)
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.events); n > 0 {
		last := &w.events[n-1]
		if last.Path == rel && now.Sub(last.Time) < w.opts.Debounce {
			if !strings.Contains("|"+last.Op+"|", "|"+op+"|") {
				last.Op += "|" + op
			}
			last.Time = now
			return
		}
	}
	w.seq++
	w.events = append(w.events, Event{Seq: w.seq, Path: rel, Op: op, Time: now})
	if len(w.events) > w.opts.MaxEvents {
		w.dropped = w.events[0].Seq
		w.events = append(w.events[:0], w.events[1:]...)
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// poll returns the events after cursor, rooted at wsRoot (the call's
// workspace, which may be above the watched directory).
func (w *watcher) poll(ctx context.Context, prefix string, cursor int64, wait time.Duration) (Changes, error) {
	w.touch()
	w.mu.Lock()
	if cursor < 0 || cursor > w.seq {
		// Starting, or a cursor of an earlier watch of this directory
		// (it ended): from now on, saying what may have been missed.
		ch := Changes{Cursor: w.seq, Events: []Event{}, Truncated: cursor > w.seq}
		w.mu.Unlock()
		return ch, nil
	}
	w.mu.Unlock()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	settled := false // one debounce wait per poll: writes that never pause cannot hold it
	for {
		w.mu.Lock()
		if w.end != nil {
			err := w.end
			w.mu.Unlock()
			return Changes{}, err
		}
		if w.seq > cursor {
			// Let the debounce window close on the newest change, so a
			// burst arrives as one answer.
			if d := w.opts.Debounce - time.Since(w.events[len(w.events)-1].Time); d > 0 && !settled {
				w.mu.Unlock()
				settled = true
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-deadline.C:
				case <-ctx.Done():
					t.Stop()
					return Changes{}, ctx.Err()
				}
				t.Stop()
				continue
			}
			ch := w.collect(prefix, cursor)
			w.mu.Unlock()
			return ch, nil
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			w.mu.Lock()
			defer w.mu.Unlock()
			return Changes{Cursor: w.seq, Events: []Event{}}, nil
		case <-ctx.Done():
			return Changes{}, ctx.Err()
		}
	}
}

// collect is the events after cursor, their paths under prefix (the
// watched directory as the caller named it). Held: w.mu.
func (w *watcher) collect(prefix string, cursor int64) Changes {
	out := Changes{Cursor: w.seq, Events: []Event{}, Truncated: w.dropped > cursor}
	for _, e := range w.events {
		if e.Seq > cursor {
			if prefix != "." && prefix != "" {
				e.Path = filepath.ToSlash(filepath.Join(prefix, e.Path))
			}
			out.Events = append(out.Events, e)
		}
	}
	return out
}

func (w *watcher) touch() {
	w.mu.Lock()
	w.lastPoll = time.Now()
	w.mu.Unlock()
}

// checkIdle ends the watcher after IdleTimeout without a poll.
func (w *watcher) checkIdle() {
	w.mu.Lock()
	idle := time.Since(w.lastPoll)
	w.mu.Unlock()
	if idle < w.opts.IdleTimeout {
		w.idle.Reset(w.opts.IdleTimeout - idle)
		return
	}
	w.stop()
}

func (w *watcher) ended() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.end != nil
}

func (w *watcher) stop() {
	w.mu.Lock()
	if w.end != nil {
		w.mu.Unlock()
		return
	}
	w.end = &errcode.Error{Code: errcode.InvalidArgument, Op: "watch_changes", Msg: "the watch ended (idle, or the daemon is stopping); start again without a cursor"}
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
	if w.idle != nil {
		w.idle.Stop()
	}
	close(w.done)
	w.ifd.Close() // ends loop's Read
	w.top.Close()
}
