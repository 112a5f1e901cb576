package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// A transaction's command ran on an overlay of the workspace (sandbox
// Request.Overlay); its changes are the overlay's upper layer. ReadUpper
// turns that layer into a change set, as checkpoint_diff shows one, and the
// plan Apply carries out: a regular file, directory or symlink in the layer
// is added (absent from the workspace) or modified (a type change is the
// old entry deleted and the new one added, as checkpoint_diff shows it); a
// whiteout (a character
// device 0:0) deletes the workspace's entry of that name; an opaque
// directory (the user.overlay.opaque attribute, the overlay's `userxattr`
// mode) hides everything of the workspace's directory beneath it that the
// layer does not hold again. A file the layer holds unchanged (copied up by
// a chmod to the same mode, a touch) is no change.
//
// For each path it plans to change, ReadUpper records the workspace's entry
// as the command left it (Base): Apply refuses, listing the conflicts, when
// any differs at apply time, and so does it for an entry whose inode changed
// while the command ran (its ctime after the command's start): the command
// may have read it half-written.

// UpperLimits bound reading an upper layer.
type UpperLimits struct {
	// MaxListed bounds the changes listed (a deleted directory of the
	// workspace lists each entry beneath it); past it the set is
	// Truncated with a notice, and Apply still carries out every change.
	MaxListed int
	// DiffBudget is the diff text the set carries (0: DefaultDiffBudget).
	DiffBudget int
	// MaxBytes bounds the apparent sizes of the layer's files added up
	// (0: no bound). The tmpfs bounds the blocks the layer uses, not the
	// sizes: a sparse file (truncate -s 100G) uses none, yet applying it
	// writes all of it. Past it, ReadUpper answers errcode.TooLarge.
	MaxBytes int64
}

// DefaultMaxListed is UpperLimits.MaxListed's default.
const DefaultMaxListed = 10000

// Base is the state of one workspace path as a transaction's command left
// it: what Apply expects to find there.
type Base struct {
	Exists  bool
	Mode    fs.FileMode // type bits and permissions
	Size    int64
	ModTime time.Time
	ID      fsops.FileID
	// During: the entry's inode changed after the command started.
	During bool
}

// wsLstat is ws.Lstat where a missing entry (or a parent that is no
// directory) is absence, not an error.
func wsLstat(ws fsops.Workspace, p string) (fsops.Info, bool, error) {
	fi, err := ws.Lstat(p)
	if errcode.Is(err, errcode.NotFound) || errcode.Is(err, errcode.NotADirectory) {
		return fsops.Info{}, false, nil
	}
	return fi, err == nil, err
}

func baseOf(ws fsops.Workspace, p string, since time.Time) (Base, error) {
	fi, ok, err := wsLstat(ws, p)
	if err != nil || !ok {
		return Base{}, err
	}
	return Base{Exists: true, Mode: fi.Mode, Size: fi.Size, ModTime: fi.ModTime, ID: fi.ID(),
		During: fi.ChangeTime.After(since)}, nil
}

// differs says how now differs from b ("" when it does not).
func (b Base) differs(now Base) string {
	switch {
	case b.During:
		return "changed in the workspace while the command ran"
	case b.Exists && !now.Exists:
		return "removed from the workspace since the command"
	case !b.Exists && now.Exists:
		return "created in the workspace since the command (" + modeType(now.Mode) + ")"
	case !b.Exists:
		return ""
	case b.Mode.Type() != now.Mode.Type():
		return "replaced in the workspace since the command (" + modeType(b.Mode) + " → " + modeType(now.Mode) + ")"
	case b.ID != now.ID || !b.ModTime.Equal(now.ModTime) || (b.Mode.IsRegular() && b.Size != now.Size):
		return "changed in the workspace since the command"
	}
	return ""
}

func modeType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return TypeDir
	case m&fs.ModeSymlink != 0:
		return TypeSymlink
	case m.IsRegular():
		return TypeFile
	}
	return "special file"
}

// kindCheck is a step that changes nothing: an entry below a deleted
// directory, whose state Apply checks before it deletes the directory.
const kindCheck = "check"

// kindClear is a step that removes every entry of a workspace directory
// the layer does not hold: an opaque directory whose workspace entries pass
// MaxListed, planned once rather than one step per entry (its base, the
// directory's own mtime and inode, shows entries made or removed since).
const kindClear = "clear"

// step is one change Apply makes, in path order.
type step struct {
	path   string
	kind   string      // KindAdded, KindModified, KindDeleted, kindCheck
	mode   fs.FileMode // the new entry's type and permissions (not for a deletion)
	target string      // a new symlink's target
	size   int64       // a new file's size, as the layer held it
	base   Base
}

