package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/resolvepath"
	"golang.org/x/sys/unix"
)

// The store's layout under its directory. Blobs are named by the sha256 of
// their content (deduplicated across checkpoints and scopes); a manifest
// lists one checkpoint's entries, or those changed since the checkpoint
// before it (a delta, delta.go). Both are written to tmp/ first, then
// renamed into place: a checkpoint's new blobs are renamed at once, then
// (Options.Durable) fsynced together with the blobs' directory and its
// manifest's temp file (one round: blobSync); the manifest is renamed only
// after all of that, and its directory fsynced (the second round). So a
// kill at any moment leaves each checkpoint whole (its manifest and blobs)
// or absent (no manifest; its orphan blobs and temp files are removed by
// the next Open), and so does a power cut when the store is durable. When
// it is not, a power cut may lose what the kernel had not yet written
// back, in any order; Open then leaves out every checkpoint whose manifest
// is unreadable, or names a blob missing or of another size than it
// recorded (and removes such a blob, so that no later checkpoint reuses
// it): what is listed is whole.
const (
	blobsDir     = "blobs"
	manifestsDir = "manifests"
	tmpDir       = "tmp"
	manifestExt  = ".json"
	// damagedExt names the manifest file of a checkpoint Open left out
	// (dropDamaged), or of one it could not read: kept for whoever looks
	// into it, never read again, the newest keepDamaged of them.
	damagedExt = ".damaged"
)

// keepDamaged is how many manifests set aside (damagedExt) Open keeps,
// the newest: they are not counted against --checkpoint-max-bytes, so
// power cuts or damage from outside, one after another, must not pile
// them up.
const keepDamaged = 16

// Defaults for the zero values of Options.
const (
	DefaultMaxBytes = 1 << 30
	DefaultMaxCount = 100
	DefaultMaxFiles = 200000
)

// Options configures a Store.
type Options struct {
	// Dir is the store's directory (created 0700 if missing). It must not
	// lie inside WorkspaceRoot, nor hold it.
	Dir string
	// WorkspaceRoot is the daemon's workspace root, to refuse a Dir the
	// agent could reach ("" skips the check: a memory workspace).
	WorkspaceRoot string
	// MaxBytes bounds the store (blobs and manifests, --checkpoint-max-bytes).
	MaxBytes int64
	// MaxCount bounds the checkpoints kept (--checkpoint-max-count).
	MaxCount int
	// MaxFiles bounds the entries one walk of the workspace visits
	// (--checkpoint-max-files).
	MaxFiles int
	Logger   *slog.Logger
	// Burst, when set, is called as each walk of the workspace begins and
	// its result when the walk ends: the daemon's internal/cpuburst.Hold,
	// which runs the walk's fstatat calls on every CPU the process may use
	// where --max-procs auto holds half of them back. nil: the walk runs
	// on the GOMAXPROCS it finds.
	Burst func() (release func())
	// Durable (--fsync) fsyncs each checkpoint's blobs and manifest, and
	// the directory entries it changes, before Create returns, so a power
	// cut keeps every checkpoint Create answered for. Unset, a checkpoint
	// survives a kill of the daemon but not always a power cut within the
	// kernel's writeback delay, as every other write of a daemon without
	// --fsync; Open leaves out a checkpoint that came back damaged.
	Durable bool
	// NoJournal turns off the journal (journal.go): every checkpoint then
	// walks the whole workspace. The benchmarks set it to measure the
	// walk; nothing else needs to.
	NoJournal bool

	// crash, when set (tests), is called between the steps of a create or
	// a prune; an error stops the operation there, leaving what a kill at
	// that moment would leave.
	crash func(step string) error
	// listed, when set (tests), is called by a walk each time it has
	// listed a directory.
	listed func(dir string)
}

// Entry is one path of a checkpoint.
type Entry struct {
	Path  string `json:"p"`
	Type  string `json:"t"`
	Mode  uint32 `json:"m"` // permission bits
	Size  int64  `json:"s,omitempty"`
	MTime int64  `json:"mt,omitempty"` // unix nanoseconds; 0 = do not trust the identity
	// CTime is the inode change time (unix nanoseconds), which no
	// unprivileged process can set back: with it, a rewrite of the same
	// size whose mtime was set back is still seen (as git uses it).
	CTime  int64  `json:"ct,omitempty"`
	Dev    uint64 `json:"d,omitempty"`
	Ino    uint64 `json:"i,omitempty"`
	Hash   string `json:"h,omitempty"` // sha256 of a file's content
	Target string `json:"l,omitempty"` // a symlink's target
}

// Manifest is one checkpoint as stored.
type Manifest struct {
	ID      string    `json:"id"`
	Seq     int64     `json:"seq"`
	Label   string    `json:"label,omitempty"`
	Created time.Time `json:"created"`
	// Scope is the absolute root of the workspace the checkpoint was taken
	// of: only a call in the same workspace (the same scope) sees it.
	Scope string `json:"scope"`
	Auto  bool   `json:"auto,omitempty"`
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
	// Base is the checkpoint whose entries this one's file lists the
	// changes of ("" when the file lists every entry), and Depth how many
	// deltas lead from a whole manifest to this one (delta.go).
	Base  string `json:"base,omitempty"`
	Depth int    `json:"depth,omitempty"`
	// Entries are every entry, sorted by path; in a delta's file, those
	// added or changed since Base, and Deleted the paths removed since.
	Entries []Entry  `json:"entries"`
	Deleted []string `json:"deleted,omitempty"`
	// Skipped are the paths not captured, with why (special files, links
	// leading out of the workspace): restore leaves them alone.
	Skipped map[string]string `json:"skipped,omitempty"`
}

