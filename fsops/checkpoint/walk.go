package checkpoint

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// walked is the state of a workspace tree: its entries sorted by path (a
// directory before what it holds), and what was not captured, with why.
type walked struct {
	entries []Entry
	skipped map[string]string
}

// walkWorkers is how many directories a walk lists at once: the walk is
// one fstatat per entry, and listing directories side by side overlaps
// their system calls.
const walkWorkers = 4

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
// workers from one queue, so what the walk holds is bounded by the tree's
// entries, not its depth. Where ws has a directory (fsops.Workspace's
// OpenDir), each directory is opened from its parent's descriptor
// (fsops.OpenDirAt), one openat whatever its depth, so the walk's cost is
// linear in the tree; a parent's descriptor is shared by its subdirectories
// waiting in the queue and closed after the last one is opened.
func (s *Store) walk(ctx context.Context, ws fsops.Workspace, rel string, max int) (walked, error) {
	w := walked{skipped: map[string]string{}}
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
	var (
		mu     sync.Mutex
		cond   = sync.NewCond(&mu)
		queue  = []dirItem{{rel: rel, own: startDir(ws, rel)}}
		active int
		failed error
	)
	// release drops one reference to h; mu is held.
	release := func(h *heldDir) {
		if h != nil {
			if h.refs--; h.refs == 0 {
				h.f.Close()
			}
		}
	}
	worker := func() {
		mu.Lock()
		defer mu.Unlock()
		for {
			for len(queue) == 0 && active > 0 && failed == nil {
				cond.Wait()
			}
			if len(queue) == 0 || failed != nil {
				cond.Broadcast()
				return
			}
			it := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			dir := it.rel
			active++
			mu.Unlock()
			var list []fsops.Info
			f := it.own
			err := ctx.Err()
			if err != nil {
				err = ctxErr("checkpoint", err)
			} else {
				if it.parent != nil {
					f, err = fsops.OpenDirAt(it.parent.f, path.Base(dir), dir)
				}
				if err == nil && f != nil {
					list, err = fsops.ListDir(f, dir)
				} else if err == nil {
					list, err = ws.ReadDir(dir)
				}
				if err != nil && dir != rel && (errcode.Is(err, errcode.NotFound) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)) {
					err = nil // removed (or replaced by a link or a file) since its parent was listed
				}
			}
			var es []Entry
			var subdirs []string
			skipped := map[string]string{}
			for _, fi := range list {
				fi.Path = path.Join(dir, fi.Name)
				e, why := entryOf(ws, fi)
				if why != "" {
					skipped[fi.Path] = why
					continue
				}
				es = append(es, e)
				if e.Type == TypeDir {
					subdirs = append(subdirs, e.Path)
				}
			}
			mu.Lock()
			active--
			release(it.parent)
			var h *heldDir
			if f != nil && len(subdirs) > 0 && err == nil && failed == nil {
				h = &heldDir{f: f, refs: len(subdirs)}
			} else if f != nil {
				f.Close()
			}
			switch {
			case failed != nil:
			case err != nil:
				failed = err
			case len(w.entries)+len(es) > max:
				failed = tooMany(ws, s.opts.MaxFiles)
			default:
				w.entries = append(w.entries, es...)
				for p, why := range skipped {
					w.skipped[p] = why
				}
				for _, d := range subdirs {
					queue = append(queue, dirItem{rel: d, parent: h})
				}
				h = nil
			}
			if h != nil { // refused: its subdirectories are not queued
				h.f.Close()
			}
			cond.Broadcast()
		}
	}
	var wg sync.WaitGroup
	for range walkWorkers {
		wg.Add(1)
		go func() { defer wg.Done(); worker() }()
	}
	wg.Wait()
	// What a failure left queued still holds descriptors.
	for _, it := range queue {
		release(it.parent)
		if it.own != nil {
			it.own.Close()
		}
	}
	if failed != nil {
		return w, failed
	}
	sortEntries(w.entries)
	return w, nil
}

// dirItem is a directory waiting to be listed: opened already (own, the
// walk's first), or to be opened from its parent's descriptor (parent),
// or, with neither, to be listed by its path.
type dirItem struct {
	rel    string
	own    *os.File
	parent *heldDir
}

// heldDir is a listed directory's descriptor, kept open while
// subdirectories of it wait in the queue (refs of them).
type heldDir struct {
	f    *os.File
	refs int
}

// startDir opens the directory rel of ws by descriptor, from the root
// down one component at a time, never following a link; nil when ws has
// no directory or the way holds a link (then the walk lists by path, which
// follows a link inside the workspace as ReadDir does).
func startDir(ws fsops.Workspace, rel string) *os.File {
	f, err := ws.OpenDir()
	if err != nil {
		return nil
	}
	if rel == "." {
		return f
	}
	so := ""
	for _, c := range strings.Split(rel, "/") {
		so = path.Join(so, c)
		next, err := fsops.OpenDirAt(f, c, so)
		f.Close()
		if err != nil {
			return nil
		}
		f = next
	}
	return f
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
		return e, "not a file, directory or symlink: " + fi.Mode.Type().String()
	}
	return e, ""
}

func sortEntries(es []Entry) {
	sort.Slice(es, func(i, j int) bool { return es[i].Path < es[j].Path })
}
