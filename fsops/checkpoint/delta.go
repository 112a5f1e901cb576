package checkpoint

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
)

// A checkpoint's manifest file is whole (every entry), or a delta: the
// entries added or changed since its base, the scope's previous checkpoint,
// and the paths deleted since. An incremental checkpoint of a large tree
// then writes (and fsyncs) a few entries rather than all of them. A scope
// writes a whole one when it has none, at least every maxChain checkpoints
// (so reading one reads at most maxChain files), and when the delta would
// hold more than half the entries.
//
// A blob stays while some manifest file names it: the entries a delta
// takes from its base are named by the base's file, which stays while a
// delta needs it, since pruning a base first rewrites the delta stored on
// it (fold).
const maxChain = 16

// fileForm is how m, a whole checkpoint, is stored after prev (the scope's
// newest, nil: none): m itself, or a delta of prev. It sets m's Base and
// Depth to say which.
func fileForm(prev, m *Manifest) *Manifest {
	m.Base, m.Depth = "", 0
	if prev == nil || prev.Depth+1 >= maxChain {
		return m
	}
	changed, deleted := diffEntries(prev.Entries, m.Entries)
	if len(changed)+len(deleted) > len(m.Entries)/2 {
		return m
	}
	m.Base, m.Depth = prev.ID, prev.Depth+1
	d := *m
	d.Entries, d.Deleted = changed, deleted
	return &d
}

// diffEntries is what turns old into cur (both sorted by path): the
// entries of cur that old lacks or holds otherwise, and the paths of old
// that cur lacks, both sorted.
func diffEntries(old, cur []Entry) (changed []Entry, deleted []string) {
	i, j := 0, 0
	for i < len(cur) || j < len(old) {
		switch {
		case j == len(old) || i < len(cur) && cur[i].Path < old[j].Path:
			changed = append(changed, cur[i])
			i++
		case i == len(cur) || old[j].Path < cur[i].Path:
			deleted = append(deleted, old[j].Path)
			j++
		default:
			if cur[i] != old[j] {
				changed = append(changed, cur[i])
			}
			i++
			j++
		}
	}
	return changed, deleted
}

// applyDelta is base (sorted by path) with changed set and deleted
// removed: the inverse of diffEntries.
func applyDelta(base, changed []Entry, deleted []string) []Entry {
	out := make([]Entry, 0, len(base)+len(changed))
	i, c, d := 0, 0, 0
	for i < len(base) || c < len(changed) {
		if c < len(changed) && (i == len(base) || changed[c].Path <= base[i].Path) {
			if i < len(base) && changed[c].Path == base[i].Path {
				i++
			}
			out = append(out, changed[c])
			c++
			continue
		}
		for d < len(deleted) && deleted[d] < base[i].Path {
			d++
		}
		if d < len(deleted) && deleted[d] == base[i].Path {
			i++
			continue
		}
		out = append(out, base[i])
		i++
	}
	return out
}

// readManifestFile reads checkpoint id's manifest file as stored (a delta
// holds only its changes).
func (s *Store) readManifestFile(id string) (*Manifest, int64, error) {
	b, err := s.root.ReadFile(path.Join(manifestsDir, id+manifestExt))
	if err != nil {
		return nil, 0, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, 0, err
	}
	if m.ID != id {
		return nil, 0, fmt.Errorf("manifest %s names itself %q", id, m.ID)
	}
	byPath := func(a, b Entry) int { return strings.Compare(a.Path, b.Path) }
	if !slices.IsSortedFunc(m.Entries, byPath) || !slices.IsSorted(m.Deleted) {
		return nil, 0, fmt.Errorf("manifest %s: its entries are not sorted by path", id)
	}
	return &m, int64(len(b)), nil
}

// readManifest reads checkpoint id with every entry: a delta applied to
// its base's entries, read the same way (at most maxChain files). The size
// is that of id's own file.
func (s *Store) readManifest(id string) (*Manifest, int64, error) {
	m, size, err := s.readManifestFile(id)
	if err != nil {
		return nil, 0, err
	}
	chain := []*Manifest{m}
	for cur := m; cur.Base != ""; {
		if len(chain) > maxChain {
			return nil, 0, fmt.Errorf("manifest %s: more than %d deltas lead to it", id, maxChain)
		}
		b, _, err := s.readManifestFile(cur.Base)
		if err != nil {
			return nil, 0, fmt.Errorf("manifest %s: its base %s: %w", id, cur.Base, err)
		}
		if b.Scope != cur.Scope || b.Seq >= cur.Seq {
			return nil, 0, fmt.Errorf("manifest %s: its base %s is not an earlier checkpoint of its scope", id, cur.Base)
		}
		chain = append(chain, b)
		cur = b
	}
	entries := chain[len(chain)-1].Entries
	for k := len(chain) - 2; k >= 0; k-- {
		entries = applyDelta(entries, chain[k].Entries, chain[k].Deleted)
	}
	out := *m
	out.Entries, out.Deleted = entries, nil
	return &out, size, nil
}

// fold rewrites checkpoint d, stored as a delta of c, so that it no longer
// needs c (which is being pruned): as a delta of c's base, or whole when c
// is whole. The new file replaces d's by rename (temp, fsync, rename,
// fsync of the directory), so a kill leaves d's old file or its new one,
// both whole with c still there; s.mu is held.
func (s *Store) fold(d, c *summary) error {
	dm, _, err := s.readManifest(d.id)
	if err != nil {
		return err
	}
	old, _, err := s.readManifestFile(d.id)
	if err != nil {
		return err
	}
	file := dm
	file.Base, file.Depth = "", 0
	if c.base != "" {
		bm, _, err := s.readManifest(c.base)
		if err != nil {
			return err
		}
		nd := *dm
		nd.Entries, nd.Deleted = diffEntries(bm.Entries, dm.Entries)
		nd.Base, nd.Depth = bm.ID, bm.Depth+1
		file = &nd
	}
	size, err := s.writeManifest(file, nil)
	if err != nil {
		return err
	}
	// The new file's blobs are counted before the old one's are let go, so
	// none both name is collected meanwhile.
	for _, h := range file.hashes() {
		s.refs[h]++
	}
	s.release(old.hashes())
	s.bytes += size - d.size
	d.size, d.base = size, file.Base
	if n := s.newest[d.scope]; n != nil && n.ID == d.id {
		n.Base, n.Depth = file.Base, file.Depth
	}
	return s.step("prune-fold")
}

// release drops one reference to each of hs, removing the blobs no
// manifest file names any more; s.mu is held.
func (s *Store) release(hs []string) {
	for _, h := range hs {
		s.refs[h]--
		if s.refs[h] <= 0 {
			delete(s.refs, h)
			s.bytes -= s.blobSize[h]
			delete(s.blobSize, h)
			s.root.Remove(path.Join(blobsDir, h))
		}
	}
}
