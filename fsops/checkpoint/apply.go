package checkpoint

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
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
	// A directory's mode is set after what it holds is written, deepest
	// first (as Restore does): a directory the command made read-only
	// (mkdir d; echo x > d/f; chmod 555 d) would refuse d/f otherwise.
	var dirModes []step
	defer func() {
		for i := len(dirModes) - 1; i >= 0; i-- {
			_ = ws.Chmod(dirModes[i].path, dirModes[i].mode.Perm())
		}
	}()
	for _, s := range u.steps {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		switch s.kind {
		case kindCheck:
			continue
		case kindClear:
			n, err := u.clear(ctx, ws, s.path)
			done.Deleted += n
			if n > 0 {
				done.Truncated = true
				done.Notice = "changes cut: the entries an opaque directory hid are counted, not listed"
			}
			if err != nil {
				return done, err
			}
			continue
		}
		if err := u.apply(ws, s); err != nil {
			return done, err
		}
		if s.kind != KindDeleted && s.mode.IsDir() {
			dirModes = append(dirModes, s)
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
		// Its mode is set by Apply once what it holds is written.
		if err := ws.Mkdir(s.path, true); err != nil && !errcode.Is(err, errcode.AlreadyExists) {
			return err
		}
		return nil
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
	return u.copyFile(ws, s)
}

// copyFile streams the layer's file at s.path into a temp file beside it
// in ws, gives it its mode and renames it over s.path: memory stays one
// buffer whatever the size, and at most the size ReadUpper counted (and
// bounded by UpperLimits.MaxBytes) is written.
func (u *Upper) copyFile(ws fsops.Workspace, s step) error {
	src, err := u.root.Open(s.path)
	if err != nil {
		return upperErr(s.path, err)
	}
	defer src.Close()
	tmp := path.Join(path.Dir(s.path), applyTemp+randHex())
	f, err := ws.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(src, s.size+1))
	if err == nil && n != s.size {
		err = &errcode.Error{Code: errcode.WriteFailed, Op: "transaction_apply", Path: s.path,
			Msg: fmt.Sprintf("the layer's file is %d bytes, not the %d it held when the transaction was read", n, s.size)}
	}
	if err == nil {
		// The mode goes on the descriptor written, not on whatever the
		// temp name holds by now.
		err = fsops.Fchmod(f, s.mode.Perm())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ws.Rename(tmp, s.path)
	}
	if err != nil {
		_ = ws.Remove(tmp, fsops.RemoveOptions{Force: true})
		return err
	}
	return nil
}

// clear removes every entry of the workspace's directory p that the
// layer's p does not hold (kindClear), and counts them.
func (u *Upper) clear(ctx context.Context, ws fsops.Workspace, p string) (int, error) {
	ents, err := ws.ReadDir(p)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		q := path.Join(p, e.Name)
		if _, err := u.root.Lstat(q); err == nil {
			continue // the layer's own entry, applied by its step
		}
		if err := ws.Remove(q, fsops.RemoveOptions{Recursive: true, Force: true}); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
