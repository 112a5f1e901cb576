package checkpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbe/agentbe-daemon/fsops"
	"golang.org/x/sys/unix"
)

// referenceStore is a second store of f's workspace that never uses the
// journal: its checkpoints are full walks, the truth a guided one must
// match.
func referenceStore(t *testing.T, f *fixture) *Store {
	t.Helper()
	ref, err := Open(Options{Dir: filepath.Join(filepath.Dir(f.storeDir), "reference"), WorkspaceRoot: f.dir, NoJournal: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	return ref
}

// sameAsFullWalk takes a checkpoint of ws in f's store and one in ref,
// and fails unless both captured the same tree: every entry's path, type,
// mode, size, content and link target, and the same skipped entries.
func sameAsFullWalk(t *testing.T, st, ref *Store, ws fsops.Workspace, what string) Info {
	t.Helper()
	ctx := context.Background()
	got, err := st.Create(ctx, ws, CreateOptions{})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want, err := ref.Create(ctx, ws, CreateOptions{})
	if err != nil {
		t.Fatalf("%s: reference: %v", what, err)
	}
	gm, err := st.manifest("test", ws, got.ID)
	if err != nil {
		t.Fatal(err)
	}
	wm, err := ref.manifest("test", ws, want.ID)
	if err != nil {
		t.Fatal(err)
	}
	line := func(e Entry) string {
		return fmt.Sprintf("%s %s %o size=%d hash=%.12s target=%q", e.Path, e.Type, e.Mode, e.Size, e.Hash, e.Target)
	}
	var g, w []string
	for _, e := range gm.Entries {
		g = append(g, line(e))
	}
	for _, e := range wm.Entries {
		w = append(w, line(e))
	}
	if !slices.Equal(g, w) {
		t.Fatalf("%s: the journal's checkpoint differs from a full walk's:\n%s", what, strings.Join(listDiff(g, w), "\n"))
	}
	if fmt.Sprint(gm.Skipped) != fmt.Sprint(wm.Skipped) {
		t.Fatalf("%s: skipped %v, a full walk %v", what, gm.Skipped, wm.Skipped)
	}
	return got
}

// listDiff is the lines only one of the sorted lists holds, marked.
func listDiff(got, want []string) []string {
	var out []string
	for _, l := range got {
		if !slices.Contains(want, l) {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range want {
		if !slices.Contains(got, l) {
			out = append(out, "- "+l)
		}
	}
	return out
}

// A checkpoint after a few changes lists only the directories that
// changed, and captures exactly what a full walk does.
func TestJournalListsOnlyWhatChanged(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	for d := range 20 {
		for i := range 20 {
			f.write(t, fmt.Sprintf("d%02d/sub/f%02d.txt", d, i), fmt.Sprintf("file %d of %d\n", i, d))
		}
	}
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	if n := f.st.guided.Load(); n != 0 {
		t.Fatalf("a first checkpoint was guided (%d)", n)
	}
	f.write(t, "d07/sub/f03.txt", "changed\n")
	info := sameAsFullWalk(t, f.st, ref, f.ws, "one file changed")
	if f.st.guided.Load() != 1 || info.Read != 1 {
		t.Fatalf("after one change: guided %d, read %d files; want a guided walk reading 1", f.st.guided.Load(), info.Read)
	}
	// Nothing changed: still guided, nothing read.
	if info := sameAsFullWalk(t, f.st, ref, f.ws, "nothing changed"); f.st.guided.Load() != 2 || info.Read != 0 {
		t.Fatalf("after no change: guided %d, read %d", f.st.guided.Load(), info.Read)
	}
}

// A file with another link outside the workspace, written through that
// link, raises no event in the workspace's directory: a directory holding
// a multiply-linked file is listed every time.
func TestJournalSeesAWriteThroughAnotherLink(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	f.write(t, "a/linked.txt", "before\n")
	f.write(t, "b/other.txt", "other\n")
	outside := filepath.Join(filepath.Dir(f.dir), "outside-link")
	if err := os.Link(filepath.Join(f.dir, "a/linked.txt"), outside); err != nil {
		t.Fatal(err)
	}
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	sameAsFullWalk(t, f.st, ref, f.ws, "second")
	if err := os.WriteFile(outside, []byte("after, through the other link\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	info := sameAsFullWalk(t, f.st, ref, f.ws, "written through the outside link")
	if info.Read != 1 {
		t.Fatalf("read %d files, want the linked one", info.Read)
	}
}

// A write through a shared mapping raises no event of its own; the
// close of the file the writer opened for writing does.
func TestJournalSeesAMappedWriteOnceClosed(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	f.write(t, "db/data", strings.Repeat("0", 4096))
	f.write(t, "other/x", "x")
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	fh, err := os.OpenFile(filepath.Join(f.dir, "db/data"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(fh.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(m, "written through the mapping")
	unix.Munmap(m)
	fh.Close()
	if info := sameAsFullWalk(t, f.st, ref, f.ws, "after a mapped write"); info.Read != 1 {
		t.Fatalf("read %d files, want the mapped one", info.Read)
	}
}

// A directory moved leaves its watch naming its old path: the journal's
// generation ends, and the next checkpoint walks in full. A directory
// moved away and back (its ctime changed) is listed again too.
func TestJournalAfterDirectoryMoves(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	f.write(t, "x/deep/one.txt", "1\n")
	f.write(t, "y/two.txt", "2\n")
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	if err := os.Rename(filepath.Join(f.dir, "x"), filepath.Join(f.dir, "y/x")); err != nil {
		t.Fatal(err)
	}
	f.write(t, "y/x/deep/one.txt", "changed after the move\n")
	g := f.st.guided.Load()
	sameAsFullWalk(t, f.st, ref, f.ws, "moved")
	if f.st.guided.Load() != g {
		t.Fatal("the checkpoint after a directory moved was guided")
	}
	f.write(t, "y/x/deep/one.txt", "changed again at the new place\n")
	sameAsFullWalk(t, f.st, ref, f.ws, "changed where it moved to")
	if f.st.guided.Load() != g+1 {
		t.Fatal("the journal did not guide again after a full walk")
	}
}

// The root replaced by another directory of the same path (whose
// directories no watch covers) is walked in full.
func TestJournalRootReplaced(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	mk := func(content string) {
		if err := os.MkdirAll(filepath.Join(dir, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "d/f.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("first root\n")
	st, err := Open(Options{Dir: filepath.Join(base, "state"), WorkspaceRoot: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ref, err := Open(Options{Dir: filepath.Join(base, "ref"), WorkspaceRoot: dir, NoJournal: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	open := func() fsops.Workspace {
		ws, err := fsops.NewDir(dir, fsops.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		return ws
	}
	sameAsFullWalk(t, st, ref, open(), "first")
	if err := os.Rename(dir, filepath.Join(base, "old")); err != nil {
		t.Fatal(err)
	}
	mk("second root\n")
	// The same length, and the times of the first: only the content
	// differs.
	old, _ := os.Stat(filepath.Join(base, "old/d/f.txt"))
	os.Chtimes(filepath.Join(dir, "d/f.txt"), old.ModTime(), old.ModTime())
	g := st.guided.Load()
	sameAsFullWalk(t, st, ref, open(), "replaced")
	if st.guided.Load() != g {
		t.Fatal("a checkpoint of a replaced root was guided")
	}
}

// A mount over a directory of the tree raises no event: a mount table
// other than the base's makes the next checkpoint walk in full.
func TestJournalAfterTheMountTableChanged(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "a/f", "x")
	f.create(t, "")
	f.create(t, "")
	if f.st.guided.Load() != 1 {
		t.Fatal("no guided checkpoint under the same table")
	}
	read := readMountTable
	t.Cleanup(func() { readMountTable = read })
	readMountTable = func() ([]byte, error) {
		b, err := read()
		return append(b, "99 1 0:99 / /mounted/over/the/tree rw - tmpfs none rw\n"...), err
	}
	f.create(t, "")
	if f.st.guided.Load() != 1 {
		t.Fatal("a checkpoint under another mount table was guided")
	}
	f.create(t, "")
	if f.st.guided.Load() != 2 {
		t.Fatal("the walk under the new table is no base")
	}
}

// A directory the base listed is taken from it only while it is the
// same one: same inode, device, mode and times.
func TestGuideTakesOnlyTheSameDirectory(t *testing.T) {
	prev := []Entry{
		{Path: "a", Type: TypeDir, Mode: 0o755, Dev: 1, Ino: 2, MTime: 3, CTime: 4},
		{Path: "a.b", Type: TypeFile},
		{Path: "a/x", Type: TypeFile},
		{Path: "a/y", Type: TypeDir},
		{Path: "a/y/z", Type: TypeFile},
		{Path: "a0", Type: TypeFile},
	}
	g := &guide{prev: prev, list: map[string]bool{".": true}, rootDev: 1}
	same := prev[0]
	if lo, hi, ok := g.subtree(&same); !ok || lo != 2 || hi != 5 {
		t.Fatalf("the same directory: %d, %d, %v; want its subtree 2..5", lo, hi, ok)
	}
	for name, change := range map[string]func(e *Entry){
		"inode": func(e *Entry) { e.Ino++ }, "device": func(e *Entry) { e.Dev++ }, "mode": func(e *Entry) { e.Mode = 0o700 },
		"mtime": func(e *Entry) { e.MTime++ }, "ctime": func(e *Entry) { e.CTime++ }, "no ctime": func(e *Entry) { e.CTime = 0 },
	} {
		e := prev[0]
		change(&e)
		if _, _, ok := g.subtree(&e); ok {
			t.Errorf("a directory of another %s was taken from the base", name)
		}
	}
	g.list["a"] = true
	if _, _, ok := g.subtree(&same); ok {
		t.Error("a directory to list again was taken from the base")
	}
}

// Scopes share the journal: a change in one scope leaves another's
// checkpoint guided and unchanged, and is seen by its own.
func TestJournalScopes(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	f.write(t, "alice/a/a.txt", "alice\n")
	f.write(t, "bob/b/b.txt", "bob\n")
	alice, bob := f.scope(t, "alice"), f.scope(t, "bob")
	sameAsFullWalk(t, f.st, ref, alice, "alice first")
	sameAsFullWalk(t, f.st, ref, bob, "bob first")
	f.write(t, "alice/a/a.txt", "alice changed\n")
	if info := sameAsFullWalk(t, f.st, ref, bob, "bob after alice's change"); info.Read != 0 {
		t.Fatalf("bob's checkpoint read %d files", info.Read)
	}
	if info := sameAsFullWalk(t, f.st, ref, alice, "alice after her change"); info.Read != 1 {
		t.Fatalf("alice's checkpoint read %d files", info.Read)
	}
	if f.st.guided.Load() != 2 {
		t.Fatalf("%d guided checkpoints, want 2", f.st.guided.Load())
	}
}

// Every kind of change, at random, many rounds: each checkpoint captures
// exactly what a full walk does, and most are guided.
func TestJournalMatchesFullWalksUnderRandomChanges(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { journalRandomChanges(t, seed) })
	}
}

func journalRandomChanges(t *testing.T, seed uint64) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	r := rand.New(rand.NewPCG(36, seed))
	outside := filepath.Join(filepath.Dir(f.dir), "outside")
	os.MkdirAll(outside, 0o755)
	var dirs, files, links []string
	dirs = append(dirs, ".")
	pick := func(l []string) string { return l[r.IntN(len(l))] }
	live := func(l []string, dir bool) []string {
		return slices.DeleteFunc(l, func(p string) bool {
			fi, err := os.Lstat(filepath.Join(f.dir, p))
			return err != nil || fi.IsDir() != dir || !dir && !fi.Mode().IsRegular()
		})
	}
	for i := range 40 {
		d := filepath.Join(pick(dirs), fmt.Sprintf("d%d", i))
		f.write(t, filepath.Join(d, "f.txt"), fmt.Sprint("file ", i, "\n"))
		dirs, files = append(dirs, d), append(files, filepath.Join(d, "f.txt"))
		if i%8 == 0 {
			// Linked from outside before the first checkpoint (a link
			// made from outside later is the journal's stated limit:
			// docs/checkpoints.md, "The journal").
			o := filepath.Join(outside, fmt.Sprint(i))
			if err := os.Link(filepath.Join(f.dir, d, "f.txt"), o); err != nil {
				t.Fatal(err)
			}
			links = append(links, o)
		}
	}
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	ops := []func(n int) string{
		func(n int) string { // a new file
			p := filepath.Join(pick(dirs), fmt.Sprintf("new%d.txt", n))
			if fi, err := os.Stat(filepath.Join(f.dir, filepath.Dir(p))); err == nil && fi.IsDir() {
				f.write(t, p, strings.Repeat("n", n%50))
				files = append(files, p)
			}
			return "create " + p
		},
		func(n int) string { // rewritten, same size, times set back
			p := pick(files)
			fi, err := os.Stat(filepath.Join(f.dir, p))
			if err != nil {
				return "gone " + p
			}
			b, _ := os.ReadFile(filepath.Join(f.dir, p))
			for i := range b {
				b[i] = 'a' + byte((n+i)%26)
			}
			os.WriteFile(filepath.Join(f.dir, p), b, 0o644)
			os.Chtimes(filepath.Join(f.dir, p), fi.ModTime(), fi.ModTime())
			return "rewrite " + p
		},
		func(n int) string { // appended
			p := pick(files)
			if fh, err := os.OpenFile(filepath.Join(f.dir, p), os.O_WRONLY|os.O_APPEND, 0); err == nil {
				fh.WriteString("more\n")
				fh.Close()
			}
			return "append " + p
		},
		func(n int) string { // truncated
			p := pick(files)
			os.Truncate(filepath.Join(f.dir, p), 1)
			return "truncate " + p
		},
		func(n int) string { // a file's mode
			p := pick(files)
			os.Chmod(filepath.Join(f.dir, p), os.FileMode(0o600+n%2*0o44))
			return "chmod " + p
		},
		func(n int) string { // a directory's mode
			d := pick(dirs)
			if d != "." {
				os.Chmod(filepath.Join(f.dir, d), os.FileMode(0o700+n%2*0o55))
			}
			return "chmod dir " + d
		},
		func(n int) string { // a file removed
			p := pick(files)
			os.Remove(filepath.Join(f.dir, p))
			return "remove " + p
		},
		func(n int) string { // a tree removed
			d := pick(dirs)
			if d != "." && n%3 == 0 {
				os.RemoveAll(filepath.Join(f.dir, d))
			}
			return "remove tree " + d
		},
		func(n int) string { // a file renamed into another directory
			p, d := pick(files), pick(dirs)
			to := filepath.Join(d, fmt.Sprintf("moved%d", n))
			if os.Rename(filepath.Join(f.dir, p), filepath.Join(f.dir, to)) == nil {
				files = append(files, to)
			}
			return "rename " + p + " " + to
		},
		func(n int) string { // a directory renamed
			d, into := pick(dirs), pick(dirs)
			to := filepath.Join(into, fmt.Sprintf("dmoved%d", n))
			if d != "." && !strings.HasPrefix(into+"/", d+"/") && os.Rename(filepath.Join(f.dir, d), filepath.Join(f.dir, to)) == nil {
				dirs = append(dirs, to)
			}
			return "rename dir " + d + " " + to
		},
		func(n int) string { // a new directory
			d := filepath.Join(pick(dirs), fmt.Sprintf("nd%d", n))
			if os.Mkdir(filepath.Join(f.dir, d), 0o755) == nil {
				dirs = append(dirs, d)
			}
			return "mkdir " + d
		},
		func(n int) string { // a symlink, inside or leading out
			p := filepath.Join(pick(dirs), fmt.Sprintf("ln%d", n))
			target := []string{"f.txt", "../../../../../../../../etc", "nowhere"}[n%3]
			os.Symlink(target, filepath.Join(f.dir, p))
			return "symlink " + p
		},
		func(n int) string { // a hard link inside the workspace, then a write through it
			p, d := pick(files), pick(dirs)
			to := filepath.Join(d, fmt.Sprintf("hl%d", n))
			if os.Link(filepath.Join(f.dir, p), filepath.Join(f.dir, to)) == nil {
				files = append(files, to)
				if n%2 == 0 {
					os.WriteFile(filepath.Join(f.dir, to), []byte(fmt.Sprint("through the new link ", n, "\n")), 0o644)
				}
			}
			return "link " + p + " " + to
		},
		func(n int) string { // a write through a link outside
			if len(links) == 0 {
				return "no link"
			}
			o := pick(links)
			os.WriteFile(o, []byte(fmt.Sprint("through the outside link ", n, "\n")), 0o644)
			return "write outside " + o
		},
		func(n int) string { // a directory replaced by a file
			d := pick(dirs)
			if d != "." && n%4 == 0 && os.RemoveAll(filepath.Join(f.dir, d)) == nil {
				if fi, err := os.Stat(filepath.Dir(filepath.Join(f.dir, d))); err == nil && fi.IsDir() {
					f.write(t, d, "was a directory\n")
					files = append(files, d)
				}
			}
			return "dir to file " + d
		},
		func(n int) string { // a FIFO (skipped)
			p := filepath.Join(pick(dirs), fmt.Sprintf("fifo%d", n))
			syscall.Mkfifo(filepath.Join(f.dir, p), 0o644)
			return "fifo " + p
		},
	}
	for round := range 120 {
		var did []string
		for k := range 1 + r.IntN(4) {
			did = append(did, ops[r.IntN(len(ops))](round*10+k))
		}
		dirs, files = live(dirs, true), live(files, false)
		if len(dirs) == 0 {
			dirs = []string{"."}
		}
		if len(files) == 0 {
			f.write(t, "again.txt", "again\n")
			files = []string{"again.txt"}
		}
		sameAsFullWalk(t, f.st, ref, f.ws, fmt.Sprintf("round %d (%s)", round, strings.Join(did, "; ")))
	}
	if g := f.st.guided.Load(); g < 60 {
		t.Fatalf("only %d of 120 checkpoints were guided", g)
	}
}

// The store holds one inotify instance from its first checkpoint, and
// gives it back at Close.
func TestJournalHoldsOneDescriptorUntilClose(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "a/b.txt", "b\n")
	_, before := countFDs(t)
	f.create(t, "")
	f.create(t, "")
	if _, n := countFDs(t); n != before+1 {
		t.Fatalf("%d inotify instances after two checkpoints, %d before", n, before)
	}
	f.st.Close()
	if _, n := countFDs(t); n != before {
		t.Fatalf("%d inotify instances after Close, %d before", n, before)
	}
}

// A journal that cannot watch (here, past its watch bound) makes no base:
// every checkpoint walks in full, and none is wrong.
func TestJournalPastItsWatchesWalksInFull(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	for i := range 5 {
		f.write(t, fmt.Sprintf("d%d/f", i), "x")
	}
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	f.st.jrnl.mu.Lock()
	for i := range f.st.jrnl.bound {
		f.st.jrnl.paths[int32(-1-i)] = "/nowhere"
	}
	f.st.jrnl.mu.Unlock()
	sameAsFullWalk(t, f.st, ref, f.ws, "second") // guided, but watches nothing new
	f.write(t, "d9/new", "y")
	f.write(t, "d1/f", "z")
	sameAsFullWalk(t, f.st, ref, f.ws, "a new directory it cannot watch")
	g := f.st.guided.Load()
	f.write(t, "d9/new", "changed")
	sameAsFullWalk(t, f.st, ref, f.ws, "a change in the unwatched directory")
	if f.st.guided.Load() != g {
		t.Fatal("a walk that could not watch a directory became a base")
	}
}

// Events the journal cannot vouch past end its generation: a lost event
// (the queue overflowed), an unmount, a directory moved.
func TestJournalUntrustingEvents(t *testing.T) {
	for _, c := range []struct {
		name string
		mask uint32
	}{{"overflow", unix.IN_Q_OVERFLOW}, {"unmount", unix.IN_UNMOUNT}, {"moved", unix.IN_MOVE_SELF}} {
		j := &journal{paths: map[int32]string{1: "/ws"}, dirty: map[string]uint64{}}
		j.record(inotifyEvent(1, unix.IN_MODIFY, "a"))
		if j.dirty["/ws"] != 0 || len(j.dirty) != 1 {
			t.Fatalf("%s: dirty %v after a modify", c.name, j.dirty)
		}
		j.record(inotifyEvent(1, c.mask, ""))
		if j.gen != 1 || len(j.dirty) != 0 {
			t.Fatalf("%s: generation %d, dirty %v", c.name, j.gen, j.dirty)
		}
	}
}

func inotifyEvent(wd int32, mask uint32, name string) []byte {
	n := 0
	if name != "" {
		n = (len(name) + 1 + 15) &^ 15
	}
	b := make([]byte, unix.SizeofInotifyEvent+n)
	binary.NativeEndian.PutUint32(b[0:], uint32(wd))
	binary.NativeEndian.PutUint32(b[4:], mask)
	binary.NativeEndian.PutUint32(b[12:], uint32(n))
	copy(b[unix.SizeofInotifyEvent:], name)
	return b
}

// The events are the kernel's, but the parser is bounded whatever it is
// given: a length past the buffer ends the generation, nothing panics.
func FuzzJournalRecord(f *testing.F) {
	f.Add(inotifyEvent(1, unix.IN_MODIFY, "name"))
	f.Add(append(inotifyEvent(2, unix.IN_DELETE_SELF, ""), inotifyEvent(2, unix.IN_IGNORED, "")...))
	f.Add([]byte{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 127})
	f.Fuzz(func(t *testing.T, b []byte) {
		j := &journal{paths: map[int32]string{1: "/ws", 2: "/ws/a"}, dirty: map[string]uint64{}}
		j.record(b)
		for d := range j.dirty {
			if d != "/ws" && d != "/ws/a" {
				t.Fatalf("dirty %q, which no watch names", d)
			}
		}
	})
}

// A journal takes at most a quarter of the user's inotify watches, which
// the user's other programs share.
func TestJournalTakesAQuarterOfTheWatches(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		t.Skip("no /proc/sys/fs/inotify/max_user_watches: not Linux's /proc")
	}
	var limit int
	fmt.Sscan(string(b), &limit)
	if got, want := watchBound(), min(maxWatches, limit/4); got != want {
		t.Fatalf("watchBound() = %d with the user's limit %d, want %d", got, limit, want)
	}
}

func TestBelow(t *testing.T) {
	for _, c := range []struct {
		p, root, rel string
		ok           bool
	}{
		{"/ws", "/ws", ".", true}, {"/ws/a/b", "/ws", "a/b", true}, {"/wsx", "/ws", "", false},
		{"/w", "/ws", "", false}, {"/ws/", "/ws", "", false}, {"/a", "/", "a", true}, {"/", "/", ".", true},
	} {
		rel, ok := below(c.p, c.root)
		if rel != c.rel || ok != c.ok {
			t.Errorf("below(%q, %q) = %q, %v; want %q, %v", c.p, c.root, rel, ok, c.rel, c.ok)
		}
	}
}

// A scope whose tree is more than the journal may watch gives back the
// watches it took and walks in full from then on, without watching; a
// scope that fits keeps its journal.
func TestJournalScopeTooLargeGivesItsWatchesBack(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	f.write(t, "bob/b/f", "bob")
	for i := range 20 {
		f.write(t, fmt.Sprintf("alice/d%d/f", i), "alice")
	}
	alice, bob := f.scope(t, "alice"), f.scope(t, "bob")
	sameAsFullWalk(t, f.st, ref, bob, "bob first")
	watchesBelow := func(root string) int {
		f.st.jrnl.mu.Lock()
		defer f.st.jrnl.mu.Unlock()
		n := 0
		for _, p := range f.st.jrnl.paths {
			if _, ok := below(p, root); ok {
				n++
			}
		}
		return n
	}
	f.st.jrnl.mu.Lock()
	f.st.jrnl.bound = len(f.st.jrnl.paths) + 10 // alice has 21 directories
	f.st.jrnl.mu.Unlock()
	for round := range 3 {
		f.write(t, "alice/d3/f", fmt.Sprint("alice ", round))
		if info := sameAsFullWalk(t, f.st, ref, alice, fmt.Sprint("alice round ", round)); info.Listed != 21 {
			t.Fatalf("alice's checkpoint listed %d directories, want all 21", info.Listed)
		}
		if n := watchesBelow(alice.Root()); n != 0 {
			t.Fatalf("round %d: alice's tree holds %d watches, want none", round, n)
		}
	}
	g := f.st.guided.Load()
	sameAsFullWalk(t, f.st, ref, bob, "bob after alice gave her watches back") // a full walk: the generation ended
	f.write(t, "bob/b/f", "bob changed")
	if info := sameAsFullWalk(t, f.st, ref, bob, "bob changed"); info.Listed != 2 || f.st.guided.Load() != g+1 {
		t.Fatalf("bob's checkpoint listed %d directories (guided %d → %d), want a guided one of 2", info.Listed, g, f.st.guided.Load())
	}
}

// Every maxGuided-th checkpoint of a scope walks in full: what the
// journal cannot see (here a file written through a hard link made from
// outside the tree after the base) is captured within maxGuided
// checkpoints.
func TestJournalWalksInFullEveryMaxGuided(t *testing.T) {
	f := newFixture(t, nil)
	for _, d := range []string{"a", "b", "c"} {
		f.write(t, d+"/f", d)
	}
	first := f.create(t, "")
	if first.Listed != 4 {
		t.Fatalf("the first checkpoint listed %d directories, want 4", first.Listed)
	}
	outside := filepath.Join(filepath.Dir(f.dir), "outside-link")
	if err := os.Link(filepath.Join(f.dir, "a/f"), outside); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, []byte("written from outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for n := 2; n <= 2*maxGuided+1; n++ {
		f.write(t, "b/f", fmt.Sprint("round ", n))
		info := f.create(t, "")
		// Guided, the root and b; once a full walk has seen a/f's second
		// link, a too (its directory is listed every time).
		want := 2
		switch {
		case n%maxGuided == 1:
			want = 4
		case n > maxGuided+1:
			want = 3
		}
		if info.Listed != want {
			t.Fatalf("checkpoint %d listed %d directories, want %d", n, info.Listed, want)
		}
		if info.Read == 2 && seen == 0 {
			seen = n
		}
	}
	if seen != maxGuided+1 {
		t.Fatalf("the write through the outside link was captured by checkpoint %d, want the full walk of checkpoint %d", seen, maxGuided+1)
	}
}
