package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// fullManifest is a whole checkpoint of f's tree taken by a store of its
// own (no previous checkpoint: every file read), to hold an incremental
// one against.
func fullManifest(t *testing.T, f *fixture) []Entry {
	t.Helper()
	st, err := Open(Options{Dir: filepath.Join(t.TempDir(), "fresh"), WorkspaceRoot: f.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	info, err := st.Create(context.Background(), f.ws, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := st.readManifest(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	return m.Entries
}

// content is what of an entry a checkpoint restores (the identity fields
// differ between two checkpoints of the same tree only by when each read).
func content(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s %s %o %d %s %s", e.Path, e.Type, e.Mode, e.Size, e.Hash, e.Target)
	}
	return out
}

// TestIncrementalSeesEveryKindOfChange makes each kind of change a walk
// must see, one checkpoint after another, and holds each incremental
// checkpoint (stored as a delta of the one before) to a whole checkpoint
// of the same tree taken from scratch, and its restore to the tree.
func TestIncrementalSeesEveryKindOfChange(t *testing.T) {
	f := newFixture(t, nil)
	populate(t, f)
	for i := range 20 {
		f.write(t, fmt.Sprintf("pad/p%02d.txt", i), fmt.Sprintf("padding %d\n", i))
	}
	f.create(t, "base")
	p := func(rel string) string { return filepath.Join(f.dir, rel) }
	changes := []struct {
		name string
		do   func()
	}{
		{"content rewritten at the same size, mtime set back", func() {
			fi, _ := os.Stat(p("main.go"))
			old, _ := os.ReadFile(p("main.go"))
			f.write(t, "main.go", strings.Replace(string(old), "main()", "mAin()", 1))
			if err := os.Chtimes(p("main.go"), fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}},
		{"rename", func() {
			if err := os.Rename(p("src/a.go"), p("src/renamed.go")); err != nil {
				t.Fatal(err)
			}
		}},
		{"chmod of a file", func() {
			if err := os.Chmod(p("bin/tool"), 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"chmod of a directory", func() {
			if err := os.Chmod(p("src/deep"), 0o750); err != nil {
				t.Fatal(err)
			}
		}},
		{"delete", func() {
			if err := os.Remove(p("pad/p03.txt")); err != nil {
				t.Fatal(err)
			}
		}},
		{"new directory with files", func() {
			f.write(t, "fresh/dir/x.txt", "x\n")
			f.write(t, "fresh/y.txt", "y\n")
		}},
		{"file replaced by a directory", func() {
			os.Remove(p("pad/p04.txt"))
			f.write(t, "pad/p04.txt/inner.txt", "now a directory\n")
		}},
		{"directory replaced by a file", func() {
			os.RemoveAll(p("fresh/dir"))
			f.write(t, "fresh/dir", "now a file\n")
		}},
		{"symlink retargeted", func() {
			os.Remove(p("link.go"))
			if err := os.Symlink("src/renamed.go", p("link.go")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a file replaced by another of the same size and times (rename over)", func() {
			fi, _ := os.Stat(p("pad/p05.txt"))
			f.write(t, "pad/tmp", "padding X\n")
			os.Chtimes(p("pad/tmp"), fi.ModTime(), fi.ModTime())
			if err := os.Rename(p("pad/tmp"), p("pad/p05.txt")); err != nil {
				t.Fatal(err)
			}
		}},
		{"nothing", func() {}},
	}
	type taken struct {
		id   string
		want map[string]string
	}
	var all []taken
	for _, c := range changes {
		c.do()
		info := f.create(t, c.name)
		got, _, err := f.st.readManifest(info.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := fullManifest(t, f); !slices.Equal(content(got.Entries), content(want)) {
			t.Fatalf("%s: the incremental checkpoint differs from a whole one:\n%s\nwant\n%s", c.name,
				strings.Join(content(got.Entries), "\n"), strings.Join(content(want), "\n"))
		}
		file, _, err := f.st.readManifestFile(info.ID)
		if err != nil {
			t.Fatal(err)
		}
		if file.Base == "" || len(file.Entries) > 6 {
			t.Errorf("%s: stored whole (%d entries), want a delta of the one before", c.name, len(file.Entries))
		}
		all = append(all, taken{info.ID, snapshot(t, f.dir)})
	}
	// Each restores byte for byte, after a restart too (read from disk
	// through its chain).
	for round := range 2 {
		for i := len(all) - 1; i >= 0; i-- {
			if _, err := f.st.Restore(context.Background(), f.ws, all[i].id, nil); err != nil {
				t.Fatal(err)
			}
			if d := diffSnapshots(all[i].want, snapshot(t, f.dir)); len(d) > 0 {
				t.Fatalf("round %d, restore of %q:\n%s", round, changes[i].name, strings.Join(d, "\n"))
			}
		}
		f.reopen(t)
	}
}

// TestDeltaChainsAcrossRestartAndPrune takes more checkpoints than a chain
// holds, with a restart in the middle, then prunes them down a few at a
// time (a pruned checkpoint a delta is stored on is kept as a base, and
// collected with the last delta stored on it): every checkpoint left
// restores what it captured, the stored bytes are what the directory
// holds, no blob is left that no manifest file names, and no kept base
// that no manifest is stored on.
func TestDeltaChainsAcrossRestartAndPrune(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxCount = 1000 })
	for i := range 10 {
		f.write(t, fmt.Sprintf("f%d.txt", i), "initial\n")
	}
	type taken struct {
		id   string
		want map[string]string
	}
	var all []taken
	n := maxChain*2 + 3
	for i := range n {
		f.write(t, fmt.Sprintf("f%d.txt", i%10), fmt.Sprintf("round %d\n", i))
		if i%7 == 3 {
			os.Remove(filepath.Join(f.dir, fmt.Sprintf("f%d.txt", (i+1)%10)))
		}
		info := f.create(t, "")
		all = append(all, taken{info.ID, snapshot(t, f.dir)})
		if i == maxChain-3 {
			f.reopen(t)
		}
	}
	whole := 0
	for _, c := range all {
		m, _, err := f.st.readManifestFile(c.id)
		if err != nil {
			t.Fatal(err)
		}
		if m.Base == "" {
			whole++
		}
		if m.Depth >= maxChain {
			t.Fatalf("%s: depth %d, at most %d", c.id, m.Depth, maxChain-1)
		}
	}
	if want := (n + maxChain - 1) / maxChain; whole != want {
		t.Errorf("%d whole manifests among %d checkpoints, want %d (one every %d)", whole, n, want, maxChain)
	}
	check := func(stage string) {
		t.Helper()
		stored, _, blobs := storeBytes(t, f.storeDir)
		if st := f.st.Stats(); st.Bytes != stored {
			t.Fatalf("%s: stats say %d bytes, the directory holds %d", stage, st.Bytes, stored)
		}
		named := map[string]bool{}
		storedOn := map[string]bool{}
		files, _ := os.ReadDir(filepath.Join(f.storeDir, manifestsDir))
		var bases []string
		for _, fi := range files {
			id, isBase := strings.CutSuffix(fi.Name(), baseExt)
			if isBase {
				bases = append(bases, id)
			} else {
				id = strings.TrimSuffix(id, manifestExt)
			}
			m, _, err := f.st.readManifestFile(id)
			if err != nil {
				t.Fatalf("%s: %v", stage, err)
			}
			for _, h := range m.hashes() {
				named[h] = true
			}
			storedOn[m.Base] = true
		}
		if blobs != len(named) {
			t.Fatalf("%s: %d blobs, the manifest files name %d", stage, blobs, len(named))
		}
		for _, id := range bases {
			if !storedOn[id] {
				t.Fatalf("%s: the kept base %s is left though no manifest is stored on it", stage, id)
			}
		}
		if len(bases) > maxChain {
			t.Fatalf("%s: %d kept bases, more than a chain's worth", stage, len(bases))
		}
		if len(files)-len(bases) != len(f.st.List(f.ws)) {
			t.Fatalf("%s: %d manifests, %d listed", stage, len(files)-len(bases), len(f.st.List(f.ws)))
		}
	}
	check("before pruning")
	// Prune from the oldest, through a base and its deltas, to one left;
	// the middle one pruned out of turn (a restore's Keep can make prune
	// skip the oldest) is kept as a base of the next.
	f.st.mu.Lock()
	mid := f.st.list[maxChain+2]
	if err := f.st.remove(mid); err != nil {
		t.Fatal(err)
	}
	f.st.mu.Unlock()
	all = slices.DeleteFunc(all, func(c taken) bool { return c.id == mid.id })
	for len(all) > 3 {
		f.opts.MaxCount = len(all) - 2
		f.reopen(t)
		f.write(t, "f0.txt", fmt.Sprintf("prune %d\n", len(all)))
		info := f.create(t, "")
		if want := []string{all[0].id, all[1].id, all[2].id}; !slices.Equal(info.Pruned, want) {
			t.Fatalf("pruned %v, want %v", info.Pruned, want)
		}
		all = append(all[3:], taken{info.ID, snapshot(t, f.dir)})
		check(fmt.Sprintf("%d left", len(all)))
		for _, c := range all {
			if _, err := f.st.Restore(context.Background(), f.ws, c.id, nil); err != nil {
				t.Fatal(err)
			}
			if d := diffSnapshots(c.want, snapshot(t, f.dir)); len(d) > 0 {
				t.Fatalf("%d left, restore of %s:\n%s", len(all), c.id, strings.Join(d, "\n"))
			}
		}
	}
}

// TestWalkIsDeterministicAndHoldsBoundedDescriptors walks one tree with
// the default bounds and with at most one descriptor held for the queue
// (the workers then walk depth first by themselves): the same entries in
// the same order every time, within the bound.
func TestWalkIsDeterministicAndHoldsBoundedDescriptors(t *testing.T) {
	f := newFixture(t, nil)
	populate(t, f)
	for i := range 30 {
		for j := range 5 {
			f.write(t, fmt.Sprintf("w%02d/s%d/f.txt", i, j), "x")
		}
	}
	mkDeep(t, f.dir, "deep", 20)
	// Names around '/' in byte order: "a.b" < "a/x" < "a0", so a
	// directory's subtree is not simply after its siblings.
	for _, p := range []string{"a/x", "a/b/c", "a.b/y", "a-c", "a0", "a0.d/z", "b", "a/!", "a/.z"} {
		f.write(t, p, p)
	}
	// A link to a directory is an entry, never walked through.
	if err := os.Symlink("w00", filepath.Join(f.dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	first, err := f.st.walk(context.Background(), f.ws, ".", 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range first.entries {
		if strings.HasPrefix(e.Path, "linkdir/") || e.Path == "linkdir" && e.Type != TypeSymlink {
			t.Fatalf("the walk followed a link: %+v", e)
		}
	}
	if first.peakHeld > maxHeldDirs || first.peakHeld == 0 {
		t.Fatalf("the walk held %d descriptors for its queue, bound %d", first.peakHeld, maxHeldDirs)
	}
	if !slices.IsSortedFunc(first.entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) }) {
		t.Fatal("the walk's entries are not sorted by path")
	}
	defer func(n int) { maxHeldDirs = n }(maxHeldDirs)
	for _, held := range []int{64, 1, 0} {
		maxHeldDirs = held
		for range 3 {
			w, err := f.st.walk(context.Background(), f.ws, ".", 10000)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(w.entries, first.entries) {
				t.Fatalf("a walk holding at most %d descriptors listed another tree", held)
			}
			if w.peakHeld > held {
				t.Fatalf("the walk held %d descriptors for its queue, bound %d", w.peakHeld, held)
			}
		}
	}
	// Two checkpoints of the same tree store the same entries.
	a, b := f.create(t, ""), f.create(t, "")
	ma, _, err := f.st.readManifest(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	mb, _, err := f.st.readManifest(b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ma.Entries, mb.Entries) {
		t.Fatal("two checkpoints of one tree hold different entries")
	}
}

// TestDamagedBaseDropsItsDeltas: a whole manifest damaged from outside
// leaves out the checkpoints stored as deltas of it, not the rest.
func TestDamagedBaseDropsItsDeltas(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 4 {
		f.write(t, fmt.Sprintf("f%d.txt", i), "x\n")
	}
	c1 := f.create(t, "")
	f.write(t, "f0.txt", "y\n")
	c2 := f.create(t, "")
	f.write(t, "f1.txt", "z\n")
	c3 := f.create(t, "")
	m2, _, err := f.st.readManifestFile(c2.ID)
	if err != nil || m2.Base != c1.ID {
		t.Fatalf("c2 stored on %q (%v), want on %s", m2.Base, err, c1.ID)
	}
	// c1's file cut short: c1 and, through it, c2 and c3 cannot be read.
	p := filepath.Join(f.storeDir, manifestsDir, c1.ID+manifestExt)
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	f.reopen(t)
	if list := f.st.List(f.ws); len(list) != 0 {
		t.Fatalf("list %+v, want none: each needs the damaged manifest", list)
	}
	// A fresh checkpoint is whole and restores; the store counts what it holds.
	f.write(t, "f2.txt", "after\n")
	c4 := f.create(t, "")
	if m, _, err := f.st.readManifestFile(c4.ID); err != nil || m.Base != "" {
		t.Fatalf("the checkpoint after the damage: base %q, %v", m.Base, err)
	}
	want := snapshot(t, f.dir)
	os.Remove(filepath.Join(f.dir, "f2.txt"))
	if _, err := f.st.Restore(context.Background(), f.ws, c4.ID, nil); err != nil {
		t.Fatal(err)
	}
	if d := diffSnapshots(want, snapshot(t, f.dir)); len(d) > 0 {
		t.Fatal(strings.Join(d, "\n"))
	}
	if _, err := f.st.Restore(context.Background(), f.ws, c3.ID, nil); err == nil {
		t.Fatal("restore of a checkpoint whose base is damaged succeeded")
	}
}

// TestKilledPruneLeavesNoBase kills a prune after it removed the last
// checkpoint stored on a kept base, before it collected the base: the
// next Open collects it and the blobs only it named.
func TestKilledPruneLeavesNoBase(t *testing.T) {
	crashed := errors.New("killed")
	armed := false
	f := newFixture(t, func(o *Options) {
		o.MaxCount = 1
		o.crash = func(s string) error {
			if armed && s == "prune-collect" {
				return crashed
			}
			return nil
		}
	})
	for i := range 4 {
		f.write(t, fmt.Sprintf("f%d.txt", i), "one\n")
	}
	c1 := f.create(t, "")
	f.write(t, "f0.txt", "two\n")
	c2 := f.create(t, "") // a delta of c1, which is kept as its base
	if _, err := os.Stat(filepath.Join(f.storeDir, manifestsDir, c1.ID+baseExt)); err != nil {
		t.Fatalf("c1 is not kept as c2's base: %v", err)
	}
	for i := range 4 {
		f.write(t, fmt.Sprintf("f%d.txt", i), "three\n")
	}
	armed = true
	c3 := f.create(t, "") // whole: c2 is pruned, and c1 would be collected
	armed = false
	if _, err := os.Stat(filepath.Join(f.storeDir, manifestsDir, c1.ID+baseExt)); err != nil {
		t.Fatalf("the kill came before c1 was collected: %v", err)
	}
	f.reopen(t)
	if list := f.st.List(f.ws); len(list) != 1 || list[0].ID != c3.ID || c2.ID == c3.ID {
		t.Fatalf("list %+v, want only %s", list, c3.ID)
	}
	files, _ := os.ReadDir(filepath.Join(f.storeDir, manifestsDir))
	if len(files) != 1 || files[0].Name() != c3.ID+manifestExt {
		t.Fatalf("manifests after reopening: %v, want only %s", files, c3.ID)
	}
	n, _, blobs := storeBytes(t, f.storeDir)
	if blobs != 1 || f.st.Stats().Bytes != n {
		t.Fatalf("%d blobs (want 1), stats %d bytes, the directory holds %d", blobs, f.st.Stats().Bytes, n)
	}
}

// TestMemoryWorkspaceWalksByPath checkpoints a workspace without a
// directory (a memory one, listed through ReadDir): the same order, deltas
// and restores as by descriptor.
func TestMemoryWorkspaceWalksByPath(t *testing.T) {
	ws := fsops.NewMemory("/mem", fsops.Options{})
	defer ws.Close()
	st, err := Open(Options{Dir: filepath.Join(t.TempDir(), "store")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	files := map[string]string{"a/x": "1", "a/b/c": "2", "a.b/y": "3", "a0": "4", "b": "5"}
	for p, c := range files {
		if err := ws.Mkdir(filepath.Dir(p), true); err != nil && filepath.Dir(p) != "." {
			t.Fatal(err)
		}
		if err := ws.WriteFile(p, []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	c1, err := st.Create(context.Background(), ws, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m1, _, err := st.readManifest(c1.ID)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range m1.Entries {
		paths = append(paths, e.Path)
	}
	if want := "a a.b a.b/y a/b a/b/c a/x a0 b"; strings.Join(paths, " ") != want {
		t.Fatalf("entries %q, want %q", strings.Join(paths, " "), want)
	}
	if err := ws.WriteFile("a/x", []byte("changed")); err != nil {
		t.Fatal(err)
	}
	c2, err := st.Create(context.Background(), ws, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f, _, err := st.readManifestFile(c2.ID); err != nil || f.Base != c1.ID {
		t.Fatalf("the second checkpoint: %+v %v, want a delta of %s", f, err, c1.ID)
	}
	if _, err := st.Restore(context.Background(), ws, c1.ID, nil); err != nil {
		t.Fatal(err)
	}
	for p, c := range files {
		if b, err := ws.ReadFile(p); err != nil || string(b) != c {
			t.Fatalf("%s after restore: %q %v, want %q", p, b, err, c)
		}
	}
}
