package checkpoint

// Regression tests for the attack review of checkpoints (docs/security.md,
// "Attack review: checkpoints and transactions"): each held a finding that
// failed before its fix.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// A restore writes files as the daemon's user: putting back a file's
// setuid or setgid bit would hand the agent's content a setuid file of the
// daemon (root with --run-as). The bits are dropped, as SFTP and
// transaction_apply drop them.
func TestRestoreDoesNotSetSetuidBits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the file's owner (the run-as user) must differ from the daemon's user")
	}
	f := newFixture(t, nil)
	f.write(t, "tool", "#!/bin/sh\nid\n")
	p := filepath.Join(f.dir, "tool")
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o755|fs.ModeSetuid|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	cp := f.create(t, "")
	if err := os.WriteFile(p, []byte("changed\n"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Restore(context.Background(), f.ws, cp.ID, nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) == os.Geteuid() && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		t.Fatalf("restore made %s owned by uid %d (the daemon) with mode %v: a setuid file with the agent's content", p, st.Uid, fi.Mode())
	}
	if b, _ := os.ReadFile(p); string(b) != "#!/bin/sh\nid\n" {
		t.Fatalf("tool = %q", b)
	}
}

// The setuid and setgid bits are not recorded at all (so a restore of an
// older manifest is the only place that strips them), and never reach a
// restored file or directory, whoever runs the daemon; a directory keeps
// its sticky bit.
func TestCheckpointRecordsNoSetuidBits(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "d/tool", "x\n")
	if err := os.Chmod(filepath.Join(f.dir, "d", "tool"), 0o755|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(f.dir, "d"), 0o755|fs.ModeSetgid|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	cp := f.create(t, "")
	m, _, err := f.st.readManifest(cp.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range m.Entries {
		if fs.FileMode(e.Mode)&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("the manifest records %s with mode %o", e.Path, e.Mode)
		}
	}
	// An older manifest holding the bits is restored without them.
	for i := range m.Entries {
		m.Entries[i].Mode |= uint32(fs.ModeSetuid | fs.ModeSetgid)
	}
	b, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.storeDir, "manifests", cp.ID+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(f.dir, "d"))
	if _, err := f.st.Restore(context.Background(), f.ws, cp.ID, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d", "d/tool"} {
		fi, err := os.Lstat(filepath.Join(f.dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("restored %s has mode %v", p, fi.Mode())
		}
	}
	if fi, _ := os.Lstat(filepath.Join(f.dir, "d")); fi.Mode()&fs.ModeSticky == 0 {
		t.Errorf("restored d lost its sticky bit: %v", fi.Mode())
	}
}

// One scope's checkpoints never prune another scope's while the creating
// scope holds more, and a create never names another scope's checkpoint.
func TestScopeCannotPruneOrSeeAnotherScope(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxCount = 2 })
	f.write(t, "alice/a.txt", "alice\n")
	f.write(t, "bob/b.txt", "bob\n")
	alice, _ := f.ws.Scope("alice")
	defer alice.Close()
	bob, _ := f.ws.Scope("bob")
	defer bob.Close()
	cb, err := f.st.Create(context.Background(), bob, CreateOptions{Label: "bob's undo"})
	if err != nil {
		t.Fatal(err)
	}
	var pruned []string
	for i := range 3 {
		f.write(t, "alice/a.txt", strings.Repeat("x", i+1))
		ca, err := f.st.Create(context.Background(), alice, CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ca.ID) > 2 && ca.ID[2] >= '0' && ca.ID[2] <= '9' {
			t.Errorf("id %s carries the store's global sequence", ca.ID)
		}
		pruned = append(pruned, ca.Pruned...)
	}
	for _, id := range pruned {
		if id == cb.ID {
			t.Errorf("alice's checkpoint_create answered Pruned naming bob's checkpoint %s", cb.ID)
		}
	}
	if len(pruned) != 2 {
		t.Errorf("alice's creates pruned %v, want her own 2 oldest", pruned)
	}
	if l := f.st.List(bob); len(l) != 1 {
		t.Errorf("bob lists %d checkpoints, want 1", len(l))
	}
	if st := f.st.Stats(); st.Count > 2 {
		t.Errorf("the store holds %d checkpoints, over its bound of 2", st.Count)
	}
}

