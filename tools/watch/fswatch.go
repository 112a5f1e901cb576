// Package watch tells a client what changed under a directory of its
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
// The watching itself is the file door's (fsops.WatchTree: the directory
// opened through the caller's workspace, every directory below opened
// through it and watched by descriptor); this package keeps what callers
// see of it: events, cursors, sharing and bounds.
package watch

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
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
	// Tokens says the daemon admits several tokens (--tokens): then the
	// watchers one token started hold at most its share of MaxWatchers
	// (admit.CallerShare). A watcher is shared by every caller that polls
	// its directory; it counts against the token that started it.
	Tokens bool
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
	watchers map[fsops.FileID]*watcher // by the watched directory's identity
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
	return &Manager{opts: opts, watchers: map[fsops.FileID]*watcher{}}
}

// Poll returns the changes under dir (a path of ws) after cursor, waiting
// up to wait for one. cursor < 0 starts following: it returns the current
// cursor and no events at once. caller is the token file entry polling
// ("" for the daemon's own token): a watcher it starts counts against its
// share.
func (m *Manager) Poll(ctx context.Context, caller string, ws fsops.Workspace, dir string, cursor int64, wait time.Duration) (Changes, error) {
	rel, err := ws.Rel(dir)
	if err != nil {
		return Changes{}, err
	}
	// A watcher is shared only by callers whose names lead, through their
	// own workspaces, to the same directory (device and inode).
	info, err := ws.Stat(dir)
	if err != nil {
		return Changes{}, err
	}
	w, err := m.watcher(info.ID(), caller, func() (*watcher, error) { return newWatcher(ws, dir, m.opts) })
	if err != nil {
		return Changes{}, err
	}
	return w.poll(ctx, rel, cursor, min(wait, DefaultMaxWait))
}

// watcher returns the live watcher of directory id, or starts one for
// caller.
func (m *Manager) watcher(id fsops.FileID, caller string, start func() (*watcher, error)) (*watcher, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("fswatch: closed")
	}
	if w := m.watchers[id]; w != nil && !w.ended() {
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
			return nil, &errcode.Error{Code: errcode.TooLarge, Op: "watch_changes",
				Msg: fmt.Sprintf("%d directories are watched already (the limit); one ends %s after its last poll", m.opts.MaxWatchers, m.opts.IdleTimeout)}
		}
	}
	if share := admit.CallerShare(m.opts.MaxWatchers, m.opts.Tokens); share < m.opts.MaxWatchers {
		mine := 0
		for _, w := range m.watchers {
			if w.by == caller && !w.ended() {
				mine++
			}
		}
		if mine >= share {
			return nil, &errcode.Error{Code: errcode.TooLarge, Op: "watch_changes",
				Msg: admit.ShareRefusal(caller, mine, m.opts.MaxWatchers, "watched directories", "them") + fmt.Sprintf(": one ends %s after its last poll", m.opts.IdleTimeout)}
		}
	}
	w, err := start()
	if err != nil {
		return nil, err
	}
	// Keyed by what was opened: if the name changed since the Stat, the
	// opened directory is the one this watcher follows. That directory
	// may be watched already: the live watcher is kept and shared, so a
	// directory swapped under its name never leaves a second watcher
	// running outside the map (and outside MaxWatchers).
	if old := m.watchers[w.tree.ID()]; old != nil && !old.ended() {
		w.stop()
		old.touch()
		return old, nil
	}
	w.by = caller
	m.watchers[w.tree.ID()] = w
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

// watcher is one watched directory tree and what happened in it.
type watcher struct {
	tree *fsops.TreeWatch
	opts Options
	by   string // the token that started it, for its share (under Manager.mu)

	mu       sync.Mutex
	events   []Event       // the last MaxEvents, oldest first
	seq      int64         // the last event's
	dropped  int64         // the seq of the newest event dropped (0: none)
	changed  chan struct{} // closed and replaced at each new event
	lastPoll time.Time
	idle     *time.Timer
	end      error // why it ended, once it has
}

func newWatcher(ws fsops.Workspace, dir string, opts Options) (*watcher, error) {
	w := &watcher{opts: opts, changed: make(chan struct{}), lastPoll: time.Now()}
	tree, err := fsops.WatchTree(ws, dir, fsops.TreeWatchOptions{MaxDirs: opts.MaxDirs, MaxPath: maxPath},
		func(c fsops.Change) { w.record(c.Path, c.Op) },
		func() { // the kernel dropped events, or a new directory is past MaxDirs: anything after the last may be missing
			w.mu.Lock()
			w.dropped = w.seq + 1
			w.mu.Unlock()
		},
		w.stop) // the watched directory itself moved or was removed
	if err != nil {
		return nil, withOp(err)
	}
	w.mu.Lock()
	w.tree = tree
	ended := w.end != nil // gone before it was kept
	w.mu.Unlock()
	if ended {
		tree.Close()
	}
	w.idle = time.AfterFunc(opts.IdleTimeout, w.checkIdle)
	return w, nil
}

// withOp names the tool in a file door error.
func withOp(err error) error {
	var e *errcode.Error
	if errors.As(err, &e) && e.Op == "watch" {
		c := *e
		c.Op = "watch_changes"
		return &c
	}
	return err
}

// maxPath bounds the paths a watcher reports: deeper directories are not
// watched.
const maxPath = 4096

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
	w.end = &errcode.Error{Code: errcode.InvalidArgument, Op: "watch_changes", Msg: "the watch ended (idle, its directory moved, or the daemon is stopping); start again without a cursor"}
	close(w.changed)
	w.changed = make(chan struct{})
	tree := w.tree
	w.mu.Unlock()
	if w.idle != nil {
		w.idle.Stop()
	}
	if tree != nil {
		tree.Close()
	}
}
