package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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
// delta needs it. A pruned checkpoint that a delta is stored on leaves the
// list but keeps its file, renamed <id>.base (a kept base): it is removed,
// and its blobs let go, once no manifest is stored on it. Pruning oldest
// first, a scope keeps at most one chain's worth of such files (one whole
// manifest and fewer than maxChain deltas), counted in the store's bytes,
// and no prune rewrites a manifest.
const maxChain = 16

// baseExt names the file of a kept base.
const baseExt = ".base"

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
// holds only its changes), a kept base's too.
func (s *Store) readManifestFile(id string) (*Manifest, int64, error) {
	b, err := s.root.ReadFile(path.Join(manifestsDir, id+manifestExt))
	if errors.Is(err, fs.ErrNotExist) {
		b, err = s.root.ReadFile(path.Join(manifestsDir, id+baseExt))
	}
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
	return s.readManifestOn(id, nil)
}

// readManifestOn is readManifest, taking the entries of known (nil: none),
// a checkpoint read with every entry, when the chain of bases reaches it
// rather than reading its files again: Open's check of every checkpoint
// (dropDamaged) passes each scope's previous one, so each delta costs the
// read of its own file.
func (s *Store) readManifestOn(id string, known *Manifest) (*Manifest, int64, error) {
	m, size, err := s.readManifestFile(id)
	if err != nil {
		return nil, 0, err
	}
	chain := []*Manifest{m}
	var from *Manifest // the base reached, read with every entry
	for cur := m; cur.Base != ""; {
		if len(chain) > maxChain {
			return nil, 0, fmt.Errorf("manifest %s: more than %d deltas lead to it", id, maxChain)
		}
		if known != nil && cur.Base == known.ID {
			if known.Scope != cur.Scope || known.Seq >= cur.Seq {
				return nil, 0, fmt.Errorf("manifest %s: its base %s is not an earlier checkpoint of its scope", id, cur.Base)
			}
			from = known
			break
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
	entries, k := chain[len(chain)-1].Entries, len(chain)-2
	if from != nil {
		entries, k = from.Entries, len(chain)-1
	}
	for ; k >= 0; k-- {
		entries = applyDelta(entries, chain[k].Entries, chain[k].Deleted)
	}
	out := *m
	out.Entries, out.Deleted = entries, nil
	return &out, size, nil
}

// needed reports whether a listed checkpoint or a kept base is stored as
// a delta of id; s.mu is held.
func (s *Store) needed(id string) bool {
	for _, c := range s.list {
		if c.base == id {
			return true
		}
	}
	for _, c := range s.bases {
		if c.base == id {
			return true
		}
	}
	return false
}

// keepAsBase takes checkpoint c, being pruned, out of the list but keeps
// its manifest as a base (renamed to <id>.base, so a restart does not list
// it again); s.mu is held. The rename is not fsynced: a power cut that
// loses it brings c back to the list, whole (its file and blobs are
// untouched), and the next prune takes it again; so a prune of a full
// store costs no fsync.
func (s *Store) keepAsBase(c *summary) error {
	if err := s.root.Rename(path.Join(manifestsDir, c.id+manifestExt), path.Join(manifestsDir, c.id+baseExt)); err != nil {
		return err
	}
	s.bases[c.id] = c
	return nil
}

// collectBases removes the kept base id, and the kept bases it is stored
// on in turn, while no manifest is stored on it, letting go of the blobs
// only its file named; s.mu is held. A kill between leaves kept bases no
// manifest needs, which the next Open collects.
func (s *Store) collectBases(id string) {
	for id != "" {
		c := s.bases[id]
		if c == nil || s.needed(id) {
			return
		}
		m, _, err := s.readManifestFile(id)
		if err := s.root.Remove(path.Join(manifestsDir, id+baseExt)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.opts.Logger.Warn("checkpoint store: removing a base no checkpoint needs failed", "id", id, "err", err)
			return
		}
		delete(s.bases, id)
		s.bytes -= c.size
		if err == nil {
			s.release(m.hashes())
		}
		id = c.base
	}
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