// Upper is a transaction's upper layer read: its change set and the steps
// Apply takes. It holds the layer's directory open; Close releases it.
type Upper struct {
	Set   ChangeSet
	root  *os.Root
	steps []step
	// Bytes and Files are what the layer holds.
	Bytes, Files int64
}

// Close releases the upper layer.
func (u *Upper) Close() error {
	if u.root == nil {
		return nil
	}
	err := u.root.Close()
	u.root = nil
	return err
}

// ReadUpper reads the upper layer in dir (the transaction's tmpfs, whose
// "upper" subdirectory is the layer) against ws, the workspace the command
// ran on, as the command left it; since is when the command started.
func ReadUpper(ctx context.Context, dir *os.File, ws fsops.Workspace, since time.Time, lim UpperLimits) (*Upper, error) {
	root, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/upper")
	if err != nil {
		return nil, &errcode.Error{Code: errcode.ReadFailed, Op: "transaction", Msg: "cannot open the transaction's upper layer", Err: err}
	}
	if lim.MaxListed <= 0 {
		lim.MaxListed = DefaultMaxListed
	}
	budget := lim.DiffBudget
	if budget <= 0 {
		budget = DefaultDiffBudget
	}
	r := &upperReader{ctx: ctx, u: &Upper{root: root}, ws: ws, since: since, lim: lim, budget: budget}
	r.u.Set.Changes = []Change{}
	if err := r.dir(".", false); err != nil {
		root.Close()
		return nil, err
	}
	r.u.Set.Sort()
	sort.SliceStable(r.u.steps, func(i, j int) bool { return r.u.steps[i].path < r.u.steps[j].path })
	return r.u, nil
}

type upperReader struct {
	ctx    context.Context
	u      *Upper
	ws     fsops.Workspace
	since  time.Time
	lim    UpperLimits
	budget int
	listed int
}

// add lists c (up to MaxListed).
func (r *upperReader) add(c Change) {
	if r.listed >= r.lim.MaxListed {
		if !r.u.Set.Truncated || r.u.Set.Notice == "" {
			r.u.Set.Truncated = true
		}
		r.u.Set.Notice = fmt.Sprintf("changes cut: the transaction lists at most %d changes (transaction_apply applies all of them)", r.lim.MaxListed)
		switch c.Kind {
		case KindAdded:
			r.u.Set.Added++
		case KindModified:
			r.u.Set.Modified++
		case KindDeleted:
			r.u.Set.Deleted++
		}
		return
	}
	r.listed++
	r.u.Set.Add(c)
}

// plan records a step and the workspace's state at its path.
func (r *upperReader) plan(s step) error {
	b, err := baseOf(r.ws, s.path, r.since)
	if err != nil {
		return err
	}
	s.base = b
	r.u.steps = append(r.u.steps, s)
	return nil
}

// dir reads one directory of the layer (rel: its path, "." for the root);
// under is set below an opaque directory, where nothing of the workspace
// shows through.
func (r *upperReader) dir(rel string, under bool) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	f, err := r.u.root.Open(rel)
	if err != nil {
		return upperErr(rel, err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return upperErr(rel, err)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := r.entry(path.Join(rel, name), under); err != nil {
			return err
		}
	}
	return nil
}

func upperErr(p string, err error) error {
	return &errcode.Error{Code: errcode.ReadFailed, Op: "transaction", Path: p, Msg: "cannot read the transaction's upper layer", Err: err}
}

