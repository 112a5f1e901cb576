package checkpoint

import (
	"context"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
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
// below it is walked. Each listing names its directory from the root (one
// openat per component), so listing a directory costs in proportion to
// its depth (about 2.6 µs a component here: 170 µs at depth 64, 560 µs at
// 256), and a manifest's size grows with the paths' lengths: MaxDepth
// keeps a tree of deep directories to a few times the cost of a usual one
// (real trees, node_modules and Java packages included, stay below 40).
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
// entries, not its depth.
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
		queue  = []string{rel}
		active int
		failed error
	)
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
			dir := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			active++
			mu.Unlock()
			var list []fsops.Info
			err := ctx.Err()
			if err != nil {
				err = ctxErr("checkpoint", err)
			} else {
				list, err = ws.ReadDir(dir)
				if err != nil && dir != rel && errcode.Is(err, errcode.NotFound) {
					err = nil // removed since its parent was listed
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
				queue = append(queue, subdirs...)
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
	if failed != nil {
		return w, failed
	}
	sortEntries(w.entries)
	return w, nil
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