// Info is what checkpoint_create and checkpoint_list say of a checkpoint.
type Info struct {
	ID      string    `json:"id"`
	Label   string    `json:"label,omitempty"`
	Created time.Time `json:"created"`
	Auto    bool      `json:"auto,omitempty"`
	Files   int       `json:"files"`
	Bytes   int64     `json:"bytes"`
	// Read is how many files this checkpoint read (the rest were unchanged
	// since the scope's previous checkpoint), Stored the bytes of new
	// content it added to the store, and TookMs how long Create took: set
	// by Create only (TookMs always, 0 included; a listed checkpoint has
	// none, as the store does not keep it).
	Read   int   `json:"read,omitempty"`
	Stored int64 `json:"stored,omitempty"`
	// Listed is how many directories Create listed: all of them, or, guided
	// by the journal (journal.go), those that changed since the scope's
	// previous checkpoint and their ancestors.
	Listed  int      `json:"listed,omitempty"`
	TookMs  *int64   `json:"took_ms,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	// Pruned are the checkpoints Create removed to stay within the bounds.
	Pruned []string `json:"pruned,omitempty"`
	// Reused is set when an automatic checkpoint found nothing changed
	// since the scope's newest one, and returned that one.
	Reused bool `json:"reused,omitempty"`
}

// tookMs is the whole milliseconds since start, for Info.TookMs.
func tookMs(start time.Time) *int64 {
	ms := time.Since(start).Milliseconds()
	return &ms
}

type summary struct {
	id, scope, label string
	base             string // the checkpoint its manifest file is a delta of
	seq              int64
	created          time.Time
	auto             bool
	files            int
	bytes            int64
	size             int64 // the manifest file's
}

// Store is a checkpoint store. It is safe for concurrent use; operations
// run one at a time.
type Store struct {
	opts Options
	root *os.Root
	lock *os.File // flocked while open: one daemon per store

	mu       sync.Mutex
	closed   bool
	seq      int64
	list     []*summary       // oldest first
	refs     map[string]int   // blob → how many manifests name it
	blobSize map[string]int64 // blob → its size
	bytes    int64            // blobs and manifests
	newest   map[string]*Manifest
	// bases are pruned checkpoints kept because a delta is stored on
	// them (delta.go): not listed, their files and blobs counted.
	bases map[string]*summary

	// What Stats reports, published after each change (publish), so
	// /health and the metrics never wait behind a long checkpoint.
	statCount, statBytes atomic.Int64
	// fsyncs counts the fsync calls made (tests).
	fsyncs atomic.Int64

	// jrnl is the journal (journal.go), started by the first checkpoint
	// (nil before, and when none can be had: noJrnl); based is, per scope,
	// what its newest checkpoint needs of it to be a guided walk's base.
	jrnl   *journal
	noJrnl bool
	based  map[string]*journalBase
	// unwatchable are the scopes whose trees did not fit the journal's
	// bound: walked in full, without watches, for the store's life.
	unwatchable map[string]bool
	// guided counts the checkpoints whose walk a journal guided (tests).
	guided atomic.Int64
}

// publish copies the store's size for Stats; s.mu is held.
func (s *Store) publish() {
	s.statCount.Store(int64(len(s.list)))
	s.statBytes.Store(s.bytes)
}

// Open opens (creating it 0700) the store at opts.Dir, removes what an
// interrupted operation left (temp files, blobs no manifest names) and
// loads the checkpoints' summaries.
func Open(opts Options) (*Store, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxCount <= 0 {
		opts.MaxCount = DefaultMaxCount
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Dir == "" {
		return nil, errors.New("checkpoint store: no directory")
	}
	if opts.WorkspaceRoot != "" {
		for _, c := range [][2]string{{opts.WorkspaceRoot, opts.Dir}, {opts.Dir, opts.WorkspaceRoot}} {
			in, err := resolvepath.Within(c[0], c[1])
			if err != nil {
				return nil, fmt.Errorf("checkpoint store %s: cannot tell whether it lies apart from the workspace %s: %v", opts.Dir, opts.WorkspaceRoot, err)
			}
			if in {
				return nil, fmt.Errorf("checkpoint store %s and the workspace %s overlap: the agent could read and change the checkpoints; keep the store (--state-dir) outside the workspace", opts.Dir, opts.WorkspaceRoot)
			}
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	r, err := openStoreDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	lock, err := lockStore(r, opts.Dir)
	if err != nil {
		r.Close()
		return nil, err
	}
	s := &Store{opts: opts, root: r, lock: lock, refs: map[string]int{}, blobSize: map[string]int64{}, newest: map[string]*Manifest{},
		bases: map[string]*summary{}}
	err = s.load()
	if err == nil {
		err = s.syncLeftovers()
	}
	if err != nil {
		lock.Close()
		r.Close()
		return nil, fmt.Errorf("checkpoint store %s: %w", opts.Dir, err)
	}
	s.publish()
	return s, nil
}

// openStoreDir opens the store's directory, which must be a directory
// itself, not a symbolic link: the daemon makes it, so a link there was
// put by someone else, and the store would make its directories and lock
// file wherever it leads, and each start would remove what the target's
// tmp/ and blobs/ hold as leftovers of interrupted checkpoints. Links
// above it (a state directory that is a link) are followed. The directory
// opened is checked to be the one judged, so a swap in between is refused
// too.
func openStoreDir(dir string) (*os.Root, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	if !fi.IsDir() {
		what := "is not a directory"
		if fi.Mode()&fs.ModeSymlink != 0 {
			what = "is a symbolic link"
		}
		return nil, fmt.Errorf("checkpoint store %s %s: the daemon makes the store's directory itself, and would make its files and remove its leftovers wherever a link leads; remove what is there, or choose another --state-dir", dir, what)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	if ri, err := r.Stat("."); err != nil || !os.SameFile(fi, ri) {
		r.Close()
		return nil, fmt.Errorf("checkpoint store %s was replaced while it was opened (a symbolic link?); try again, or choose another --state-dir", dir)
	}
	return r, nil
}

// syncLeftovers makes what the store holds durable, once, when it is
// durable and holds blobs: a run without --fsync may have left blobs the
// kernel has not written back yet, and a checkpoint reuses a blob for each
// unchanged file without syncing it again, so without this a power cut
// soon after a restart with --fsync could lose a checkpoint Create
// answered for. One syncfs of the store's file system, not an fsync per
// blob.
func (s *Store) syncLeftovers() error {
	if !s.opts.Durable || len(s.blobSize) == 0 {
		return nil
	}
	f, err := s.root.Open(".")
	if err != nil {
		return err
	}
	defer f.Close()
	s.fsyncs.Add(1)
	return unix.Syncfs(int(f.Fd()))
}

// lockFile is the file of the store's directory a Store holds an
// exclusive flock on while open.
const lockFile = "lock"

// lockStore takes the store's lock, or says which directory another
// daemon (or Store) holds: each counts blob references only from the
// manifests it knows, so two on one store would delete each other's blobs.
func lockStore(r *os.Root, dir string) (*os.File, error) {
	f, err := r.OpenFile(lockFile, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store %s: %w", dir, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		defer f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("checkpoint store %s is in use by another daemon (%sit holds %s): give each daemon its own --state-dir",
				dir, holder(f), filepath.Join(dir, lockFile))
		}
		return nil, fmt.Errorf("checkpoint store %s: locking %s: %w", dir, lockFile, err)
	}
	// Who holds it, for the refusal of a second daemon. The lock is the
	// flock, not this text: a pid left by a killed daemon locks nothing.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// holder is "pid N, " for the pid the lock's holder wrote in it, or "".
func holder(f *os.File) string {
	var b [24]byte
	n, _ := f.ReadAt(b[:], 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return ""
	}
	return "pid " + strconv.Itoa(pid) + ", "
}

// load reads every manifest and the blobs, dropping leftovers.
func (s *Store) load() error {
	for _, d := range []string{blobsDir, manifestsDir, tmpDir} {
		if err := s.root.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	// Temp files are what a kill left mid-write: never part of a checkpoint.
	tmps, err := s.readDirNames(tmpDir)
	if err != nil {
		return err
	}
	for _, n := range tmps {
		s.root.Remove(path.Join(tmpDir, n))
	}
	names, err := s.readDirNames(manifestsDir)
	if err != nil {
		return err
	}
	// want is each named blob's size, as the manifests recorded it.
	want := map[string]int64{}
	for _, n := range names {
		id, base := strings.CutSuffix(n, baseExt)
		if !base {
			var ok bool
			if id, ok = strings.CutSuffix(n, manifestExt); !ok {
				continue
			}
		}
		m, size, err := s.readManifestFile(id)
		if err != nil {
			// A manifest is renamed into place whole, so an unreadable one
			// was damaged from outside, or by a power cut that came before
			// the kernel wrote it back (a store that is not durable): keep
			// it out of the list, set it aside, say so.
			s.opts.Logger.Warn("checkpoint store: unreadable manifest left out", "file", n,
				"set_aside", path.Join(manifestsDir, id+damagedExt), "err", err)
			s.setAside(n, id)
			continue
		}
		for _, e := range m.Entries {
			if e.Hash != "" {
				if w, ok := want[e.Hash]; ok && w != e.Size {
					e.Size = -1 // two sizes for one content: neither is trusted
				}
				want[e.Hash] = e.Size
			}
		}
		c := s.add(m, size)
		if base {
			s.list = s.list[:len(s.list)-1]
			s.bases[id] = c
		}
		if m.Seq > s.seq {
			s.seq = m.Seq
		}
	}
	sort.Slice(s.list, func(i, j int) bool { return s.list[i].seq < s.list[j].seq })
	blobs, err := s.readDirNames(blobsDir)
	if err != nil {
		return err
	}
	// A blob is present when it has the size its manifests recorded. One
	// cut short (a power cut before the kernel wrote it back, or a hand in
	// the store) is removed: the checkpoints naming it are left out below,
	// and a later checkpoint of the same content stores it again rather
	// than reuse it. What is not a file goes too, a directory with what it
	// holds (RemoveAll, which follows no link): a blob is renamed onto its
	// name, which a directory would refuse to every later checkpoint.
	present := make(map[string]bool, len(blobs))
	sizes := make(map[string]int64, len(blobs))
	for _, b := range blobs {
		if s.refs[b] == 0 {
			// Written by a create that did not reach its manifest, or left
			// by a prune that stopped before its collection.
			s.root.RemoveAll(path.Join(blobsDir, b))
			continue
		}
		fi, err := s.root.Lstat(path.Join(blobsDir, b))
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() || fi.Size() != want[b] {
			s.opts.Logger.Warn("checkpoint store: a blob of another size than its checkpoints recorded is removed, and they are left out",
				"blob", b, "bytes", fi.Size(), "recorded", want[b])
			s.root.RemoveAll(path.Join(blobsDir, b))
			continue
		}
		present[b] = true
		sizes[b] = fi.Size()
	}
	s.dropDamaged(present)
	s.trimDamaged()
	// Kept bases no manifest needs: a prune stopped before collecting
	// them, or what needed them is left out.
	for id := range s.bases {
		s.collectBases(id)
	}
	for b, n := range sizes {
		if s.refs[b] == 0 {
			// Named only by checkpoints left out.
			s.root.RemoveAll(path.Join(blobsDir, b))
			continue
		}
		s.blobSize[b] = n
		s.bytes += n
	}
	return nil
}

// dropDamaged leaves out of the list every checkpoint that names a blob
// not present, or whose manifest is a delta of a checkpoint not listed, or
// left out, or of a kept base stored on one left out (a power cut, or the
// store changed from outside: such a checkpoint can no longer be restored
// whole, and the blobs only the file left out names are let go), saying
// so in the log; its manifest file stays for whoever looks into it,
// renamed <id>.damaged (damagedExt). Rare,
// so the manifests are read again only when a blob or a base is missing,
// or a base is not an earlier checkpoint of the same scope.
func (s *Store) dropDamaged(present map[string]bool) {
	missing := false
	for h := range s.refs {
		if !present[h] {
			missing = true
			break
		}
	}
	listed := map[string]*summary{} // and kept bases
	for _, c := range s.list {
		listed[c.id] = c
	}
	for id, c := range s.bases {
		listed[id] = c
	}
	for _, c := range listed {
		if b := listed[c.base]; c.base != "" && (b == nil || b.scope != c.scope || b.seq >= c.seq) {
			missing = true
		}
	}
	if !missing {
		return
	}
	// Oldest first, kept bases among the listed: a base is judged before
	// its deltas. A kept base is not listed, so its own blobs do not
	// matter here (a delta on it is judged by the entries it reads), but
	// one stored on a checkpoint left out takes its deltas with it: they
	// read their entries through that file, whose blobs are let go.
	all := slices.Clone(s.list)
	for _, c := range s.bases {
		all = append(all, c)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	dropped := map[string]bool{}
	kept := s.list[:0]
	prev := map[string]*Manifest{} // each scope's newest kept, read whole
	for _, c := range all {
		damaged := c.base != "" && (listed[c.base] == nil || dropped[c.base])
		if s.bases[c.id] == c {
			// Collected by load once nothing is stored on it.
			dropped[c.id] = damaged
			continue
		}
		if !damaged {
			m, _, err := s.readManifestOn(c.id, prev[c.scope])
			damaged = err != nil
			if m != nil {
				for _, h := range m.hashes() {
					if !present[h] {
						damaged = true
						break
					}
				}
			}
			if !damaged {
				prev[c.scope] = m
			}
		}
		if !damaged {
			kept = append(kept, c)
			continue
		}
		dropped[c.id] = true
		s.opts.Logger.Warn("checkpoint store: a checkpoint whose content is missing is left out", "id", c.id,
			"file", path.Join(manifestsDir, c.id+damagedExt))
		s.bytes -= c.size
		if f, _, err := s.readManifestFile(c.id); err == nil {
			for _, h := range f.hashes() {
				if s.refs[h]--; s.refs[h] <= 0 {
					delete(s.refs, h)
				}
			}
		}
		// Set aside, so the next start neither reads every manifest
		// again for it (its blob stays missing) nor lists it again once
		// a later checkpoint stores that content anew.
		s.setAside(c.id+manifestExt, c.id)
	}
	s.list = kept
}

// setAside renames the manifest file name, of checkpoint id, to
// <id>.damaged (damagedExt): never read again, kept for whoever looks into
// it (trimDamaged bounds them). Not fsynced: a power cut that loses the
// rename makes the next start do it again.
func (s *Store) setAside(name, id string) {
	if err := s.root.Rename(path.Join(manifestsDir, name), path.Join(manifestsDir, id+damagedExt)); err != nil {
		s.opts.Logger.Warn("checkpoint store: setting a manifest left out aside failed", "file", path.Join(manifestsDir, name), "err", err)
	}
}

// trimDamaged removes the manifests set aside (damagedExt) but the newest
// keepDamaged, by modification time (a rename keeps it: when the
// checkpoint was written).
func (s *Store) trimDamaged() {
	names, err := s.readDirNames(manifestsDir)
	if err != nil {
		return
	}
	type aside struct {
		name string
		mod  time.Time
	}
	var all []aside
	for _, n := range names {
		if strings.HasSuffix(n, damagedExt) {
			if fi, err := s.root.Lstat(path.Join(manifestsDir, n)); err == nil {
				all = append(all, aside{n, fi.ModTime()})
			}
		}
	}
	if len(all) <= keepDamaged {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mod.After(all[j].mod) })
	for _, a := range all[keepDamaged:] {
		s.opts.Logger.Info("checkpoint store: an old manifest set aside is removed", "file", path.Join(manifestsDir, a.name), "kept", keepDamaged)
		s.root.RemoveAll(path.Join(manifestsDir, a.name))
	}
}

func (s *Store) readDirNames(d string) ([]string, error) {
	f, err := s.root.Open(d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// add counts a loaded or created manifest file (a delta's blobs are those
// its file names).
func (s *Store) add(m *Manifest, size int64) *summary {
	c := &summary{id: m.ID, scope: m.Scope, label: m.Label, base: m.Base, seq: m.Seq, created: m.Created,
		auto: m.Auto, files: m.Files, bytes: m.Bytes, size: size}
	s.list = append(s.list, c)
	for _, h := range m.hashes() {
		s.refs[h]++
	}
	s.bytes += size
	return c
}

// hashes is each blob m names, once.
func (m *Manifest) hashes() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range m.Entries {
		if e.Hash != "" && !seen[e.Hash] {
			seen[e.Hash] = true
			out = append(out, e.Hash)
		}
	}
	return out
}

// Close releases the store's directory. Idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.jrnl != nil {
		s.jrnl.close()
	}
	s.lock.Close() // releases the flock
	return s.root.Close()
}

// Stats is the store's size for /health and the metrics.
type Stats struct {
	Count    int   `json:"count"`
	Bytes    int64 `json:"bytes"`
	MaxBytes int64 `json:"maxBytes"`
	MaxCount int   `json:"maxCount"`
}

// Stats reports the store's size.
func (s *Store) Stats() Stats {
	return Stats{Count: int(s.statCount.Load()), Bytes: s.statBytes.Load(), MaxBytes: s.opts.MaxBytes, MaxCount: s.opts.MaxCount}
}

// List returns the checkpoints of ws's scope, oldest first.
func (s *Store) List(ws fsops.Workspace) []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Info
	for _, c := range s.list {
		if c.scope == ws.Root() {
			out = append(out, Info{ID: c.id, Label: c.label, Created: c.created, Auto: c.auto, Files: c.files, Bytes: c.bytes})
		}
	}
	return out
}

// errNotFound is the answer for an id this scope has no checkpoint of:
// the same whether the id does not exist or is another scope's, so a
// scope learns nothing of the others.
func errNotFound(op, id string) error {
	return &errcode.Error{Code: errcode.NotFound, Op: op, Path: id,
		Msg: "no checkpoint of this workspace has this id", Hint: "checkpoint_list shows them"}
}

// manifest loads checkpoint id of ws's scope; s.mu is held.
func (s *Store) manifest(op string, ws fsops.Workspace, id string) (*Manifest, error) {
	for _, c := range s.list {
		if c.id == id && c.scope == ws.Root() {
			if n := s.newest[c.scope]; n != nil && n.ID == id {
				// A copy: the caller may fill in its entries.
				cp := *n
				cp.Entries = slices.Clone(n.Entries)
				return &cp, nil
			}
			m, _, err := s.readManifest(id)
			if err != nil {
				return nil, &errcode.Error{Code: errcode.ReadFailed, Op: op, Path: id, Msg: "the checkpoint cannot be read: " + err.Error()}
			}
			return m, nil
		}
	}
	return nil, errNotFound(op, id)
}

// CreateOptions are a Create's settings.
type CreateOptions struct {
	Label string
	// Auto marks a checkpoint taken before a tool call (--checkpoints
	// auto): when nothing changed since the scope's newest checkpoint,
	// that one is returned instead of a copy (Info.Reused).
	Auto bool
	// Keep names checkpoints this create must not prune: the target of the
	// checkpoint_restore the automatic checkpoint is taken before.
	Keep []string
}

// Create takes a checkpoint of ws. Only files whose identity (device and
// inode), size, modification or inode change time changed since the
// scope's newest checkpoint are read; the rest reuse its blobs.
func (s *Store) Create(ctx context.Context, ws fsops.Workspace, o CreateOptions) (Info, error) {
	start := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.publish()
	if s.closed {
		return Info{}, errors.New("checkpoint store is closed")
	}
	prev, err := s.newestOf(ws.Root())
	if err != nil {
		return Info{}, err
	}
	n := 0
	if prev != nil {
		n = len(prev.Entries) + 64
	}
	jr, jm, g, mounts := s.journalFor(ws.Root(), prev)
	w, err := func() (walked, error) {
		defer s.burst()() // released even if the walk panics
		if jr != nil && g == nil {
			watchTree(ws, jr)
		}
		w, err := s.walkJournaled(ctx, ws, ".", s.opts.MaxFiles, n, jr, g)
		if err == nil && g != nil && (w.newLink || w.newWatch || !jr.current(jm)) {
			// A file linked again since the base: its other paths may
			// lie in directories the guide took from the base, and a
			// write through one raises no event there; or a directory
			// listed was watched by no one; or the journal could no
			// longer vouch by the walk's end (journal.go's made: a name
			// that may have been such a link is gone). Walk in full,
			// from a new mark.
			putBlocks(w.entries)
			g = nil
			jm = jr.mark()
			watchTree(ws, jr)
			w, err = s.walkJournaled(ctx, ws, ".", s.opts.MaxFiles, n, jr, nil)
		}
		return w, err
	}()
	if err != nil {
		return Info{}, err
	}
	if g != nil {
		s.guided.Add(1)
	}
	// base records this walk as the scope's journal base, for checkpoint
	// id, once it is stored (or reused).
	base := func(id string) {
		if jr != nil {
			jr.settle(ws.Root(), jm)
		}
		if jr == nil || !w.journaled || w.newWatch {
			delete(s.based, ws.Root())
			if jr != nil && w.unwatched {
				// Past the journal's bound: this scope walks in full
				// without watches from now on, and gives back those
				// it holds.
				s.unwatchable[ws.Root()] = true
				jr.drop(ws.Root())
				s.opts.Logger.Warn("checkpoints of this scope walk the whole workspace each time: its directories are more than the journal may watch (a quarter of fs.inotify.max_user_watches, at most 65,536)",
					"scope", ws.Root())
			}
			return
		}
		if g == nil {
			jr.forget(ws.Root(), w.watched)
		}
		guided := 0
		if prevBase := s.based[ws.Root()]; g != nil && prevBase != nil {
			guided = prevBase.guided + 1
		}
		s.based[ws.Root()] = &journalBase{id: id, mark: jm, rootDev: w.rootDev, rootIno: w.rootIno, volatile: w.volatile, linked: w.linked, mounts: mounts, guided: guided}
	}
	// Which files must be read, and refuse before reading any when they
	// cannot fit (a 10 GB sparse file is refused by its size). Both lists
	// are sorted by path: one pass pairs each entry with the previous
	// manifest's of the same path, whose path string it takes over (and,
	// for an unchanged file, its hash). A path new since then gets a
	// string of its own: the walk's point into its workers' chunks
	// (scratch.names), which the newest manifest, kept until the next
	// checkpoint, must not hold on to.
	var prevEntries []Entry
	if prev != nil {
		prevEntries = prev.Entries
	}
	var toRead []int
	var total, readBytes int64
	j := 0
	for i := range w.entries {
		e := &w.entries[i]
		for j < len(prevEntries) && prevEntries[j].Path < e.Path {
			j++
		}
		var p *Entry
		if j < len(prevEntries) && prevEntries[j].Path == e.Path {
			p = &prevEntries[j]
			e.Path = p.Path
		} else {
			e.Path = strings.Clone(e.Path)
		}
		if e.Type != TypeFile {
			continue
		}
		total += e.Size
		// Its blob is in the store: prev is listed, so its manifest file,
		// or those of the bases it is stored on, name the blob.
		if p != nil && sameIdentity(p, e) {
			e.Hash = p.Hash
			continue
		}
		toRead = append(toRead, i)
		readBytes += e.Size
	}
	if readBytes > s.opts.MaxBytes {
		return Info{}, tooLarge(w.entries, toRead, readBytes, s.opts.MaxBytes)
	}
	m := &Manifest{Label: o.Label, Created: time.Now().UTC(), Scope: ws.Root(), Auto: o.Auto, Entries: w.entries, Skipped: w.skipped}
	fresh, stored, bs, err := s.storeFiles(ctx, ws, m.Entries, toRead)
	if err != nil {
		return Info{}, err
	}
	// fail drops what this create stored, once its fsyncs are over.
	fail := func(err error) (Info, error) {
		<-bs.start(nil)
		s.dropBlobs(fresh)
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		// The deadline passed during the last copy: a checkpoint of the
		// state at some later moment is not what the caller waited for.
		return fail(ctxErr("checkpoint_create", err))
	}
	for _, e := range m.Entries {
		if e.Type == TypeFile {
			m.Files++
			m.Bytes += e.Size
		}
	}
	var held int64 // the content this checkpoint alone keeps in the store
	if m.Bytes > s.opts.MaxBytes {
		// Only then can the distinct content be larger (each blob is the
		// size of a file that names it).
		for _, h := range m.hashes() {
			held += s.blobSize[h]
		}
	}
	if held > s.opts.MaxBytes {
		// Pruning every other checkpoint would not make room for it.
		return fail(&errcode.Error{Code: errcode.TooLarge, Op: "checkpoint_create",
			Msg:  fmt.Sprintf("the workspace's distinct content is %d bytes, more than --checkpoint-max-bytes (%d)", held, s.opts.MaxBytes),
			Hint: "remove or move large files out of the workspace, or raise --checkpoint-max-bytes"})
	}
	if o.Auto && prev != nil && sameContent(prev, m) {
		fail(nil)
		base(prev.ID)
		return Info{ID: prev.ID, Label: prev.Label, Created: prev.Created, Auto: prev.Auto, Files: prev.Files, Bytes: prev.Bytes,
			Reused: true, Listed: w.listed, TookMs: tookMs(start)}, nil
	}
	if err := s.step("blobs"); err != nil {
		<-bs.start(nil) // a kill here leaves the blobs, which Open collects
		return Info{}, err
	}
	s.seq++
	m.Seq = s.seq
	m.ID = newID()
	file := fileForm(prev, m)
	size, err := s.writeManifest(file, bs)
	if err != nil {
		s.dropBlobs(fresh)
		return Info{}, err
	}
	for _, h := range fresh {
		s.refs[h]-- // add counts them again, with the manifest
	}
	s.add(file, size)
	s.newest[m.Scope] = m
	base(m.ID)
	pruned := s.prune(m.Scope, append([]string{m.ID}, o.Keep...))
	skipped := make([]string, 0, len(m.Skipped))
	for p, why := range m.Skipped {
		skipped = append(skipped, p+" ("+why+")")
	}
	sort.Strings(skipped)
	return Info{ID: m.ID, Label: m.Label, Created: m.Created, Auto: m.Auto, Files: m.Files, Bytes: m.Bytes, Read: len(toRead),
		Stored: stored, Listed: w.listed, Skipped: skipped, Pruned: pruned, TookMs: tookMs(start)}, nil
}

// journalFor is the journal a checkpoint of the scope root walks with
// (nil: none), the moment the walk begins at, and, when the scope's newest
// checkpoint prev is the journal's base and nothing the journal cannot see
// happened since (its generation and the mount table unchanged), the
// guide of a walk that lists only what changed. s.mu is held.
func (s *Store) journalFor(root string, prev *Manifest) (*journal, journalMark, *guide, []byte) {
	if s.opts.NoJournal || s.noJrnl {
		return nil, journalMark{}, nil, nil
	}
	if s.jrnl == nil {
		if s.jrnl = newJournal(); s.jrnl == nil {
			s.noJrnl = true
			s.opts.Logger.Warn("checkpoints walk the whole workspace each time: no inotify instance could be had (fs.inotify.max_user_instances)")
			return nil, journalMark{}, nil, nil
		}
		s.based, s.unwatchable = map[string]*journalBase{}, map[string]bool{}
	}
	if s.unwatchable[root] {
		return nil, journalMark{}, nil, nil
	}
	mounts, err := readMountTable()
	if err != nil {
		return nil, journalMark{}, nil, nil
	}
	jm := s.jrnl.mark()
	b := s.based[root]
	if b == nil || prev == nil || b.id != prev.ID || !bytes.Equal(b.mounts, mounts) || b.guided+1 >= maxGuided {
		return s.jrnl, jm, nil, mounts
	}
	dirty, ok := s.jrnl.dirtySince(root, b.mark)
	if !ok {
		return s.jrnl, jm, nil, mounts
	}
	// A file mounted in the tree is written through its other path,
	// whose directory raises the event: its directory is listed every
	// time, as is every mount point's.
	points, ok := mountPointsBelow(mounts, root)
	if !ok {
		return s.jrnl, jm, nil, mounts
	}
	return s.jrnl, jm, newGuide(prev, b, append(dirty, points...)), mounts
}

// burst begins Options.Burst for one walk of the workspace (the whole of
// it, or a diff's selected paths together: each begin and end resizes the
// runtime's Ps, so not once per path).
func (s *Store) burst() (release func()) {
	if s.opts.Burst == nil {
		return func() {}
	}
	return s.opts.Burst()
}

func (s *Store) step(name string) error {
	if s.opts.crash != nil {
		return s.opts.crash(name)
	}
	return nil
}

// newID names a checkpoint at random: a sequence of the whole store would
// tell one scope how many checkpoints the others take.
func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "cp-" + hex.EncodeToString(b[:])
}

func ctxErr(op string, err error) error {
	return &errcode.Error{Code: errcode.Timeout, Op: op, Msg: "stopped before the end: " + err.Error(), Err: err}
}

func storeErr(err error) error {
	return &errcode.Error{Code: errcode.WriteFailed, Op: "checkpoint store", Msg: err.Error(), Err: err}
}

func tooLarge(es []Entry, idx []int, total, max int64) error {
	sort.Slice(idx, func(a, b int) bool { return es[idx[a]].Size > es[idx[b]].Size })
	var big []string
	for _, i := range idx[:min(3, len(idx))] {
		big = append(big, es[i].Path+" ("+strconv.FormatInt(es[i].Size, 10)+" bytes)")
	}
	return &errcode.Error{Code: errcode.TooLarge, Op: "checkpoint_create",
		Msg:  fmt.Sprintf("the files to store hold %d bytes, more than --checkpoint-max-bytes (%d); the largest: %s", total, max, strings.Join(big, ", ")),
		Hint: "remove or move the large files out of the workspace, or raise --checkpoint-max-bytes"}
}

// sameIdentity reports whether the file e describes is, by its identity,
// size and times, the one p recorded: then its content is not read again.
// The inode change time is what makes it sound: a writer can set the mtime
// back, but any write, chmod or utimes moves the ctime to now. A manifest
// without it (older) is not trusted.
func sameIdentity(p, e *Entry) bool {
	return p.Type == TypeFile && p.MTime != 0 && p.CTime != 0 && p.Dev == e.Dev && p.Ino == e.Ino && p.Size == e.Size &&
		p.MTime == e.MTime && p.CTime == e.CTime && p.Hash != ""
}

// sameContent reports whether a and b capture the same tree.
func sameContent(a, b *Manifest) bool {
	if len(a.Entries) != len(b.Entries) || len(a.Skipped) != len(b.Skipped) {
		return false
	}
	for i := range a.Entries {
		x, y := a.Entries[i], b.Entries[i]
		if x.Path != y.Path || x.Type != y.Type || x.Mode != y.Mode || x.Hash != y.Hash || x.Target != y.Target {
			return false
		}
	}
	return true
}

// newestOf is the newest manifest of a scope (nil: none); s.mu is held.
func (s *Store) newestOf(scope string) (*Manifest, error) {
	var last *summary
	for _, c := range s.list {
		if c.scope == scope {
			last = c
		}
	}
	if last == nil {
		delete(s.newest, scope)
		return nil, nil
	}
	if m := s.newest[scope]; m != nil && m.ID == last.id {
		return m, nil
	}
	m, _, err := s.readManifest(last.id)
	if err != nil {
		return nil, &errcode.Error{Code: errcode.ReadFailed, Op: "checkpoint store", Path: last.id, Msg: err.Error()}
	}
	s.newest[scope] = m
	return m, nil
}

// syncWorkers is how many files a checkpoint copies at once, and how many
// blob fsyncs run at once: copies overlap their reads, hashing and writes
// on the cores there are, and a journalling file system commits concurrent
// fsyncs together.
const syncWorkers = 8

// syncBatch is how many copied blobs wait, their temp files open, before
// their fsyncs start: a checkpoint of a few changed files starts them all
// at once, after its renames, so they share one journal commit rather than
// paying one each as they come; a large one (a first checkpoint) holds at
// most two batches of open files for this (one filling, one queued for
// the fsync workers, which the copies then wait behind), plus the
// workers' own.
const syncBatch = 64

// copyBufs are the copies' buffers, reused by every checkpoint.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// pending is a blob copied to its temp file, waiting to be renamed to its
// hash once durable.
type pending struct {
	tmp, hash string
	n         int64
}

// blobSync is the fsyncs of one create's new blobs. A pool of workers
// fsyncs (and closes) the temp files it is fed: the batches a large create
// fills while copying, then, in start, the last batch, the blobs'
// directory and the manifest's temp file, all at once, so that a
// checkpoint of a few changed files waits for one journal commit for all
// of them rather than one after the other.
type blobSync struct {
	s     *Store
	work  chan *os.File
	wg    sync.WaitGroup
	open  []*os.File // the last batch, waiting for start
	dir   bool       // the blobs' directory gained entries
	mu    sync.Mutex
	first error // of the fsyncs (and closes) done
}

func (s *Store) newBlobSync(files int) *blobSync {
	b := &blobSync{s: s, work: make(chan *os.File, syncBatch)}
	// At least one: the manifest's temp file comes to start.
	for range max(1, min(syncWorkers, files)) {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for f := range b.work {
				err := b.s.fsync(f)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					b.mu.Lock()
					if b.first == nil {
						b.first = err
					}
					b.mu.Unlock()
				}
			}
		}()
	}
	return b
}

// add takes a copied blob's open temp file, fsyncing a full batch.
func (b *blobSync) add(f *os.File) {
	b.open = append(b.open, f)
	if len(b.open) == syncBatch {
		for _, f := range b.open {
			b.work <- f
		}
		b.open = b.open[:0]
	}
}

// start fsyncs what is left (and then closes it): the last batch, the
// blobs' directory when it gained entries, and extra (nil: none, else the
// manifest's temp file, written). The channel yields once, when all of it
// and the batches before are durable: the error of the first that failed.
// Called once.
func (b *blobSync) start(extra *os.File) <-chan error {
	dirDone := make(chan error, 1)
	if b.dir {
		go func() { dirDone <- b.s.syncDir(blobsDir) }()
	} else {
		dirDone <- nil
	}
	for _, f := range b.open {
		b.work <- f
	}
	b.open = nil
	if extra != nil {
		b.work <- extra
	}
	close(b.work)
	done := make(chan error, 1)
	go func() {
		b.wg.Wait()
		err := b.first
		if derr := <-dirDone; err == nil {
			err = derr
		}
		if err != nil {
			err = storeErr(err)
		}
		done <- err
	}()
	return done
}

// storeFiles reads the files es[idx] into blobs: each copied to a temp
// file while hashed (its identity taken from the opened file) by a pool
// of workers, and, once all are copied, renamed to its hash unless that
// blob exists. It returns the blobs it added (each counted once in s.refs
// until the manifest counts them), their bytes, and their fsyncs, whose
// last batch waits for blobSync.start; on an error it leaves nothing
// behind and the blobSync is nil.
//
// A blob is renamed before its content is durable, so the directory's
// fsync runs beside the blobs' own: a power cut between leaves a blob
// whose content may be short, but no manifest names it (the manifest is
// renamed only once start's channel yields), and the next Open removes it.
func (s *Store) storeFiles(ctx context.Context, ws fsops.Workspace, es []Entry, idx []int) (fresh []string, stored int64, bs *blobSync, err error) {
	bs = s.newBlobSync(len(idx))
	// The copies: workers take the files in turn; each result comes back
	// here, where the store's maps are read and written (s.mu is held).
	type copied struct {
		p   pending
		f   *os.File
		err error
	}
	results := make(chan copied, syncWorkers)
	var next atomic.Int64
	var budget atomic.Int64 // what this create may still read, against --checkpoint-max-bytes
	budget.Store(s.opts.MaxBytes)
	var stop atomic.Bool
	var cw sync.WaitGroup
	for range min(syncWorkers, len(idx)) {
		cw.Add(1)
		go func() {
			defer cw.Done()
			bp := copyBufs.Get().(*[]byte)
			defer copyBufs.Put(bp)
			for {
				k := int(next.Add(1)) - 1
				if k >= len(idx) || stop.Load() {
					return
				}
				var r copied
				if cerr := ctx.Err(); cerr != nil {
					r.err = ctxErr("checkpoint_create", cerr)
				} else {
					r.p, r.f, r.err = s.copyFile(ctx, ws, &es[idx[k]], &budget, *bp)
				}
				results <- r
			}
		}()
	}
	go func() { cw.Wait(); close(results) }()
	var todo []pending
	seen := map[string]bool{}
	for r := range results {
		if r.err != nil {
			if err == nil {
				err = r.err
			}
			stop.Store(true)
			continue
		}
		if _, exists := s.blobSize[r.p.hash]; err != nil || exists || seen[r.p.hash] {
			// Failed meanwhile, stored already, or copied twice in this create.
			r.f.Close()
			s.root.Remove(r.p.tmp)
			continue
		}
		seen[r.p.hash] = true
		todo = append(todo, r.p)
		bs.add(r.f)
	}
	renamed := 0
	for ; err == nil && renamed < len(todo); renamed++ {
		p := todo[renamed]
		if rerr := s.root.Rename(p.tmp, path.Join(blobsDir, p.hash)); rerr != nil {
			err = storeErr(rerr)
			break
		}
		s.blobSize[p.hash] = p.n
		s.refs[p.hash]++ // held by this create until its manifest counts it
		s.bytes += p.n
		fresh = append(fresh, p.hash)
		stored += p.n
	}
	bs.dir = len(fresh) > 0
	if err != nil {
		<-bs.start(nil)
		for _, p := range todo[renamed:] {
			s.root.Remove(p.tmp)
		}
		s.dropBlobs(fresh)
		return nil, 0, nil, err
	}
	return fresh, stored, bs, nil
}

// copyFile copies one workspace file to a temp file of the store, hashing
// it, and sets e's hash, size and identity from the opened file (a file
// that changed while it was read is recorded as untrusted, so the next
// checkpoint reads it again). It copies at most the size the opened file
// had (a file growing while read stops there), taking that size from
// budget, shared by the create's copies: one that does not fit is refused
// naming --checkpoint-max-bytes. It stops when ctx is done. The temp file
// is returned open, unsynced; buf is the copy's buffer.
func (s *Store) copyFile(ctx context.Context, ws fsops.Workspace, e *Entry, budget *atomic.Int64, buf []byte) (pending, *os.File, error) {
	f, err := ws.OpenFile(e.Path, os.O_RDONLY, 0)
	if err != nil {
		return pending{}, nil, err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return pending{}, nil, err
	}
	if budget.Add(-before.Size) < 0 {
		// Grown since the walk's sizes were checked.
		return pending{}, nil, &errcode.Error{Code: errcode.TooLarge, Op: "checkpoint_create", Path: e.Path,
			Msg:  fmt.Sprintf("the file grew to %d bytes while the checkpoint was taken: the files to store pass --checkpoint-max-bytes (%d)", before.Size, s.opts.MaxBytes),
			Hint: "try again once it stops growing, move it out of the workspace, or raise --checkpoint-max-bytes"}
	}
	tmpName := path.Join(tmpDir, "blob-"+randHex())
	t, err := s.root.OpenFile(tmpName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return pending{}, nil, storeErr(err)
	}
	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(t, h), ctxReader{ctx, io.NewSectionReader(f, 0, before.Size)}, buf)
	if err != nil {
		t.Close()
		s.root.Remove(tmpName)
		if cerr := ctx.Err(); cerr != nil {
			return pending{}, nil, ctxErr("checkpoint_create", cerr)
		}
		return pending{}, nil, &errcode.Error{Code: errcode.ReadFailed, Op: "checkpoint_create", Path: e.Path, Msg: err.Error(), Err: err}
	}
	after, aerr := f.Stat()
	id := before.ID()
	e.Hash = hex.EncodeToString(h.Sum(nil))
	e.Size = n
	e.Dev, e.Ino = id.Dev, id.Ino
	e.MTime = before.ModTime.UnixNano()
	e.CTime = before.ChangeTime.UnixNano()
	if aerr != nil || after.Size != n || !after.ModTime.Equal(before.ModTime) || !after.ChangeTime.Equal(before.ChangeTime) || before.Size != n {
		e.MTime = 0
	}
	return pending{tmp: tmpName, hash: e.Hash, n: n}, t, nil
}

// dropBlobs removes the blobs a failed create added.
func (s *Store) dropBlobs(hs []string) { s.release(hs) }

func randHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeManifest writes m durably: temp file, fsync, rename, fsync of the
// directory. The temp file's fsync runs with the last of bs's, the blobs
// m names, and the rename waits for all of them.
func (s *Store) writeManifest(m *Manifest, bs *blobSync) (int64, error) {
	b, err := encodeManifest(m)
	if err != nil {
		<-bs.start(nil)
		return 0, storeErr(err)
	}
	tmpName := path.Join(tmpDir, "manifest-"+randHex())
	t, err := s.root.OpenFile(tmpName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		<-bs.start(nil)
		return 0, storeErr(err)
	}
	if _, err = t.Write(b); err != nil {
		t.Close()
		<-bs.start(nil)
	} else {
		// What the manifest names must be durable before it is; the
		// pool fsyncs and closes t.
		err = <-bs.start(t)
	}
	if err == nil {
		err = s.step("manifest-temp")
		if err != nil {
			return 0, err // a kill here leaves the temp file
		}
	}
	target := path.Join(manifestsDir, m.ID+manifestExt)
	renamed := false
	if err == nil {
		err = s.root.Rename(tmpName, target)
		renamed = err == nil
	}
	if err == nil {
		err = s.syncDir(manifestsDir)
	}
	if err != nil {
		s.root.Remove(tmpName)
		if renamed {
			s.root.Remove(target)
		}
		return 0, storeErr(err)
	}
	return int64(len(b)), nil
}

// fsync makes f's content durable when the store is (Options.Durable).
func (s *Store) fsync(f *os.File) error {
	if !s.opts.Durable {
		return nil
	}
	s.fsyncs.Add(1)
	return f.Sync()
}

// syncDir makes the entries of the store's directory d durable when the
// store is.
func (s *Store) syncDir(d string) error {
	if !s.opts.Durable {
		return nil
	}
	f, err := s.root.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	return s.fsync(f)
}

// prune removes checkpoints (never those in keep) until the store is
// within its count and bytes, and returns the ids of scope's it removed
// (a scope never learns of another's); s.mu is held. Each victim is
// chosen by victim, so one scope prunes another's checkpoints only while
// that one holds more. The manifest goes first (durably), then the blobs
// no manifest names: a kill between leaves orphan blobs, which Open
// removes.
func (s *Store) prune(scope string, keep []string) []string {
	var out []string
	for len(s.list) > s.opts.MaxCount || s.bytes > s.opts.MaxBytes {
		c := s.victim(scope, keep)
		if c == nil {
			break // only kept checkpoints are left
		}
		if err := s.remove(c); err != nil {
			s.opts.Logger.Warn("checkpoint store: pruning failed", "id", c.id, "err", err)
			break
		}
		if c.scope == scope {
			out = append(out, c.id)
		} else {
			s.opts.Logger.Info("checkpoint store: pruned another scope's oldest checkpoint (it holds the most)", "id", c.id, "scope", c.scope)
		}
	}
	return out
}

// victim is the checkpoint prune removes next: the oldest one, not in
// keep, of the scope holding the most checkpoints, the creating scope
// first on a tie (nil: none left). The bounds stay global, and each scope
// keeps a fair share of them: a scope filling the store prunes its own.
func (s *Store) victim(scope string, keep []string) *summary {
	count := map[string]int{}
	most := 0
	for _, c := range s.list {
		if !slices.Contains(keep, c.id) {
			count[c.scope]++
			most = max(most, count[c.scope])
		}
	}
	if most == 0 {
		return nil
	}
	from := ""
	if count[scope] == most {
		from = scope
	}
	for _, c := range s.list {
		if slices.Contains(keep, c.id) || count[c.scope] != most {
			continue
		}
		if from == "" || c.scope == from {
			return c
		}
	}
	return nil
}

// remove deletes one checkpoint and the blobs only its manifest file
// named, then the kept bases it was stored on that no manifest needs any
// more (collectBases); s.mu is held. A checkpoint a delta is stored on is
// kept as a base instead (keepAsBase).
func (s *Store) remove(c *summary) error {
	keep := s.needed(c.id)
	var m *Manifest
	if keep {
		if err := s.keepAsBase(c); err != nil {
			return err
		}
	} else {
		var err error
		if m, _, err = s.readManifestFile(c.id); err != nil {
			return err
		}
		if err := s.root.Remove(path.Join(manifestsDir, c.id+manifestExt)); err != nil {
			return err
		}
		s.syncDir(manifestsDir)
	}
	for i, x := range s.list {
		if x == c {
			s.list = append(s.list[:i], s.list[i+1:]...)
			break
		}
	}
	if s.newest[c.scope] != nil && s.newest[c.scope].ID == c.id {
		delete(s.newest, c.scope)
	}
	if err := s.step("prune-manifest"); err != nil {
		return err
	}
	if keep {
		return nil // its file and blobs stay, counted
	}
	s.bytes -= c.size
	s.release(m.hashes())
	if err := s.step("prune-collect"); err != nil {
		return err
	}
	s.collectBases(c.base)
	return nil
}

// openBlob opens a blob for reading.
func (s *Store) openBlob(h string) (*os.File, error) {
	f, err := s.root.Open(path.Join(blobsDir, h))
	if err != nil {
		return nil, &errcode.Error{Code: errcode.ReadFailed, Op: "checkpoint store", Path: h, Msg: "a blob of the checkpoint is missing: " + err.Error(), Err: err}
	}
	return f, nil
}

// hasBlob checks that blob h is in the store with the size the checkpoint
// recorded (a restore's preflight: a blob cut short, by a hand in the
// store or a disk that lost writes, is refused before anything changes).
func (s *Store) hasBlob(h string, size int64) error {
	fi, err := s.root.Lstat(path.Join(blobsDir, h))
	if err != nil {
		return &errcode.Error{Code: errcode.ReadFailed, Op: "checkpoint_restore", Path: h,
			Msg: "a blob of the checkpoint is missing (the store was changed from outside): nothing was restored: " + err.Error(), Err: err}
	}
	if fi.Size() != size {
		return &errcode.Error{Code: errcode.ReadFailed, Op: "checkpoint_restore", Path: h,
			Msg: fmt.Sprintf("a blob of the checkpoint is damaged: %d bytes where the checkpoint recorded %d (the store was changed from outside, or its disk lost writes): nothing was restored", fi.Size(), size)}
	}
	return nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return filepath.Clean(s.opts.Dir) }

// Durable says whether each checkpoint is fsynced before Create returns
// (Options.Durable).
func (s *Store) Durable() bool { return s.opts.Durable }
