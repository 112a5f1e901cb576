package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// restoreTemp prefixes the temp names a restore writes beside a file
// before renaming them over it.
const restoreTemp = ".agentbe-restore-"

// Restore brings ws (or the listed paths of it) back to checkpoint id of
// its scope and returns what it changed, as seen from now: "added" paths
// were recreated, "modified" rewritten, "deleted" removed (created since
// the checkpoint). Each file is written to a temp file beside it and
// renamed over it, so a reader sees the old file or the restored one; a
// symlink is recreated as a link (fsops refuses one leading out), and a
// directory on the way that was replaced by a link or a file since is
// made a directory again, so nothing is written through a planted link.
// Paths the checkpoint skipped (special files, links leading out) and
// special files now present are left as they are. On an error, the
// changes made before it are returned with it.
func (s *Store) Restore(ctx context.Context, ws fsops.Workspace, id string, paths []string) (ChangeSet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sel, err := selectPaths(ws, "checkpoint_restore", paths)
	if err != nil {
		return ChangeSet{}, err
	}
	m, err := s.manifest("checkpoint_restore", ws, id)
	if err != nil {
		return ChangeSet{}, err
	}
	want := sel.filter(m.Entries)
	wantBy := make(map[string]*Entry, len(want))
	for i := range want {
		wantBy[want[i].Path] = &want[i]
	}
	r := restorer{s: s, ws: ws, ctx: ctx, m: m, dirs: map[string]bool{}, relock: map[string]fs.FileMode{}, checked: map[string]bool{}}
	var done ChangeSet
	done.Changes = []Change{}
	// A selected path below a link or a file planted since the checkpoint
	// is restored below a real directory again; one the checkpoint does not
	// hold is left alone there (its walk would follow the link).
	var roots selection
	for _, root := range sel {
		if _, ok := wantBy[root]; ok {
			extra, err := r.ensureParents(root)
			for _, x := range extra {
				done.Add(x)
			}
			if err != nil {
				return done, err
			}
		} else if !r.realParents(root) {
			continue
		}
		roots = append(roots, root)
	}
	if sel != nil && roots == nil {
		roots = selection{}
	}
	now, err := s.current(ctx, ws, roots)
	if err != nil {
		return done, err
	}
	// What the checkpoint holds where a link leading out or a special file
	// is now: removed, so the restored entry takes its place.
	for p := range now.skipped {
		if e := wantBy[p]; e != nil {
			if err := ws.Remove(p, fsops.RemoveOptions{Force: true}); err != nil {
				return done, err
			}
			done.Add(Change{Path: p, Kind: KindDeleted, Note: "was " + now.skipped[p]})
			delete(now.skipped, p)
		}
	}
	have := now.entries[:0]
	for _, e := range now.entries {
		if _, skipped := m.Skipped[e.Path]; !skipped && !strings.HasPrefix(path.Base(e.Path), restoreTemp) {
			have = append(have, e)
		}
	}
	plan, err := compare(ctx, side{s: s, ws: ws}, side{s: s}, have, want, false, len(have)+len(want)+1)
	if err != nil {
		return done, err
	}
	// Every blob the plan writes is checked before anything is removed: a
	// restore that cannot finish deletes no newer work.
	for _, c := range plan.Changes {
		if e := wantBy[c.Path]; c.Kind != KindDeleted && e != nil && e.Type == TypeFile {
			if err := s.hasBlob(e.Hash, e.Size); err != nil {
				return done, err
			}
		}
	}
	// Removals first (what was created since, and the old side of a type
	// change), a directory with what it holds.
	for _, c := range plan.Changes {
		if c.Kind != KindDeleted {
			continue
		}
		if err := r.writable(path.Dir(c.Path)); err != nil {
			return done, err
		}
		if err := ws.Remove(c.Path, fsops.RemoveOptions{Recursive: true, Force: true}); err != nil {
			return done, err
		}
		done.Add(c)
	}
	// Then what the checkpoint holds, parents before children.
	var dirModes []*Entry
	for _, c := range plan.Changes {
		if c.Kind == KindDeleted {
			continue
		}
		if err := ctx.Err(); err != nil {
			return done, ctxErr("checkpoint_restore", err)
		}
		e := wantBy[c.Path]
		extra, err := r.ensureParents(e.Path)
		if err != nil {
			return done, err
		}
		for _, x := range extra {
			done.Add(x)
		}
		if err := r.writable(path.Dir(e.Path)); err != nil {
			return done, err
		}
		switch e.Type {
		case TypeDir:
			if _, err := r.ensureDir(e.Path); err != nil {
				return done, err
			}
			dirModes = append(dirModes, e)
		case TypeFile:
			if err := r.writeFile(e); err != nil {
				return done, err
			}
		case TypeSymlink:
			if err := r.writeLink(e); err != nil {
				return done, err
			}
		}
		done.Add(c)
	}
	// Directories made writable for the restore get their mode back: the
	// checkpoint's, or the one they had.
	for d, mode := range r.relock {
		if e := wantBy[d]; e != nil && e.Type == TypeDir {
			mode = fsops.SafeMode(fs.FileMode(e.Mode))
		}
		if err := ws.Chmod(d, mode); err != nil {
			return done, err
		}
	}
	// Directory modes last, deepest first, so a read-only directory is
	// made so after what it holds was written.
	sort.Slice(dirModes, func(i, j int) bool { return dirModes[i].Path > dirModes[j].Path })
	for _, e := range dirModes {
		if err := ws.Chmod(e.Path, fsops.SafeMode(fs.FileMode(e.Mode))); err != nil {
			return done, err
		}
	}
	for p, why := range now.skipped {
		if _, inCheckpoint := wantBy[p]; !inCheckpoint {
			done.Skipped = append(done.Skipped, p+" (left as is: "+why+")")
		}
	}
	done.Sort()
	return done, nil
}

