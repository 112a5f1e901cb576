package checkpoint

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// applyTemp prefixes the temp names Apply makes a symlink under before
// renaming it over its path.
const applyTemp = ".agentbe-apply-"

// Conflict is one path Apply will not change: the workspace's entry is not
// what the command left (Why says how), or the change cannot be made
// there (a symlink leading out of the workspace).
type Conflict struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// ConflictError is Apply's refusal: nothing was changed.
type ConflictError struct{ Conflicts []Conflict }

func (e *ConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "refused: %d conflicting path(s), nothing applied:", len(e.Conflicts))
	for _, c := range e.Conflicts {
		fmt.Fprintf(&b, "\n  %s: %s", c.Path, c.Why)
	}
	return b.String()
}

// Conflicts lists the paths of u's plan whose workspace entry in ws differs
// from what the command left, or that cannot be applied (a symlink leading
// out of ws); none means Apply would go ahead.
func (u *Upper) Conflicts(ws fsops.Workspace) ([]Conflict, error) {
	var out []Conflict
	for _, s := range u.steps {
		fi, ok, err := wsLstat(ws, s.path)
		if err != nil {
			return nil, err
		}
		now := Base{}
		if ok {
			now = Base{Exists: true, Mode: fi.Mode, Size: fi.Size, ModTime: fi.ModTime, ID: fi.ID()}
		}
		if why := s.base.differs(now); why != "" {
			out = append(out, Conflict{Path: s.path, Why: why})
			continue
		}
		if s.mode&fs.ModeSymlink != 0 && s.kind != KindDeleted && s.kind != kindCheck && leadsOut(s.path, s.target, ws.Root()) {
			out = append(out, Conflict{Path: s.path, Why: "a symlink to " + s.target + ", which leads out of the workspace"})
		}
	}
	return out, nil
}

// leadsOut reports a symlink at p (relative to root) whose target resolves
// outside root, by name: fsops refuses to make one, and Apply checks first
// so that it refuses before it changes anything.
func leadsOut(p, target, root string) bool {
	if path.IsAbs(target) {
		return target != root && !strings.HasPrefix(target, root+"/")
	}
	j := path.Join(path.Dir(p), target)
	return j == ".." || strings.HasPrefix(j, "../")
}

// Apply makes u's changes in ws, each file replaced atomically (fsops's
// WriteFile: a temp file renamed over it; a symlink made under a temp name
// and renamed; a deletion removes the entry with what it holds), after
// checking every path: when any conflicts (Conflicts), nothing is changed
// and the error is a *ConflictError listing them. It returns the changes
// made; on an I/O error, those made before it with the error.
func (u *Upper) Apply(ctx context.Context, ws fsops.Workspace) (ChangeSet, error) {
	conflicts, err := u.Conflicts(ws)
	if err != nil {
		return ChangeSet{}, err
	}
	if len(conflicts) > 0 {
		return ChangeSet{}, &ConflictError{Conflicts: conflicts}
	}
	var done ChangeSet
	done.Changes = []Change{}
	for _, s := range u.steps {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		if s.kind == kindCheck {
			continue
		}
		if err := u.apply(ws, s); err != nil {
			return done, err
		}
		c := Change{Path: s.path, Kind: s.kind, Type: modeType(s.mode)}
		if s.kind == KindDeleted {
			c.Type = modeType(s.base.Mode)
		}
		done.Add(c)
	}
	return done, nil
}

func (u *Upper) apply(ws fsops.Workspace, s step) error {
	if s.kind == KindDeleted {
		return ws.Remove(s.path, fsops.RemoveOptions{Recursive: true, Force: true})
	}
	// A type change: the old entry goes first (a directory with what it
	// held: the layer lists what it holds anew).
	if s.base.Exists && s.base.Mode.Type() != s.mode.Type() {
		if err := ws.Remove(s.path, fsops.RemoveOptions{Recursive: true, Force: true}); err != nil {
			return err
		}
	}
	switch {
	case s.mode.IsDir():
		if err := ws.Mkdir(s.path, true); err != nil && !errcode.Is(err, errcode.AlreadyExists) {
			return err
		}
		return ws.Chmod(s.path, s.mode.Perm())
	case s.mode&fs.ModeSymlink != 0:
		tmp := path.Join(path.Dir(s.path), applyTemp+randHex())
		if err := ws.Symlink(s.target, tmp); err != nil {
			return err
		}
		if err := ws.Rename(tmp, s.path); err != nil {
			_ = ws.Remove(tmp, fsops.RemoveOptions{Force: true})
			return err
		}
		return nil
	}
	data, err := u.root.ReadFile(s.path)
	if err != nil {
		return upperErr(s.path, err)
	}
	if err := ws.WriteFile(s.path, data); err != nil {
		return err
	}
	return ws.Chmod(s.path, s.mode.Perm())
}