// A file rewritten with the same size and its modification time set back
// is still seen as changed (its inode change time moved), by diff and by
// restore.
func TestModificationHiddenByMtimeIsSeen(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "config.yaml", "admin: false\n")
	p := filepath.Join(f.dir, "config.yaml")
	fi, _ := os.Stat(p)
	cp := f.create(t, "")
	if err := os.WriteFile(p, []byte("admin: true!\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.ws.Chtimes("config.yaml", fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	cs, err := f.st.Diff(context.Background(), f.ws, cp.ID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Changes) != 1 || cs.Changes[0].Path != "config.yaml" {
		t.Errorf("checkpoint_diff of a rewritten config.yaml: %+v", cs.Changes)
	}
	cp2 := f.create(t, "")
	if cp2.Read != 1 {
		t.Errorf("the next checkpoint read %d files, want the rewritten one", cp2.Read)
	}
	if _, err := f.st.Restore(context.Background(), f.ws, cp.ID, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "admin: false\n" {
		t.Errorf("after checkpoint_restore config.yaml holds %q, want the checkpoint's bytes", b)
	}
}

// Repeated and nested paths are walked once, and the entries of all the
// selected paths count together against --checkpoint-max-files.
func TestRepeatedPathsKeepTheFileBound(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxFiles = 200 })
	for i := range 60 {
		f.write(t, filepath.Join("a", "f"+string(rune('a'+i%26))+string(rune('a'+i/26))), "x")
		f.write(t, filepath.Join("b", "f"+string(rune('a'+i%26))+string(rune('a'+i/26))), "x")
	}
	cp := f.create(t, "")
	f.opts.MaxFiles = 100
	f.reopen(t)
	paths := make([]string, 1000)
	for i := range paths {
		paths[i] = []string{"a", "./a", "a/fa"}[i%3]
	}
	if _, err := f.st.Diff(context.Background(), f.ws, cp.ID, "", paths); err != nil {
		t.Fatalf("1000 spellings of one 61-entry path (bound 100): %v", err)
	}
	_, err := f.st.Diff(context.Background(), f.ws, cp.ID, "", []string{"a", "b"})
	if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "--checkpoint-max-files") {
		t.Errorf("two paths of 61 entries each (bound 100): %v, want TOO_LARGE naming --checkpoint-max-files", err)
	}
	many := make([]string, MaxPaths+1)
	for i := range many {
		many[i] = "a/f" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
	}
	_, err = f.st.Diff(context.Background(), f.ws, cp.ID, "", many)
	if !errcode.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), "1000") {
		t.Errorf("%d paths: %v, want INVALID_ARGUMENT naming the limit", len(many), err)
	}
}

// growingWS serves one file that grows as fast as it is read, up to limit
// bytes; the first read cancels cancel (the call's deadline passing
// mid-copy).
type growingWS struct {
	fsops.Workspace
	name   string
	limit  int64
	cancel context.CancelFunc
}

type growingFile struct {
	fsops.File
	w *growingWS
}

func (g *growingWS) OpenFile(p string, flag int, perm fs.FileMode) (fsops.File, error) {
	f, err := g.Workspace.OpenFile(p, flag, perm)
	if err != nil || p != g.name {
		return f, err
	}
	return growingFile{f, g}, nil
}

func (g growingFile) ReadAt(b []byte, off int64) (int, error) {
	if g.w.cancel != nil {
		g.w.cancel()
	}
	if off >= g.w.limit {
		return 0, io.EOF
	}
	n := int(min(int64(len(b)), g.w.limit-off))
	clear(b[:n])
	return n, nil
}

