package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// fixture is a workspace directory, its fsops.Workspace and a store
// outside it.
type fixture struct {
	dir, storeDir string
	ws            fsops.Workspace
	st            *Store
	opts          Options
}

func newFixture(t *testing.T, tweak func(*Options)) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{dir: filepath.Join(base, "ws"), storeDir: filepath.Join(base, "state", "checkpoints")}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := fsops.NewDir(f.dir, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	f.ws = ws
	f.opts = Options{Dir: f.storeDir, WorkspaceRoot: f.dir}
	if tweak != nil {
		tweak(&f.opts)
	}
	f.reopen(t)
	return f
}

// reopen opens the store again, as a restarted daemon does.
func (f *fixture) reopen(t *testing.T) {
	t.Helper()
	if f.st != nil {
		f.st.Close()
	}
	st, err := Open(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	f.st = st
	t.Cleanup(func() { st.Close() })
}

// scope is the fixture's workspace scoped to rel, closed when the test
// ends.
func (f *fixture) scope(t *testing.T, rel string) fsops.Workspace {
	t.Helper()
	ws, err := f.ws.Scope(rel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

func (f *fixture) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(f.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) create(t *testing.T, label string) Info {
	t.Helper()
	info, err := f.st.Create(context.Background(), f.ws, CreateOptions{Label: label})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// snapshot is every entry below dir: type, permission bits, and content or
// link target, byte for byte.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			out[rel] = "link " + t
		case fi.IsDir():
			out[rel] = fmt.Sprintf("dir %o", fi.Mode().Perm())
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			out[rel] = fmt.Sprintf("file %o %q", fi.Mode().Perm(), b)
		default:
			out[rel] = "special " + fi.Mode().Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffSnapshots(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, fmt.Sprintf("%s: %q, then %q", k, v, b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s: absent, then %q", k, v))
		}
	}
	sort.Strings(out)
	return out
}

func populate(t *testing.T, f *fixture) {
	f.write(t, "main.go", "package main\n\nfunc main() {}\n")
	f.write(t, "src/a.go", "package src\n\nconst A = 1\n")
	f.write(t, "src/deep/b.txt", strings.Repeat("line\n", 50))
	f.write(t, "bin/tool", "\x00\x01binary")
	if err := os.Chmod(filepath.Join(f.dir, "bin/tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/a.go", filepath.Join(f.dir, "link.go")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(f.dir, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
}

func TestCreateRestoreEveryByte(t *testing.T) {
	f := newFixture(t, nil)
	populate(t, f)
	before := snapshot(t, f.dir)
	info := f.create(t, "start")
	if info.ID == "" || info.Files != 4 || info.Read != 4 {
		t.Fatalf("create: %+v", info)
	}

	// Damage: a removed tree, a rewritten file, new files, a changed mode,
	// a link turned into a file.
	os.RemoveAll(filepath.Join(f.dir, "src"))
	f.write(t, "main.go", "broken\n")
	f.write(t, "new/file.txt", "new\n")
	os.Chmod(filepath.Join(f.dir, "bin/tool"), 0o600)
	os.Remove(filepath.Join(f.dir, "link.go"))
	f.write(t, "link.go", "not a link")

	cs, err := f.st.Restore(context.Background(), f.ws, info.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffSnapshots(before, snapshot(t, f.dir)); len(d) > 0 {
		t.Fatalf("after restore:\n%s", strings.Join(d, "\n"))
	}
	kinds := map[string]string{}
	for _, c := range cs.Changes {
		kinds[c.Path+" "+c.Type] += c.Kind
	}
	for k, want := range map[string]string{"src/a.go file": KindAdded, "main.go file": KindModified, "new dir": KindDeleted,
		"bin/tool file": KindModified, "link.go symlink": KindAdded, "link.go file": KindDeleted} {
		if kinds[k] != want {
			t.Errorf("restore change %s = %q, want %q (all: %v)", k, kinds[k], want, kinds)
		}
	}
	// A second restore finds nothing to do.
	cs, err = f.st.Restore(context.Background(), f.ws, info.ID, nil)
	if err != nil || len(cs.Changes) != 0 {
		t.Fatalf("second restore: %v %+v", err, cs)
	}
}

func TestRestorePaths(t *testing.T) {
	f := newFixture(t, nil)
	populate(t, f)
	info := f.create(t, "")
	f.write(t, "main.go", "changed\n")
	f.write(t, "src/a.go", "changed\n")
	f.write(t, "src/c.go", "created since\n")
	cs, err := f.st.Restore(context.Background(), f.ws, info.ID, []string{"src"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "main.go")); string(b) != "changed\n" {
		t.Errorf("main.go outside paths was restored: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "src/a.go")); string(b) != "package src\n\nconst A = 1\n" {
		t.Errorf("src/a.go: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(f.dir, "src/c.go")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("src/c.go created since is still there: %v", err)
	}
	if cs.Modified != 1 || cs.Deleted != 1 || cs.Added != 0 {
		t.Errorf("changes: %+v", cs)
	}
}

func TestIncrementalReadsOnlyChangedFiles(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 50 {
		f.write(t, fmt.Sprintf("d%d/f%d.txt", i%5, i), fmt.Sprintf("file %d\n", i))
	}
	first := f.create(t, "")
	if first.Read != 50 {
		t.Fatalf("first checkpoint read %d files, want 50", first.Read)
	}
	f.write(t, "d1/f1.txt", "changed\n")
	f.write(t, "d2/new.txt", "new\n")
	second := f.create(t, "")
	if second.Read != 2 || second.Files != 51 {
		t.Fatalf("second checkpoint: %+v, want 2 read of 51", second)
	}
	// A restarted daemon keeps the previous manifest as its baseline.
	f.reopen(t)
	third := f.create(t, "")
	if third.Read != 0 || third.Stored != 0 {
		t.Fatalf("checkpoint after a restart: %+v, want nothing read", third)
	}
	if got := len(f.st.List(f.ws)); got != 3 {
		t.Fatalf("list after restart: %d checkpoints, want 3", got)
	}
}

func TestDedupAndAutoReuse(t *testing.T) {
	f := newFixture(t, nil)
	content := strings.Repeat("same content\n", 1000)
	for i := range 10 {
		f.write(t, fmt.Sprintf("copy%d.txt", i), content)
	}
	info := f.create(t, "")
	if info.Stored != int64(len(content)) {
		t.Fatalf("stored %d bytes for 10 identical files of %d", info.Stored, len(content))
	}
	blobs, _ := os.ReadDir(filepath.Join(f.storeDir, blobsDir))
	if len(blobs) != 1 {
		t.Fatalf("%d blobs, want 1", len(blobs))
	}
	auto, err := f.st.Create(context.Background(), f.ws, CreateOptions{Auto: true})
	if err != nil || !auto.Reused || auto.ID != info.ID {
		t.Fatalf("auto checkpoint of an unchanged workspace: %+v %v", auto, err)
	}
	f.write(t, "copy0.txt", "other")
	auto, err = f.st.Create(context.Background(), f.ws, CreateOptions{Auto: true})
	if err != nil || auto.Reused || auto.ID == info.ID {
		t.Fatalf("auto checkpoint of a changed workspace: %+v %v", auto, err)
	}
}

// storeBytes is what the store directory holds, by walking it: its
// checkpoints' files (the lock file, which holds its holder's pid, is no
// checkpoint's and not in the store's bytes).
func storeBytes(t *testing.T, dir string) (n int64, tmp, blobs int) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			p, _ = filepath.Rel(dir, p)
			p = "/" + p
			if p == "/"+lockFile {
				return nil
			}
			fi, _ := d.Info()
			n += fi.Size()
			if strings.Contains(p, "/"+tmpDir+"/") {
				tmp++
			}
			if strings.Contains(p, "/"+blobsDir+"/") {
				blobs++
			}
		}
		return nil
	})
	return
}

func TestPruneOldestAndCollectBlobs(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxCount = 2 })
	f.write(t, "a.txt", "first\n")
	c1 := f.create(t, "1")
	f.write(t, "a.txt", "second\n")
	c2 := f.create(t, "2")
	f.write(t, "a.txt", "third\n")
	c3 := f.create(t, "3")
	if len(c3.Pruned) != 1 || c3.Pruned[0] != c1.ID {
		t.Fatalf("pruned %v, want [%s]", c3.Pruned, c1.ID)
	}
	var ids []string
	for _, c := range f.st.List(f.ws) {
		ids = append(ids, c.ID)
	}
	if strings.Join(ids, ",") != c2.ID+","+c3.ID {
		t.Fatalf("list %v, want %s,%s", ids, c2.ID, c3.ID)
	}
	n, _, blobs := storeBytes(t, f.storeDir)
	if blobs != 2 {
		t.Fatalf("%d blobs after pruning, want 2 (first's content collected)", blobs)
	}
	if st := f.st.Stats(); st.Bytes != n || st.Count != 2 {
		t.Fatalf("stats %+v, directory holds %d bytes", st, n)
	}

	// Bytes: a store of 1 MiB keeps what fits, the oldest pruned first.
	g := newFixture(t, func(o *Options) { o.MaxBytes = 1 << 20 })
	for i := range 4 {
		g.write(t, "big.bin", strings.Repeat(string(rune('a'+i)), 400<<10))
		g.create(t, "")
	}
	if st := g.st.Stats(); st.Bytes > 1<<20 || st.Count != 2 {
		t.Fatalf("bytes bound: %+v", st)
	}
}

// TestCrashLeavesWholeOrAbsent stops a create, and a prune, between each
// of their steps, as a kill would, and opens the store again: every
// checkpoint is whole (it restores byte for byte) or absent, and nothing
// is left over. The second checkpoint is stored as a delta of the first,
// so the prune keeps the first's manifest as a base (renamed) rather than
// removing it.
func TestCrashLeavesWholeOrAbsent(t *testing.T) {
	for _, durable := range []bool{false, true} {
		for _, step := range []string{"blobs", "manifest-temp", "prune-manifest"} {
			t.Run(fmt.Sprintf("durable=%v/%s", durable, step), func(t *testing.T) { crashAt(t, step, durable) })
		}
	}
}

// crashAt stops a create (or the prune it ends with) at step, as a kill
// there would, and opens the store again.
func crashAt(t *testing.T, step string, durable bool) {
	crashed := errors.New("killed")
	var armed bool
	f := newFixture(t, func(o *Options) {
		o.Durable = durable
		o.MaxCount = 2
		o.crash = func(s string) error {
			if armed && s == step {
				return crashed
			}
			return nil
		}
	})
	f.write(t, "a.txt", "one\n")
	c1 := f.create(t, "")
	f.write(t, "b.txt", "two\n")
	c2 := f.create(t, "")
	if m, _, err := f.st.readManifestFile(c2.ID); err != nil || m.Base != c1.ID {
		t.Fatalf("the second checkpoint is stored on %q (%v), want a delta of %s", m.Base, err, c1.ID)
	}
	want := snapshot(t, f.dir)
	f.write(t, "c.txt", "three, only in the crashed checkpoint\n")
	armed = true
	_, err := f.st.Create(context.Background(), f.ws, CreateOptions{})
	if !strings.HasPrefix(step, "prune-") && !errors.Is(err, crashed) {
		t.Fatalf("create: %v, want the crash", err)
	}
	armed = false
	f.reopen(t)

	n, tmp, _ := storeBytes(t, f.storeDir)
	if tmp != 0 {
		t.Errorf("%d temp files left after reopening", tmp)
	}
	if st := f.st.Stats(); st.Bytes != n {
		t.Errorf("stats say %d bytes, the directory holds %d", st.Bytes, n)
	}
	list := f.st.List(f.ws)
	switch step {
	case "prune-manifest":
		// The new checkpoint is whole, the pruned one gone from
		// the list, its manifest kept as the base c2 is stored on.
		if len(list) != 2 || list[0].ID != c2.ID {
			t.Fatalf("list %+v", list)
		}
		if _, err := os.Stat(filepath.Join(f.storeDir, manifestsDir, c1.ID+baseExt)); err != nil {
			t.Fatalf("the pruned base: %v", err)
		}
	default:
		if len(list) != 2 || list[0].ID != c1.ID || list[1].ID != c2.ID {
			t.Fatalf("list %+v, want the two whole checkpoints", list)
		}
		_, _, blobs := storeBytes(t, f.storeDir)
		if blobs != 2 {
			t.Errorf("%d blobs, want 2: the crashed create's blob is collected", blobs)
		}
	}
	os.Remove(filepath.Join(f.dir, "c.txt"))
	os.Remove(filepath.Join(f.dir, "a.txt"))
	f.write(t, "b.txt", "damaged")
	if _, err := f.st.Restore(context.Background(), f.ws, c2.ID, nil); err != nil {
		t.Fatal(err)
	}
	if d := diffSnapshots(want, snapshot(t, f.dir)); len(d) > 0 {
		t.Fatalf("restore after the crash:\n%s", strings.Join(d, "\n"))
	}
}

func TestDiff(t *testing.T) {
	f := newFixture(t, nil)
	populate(t, f)
	c1 := f.create(t, "")
	f.write(t, "main.go", "package main\n\nfunc main() { println(1) }\n")
	os.Remove(filepath.Join(f.dir, "src/deep/b.txt"))
	f.write(t, "bin/tool", "\x00\x02other")
	f.write(t, "added.txt", "hello\n")
	cs, err := f.st.Diff(context.Background(), f.ws, c1.ID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Change{}
	for _, c := range cs.Changes {
		by[c.Path] = c
	}
	if c := by["main.go"]; c.Kind != KindModified || !strings.Contains(c.Diff, "+func main() { println(1) }") {
		t.Errorf("main.go: %+v", c)
	}
	if c := by["src/deep/b.txt"]; c.Kind != KindDeleted || c.OldSize != 250 || !strings.Contains(c.Diff, "-line") {
		t.Errorf("b.txt: %+v", c)
	}
	if c := by["bin/tool"]; c.Kind != KindModified || !c.Binary || c.Diff != "" || c.NewSize != 7 {
		t.Errorf("bin/tool: %+v", c)
	}
	if c := by["added.txt"]; c.Kind != KindAdded || !strings.Contains(c.Diff, "+hello") {
		t.Errorf("added.txt: %+v", c)
	}
	if cs.Added != 1 || cs.Modified != 2 || cs.Deleted != 1 || len(cs.Changes) != 4 {
		t.Errorf("counts: %+v", cs)
	}
	// Between two checkpoints, from their blobs.
	c2 := f.create(t, "")
	between, err := f.st.Diff(context.Background(), f.ws, c1.ID, c2.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if Text(between) != Text(cs) {
		t.Errorf("diff to the second checkpoint:\n%s\ndiff to now:\n%s", Text(between), Text(cs))
	}
	// Past the diff budget: cut, with a notice naming the limit.
	for i := range 40 {
		f.write(t, fmt.Sprintf("many/%02d.txt", i), strings.Repeat(fmt.Sprintf("text %d\n", i), 2000))
	}
	cs, err = f.st.Diff(context.Background(), f.ws, c2.ID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cs.Truncated || !strings.Contains(cs.Notice, "diff limit") || cs.Added != 41 || len(cs.Changes) != 41 {
		t.Errorf("over budget: truncated %v, notice %q, %d added, %d listed", cs.Truncated, cs.Notice, cs.Added, len(cs.Changes))
	}
}

// TestSparseFile is the attack of a 10 GB sparse file: a diff compares it
// by size without reading it into memory, and a checkpoint refuses it by
// its size, naming the limit, before reading it.
func TestSparseFile(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "big.bin", "small at first\n")
	c1 := f.create(t, "")
	if err := os.Truncate(filepath.Join(f.dir, "big.bin"), 10<<30); err != nil {
		t.Skipf("cannot make a 10 GB sparse file here: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cs, err := f.st.Diff(context.Background(), f.ws, c1.ID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if len(cs.Changes) != 1 {
		t.Fatalf("changes %+v", cs)
	}
	c := cs.Changes[0]
	if c.Kind != KindModified || !c.Binary || c.NewSize != 10<<30 || c.Diff != "" || !strings.Contains(c.Note, "bytes") {
		t.Fatalf("sparse change: %+v", c)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("the diff allocated %d bytes", alloc)
	}
	_, err = f.st.Create(context.Background(), f.ws, CreateOptions{})
	if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "--checkpoint-max-bytes") || !strings.Contains(err.Error(), "big.bin") {
		t.Fatalf("checkpoint of a 10 GB file: %v", err)
	}
	if n, _, _ := storeBytes(t, f.storeDir); n > 1<<20 {
		t.Fatalf("the refused checkpoint left %d bytes in the store", n)
	}
}

// TestRestoreOverPlantedSymlink is the attack of a link planted after the
// checkpoint: where a file was (leading to another file of the workspace)
// and where a directory was (leading out of it). Restore replaces the
// links, and writes nothing through them.
func TestRestoreOverPlantedSymlink(t *testing.T) {
	for _, paths := range [][]string{nil, {"src/a.go", "secret.txt"}} {
		t.Run(fmt.Sprint(paths), func(t *testing.T) {
			f := newFixture(t, nil)
			populate(t, f)
			f.write(t, "secret.txt", "keep me\n")
			c := f.create(t, "")
			outside := t.TempDir()
			os.WriteFile(filepath.Join(outside, "a.go"), []byte("outside"), 0o644)

			os.Remove(filepath.Join(f.dir, "secret.txt"))
			os.Symlink("main.go", filepath.Join(f.dir, "secret.txt"))
			os.RemoveAll(filepath.Join(f.dir, "src"))
			os.Symlink(outside, filepath.Join(f.dir, "src"))

			if _, err := f.st.Restore(context.Background(), f.ws, c.ID, paths); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "a.go")); string(b) != "outside" {
				t.Fatalf("the file outside was written through the link: %q", b)
			}
			if fi, err := os.Lstat(filepath.Join(f.dir, "src")); err != nil || !fi.IsDir() {
				t.Fatalf("src is not a directory again: %v %v", fi, err)
			}
			if fi, err := os.Lstat(filepath.Join(f.dir, "secret.txt")); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("secret.txt is not a file again: %v", err)
			}
			if b, _ := os.ReadFile(filepath.Join(f.dir, "main.go")); string(b) != "package main\n\nfunc main() {}\n" {
				t.Fatalf("main.go was written through the link: %q", b)
			}
			if b, _ := os.ReadFile(filepath.Join(f.dir, "src/a.go")); string(b) != "package src\n\nconst A = 1\n" {
				t.Fatalf("src/a.go: %q", b)
			}
		})
	}
}

// TestScopesSeeOnlyTheirOwn is the attack of a scope reaching another
// scope's checkpoint: it is not listed, and diff and restore by its id
// answer as for an id that does not exist.
func TestScopesSeeOnlyTheirOwn(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "alice/a.txt", "alice\n")
	f.write(t, "bob/b.txt", "bob\n")
	alice, bob := f.scope(t, "alice"), f.scope(t, "bob")
	ca, err := f.st.Create(context.Background(), alice, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ca.Files != 1 {
		t.Fatalf("alice's checkpoint holds %d files, want her 1", ca.Files)
	}
	if l := f.st.List(bob); len(l) != 0 {
		t.Fatalf("bob lists %+v", l)
	}
	if l := f.st.List(f.ws); len(l) != 0 {
		t.Fatalf("the root lists %+v", l)
	}
	_, errBogus := f.st.Diff(context.Background(), bob, "cp999-000000", "", nil)
	_, errDiff := f.st.Diff(context.Background(), bob, ca.ID, "", nil)
	_, errRestore := f.st.Restore(context.Background(), bob, ca.ID, nil)
	for _, err := range []error{errDiff, errRestore} {
		if !errcode.Is(err, errcode.NotFound) || strings.Replace(err.Error(), ca.ID, "X", 1) != strings.Replace(strings.Replace(errBogus.Error(), "cp999-000000", "X", 1), "checkpoint_diff", opOf(err), 1) {
			t.Fatalf("bob reaching alice's checkpoint: %v (an unknown id: %v)", err, errBogus)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "bob/b.txt")); string(b) != "bob\n" {
		t.Fatalf("bob's file: %q", b)
	}
}

func opOf(err error) string {
	var e *errcode.Error
	if errors.As(err, &e) {
		return e.Op
	}
	return ""
}

func TestWalkBounds(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxFiles = 5 })
	for i := range 6 {
		f.write(t, fmt.Sprintf("f%d", i), "x")
	}
	_, err := f.st.Create(context.Background(), f.ws, CreateOptions{})
	if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "--checkpoint-max-files (5)") {
		t.Fatalf("over the file count: %v", err)
	}
	g := newFixture(t, nil)
	g.write(t, "a", "x")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.st.Create(ctx, g.ws, CreateOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled create: %v", err)
	}
	if len(g.st.List(g.ws)) != 0 {
		t.Fatal("a cancelled create left a checkpoint")
	}
}

