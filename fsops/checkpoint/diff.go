package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// MaxListed is the most changes one change set lists; past it the set
// still counts every change by kind and says how many it left out.
const MaxListed = 10000

// selection is the set of paths an operation is restricted to (nil: the
// whole workspace), each relative to the workspace root.
type selection []string

// MaxPaths is the most paths one checkpoint_diff or checkpoint_restore
// takes (the tools' schema says so too).
const MaxPaths = 1000

// selectPaths resolves the paths a client gave through ws's rules, sorted,
// each once, none below another (so each part of the tree is walked once).
func selectPaths(ws fsops.Workspace, op string, paths []string) (selection, error) {
	if len(paths) > MaxPaths {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: op,
			Msg:  "paths holds " + strconv.Itoa(len(paths)) + " entries, more than the " + strconv.Itoa(MaxPaths) + " one call takes",
			Hint: "pass a parent directory instead, or split the call"}
	}
	var sel selection
	for _, p := range paths {
		rel, err := ws.Rel(p)
		if errcode.Is(err, errcode.PathEscapeAttempt) {
			// A link planted on the way leads out: the path still names
			// an entry of the checkpoint, which restore puts back below a
			// real directory (every access stays confined by fsops).
			rel, err = lexicalRel(ws.Root(), p, err)
		}
		if err != nil {
			return nil, err
		}
		if rel == "." {
			return nil, nil
		}
		sel = append(sel, rel)
	}
	if len(paths) > 0 && len(sel) == 0 {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: op, Msg: "paths is empty"}
	}
	// Sorted, "a" comes before "a/b" (and before "a.b", which is not below
	// it): a path below the last one kept is covered by it.
	sort.Strings(sel)
	out := sel[:0]
	for _, p := range sel {
		if len(out) > 0 && (p == out[len(out)-1] || strings.HasPrefix(p, out[len(out)-1]+"/")) {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// lexicalRel is p relative to root by its spelling alone, or orig when
// it leaves root that way too.
func lexicalRel(root, p string, orig error) (string, error) {
	if path.IsAbs(p) {
		if !strings.HasPrefix(p, root+"/") {
			return "", orig
		}
		p = strings.TrimPrefix(p, root+"/")
	}
	p = path.Clean(p)
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", orig
	}
	return p, nil
}

// has reports whether p is one of the selected paths or lies below one.
func (s selection) has(p string) bool {
	if s == nil {
		return true
	}
	for _, r := range s {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

func (s selection) filter(es []Entry) []Entry {
	if s == nil {
		return es
	}
	var out []Entry
	for _, e := range es {
		if s.has(e.Path) {
			out = append(out, e)
		}
	}
	return out
}

// current walks the selected part of ws's tree as it is now (sel holds
// no path twice, none below another: selectPaths), its entries counted
// together against --checkpoint-max-files.
func (s *Store) current(ctx context.Context, ws fsops.Workspace, sel selection) (walked, error) {
	defer s.burst()()
	if sel == nil {
		return s.walk(ctx, ws, ".", s.opts.MaxFiles)
	}
	all := walked{skipped: map[string]string{}}
	for _, r := range sel {
		w, err := s.walk(ctx, ws, r, s.opts.MaxFiles-len(all.entries))
		if err != nil {
			return all, err
		}
		all.entries = append(all.entries, w.entries...)
		for p, why := range w.skipped {
			all.skipped[p] = why
		}
	}
	sortEntries(all.entries)
	return all, nil
}

// side is one state being compared: a checkpoint, or the workspace now.
type side struct {
	s  *Store
	ws fsops.Workspace // set for the workspace now
}

// hash is the content hash of e, reading the workspace file (streamed, so
// a 10 GB file costs time bounded by ctx, not memory) when e is of now.
func (d side) hash(ctx context.Context, e *Entry) (string, error) {
	if e.Hash != "" || d.ws == nil {
		return e.Hash, nil
	}
	f, err := d.ws.OpenFile(e.Path, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, io.NewSectionReader(f, 0, 1<<62)}); err != nil {
		return "", &errcode.Error{Code: errcode.ReadFailed, Op: "checkpoint_diff", Path: e.Path, Msg: err.Error(), Err: err}
	}
	e.Hash = hex.EncodeToString(h.Sum(nil))
	return e.Hash, nil
}

// content is e's content for a text diff, or nil when it is larger than
// MaxTextBytes.
func (d side) content(e *Entry) ([]byte, error) {
	if e.Size > MaxTextBytes {
		return nil, nil
	}
	var r io.Reader
	if d.ws == nil {
		f, err := d.s.openBlob(e.Hash)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	} else {
		f, err := d.ws.OpenFile(e.Path, os.O_RDONLY, 0)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxTextBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxTextBytes {
		return nil, nil
	}
	return b, nil
}

// ctxReader stops a long read when its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// compare builds the change set from old to new (both sorted by path),
// listing at most limit changes. With diffs, text files get unified diffs within DefaultDiffBudget.
func compare(ctx context.Context, oldS, newS side, old, new []Entry, diffs bool, limit int) (ChangeSet, error) {
	cs := ChangeSet{Changes: []Change{}}
	budget := DefaultDiffBudget
	left := 0
	emit := func(c Change, o, n *Entry) error {
		if len(cs.Changes) >= limit {
			left++
			switch c.Kind {
			case KindAdded:
				cs.Added++
			case KindModified:
				cs.Modified++
			case KindDeleted:
				cs.Deleted++
			}
			return nil
		}
		switch c.Type {
		case TypeSymlink:
			if o != nil {
				c.OldTarget = o.Target
			}
			if n != nil {
				c.NewTarget = n.Target
			}
		case TypeFile:
			if o != nil {
				c.OldSize = o.Size
			}
			if n != nil {
				c.NewSize = n.Size
			}
			if diffs {
				if err := describe(&c, oldS, newS, o, n, &budget); err != nil {
					return err
				}
			}
		}
		cs.Add(c)
		return nil
	}
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		if err := ctx.Err(); err != nil {
			return cs, ctxErr("checkpoint_diff", err)
		}
		var o, n *Entry
		switch {
		case j >= len(new) || (i < len(old) && old[i].Path < new[j].Path):
			o = &old[i]
			i++
		case i >= len(old) || new[j].Path < old[i].Path:
			n = &new[j]
			j++
		default:
			o, n = &old[i], &new[j]
			i++
			j++
		}
		switch {
		case n == nil:
			if err := emit(Change{Path: o.Path, Kind: KindDeleted, Type: o.Type}, o, nil); err != nil {
				return cs, err
			}
		case o == nil:
			if err := emit(Change{Path: n.Path, Kind: KindAdded, Type: n.Type}, nil, n); err != nil {
				return cs, err
			}
		case o.Type != n.Type:
			if err := emit(Change{Path: o.Path, Kind: KindDeleted, Type: o.Type}, o, nil); err != nil {
				return cs, err
			}
			if err := emit(Change{Path: n.Path, Kind: KindAdded, Type: n.Type}, nil, n); err != nil {
				return cs, err
			}
		default:
			changed, err := differs(ctx, oldS, newS, o, n)
			if err != nil {
				return cs, err
			}
			if !changed {
				continue
			}
			c := Change{Path: n.Path, Kind: KindModified, Type: n.Type}
			if o.Mode != n.Mode && n.Type != TypeSymlink {
				c.Note = fmt.Sprintf("mode %04o → %04o", o.Mode, n.Mode)
			}
			if err := emit(c, o, n); err != nil {
				return cs, err
			}
		}
	}
	if left > 0 {
		cs.Truncated = true
		notice := strconv.Itoa(left) + " more changes are counted but not listed (at most " + strconv.Itoa(MaxListed) + " are); pass paths to see them"
		if cs.Notice != "" {
			notice = cs.Notice + "; " + notice
		}
		cs.Notice = notice
	}
	return cs, nil
}

// differs reports whether two entries of one path and type differ.
func differs(ctx context.Context, oldS, newS side, o, n *Entry) (bool, error) {
	switch n.Type {
	case TypeSymlink:
		return o.Target != n.Target, nil
	case TypeDir:
		return o.Mode != n.Mode, nil
	}
	if o.Mode != n.Mode || o.Size != n.Size {
		return true, nil
	}
	// The side that is the workspace now has no hash yet: unchanged by
	// identity means unchanged, without reading it.
	if n.Hash == "" && sameIdentity(o, n) {
		n.Hash = o.Hash
		return false, nil
	}
	if o.Hash == "" && sameIdentity(n, o) {
		o.Hash = n.Hash
		return false, nil
	}
	oh, err := oldS.hash(ctx, o)
	if err != nil {
		return false, err
	}
	nh, err := newS.hash(ctx, n)
	if err != nil {
		return false, err
	}
	return oh != nh, nil
}

// describe fills a file change's diff, or marks it binary by size.
func describe(c *Change, oldS, newS side, o, n *Entry, budget *int) error {
	if (o != nil && o.Size > MaxTextBytes) || (n != nil && n.Size > MaxTextBytes) {
		c.Binary = true
		Describe(c, nil, nil, budget)
		return nil
	}
	var ob, nb []byte
	var err error
	if o != nil {
		if ob, err = oldS.content(o); err != nil {
			return err
		}
	}
	if n != nil {
		if nb, err = newS.content(n); err != nil {
			return err
		}
	}
	if (o != nil && ob == nil) || (n != nil && nb == nil) {
		// It grew past MaxTextBytes since it was listed: by size, as above.
		c.Binary = true
		Describe(c, nil, nil, budget)
		return nil
	}
	Describe(c, ob, nb, budget)
	return nil
}

// Diff is the change set from checkpoint from to checkpoint to (""): the
// workspace now), both of ws's scope, restricted to paths (none: all).
// Files unchanged by identity are not read; a changed file over
// MaxTextBytes is compared by size and a streamed hash, never held.
func (s *Store) Diff(ctx context.Context, ws fsops.Workspace, from, to string, paths []string) (ChangeSet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sel, err := selectPaths(ws, "checkpoint_diff", paths)
	if err != nil {
		return ChangeSet{}, err
	}
	fm, err := s.manifest("checkpoint_diff", ws, from)
	if err != nil {
		return ChangeSet{}, err
	}
	old := sel.filter(fm.Entries)
	var cs ChangeSet
	if to == "" {
		w, err := s.current(ctx, ws, sel)
		if err != nil {
			return ChangeSet{}, err
		}
		cs, err = compare(ctx, side{s: s}, side{s: s, ws: ws}, old, w.entries, true, MaxListed)
		if err != nil {
			return ChangeSet{}, err
		}
		for p, why := range w.skipped {
			cs.Skipped = append(cs.Skipped, p+" ("+why+")")
		}
	} else {
		tm, err := s.manifest("checkpoint_diff", ws, to)
		if err != nil {
			return ChangeSet{}, err
		}
		cs, err = compare(ctx, side{s: s}, side{s: s}, old, sel.filter(tm.Entries), true, MaxListed)
		if err != nil {
			return ChangeSet{}, err
		}
	}
	cs.Sort()
	return cs, nil
}