// A file that grows while it is copied is copied up to its size when
// opened, and a create whose context ends mid-copy stops: the store never
// passes --checkpoint-max-bytes.
func TestCopyBoundedByMaxBytesAndContext(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxBytes = 1 << 20 })
	f.write(t, "app.log", "start\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws := &growingWS{Workspace: f.ws, name: "app.log", limit: 64 << 20, cancel: cancel}
	_, err := f.st.Create(ctx, ws, CreateOptions{})
	if !errcode.Is(err, errcode.Timeout) {
		t.Errorf("checkpoint_create went on after its context was done: %v", err)
	}
	if st := f.st.Stats(); st.Bytes > st.MaxBytes || st.Count != 0 {
		t.Errorf("the store holds %d bytes in %d checkpoints (bound %d)", st.Bytes, st.Count, st.MaxBytes)
	}
	// Without the deadline, the copy stops at the size seen when opened.
	ws.cancel = nil
	info, err := f.st.Create(context.Background(), ws, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Stored > 64 {
		t.Errorf("a 6-byte file growing while read stored %d bytes", info.Stored)
	}
	if st := f.st.Stats(); st.Bytes > st.MaxBytes {
		t.Errorf("the store holds %d bytes, over its bound of %d", st.Bytes, st.MaxBytes)
	}
}

// Two daemons on one store would delete each other's blobs: the second
// Open is refused, naming the directory.
func TestSecondOpenOfAStoreRefused(t *testing.T) {
	a := newFixture(t, nil)
	_, err := Open(Options{Dir: a.storeDir})
	if err == nil || !strings.Contains(err.Error(), a.storeDir) || !strings.Contains(err.Error(), "--state-dir") {
		t.Fatalf("a second Open of a store in use: %v, want a refusal naming %s and --state-dir", err, a.storeDir)
	}
	// It names the holder's pid (here this process's), which the lock
	// file records.
	if want := fmt.Sprintf("pid %d, ", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Fatalf("a second Open of a store in use: %v, want it to name the holder (%q)", err, want)
	}
	a.reopen(t) // closing releases it
}

// A restore checks that every blob it needs is there before it changes
// anything: a failed restore deletes no newer work.
func TestRestoreChecksBlobsFirst(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "a.txt", "checkpointed\n")
	cp := f.create(t, "")
	f.write(t, "a.txt", "edited\n")
	f.write(t, "new-work.txt", "hours of work\n")
	if err := os.Remove(filepath.Join(f.storeDir, "blobs", sha256hex("checkpointed\n"))); err != nil {
		t.Fatal(err)
	}
	done, err := f.st.Restore(context.Background(), f.ws, cp.ID, nil)
	if err == nil {
		t.Fatal("restore with a missing blob succeeded")
	}
	if len(done.Changes) != 0 {
		t.Errorf("the failed restore made changes: %+v", done.Changes)
	}
	if b, serr := os.ReadFile(filepath.Join(f.dir, "new-work.txt")); serr != nil || string(b) != "hours of work\n" {
		t.Fatalf("restore failed (%v) after deleting new-work.txt (%v)", err, serr)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "a.txt")); string(b) != "edited\n" {
		t.Fatalf("a.txt = %q", b)
	}
}