func TestSpecialFilesAreNamed(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "a.txt", "a")
	if err := syscall.Mkfifo(filepath.Join(f.dir, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	info := f.create(t, "")
	if len(info.Skipped) != 1 || !strings.HasPrefix(info.Skipped[0], "pipe (not a file") || !strings.Contains(info.Skipped[0], "named pipe") {
		t.Fatalf("skipped %v", info.Skipped)
	}
	cs, err := f.st.Restore(context.Background(), f.ws, info.ID, nil)
	if err != nil || len(cs.Changes) != 0 {
		t.Fatalf("restore: %v %+v", err, cs)
	}
	if fi, err := os.Lstat(filepath.Join(f.dir, "pipe")); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was touched: %v", err)
	}
}

func TestStoreInsideWorkspaceRefused(t *testing.T) {
	dir := t.TempDir()
	for _, store := range []string{filepath.Join(dir, ".checkpoints"), filepath.Dir(dir)} {
		_, err := Open(Options{Dir: store, WorkspaceRoot: dir})
		if err == nil || !strings.Contains(err.Error(), "outside the workspace") {
			t.Fatalf("store %s with workspace %s: %v", store, dir, err)
		}
	}
}

// TestStatsDoNotWait: /health and the metrics read the store's size while
// a long checkpoint holds the store.
func TestStatsDoNotWait(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "a.txt", "a")
	f.create(t, "")
	f.st.mu.Lock()
	done := make(chan Stats, 1)
	go func() { done <- f.st.Stats() }()
	select {
	case st := <-done:
		if st.Count != 1 || st.Bytes == 0 {
			t.Errorf("stats %+v", st)
		}
	case <-time.After(10 * time.Second): // a hang guard
		t.Error("Stats waited for the store's lock")
	}
	f.st.mu.Unlock()
}