// entry reads one entry of the layer.
func (r *upperReader) entry(p string, under bool) error {
	fi, err := r.u.root.Lstat(p)
	if err != nil {
		return upperErr(p, err)
	}
	r.u.Files++
	if fi.Mode().IsRegular() {
		r.u.Bytes += fi.Size()
		if r.lim.MaxBytes > 0 && r.u.Bytes > r.lim.MaxBytes {
			return &errcode.Error{Code: errcode.TooLarge, Op: "transaction", Path: p,
				Msg: fmt.Sprintf("the layer's files add up to more than %d bytes (%s alone is %d bytes: a sparse file counts at its whole size, as applying it would write it)", r.lim.MaxBytes, p, fi.Size())}
		}
	}
	old, exists, oerr := wsLstat(r.ws, p)
	if oerr != nil {
		return oerr
	}
	m := fi.Mode()
	switch {
	case fsops.POSIXMode(m)&syscall.S_IFMT == syscall.S_IFCHR && isWhiteout(fi):
		if !exists {
			return nil // made and removed by the command: nothing to do
		}
		if err := r.plan(step{path: p, kind: KindDeleted}); err != nil {
			return err
		}
		return r.deleted(p, old)
	case m.IsDir():
		opaque := under || r.opaque(p)
		switch {
		case !exists:
			r.add(Change{Path: p, Kind: KindAdded, Type: TypeDir})
			if err := r.plan(step{path: p, kind: KindAdded, mode: m}); err != nil {
				return err
			}
		case !old.IsDir():
			// A type change: the old entry deleted, the directory added.
			if err := r.deleted(p, old); err != nil {
				return err
			}
			r.add(Change{Path: p, Kind: KindAdded, Type: TypeDir})
			if err := r.plan(step{path: p, kind: KindModified, mode: m}); err != nil {
				return err
			}
		default:
			if opaque {
				if err := r.hidden(p); err != nil {
					return err
				}
			}
			if m.Perm() != old.Mode.Perm() {
				r.add(Change{Path: p, Kind: KindModified, Type: TypeDir, Note: "mode " + old.Mode.Perm().String() + " → " + m.Perm().String()})
				if err := r.plan(step{path: p, kind: KindModified, mode: m}); err != nil {
					return err
				}
			}
		}
		return r.dir(p, opaque)
	case m.IsRegular():
		if exists && old.Mode.IsRegular() {
			same, err := r.sameFile(p, fi, old)
			if err != nil {
				return err
			}
			if same {
				return nil
			}
		}
		c := Change{Path: p, Kind: KindAdded, Type: TypeFile}
		step := step{path: p, kind: KindAdded, mode: m, size: fi.Size()}
		if exists {
			c.Kind, step.kind = KindModified, KindModified
			if !old.Mode.IsRegular() {
				// A type change: the old entry deleted, the file added.
				if err := r.deleted(p, old); err != nil {
					return err
				}
				c.Kind = KindAdded
			}
		}
		if err := r.describeFile(&c, p, fi, old, exists && old.Mode.IsRegular()); err != nil {
			return err
		}
		r.add(c)
		return r.plan(step)
	case m&fs.ModeSymlink != 0:
		target, err := r.u.root.Readlink(p)
		if err != nil {
			return upperErr(p, err)
		}
		c := Change{Path: p, Kind: KindAdded, Type: TypeSymlink, NewTarget: target}
		step := step{path: p, kind: KindAdded, mode: m, target: target}
		if exists {
			step.kind = KindModified
			if old.Mode&fs.ModeSymlink != 0 {
				ot, err := r.ws.Readlink(p)
				if err == nil && ot == target {
					return nil
				}
				c.OldTarget, c.Kind = ot, KindModified
			} else if err := r.deleted(p, old); err != nil {
				// A type change: the old entry deleted, the link added.
				return err
			}
		}
		r.add(c)
		return r.plan(step)
	}
	r.u.Set.Skipped = append(r.u.Set.Skipped, p)
	return nil
}

// deleted lists p, removed from the workspace, and all it held.
func (r *upperReader) deleted(p string, old fsops.Info) error {
	c := Change{Path: p, Kind: KindDeleted, Type: modeType(old.Mode)}
	switch {
	case old.Mode.IsRegular():
		if err := r.describeOld(&c, p, old); err != nil {
			return err
		}
	case old.Mode&fs.ModeSymlink != 0:
		c.OldTarget, _ = r.ws.Readlink(p)
	case old.IsDir():
		r.add(c)
		ents, err := r.ws.ReadDir(p)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := r.ctx.Err(); err != nil {
				return err
			}
			if r.listed >= r.lim.MaxListed {
				// Not walked further: a directory of a million files
				// is not read for a list nobody sees.
				r.add(Change{Path: path.Join(p, e.Name), Kind: KindDeleted})
				break
			}
			// What the deletion takes with it is checked too: a file
			// edited below a deleted directory since the command is a
			// conflict, not a silent loss.
			if err := r.plan(step{path: path.Join(p, e.Name), kind: kindCheck}); err != nil {
				return err
			}
			if err := r.deleted(path.Join(p, e.Name), e); err != nil {
				return err
			}
		}
		return nil
	}
	r.add(c)
	return nil
}