// A blob whose bytes are not those its name says (changed in the store
// from outside, or damaged by a disk that lost writes) is never restored
// as if it were the checkpoint's: one cut short is refused before anything
// changes, as a missing one is; one of the right size but other bytes is
// caught by its hash as it is copied, and that file keeps what it held,
// with no temp file left beside it.
func TestRestoreRefusesDamagedBlobs(t *testing.T) {
	t.Run("cut short", func(t *testing.T) {
		f := newFixture(t, nil)
		f.write(t, "a.txt", "checkpointed\n")
		cp := f.create(t, "")
		f.write(t, "a.txt", "edited\n")
		f.write(t, "new-work.txt", "hours of work\n")
		if err := os.Truncate(filepath.Join(f.storeDir, "blobs", sha256hex("checkpointed\n")), 0); err != nil {
			t.Fatal(err)
		}
		done, err := f.st.Restore(context.Background(), f.ws, cp.ID, nil)
		if err == nil || !strings.Contains(err.Error(), "is damaged: 0 bytes where the checkpoint recorded 13") {
			t.Fatalf("restore over a blob cut short: %v", err)
		}
		if len(done.Changes) != 0 {
			t.Errorf("the refused restore made changes: %+v", done.Changes)
		}
		if b, _ := os.ReadFile(filepath.Join(f.dir, "new-work.txt")); string(b) != "hours of work\n" {
			t.Errorf("new-work.txt = %q after the refused restore", b)
		}
		if b, _ := os.ReadFile(filepath.Join(f.dir, "a.txt")); string(b) != "edited\n" {
			t.Errorf("a.txt = %q after the refused restore", b)
		}
	})
	t.Run("other bytes", func(t *testing.T) {
		f := newFixture(t, nil)
		f.write(t, "a.txt", "checkpointed\n")
		f.write(t, "b.txt", "kept whole\n")
		cp := f.create(t, "")
		f.write(t, "a.txt", "edited\n")
		os.Remove(filepath.Join(f.dir, "b.txt"))
		blob := filepath.Join(f.storeDir, "blobs", sha256hex("checkpointed\n"))
		if err := os.WriteFile(blob, []byte("CHECKPOINTED\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := f.st.Restore(context.Background(), f.ws, cp.ID, nil)
		var ce *errcode.Error
		if !errors.As(err, &ce) || ce.Path != "a.txt" || !strings.Contains(ce.Msg, "does not match its hash") {
			t.Fatalf("restore over a blob of other bytes: %v", err)
		}
		if b, _ := os.ReadFile(filepath.Join(f.dir, "a.txt")); string(b) != "edited\n" {
			t.Errorf("a.txt = %q: the damaged blob's bytes were restored", b)
		}
		names, _ := os.ReadDir(f.dir)
		for _, n := range names {
			if strings.HasPrefix(n.Name(), restoreTemp) {
				t.Errorf("temp file %s left in the workspace", n.Name())
			}
		}
	})
}

// swapWS plays a command running beside a restore: once the restore has
// written its temp file and closed it, the command replaces it with a link
// to "victim" in the same directory.
type swapWS struct {
	fsops.Workspace
	root string
}

type swapFile struct {
	fsops.File
	full string
}

func (s swapWS) OpenFile(p string, flag int, perm fs.FileMode) (fsops.File, error) {
	f, err := s.Workspace.OpenFile(p, flag, perm)
	if err != nil || flag&os.O_CREATE == 0 || !strings.HasPrefix(filepath.Base(p), restoreTemp) {
		return f, err
	}
	return swapFile{f, filepath.Join(s.root, p)}, nil
}

// Chmod passes the mode on to the open file (fsops.Fchmod).
func (f swapFile) Chmod(mode fs.FileMode) error { return fsops.Fchmod(f.File, mode) }

func (f swapFile) Close() error {
	err := f.File.Close()
	os.Remove(f.full)
	os.Symlink("victim", f.full)
	return err
}

// Restore sets the mode on the file it wrote (its descriptor) and renames
// only that file into place: a temp file swapped for a link meanwhile
// neither passes the mode to the link's target nor is renamed.
func TestRestoreChmodsWhatItWrote(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "run.sh", "echo hi\n")
	os.Chmod(filepath.Join(f.dir, "run.sh"), 0o755)
	cp := f.create(t, "")
	f.write(t, "run.sh", "edited\n")
	f.write(t, "victim", "private\n")
	os.Chmod(filepath.Join(f.dir, "victim"), 0o600)
	_, err := f.st.Restore(context.Background(), swapWS{f.ws, f.dir}, cp.ID, []string{"run.sh"})
	if err == nil {
		t.Errorf("restore over a swapped temp file succeeded")
	}
	fi, _ := os.Lstat(filepath.Join(f.dir, "victim"))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("restore (err %v) chmodded the file a planted link named: victim is %v", err, fi.Mode())
	}
	if li, _ := os.Lstat(filepath.Join(f.dir, "run.sh")); li.Mode()&fs.ModeSymlink != 0 {
		t.Errorf("restore renamed a planted link into run.sh")
	}
	// Without the swap, the restored file has its mode.
	if _, err := f.st.Restore(context.Background(), f.ws, cp.ID, []string{"run.sh"}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(filepath.Join(f.dir, "run.sh")); fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh restored as %v", fi.Mode())
	}
}

// mkDeep makes depth nested directories named name below dir, by
// descriptor (no path length limit), and returns the relative path.
func mkDeep(t testing.TB, dir, name string, depth int) string {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	rel := ""
	for range depth {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		fd = nfd
		rel = path.Join(rel, name)
	}
	unix.Close(fd)
	return rel
}

// A path longer than MaxPathBytes, or deeper than MaxDepth, is skipped
// with why (and not walked below): the walk's cost, which grows with the
// square of the depth, and the manifest's size are bounded.
func TestDeepTreeBounded(t *testing.T) {
	f := newFixture(t, nil)
	long := mkDeep(t, f.dir, strings.Repeat("d", 255), 20) // 5,119 bytes, 20 entries
	deep := mkDeep(t, f.dir, "e", MaxDepth+10)
	info := f.create(t, "")
	found := func(prefix, why string) bool {
		for _, s := range info.Skipped {
			if strings.HasPrefix(s, prefix+" (") && strings.Contains(s, why) {
				return true
			}
		}
		return false
	}
	if !found(firstOver(long, MaxPathBytes), "longer than") {
		t.Errorf("a %d-byte path was not skipped with why: %v", len(long), info.Skipped)
	}
	if !found(firstDeeper(deep, MaxDepth), "deeper than") {
		t.Errorf("a %d-deep path was not skipped with why: %v", MaxDepth+10, info.Skipped)
	}
	if info.Files != 0 {
		t.Errorf("files %d", info.Files)
	}
	m, _, err := f.st.readManifest(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range m.Entries {
		if len(e.Path) > MaxPathBytes || strings.Count(e.Path, "/")+1 > MaxDepth {
			t.Fatalf("the manifest holds %d bytes deep %d", len(e.Path), strings.Count(e.Path, "/")+1)
		}
	}
	// Restore leaves the skipped part alone.
	if _, err := f.st.Restore(context.Background(), f.ws, info.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, deep[:len(deep)-len("/e")])); err != nil && !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("the deep tree is gone after restore: %v", err)
	}
}