// TestDamagedStoreStillOpens: a blob removed from outside leaves out the
// checkpoints that name it, and the store opens with the others.
func TestDamagedStoreStillOpens(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "a.txt", "kept\n")
	c1 := f.create(t, "")
	f.write(t, "b.txt", "its blob goes missing\n")
	f.create(t, "")
	blob := filepath.Join(f.storeDir, blobsDir, sha256hex("its blob goes missing\n"))
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	f.reopen(t)
	list := f.st.List(f.ws)
	if len(list) != 1 || list[0].ID != c1.ID {
		t.Fatalf("list %+v, want only %s", list, c1.ID)
	}
	if n, _, _ := storeBytes(t, f.storeDir); f.st.Stats().Bytes > n {
		t.Fatalf("stats count %d bytes, the directory holds %d", f.st.Stats().Bytes, n)
	}
}

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestRestoreIntoReadOnlyDirectories: a directory made read-only since the
// checkpoint, and one read-only in it, do not stop a restore, and keep the
// checkpoint's modes.
//
// The restore goes through dacWS, which refuses what an unprivileged
// daemon's kernel would, so the test holds as root too.
func TestRestoreIntoReadOnlyDirectories(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "ro/a.txt", "a\n")
	f.write(t, "rw/b.txt", "b\n")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(filepath.Join(f.dir, "ro"), 0o555))
	t.Cleanup(func() { os.Chmod(filepath.Join(f.dir, "ro"), 0o755); os.Chmod(filepath.Join(f.dir, "rw"), 0o755) })
	before := snapshot(t, f.dir)
	c := f.create(t, "")
	must(os.Chmod(filepath.Join(f.dir, "ro"), 0o755))
	f.write(t, "ro/a.txt", "changed\n")
	f.write(t, "ro/new.txt", "new\n")
	must(os.Chmod(filepath.Join(f.dir, "ro"), 0o555))
	f.write(t, "rw/b.txt", "changed\n")
	f.write(t, "rw/new.txt", "new\n")
	must(os.Chmod(filepath.Join(f.dir, "rw"), 0o555))
	if _, err := f.st.Restore(context.Background(), dacWS{f.ws}, c.ID, nil); err != nil {
		t.Fatal(err)
	}
	if d := diffSnapshots(before, snapshot(t, f.dir)); len(d) > 0 {
		t.Fatalf("after restore:\n%s", strings.Join(d, "\n"))
	}
}