// hidden: p is an opaque directory of the layer over a directory of the
// workspace; what the workspace's holds and the layer does not is deleted.
func (r *upperReader) hidden(p string) error {
	ents, err := r.ws.ReadDir(p)
	if err != nil {
		return err
	}
	for i, e := range ents {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if r.listed >= r.lim.MaxListed {
			// Past the bound, one step clears the rest (as a deleted
			// directory's removal takes what it holds): a directory of a
			// million files is not a million steps held for the TTL.
			if err := r.plan(step{path: p, kind: kindClear}); err != nil {
				return err
			}
			n, err := r.notInLayer(p, ents[i:])
			if err != nil {
				return err
			}
			r.u.Set.Truncated = true
			r.u.Set.Deleted += n
			r.u.Set.Notice = fmt.Sprintf("changes cut: the transaction lists at most %d changes (transaction_apply applies all of them)", r.lim.MaxListed)
			return nil
		}
		q := path.Join(p, e.Name)
		if _, err := r.u.root.Lstat(q); err == nil {
			continue // the layer has its own entry
		}
		if err := r.plan(step{path: q, kind: KindDeleted}); err != nil {
			return err
		}
		if err := r.deleted(q, e); err != nil {
			return err
		}
	}
	return nil
}

// notInLayer counts the entries of ents (the workspace's, of directory p)
// the layer's p does not hold, from one listing of the layer's p (bounded
// by the layer's inodes) rather than a look-up per workspace entry.
func (r *upperReader) notInLayer(p string, ents []fsops.Info) (int, error) {
	f, err := r.u.root.Open(p)
	if err != nil {
		return 0, upperErr(p, err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return 0, upperErr(p, err)
	}
	held := make(map[string]bool, len(names))
	for _, n := range names {
		held[n] = true
	}
	n := 0
	for _, e := range ents {
		if !held[e.Name] {
			n++
		}
	}
	return n, nil
}

// opaque reports the overlay's opaque mark on a directory of the layer.
func (r *upperReader) opaque(p string) bool {
	f, err := r.u.root.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, 8)
	for _, name := range []string{"user.overlay.opaque", "trusted.overlay.opaque"} {
		n, err := unix.Fgetxattr(int(f.Fd()), name, buf)
		if err == nil && n > 0 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

// isWhiteout reports the overlay's mark of a deletion: a character
// device 0:0.
func isWhiteout(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// sameFile reports a layer file equal to the workspace's in mode and
// content (a copy-up without a change).
func (r *upperReader) sameFile(p string, fi fs.FileInfo, old fsops.Info) (bool, error) {
	if fi.Size() != old.Size || fi.Mode().Perm() != old.Mode.Perm() {
		return false, nil
	}
	nf, err := r.u.root.Open(p)
	if err != nil {
		return false, upperErr(p, err)
	}
	defer nf.Close()
	of, err := r.ws.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return false, err
	}
	defer of.Close()
	a, b := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		if err := r.ctx.Err(); err != nil {
			return false, err
		}
		n, err1 := io.ReadFull(nf, a)
		m, err2 := io.ReadFull(of, b[:max(n, 1)])
		if n != m || !bytes.Equal(a[:n], b[:m]) {
			return false, nil
		}
		if err1 == io.EOF || err1 == io.ErrUnexpectedEOF {
			_, err := of.Read(b[:1])
			return errors.Is(err, io.EOF) || m == 0, nil
		}
		if err1 != nil {
			return false, upperErr(p, err1)
		}
		if err2 != nil {
			return false, nil
		}
	}
}

// describeFile fills c's sizes and diff: both sides read when each fits
// MaxTextBytes, else sizes only.
func (r *upperReader) describeFile(c *Change, p string, fi fs.FileInfo, old fsops.Info, hadFile bool) error {
	var oldData []byte
	if hadFile {
		c.OldSize = old.Size
	}
	c.NewSize = fi.Size()
	if fi.Size() > MaxTextBytes || (hadFile && old.Size > MaxTextBytes) {
		c.Binary = true
		Describe(c, nil, nil, &r.budget)
		return nil
	}
	newData, err := r.u.root.ReadFile(p)
	if err != nil {
		return upperErr(p, err)
	}
	if hadFile {
		if oldData, err = r.ws.ReadFile(p); err != nil {
			return err
		}
	}
	Describe(c, oldData, newData, &r.budget)
	return nil
}

// describeOld fills a deleted file's size and diff.
func (r *upperReader) describeOld(c *Change, p string, old fsops.Info) error {
	c.OldSize = old.Size
	if r.listed >= r.lim.MaxListed || r.budget <= 0 {
		// Not listed, or no diff left to show: not read either.
		Describe(c, nil, nil, &r.budget)
		return nil
	}
	if old.Size > MaxTextBytes {
		c.Binary = true
		Describe(c, nil, nil, &r.budget)
		return nil
	}
	data, err := r.ws.ReadFile(p)
	if err != nil {
		return err
	}
	Describe(c, data, []byte{}, &r.budget)
	return nil
}
