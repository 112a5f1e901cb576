// Package fswatch tells a client what changed under a directory of its
// workspace: the watch_changes tool (behind --watch-tools), a long poll
// with a cursor, so an agent or a UI can follow a build's output directory
// over stateless HTTP as well as over a session.
//
// The first call for a directory starts a watcher (inotify through
// fsnotify, on the directory and every directory below it) and returns
// the cursor of "now"; each later call with that cursor returns the
// changes after it, waiting up to its timeout for the first one. Changes
// to one path within the debounce window are one event. Everything is
// bounded: watchers (MaxWatchers, each ending after IdleTimeout without a
// poll), directories per watcher (MaxDirs), events kept per watcher
// (MaxEvents: an older cursor gets "truncated").
//
// Confinement: the directory is resolved by the workspace (fsops) and
// must be a directory, not a link; directories found below it are
// watched only if they are real directories, checked again (device and
// inode) after the watch is added, so a directory swapped for a link to
// somewhere else is not followed; event paths are reported relative to
// the call's workspace, and only for directories the watcher added.
package fswatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

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
	watchers map[string]*watcher // by absolute directory
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
	return &Manager{opts: opts, watchers: map[string]*watcher{}}
}

// Poll returns the changes under dir (a path of ws) after cursor, waiting
// up to wait for one. cursor < 0 starts following: it returns the current
// cursor and no events at once.
func (m *Manager) Poll(ctx context.Context, ws fsops.Workspace, dir string, cursor int64, wait time.Duration) (Changes, error) {
	abs, err := ws.Resolve(dir)
	if err != nil {
		return Changes{}, err
	}
	fi, err := os.Lstat(abs)
	if err != nil || !fi.IsDir() {
		return Changes{}, &errcode.Error{Code: errcode.InvalidArgument, Op: "watch_changes", Path: dir, Msg: "not a directory of the workspace"}
	}
	w, err := m.watcher(abs)
	if err != nil {
		return Changes{}, err
	}
	return w.poll(ctx, ws.Root(), cursor, min(wait, DefaultMaxWait))
}

func (m *Manager) watcher(abs string) (*watcher, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("fswatch: closed")
	}
	if w := m.watchers[abs]; w != nil && !w.ended() {
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
			return nil, &errcode.Error{Code: errcode.TooLarge, Op: "watch_changes", Path: abs,
				Msg: fmt.Sprintf("%d directories are watched already (the limit); one ends %s after its last poll", m.opts.MaxWatchers, m.opts.IdleTimeout)}
		}
	}
	w, err := newWatcher(abs, m.opts)
	if err != nil {
		return nil, err
	}
	m.watchers[abs] = w
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
	root string
	opts Options
	fw   *fsnotify.Watcher
	done chan struct{}

	mu       sync.Mutex
	dirs     map[string]bool // absolute directories being watched
	events   []Event         // the last MaxEvents, oldest first
	seq      int64           // the last event's
	dropped  int64           // the seq of the newest event dropped (0: none)
	changed  chan struct{}   // closed and replaced at each new event
	lastPoll time.Time
	idle     *time.Timer
	end      error // why it ended, once it has
}

func newWatcher(root string, opts Options) (*watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, &errcode.Error{Code: errcode.TooLarge, Op: "watch_changes", Msg: "cannot create an inotify instance", Err: err}
	}
	w := &watcher{root: root, opts: opts, fw: fw, done: make(chan struct{}), dirs: map[string]bool{},
		changed: make(chan struct{}), lastPoll: time.Now()}
	if err := w.addTree(root); err != nil {
		fw.Close()
		return nil, err
	}
	w.idle = time.AfterFunc(opts.IdleTimeout, w.checkIdle)
	go w.loop()
	return w, nil
}

// addTree watches dir and the real directories below it.
func (w *watcher) addTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // gone meanwhile, or unreadable: not watched
		}
		if !d.IsDir() { // a link to a directory is not a directory here
			return nil
		}
		return w.addDir(p)
	})
}

// addDir watches one directory if it is (still) a real one, and checks
// after adding that the name still holds that directory.
func (w *watcher) addDir(p string) error {
	w.mu.Lock()
	n := len(w.dirs)
	known := w.dirs[p]
	w.mu.Unlock()
	if known {
		return nil
	}
	if n >= w.opts.MaxDirs {
		return &errcode.Error{Code: errcode.TooLarge, Op: "watch_changes", Path: p,
			Msg: fmt.Sprintf("more than %d directories below the watched one; watch a smaller part", w.opts.MaxDirs)}
	}
	before, err := os.Lstat(p)
	if err != nil || !before.IsDir() {
		return nil
	}
	if err := w.fw.Add(p); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return &errcode.Error{Code: errcode.TooLarge, Op: "watch_changes", Path: p, Msg: "the system's inotify watch limit is reached (fs.inotify.max_user_watches)"}
		}
		return nil
	}
	after, err := os.Lstat(p)
	if err != nil || !after.IsDir() || !os.SameFile(before, after) {
		_ = w.fw.Remove(p) // swapped while being added: not followed
		return nil
	}
	w.mu.Lock()
	w.dirs[p] = true
	w.mu.Unlock()
	return nil
}

func (w *watcher) loop() {
	for {
		select {
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			w.handle(ev)
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.mu.Lock()
				w.dropped = w.seq + 1 // everything up to the next event may be missing
				w.mu.Unlock()
			}
		case <-w.done:
			return
		}
	}
}

func (w *watcher) handle(ev fsnotify.Event) {
	dir := filepath.Dir(ev.Name)
	w.mu.Lock()
	watched := w.dirs[dir]
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		delete(w.dirs, ev.Name)
	}
	w.mu.Unlock()
	if !watched {
		return
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			_ = w.addTree(ev.Name) // a new directory: follow it too (errors: its limit)
		}
	}
	rel, err := filepath.Rel(w.root, ev.Name)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return
	}
	op := opName(ev.Op)
	now := time.Now()
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
	w.events = append(w.events, Event{Seq: w.seq, Path: filepath.ToSlash(rel), Op: op, Time: now})
	if len(w.events) > w.opts.MaxEvents {
		w.dropped = w.events[0].Seq
		w.events = append(w.events[:0], w.events[1:]...)
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

func opName(op fsnotify.Op) string {
	var names []string
	for _, o := range []struct {
		op   fsnotify.Op
		name string
	}{{fsnotify.Create, "create"}, {fsnotify.Write, "write"}, {fsnotify.Remove, "remove"}, {fsnotify.Rename, "rename"}, {fsnotify.Chmod, "chmod"}} {
		if op.Has(o.op) {
			names = append(names, o.name)
		}
	}
	return strings.Join(names, "|")
}

// poll returns the events after cursor, rooted at wsRoot (the call's
// workspace, which may be above the watched directory).
func (w *watcher) poll(ctx context.Context, wsRoot string, cursor int64, wait time.Duration) (Changes, error) {
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
			wait := w.opts.Debounce - time.Since(w.events[len(w.events)-1].Time)
			if wait > 0 {
				w.mu.Unlock()
				time.Sleep(wait)
				continue
			}
			ch := w.collect(wsRoot, cursor)
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

// collect is the events after cursor, with their paths relative to
// wsRoot. Held: w.mu.
func (w *watcher) collect(wsRoot string, cursor int64) Changes {
	prefix, _ := filepath.Rel(wsRoot, w.root)
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
	w.fw.Close()
}