// firstOver is the shortest prefix of p (at a slash) longer than n bytes.
func firstOver(p string, n int) string {
	for i := n + 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			return p[:i]
		}
	}
	return p
}

// firstDeeper is the prefix of p of n+1 components.
func firstDeeper(p string, n int) string {
	parts := strings.Split(p, "/")
	return strings.Join(parts[:n+1], "/")
}

// A diff that gives up (too many line edits) spends the set's budget by
// what it attempted, so a change set runs few such diffs.
func TestFailedDiffSpendsBudget(t *testing.T) {
	old := make([]byte, 0, 1<<20)
	nw := make([]byte, 0, 1<<20)
	for len(old) < 1<<20-2 {
		old = append(old, 'a', '\n')
		nw = append(nw, 'b', '\n')
	}
	budget := DefaultDiffBudget
	c := Change{Path: "x", Type: TypeFile}
	Describe(&c, old, nw, &budget)
	if c.Diff == "" && budget == DefaultDiffBudget {
		t.Fatalf("a %d-byte diff that gave up (%q) spent none of the budget", len(old), c.Note)
	}
	c2 := Change{Path: "y", Type: TypeFile}
	Describe(&c2, old, nw, &budget)
	if !strings.Contains(c2.Note, "limit is spent") {
		t.Fatalf("a second give-up ran with the budget spent: %q", c2.Note)
	}
}

// openFDs counts the process's open descriptors.
// openFDs counts the process's descriptors but the journals' inotify
// instances, which a store holds from its first checkpoint to its Close
// (TestJournalHoldsOneDescriptorUntilClose).
func openFDs(t *testing.T) int {
	t.Helper()
	n, _ := countFDs(t)
	return n
}

// countFDs counts the process's descriptors, those that are not inotify
// instances and those that are.
func countFDs(t *testing.T) (others, inotify int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l == "anon_inode:inotify" {
			inotify++
		} else {
			others++
		}
	}
	return others, inotify
}