type restorer struct {
	s    *Store
	ws   fsops.Workspace
	ctx  context.Context
	m    *Manifest
	dirs map[string]bool // directories known to be real directories now
	// relock holds the modes of directories the restore made writable
	// (owner write and search) to change what they hold; checked, those it
	// looked at.
	relock  map[string]fs.FileMode
	checked map[string]bool
}

// writable makes directory d writable by its owner for the restore, when
// it is not (a directory made read-only since the checkpoint, or one that
// was read-only in it), remembering its mode for the end.
func (r *restorer) writable(d string) error {
	if r.checked[d] {
		return nil
	}
	r.checked[d] = true
	fi, err := r.ws.Lstat(d)
	if err != nil || !fi.IsDir() || fi.Mode.Perm()&0o300 == 0o300 {
		return nil // a missing parent is created writable; others fail where they are used
	}
	if err := r.ws.Chmod(d, fi.Mode.Perm()|0o300); err != nil {
		return err
	}
	r.relock[d] = fi.Mode.Perm()
	return nil
}

// ensureParents makes each directory above p a real directory: one that is
// missing is created, and one replaced by a link or a file since the
// checkpoint is removed and created again (returned as changes), so the
// write below it cannot be led elsewhere by a planted link.
func (r *restorer) ensureParents(p string) ([]Change, error) {
	var out []Change
	dir := path.Dir(p)
	if dir == "." || r.dirs[dir] {
		return nil, nil
	}
	var chain []string
	for d := dir; d != "." && !r.dirs[d]; d = path.Dir(d) {
		chain = append(chain, d)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		c, err := r.ensureDir(chain[i])
		if c != nil {
			out = append(out, *c)
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// ensureDir makes d (whose parent is a real directory) a real directory:
// created when missing, and when a link or a file took its place, that is
// removed (never followed) first. The change is nil when d was one.
func (r *restorer) ensureDir(d string) (*Change, error) {
	if r.dirs[d] {
		return nil, nil
	}
	var c *Change
	fi, err := r.ws.Lstat(d)
	switch {
	case err == nil && fi.IsDir():
	case err == nil:
		if err := r.ws.Remove(d, fsops.RemoveOptions{Force: true}); err != nil {
			return nil, err
		}
		if err := r.ws.Mkdir(d, false); err != nil {
			return nil, err
		}
		c = &Change{Path: d, Kind: KindModified, Type: TypeDir, Note: "was a " + typeName(fi.Mode) + " since the checkpoint; made a directory again"}
	case errcode.Is(err, errcode.NotFound):
		if err := r.ws.Mkdir(d, false); err != nil {
			return nil, err
		}
		c = &Change{Path: d, Kind: KindAdded, Type: TypeDir}
	default:
		return nil, err
	}
	r.dirs[d] = true
	return c, nil
}

// realParents reports whether every directory above p is a real directory
// (no link or file planted on the way).
func (r *restorer) realParents(p string) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		fi, err := r.ws.Lstat(d)
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "file"
	}
	return "special file"
}

// writeFile restores one file: its blob copied to a temp file beside it
// and hashed on the way (a blob whose bytes are not those its name says,
// changed in the store from outside or damaged on its disk, is not
// restored: the temp file goes and the path keeps what it held), its mode
// set on the open file (never setuid or setgid: fsops.Fchmod), then, once
// the temp name is checked to still hold that file (a command beside the
// restore may swap names in its directory), renamed over whatever is
// there.
func (r *restorer) writeFile(e *Entry) error {
	b, err := r.s.openBlob(e.Hash)
	if err != nil {
		return err
	}
	defer b.Close()
	tmp := path.Join(path.Dir(e.Path), restoreTemp+randHex())
	f, err := r.ws.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(f, io.TeeReader(ctxReader{r.ctx, b}, h))
	if err == nil && hex.EncodeToString(h.Sum(nil)) != e.Hash {
		err = &errcode.Error{Code: errcode.ReadFailed, Op: "checkpoint_restore", Path: e.Path,
			Msg: "the checkpoint's stored content of this file does not match its hash (blob " + e.Hash +
				" was changed from outside the daemon, or its disk damaged it): this file was not restored"}
	}
	if err == nil {
		err = fsops.Fchmod(f, fs.FileMode(e.Mode))
	}
	var wrote fsops.Info
	if err == nil {
		wrote, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = sameFile(r.ws, tmp, wrote)
	}
	if err == nil {
		err = r.ws.Rename(tmp, e.Path)
	}
	if err != nil {
		r.ws.Remove(tmp, fsops.RemoveOptions{Force: true})
		if _, ok := err.(*errcode.Error); !ok {
			err = &errcode.Error{Code: errcode.WriteFailed, Op: "checkpoint_restore", Path: e.Path, Msg: err.Error(), Err: err}
		}
		return err
	}
	return nil
}

// sameFile checks that name still holds the file wrote describes (the same
// device and inode, a regular file): what the restore wrote, not an entry
// swapped in since.
func sameFile(ws fsops.Workspace, name string, wrote fsops.Info) error {
	fi, err := ws.Lstat(name)
	if err != nil {
		return err
	}
	if !fi.Mode.IsRegular() || fi.ID() != wrote.ID() {
		return &errcode.Error{Code: errcode.WriteFailed, Op: "checkpoint_restore", Path: name,
			Msg:  "the restore's temp file was replaced while it was written (a command changing the directory at the same time?): nothing renamed",
			Hint: "run checkpoint_restore again once no command changes the workspace"}
	}
	return nil
}

// writeLink restores one symlink: made beside it, renamed over it.
func (r *restorer) writeLink(e *Entry) error {
	tmp := path.Join(path.Dir(e.Path), restoreTemp+randHex())
	if err := r.ws.Symlink(e.Target, tmp); err != nil {
		return err
	}
	if err := r.ws.Rename(tmp, e.Path); err != nil {
		r.ws.Remove(tmp, fsops.RemoveOptions{Force: true})
		return err
	}
	return nil
}
