package checkpoint

import (
	"context"
	"io/fs"
	"path"
	"sort"
	"strconv"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// walked is the state of a workspace tree: its entries sorted by path (a
// directory before what it holds), and what was not captured, with why.
type walked struct {
	entries []Entry
	skipped map[string]string
}

// walk lists the tree below rel (rel itself included unless it is the
// root) through ws, without following symlinks, reading no file. It stops
// with ctx's error when ctx is done and refuses a tree of more than
// MaxFiles entries naming --checkpoint-max-files.
func (s *Store) walk(ctx context.Context, ws fsops.Workspace, rel string) (walked, error) {
	w := walked{skipped: map[string]string{}}
	var visit func(dir string) error
	add := func(fi fsops.Info) (descend bool, err error) {
		if len(w.entries) >= s.opts.MaxFiles {
			return false, &errcode.Error{Code: errcode.TooLarge, Op: "checkpoint", Path: ws.Root(),
				Msg:  "the workspace holds more than --checkpoint-max-files (" + strconv.Itoa(s.opts.MaxFiles) + ") entries",
				Hint: "raise --checkpoint-max-files, or keep large generated trees out of the workspace"}
		}
		e, why := entryOf(ws, fi)
		if why != "" {
			w.skipped[fi.Path] = why
			return false, nil
		}
		w.entries = append(w.entries, e)
		return e.Type == TypeDir, nil
	}
	visit = func(dir string) error {
		if err := ctx.Err(); err != nil {
			return ctxErr("checkpoint", err)
		}
		list, err := ws.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, fi := range list {
			fi.Path = path.Join(dir, fi.Name)
			descend, err := add(fi)
			if err != nil {
				return err
			}
			if descend {
				if err := visit(fi.Path); err != nil {
					return err
				}
			}
		}
		return nil
	}
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
		descend, err := add(fi)
		if err != nil || !descend {
			return w, err
		}
	}
	if err := visit(rel); err != nil {
		return w, err
	}
	sortEntries(w.entries)
	return w, nil
}

// entryOf describes one listed entry, or says why it is not captured.
func entryOf(ws fsops.Workspace, fi fsops.Info) (Entry, string) {
	e := Entry{Path: fi.Path, Mode: uint32(fi.Mode.Perm() | fi.Mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))}
	switch {
	case fi.Mode.IsRegular():
		id := fi.ID()
		e.Type, e.Size, e.Dev, e.Ino, e.MTime = TypeFile, fi.Size, id.Dev, id.Ino, fi.ModTime.UnixNano()
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