// The walk goes down by descriptor: it lists a deep tree whole, and
// leaves no descriptor open, whether it finishes or is refused half-way.
func TestWalkByDescriptorClosesWhatItOpens(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxFiles = 1000 })
	deep := mkDeep(t, f.dir, "d", MaxDepth-1)
	for i := range 50 {
		if err := os.MkdirAll(filepath.Join(f.dir, "wide", strconv.Itoa(i), "x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Ten directories of twenty files: a walk bounded at 50 is refused with
	// some of them still queued, holding their parent's descriptor.
	for i := range 10 {
		for j := range 20 {
			f.write(t, filepath.Join("many", strconv.Itoa(i), strconv.Itoa(j)), "")
		}
	}
	before := openFDs(t)
	if _, err := f.st.walk(context.Background(), f.ws, "many", 50); !errcode.Is(err, errcode.TooLarge) {
		t.Fatalf("a walk of 211 entries bounded at 50: %v", err)
	}
	if _, err := f.st.walk(context.Background(), f.ws, "deep", 1); err != nil {
		t.Fatal(err) // absent
	}
	f.opts.MaxFiles = 1000
	w, err := f.st.walk(context.Background(), f.ws, "d", f.opts.MaxFiles)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(w.entries); n != MaxDepth-1 || w.entries[len(w.entries)-1].Path != deep {
		t.Errorf("the walk of d listed %d entries, want %d down to %s", n, MaxDepth-1, deep)
	}
	w, err = f.st.walk(context.Background(), f.ws, ".", f.opts.MaxFiles)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(w.entries); n != MaxDepth-1+1+100+1+10+200 {
		t.Errorf("the walk listed %d entries, want %d", n, MaxDepth-1+1+100+1+10+200)
	}
	if got := w.entries[MaxDepth-2].Path; got != deep {
		t.Errorf("the deepest directory is missing: %q", got)
	}
	if _, err := f.st.walk(context.Background(), f.ws, ".", 40); !errcode.Is(err, errcode.TooLarge) {
		t.Fatalf("a walk bounded at 40: %v", err)
	}
	if _, err := f.st.walk(context.Background(), f.ws, "wide/7", 10); err != nil {
		t.Fatal(err)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open before the walks, %d after", before, after)
	}
}

// BenchmarkDeepTreeWalk reports the walk's cost per entry of a chain of
// nested directories: about the same at every depth, since each directory
// is opened from its parent's descriptor.
func BenchmarkDeepTreeWalk(b *testing.B) {
	for _, depth := range []int{16, 32, MaxDepth} {
		b.Run(strconv.Itoa(depth), func(b *testing.B) {
			base := b.TempDir()
			ws, err := fsops.NewDir(base, fsops.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer ws.Close()
			mkDeep(b, base, "d", depth)
			st, err := Open(Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			for b.Loop() {
				if _, err := st.walk(context.Background(), ws, ".", DefaultMaxFiles); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(depth), "ns/entry")
		})
	}
}

// linkCountingWS counts the links the walk reads (one Readlink per link
// entry it stat-ed), and cancels cancel at the first.
type linkCountingWS struct {
	fsops.Workspace
	reads  atomic.Int64
	cancel context.CancelFunc
}

func (l *linkCountingWS) Readlink(p string) (string, error) {
	if l.reads.Add(1) == 1 && l.cancel != nil {
		l.cancel()
	}
	return l.Workspace.Readlink(p)
}

// One directory is listed whole before the walk's count was checked, and
// the call's context was looked at only between directories: a directory
// of a million names was stat-ed (and its entries held) whole, past
// --checkpoint-max-files and the deadline, with GOMAXPROCS raised
// (internal/cpuburst) all along. The walk stops within the directory, one
// entry past the limit or ctxEvery names after the context ended, and the
// skipped entries (special files, which the manifest keeps) are bounded
// by the same limit.
func TestOneDirectoryKeepsTheWalkBounds(t *testing.T) {
	const links = 3 * ctxEvery
	fill := func(t *testing.T, f *fixture) {
		if err := os.Mkdir(filepath.Join(f.dir, "big"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range links {
			if err := os.Symlink("a.txt", filepath.Join(f.dir, "big", "l"+strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("max files", func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.MaxFiles = 5 })
		fill(t, f)
		ws := &linkCountingWS{Workspace: f.ws}
		_, err := f.st.Create(context.Background(), ws, CreateOptions{})
		if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "--checkpoint-max-files (5)") {
			t.Fatalf("create over the file count in one directory: %v", err)
		}
		if n := ws.reads.Load(); n > 6 {
			t.Errorf("the create stat-ed %d links of a directory of %d with --checkpoint-max-files 5, want at most 6", n, links)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		f := newFixture(t, nil)
		fill(t, f)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ws := &linkCountingWS{Workspace: f.ws, cancel: cancel}
		_, err := f.st.Create(ctx, ws, CreateOptions{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("create whose context ended in the walk: %v", err)
		}
		if n := ws.reads.Load(); n > ctxEvery {
			t.Errorf("the walk stat-ed %d links of %d after its context ended at the first, want at most %d", n, links, ctxEvery)
		}
		if len(f.st.List(f.ws)) != 0 {
			t.Error("a cancelled create left a checkpoint")
		}
	})

	t.Run("skipped", func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.MaxFiles = 5 })
		if err := os.Mkdir(filepath.Join(f.dir, "pipes"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if err := syscall.Mkfifo(filepath.Join(f.dir, "pipes", "p"+strconv.Itoa(i)), 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		}
		_, err := f.st.Create(context.Background(), f.ws, CreateOptions{})
		if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "--checkpoint-max-files (5)") {
			t.Fatalf("create of 20 special files with --checkpoint-max-files 5: %v", err)
		}
		// Up to the limit they are skipped and named, as before.
		g := newFixture(t, func(o *Options) { o.MaxFiles = 5 })
		for i := range 5 {
			if err := syscall.Mkfifo(filepath.Join(g.dir, "p"+strconv.Itoa(i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if info := g.create(t, ""); len(info.Skipped) != 5 {
			t.Errorf("5 special files with --checkpoint-max-files 5: skipped %v, want all 5 named", info.Skipped)
		}
	})
}