// TestCheckpointOverTheStoreRefused: a checkpoint whose content alone
// (new and already stored) passes --checkpoint-max-bytes is refused naming
// it, and the store keeps what it had.
func TestCheckpointOverTheStoreRefused(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxBytes = 1 << 20 })
	f.write(t, "a.bin", strings.Repeat("a", 700<<10))
	c1 := f.create(t, "")
	f.write(t, "b.bin", strings.Repeat("b", 700<<10)) // 700 KiB new, 1.4 MiB held
	_, err := f.st.Create(context.Background(), f.ws, CreateOptions{})
	if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "--checkpoint-max-bytes") {
		t.Fatalf("create: %v", err)
	}
	if l := f.st.List(f.ws); len(l) != 1 || l[0].ID != c1.ID {
		t.Fatalf("list %+v", l)
	}
	if n, _, blobs := storeBytes(t, f.storeDir); blobs != 1 || f.st.Stats().Bytes != n {
		t.Fatalf("%d blobs, stats %+v, directory %d bytes", blobs, f.st.Stats(), n)
	}
}

// TestWalksRunInsideBurst: each walk of the workspace (a create's, a diff's
// to now, a restore's) runs after Options.Burst begins and before its
// release, one burst per operation. The hook writes a file as the burst
// begins, which the walk must see, and another at the release, which it
// must not.
func TestWalksRunInsideBurst(t *testing.T) {
	var begins, releases int
	var f *fixture
	f = newFixture(t, func(o *Options) {
		o.Burst = func() func() {
			begins++
			f.write(t, fmt.Sprintf("burst/begin%d", begins), "seen by the walk")
			return func() {
				releases++
				f.write(t, fmt.Sprintf("burst/end%d", releases), "after the walk")
			}
		}
	})
	populate(t, f)
	c1 := f.create(t, "")
	m, err := f.st.manifest("test", f.ws, c1.ID)
	if err != nil {
		t.Fatal(err)
	}
	var inBurst []string
	for _, e := range m.Entries {
		if strings.HasPrefix(e.Path, "burst/") {
			inBurst = append(inBurst, e.Path)
		}
	}
	if !slices.Equal(inBurst, []string{"burst/begin1"}) {
		t.Errorf("the create's checkpoint holds %v of the hook's files, want [burst/begin1]", inBurst)
	}

	cs, err := f.st.Diff(context.Background(), f.ws, c1.ID, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var added []string
	for _, c := range cs.Changes {
		added = append(added, string(c.Kind)+" "+c.Path)
	}
	if want := []string{"added burst/begin2", "added burst/end1"}; !slices.Equal(added, want) {
		t.Errorf("the diff to now saw %v, want %v", added, want)
	}

	if _, err := f.st.Restore(context.Background(), f.ws, c1.ID, nil); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(filepath.Join(f.dir, "burst"))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, n := range names {
		left = append(left, n.Name())
	}
	// The restore's walk saw begin3 (and everything before it) and took
	// the workspace back to c1; end3 came after the walk.
	if want := []string{"begin1", "end3"}; !slices.Equal(left, want) {
		t.Errorf("after the restore burst/ holds %v, want %v", left, want)
	}
	if begins != 3 || releases != 3 {
		t.Errorf("%d bursts begun and %d released, want one of each per operation (3)", begins, releases)
	}
}
