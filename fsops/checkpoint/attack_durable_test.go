package checkpoint

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// storeFilesOf is every file of a store's blobs and manifests: its path
// relative to the store, and its content.
func storeFilesOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range []string{blobsDir, manifestsDir} {
		es, err := os.ReadDir(filepath.Join(dir, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if !e.Type().IsRegular() {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, d, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[d+"/"+e.Name()] = string(b)
		}
	}
	return out
}

// checkAccounting: every blob on disk is counted with its size, every
// blob a listed checkpoint names is counted with the size it recorded, and
// the store's bytes are its blobs and the manifest files of the
// checkpoints listed and the bases kept (a manifest left out stays on
// disk, uncounted).
func checkAccounting(t *testing.T, f *fixture) {
	t.Helper()
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	counted := map[string]bool{}
	for _, c := range f.st.list {
		counted[c.id+manifestExt] = true
	}
	for id := range f.st.bases {
		counted[id+baseExt] = true
	}
	var want int64
	blobs, _ := os.ReadDir(filepath.Join(f.storeDir, blobsDir))
	onDisk := map[string]bool{}
	for _, b := range blobs {
		fi, err := b.Info()
		if err != nil {
			t.Fatal(err)
		}
		onDisk[b.Name()] = true
		want += fi.Size()
		if n, ok := f.st.blobSize[b.Name()]; !ok || n != fi.Size() {
			t.Errorf("blob %s: %d bytes on disk, counted %d (%v)", b.Name(), fi.Size(), n, ok)
		}
		if f.st.refs[b.Name()] <= 0 {
			t.Errorf("blob %s is kept with %d references", b.Name(), f.st.refs[b.Name()])
		}
	}
	for h := range f.st.blobSize {
		if !onDisk[h] {
			t.Errorf("blob %s is counted, not on disk", h)
		}
	}
	ms, _ := os.ReadDir(filepath.Join(f.storeDir, manifestsDir))
	for _, m := range ms {
		if counted[m.Name()] {
			fi, _ := m.Info()
			want += fi.Size()
		}
	}
	if f.st.bytes != want {
		t.Errorf("the store counts %d bytes, its blobs and counted manifests hold %d", f.st.bytes, want)
	}
	// What a later checkpoint reuses by identity, and a restore reads.
	for _, c := range f.st.list {
		m, _, err := f.st.readManifest(c.id)
		if err != nil {
			t.Errorf("listed %s cannot be read: %v", c.id, err)
			continue
		}
		for _, e := range m.Entries {
			if n, ok := f.st.blobSize[e.Hash]; e.Hash != "" && (!ok || n != e.Size) {
				t.Errorf("listed %s names blob %s of %d bytes, counted %d (%v)", c.id, e.Hash, e.Size, n, ok)
			}
		}
	}
	for h, n := range f.st.refs {
		if n <= 0 {
			t.Errorf("blob %s has %d references", h, n)
		}
	}
}

// TestPowerCutAnySubset plays, many times over, what a power cut can leave
// of a store that is not durable: some of its writes since a moment kept,
// others lost, in any order. A blob or manifest renamed into place comes
// back missing (the rename lost) or cut short (its content lost); a file
// the store removed comes back (the removal lost), and a kept base comes
// back as the checkpoint it was (its rename lost). Each time the store
// opens; each checkpoint it lists restores every byte it held; its bytes
// are what its directory holds; and the checkpoints taken after, stored
// on whatever survived, restore every byte too.
func TestPowerCutAnySubset(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { powerCut(t, seed) })
	}
}

func powerCut(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 37))
	f := newFixture(t, func(o *Options) { o.MaxCount = 4 })
	names := []string{"a.txt", "b.txt", "c.txt", "d/e.txt", "d/f.txt", "g.txt", "h.txt", "i.txt"}
	contents := []string{"one\n", "two\n", strings.Repeat("three\n", 40), "four\n", strings.Repeat("five\n", 90), "six\n"}
	for _, n := range names {
		f.write(t, n, contents[rng.IntN(len(contents))])
	}
	held := map[string]map[string]string{} // checkpoint → its workspace
	var history []map[string]string        // the store's files after each create
	step := func() {
		for range 1 + rng.IntN(2) {
			n := names[rng.IntN(len(names))]
			if rng.IntN(5) == 0 {
				os.Remove(filepath.Join(f.dir, n))
			} else {
				f.write(t, n, contents[rng.IntN(len(contents))]+fmt.Sprint(rng.IntN(3)))
			}
		}
		// Now and then the target of a restore is kept from the prune:
		// a base is then kept on a listed checkpoint.
		var o CreateOptions
		if l := f.st.List(f.ws); len(l) > 0 && rng.IntN(3) == 0 {
			o.Keep = []string{l[rng.IntN(len(l))].ID}
		}
		c, err := f.st.Create(context.Background(), f.ws, o)
		if err != nil {
			t.Fatal(err)
		}
		held[c.ID] = snapshot(t, f.dir)
		history = append(history, storeFilesOf(t, f.storeDir))
	}
	for range 8 {
		step()
	}
	// For a failure's log: each create's manifest files, with the base
	// each is stored on (as its file says now).
	for i, h := range history {
		var ms []string
		for p := range h {
			if strings.HasPrefix(p, manifestsDir) {
				m, _, _ := f.st.readManifestFile(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(p, manifestsDir+"/"), manifestExt), baseExt))
				base := ""
				if m != nil {
					base = m.Base
				}
				ms = append(ms, p+"<-"+base)
			}
		}
		sort.Strings(ms)
		t.Logf("after create %d: %v", i, ms)
	}

	// The cut: what was written since history[since] may be lost.
	since := rng.IntN(len(history))
	t.Logf("synced at %d", since)
	synced := history[since]
	now := storeFilesOf(t, f.storeDir)
	// Removals lost: a file that was there at some point since comes back.
	ever := map[string]string{}
	for _, h := range history[since:] {
		for p, c := range h {
			ever[p] = c
		}
	}
	keys := func(m map[string]string) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	for _, p := range keys(ever) {
		if _, ok := now[p]; ok || rng.IntN(3) != 0 {
			continue
		}
		if id, ok := strings.CutSuffix(p, manifestExt); ok {
			// A kept base's rename lost: the name it had comes back
			// instead.
			os.Remove(filepath.Join(f.storeDir, id+baseExt))
		}
		t.Logf("the cut brings back %s", p)
		if err := os.WriteFile(filepath.Join(f.storeDir, p), []byte(ever[p]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Writes lost: a file renamed into place since the moment synced is
	// missing or cut short.
	for _, p := range keys(now) {
		if c, ok := synced[p]; ok && c == now[p] {
			continue
		}
		if id, ok := strings.CutSuffix(p, baseExt); ok && synced[id+manifestExt] == now[p] {
			continue // written before, renamed since
		}
		if _, err := os.Lstat(filepath.Join(f.storeDir, p)); err != nil {
			continue // its rename lost above
		}
		switch rng.IntN(4) {
		case 0:
			t.Logf("the cut loses %s", p)
			os.Remove(filepath.Join(f.storeDir, p))
		case 1:
			n := int64(rng.IntN(len(now[p]) + 1))
			t.Logf("the cut leaves %d of the %d bytes of %s", n, len(now[p]), p)
			truncate(t, filepath.Join(f.storeDir, p), n)
		}
	}
	f.reopen(t)
	checkAccounting(t, f)
	restoreEach := func(when string) {
		t.Helper()
		for _, c := range f.st.List(f.ws) {
			if _, err := f.st.Restore(context.Background(), f.ws, c.ID, nil); err != nil {
				t.Fatalf("%s: restore of %s, listed: %v", when, c.ID, err)
			}
			if d := diffSnapshots(held[c.ID], snapshot(t, f.dir)); len(d) > 0 {
				t.Fatalf("%s: restore of %s, listed:\n%s", when, c.ID, strings.Join(d, "\n"))
			}
		}
	}
	restoreEach("after the cut")
	// The checkpoints after: stored on what the cut left.
	for range 6 {
		step()
		checkAccounting(t, f)
	}
	restoreEach("after later checkpoints")
	f.reopen(t)
	checkAccounting(t, f)
	restoreEach("after a restart")
}

// TestDamagedBaseTakesDeltasThroughKeptBases: a checkpoint kept from a
// prune (the target of a restore, CreateOptions.Keep) while the newer ones
// of its scope are pruned becomes the base of a kept base, and so of the
// listed delta stored on that. A power cut that cuts one of its blobs
// short leaves it out at the next Open; the delta reads its entries
// through the kept base and the manifest left out, so it goes with it:
// listed, it would name blobs the store let go with the checkpoint left
// out, and its restore would fail.
func TestDamagedBaseTakesDeltasThroughKeptBases(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxCount = 2 })
	f.write(t, "a.txt", "named only by the first manifest file\n")
	f.write(t, "b.txt", "cut short by the power cut\n")
	f.write(t, "c.txt", "three\n")
	f.write(t, "d.txt", "four\n")
	k := f.create(t, "")
	f.write(t, "e.txt", "in the second\n")
	b := f.create(t, "")
	f.write(t, "b.txt", "rewritten in the third\n")
	c, err := f.st.Create(context.Background(), f.ws, CreateOptions{Keep: []string{k.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pruned) != 1 || c.Pruned[0] != b.ID {
		t.Fatalf("pruned %v, want %s", c.Pruned, b.ID)
	}
	if _, err := os.Stat(filepath.Join(f.storeDir, manifestsDir, b.ID+baseExt)); err != nil {
		t.Fatalf("the pruned checkpoint is not kept as a base: %v", err)
	}
	if m, _, err := f.st.readManifestFile(c.ID); err != nil || m.Base != b.ID {
		t.Fatalf("the third checkpoint is stored on %q (%v), want a delta of %s", m.Base, err, b.ID)
	}
	truncate(t, filepath.Join(f.storeDir, blobsDir, sha256hex("cut short by the power cut\n")), 3)
	f.reopen(t)
	checkAccounting(t, f)
	for _, l := range f.st.List(f.ws) {
		os.Remove(filepath.Join(f.dir, "a.txt")) // so the restore reads its blob
		if _, err := f.st.Restore(context.Background(), f.ws, l.ID, nil); err != nil {
			t.Errorf("restore of %s, listed after the cut: %v", l.ID, err)
		}
	}
	if l := f.st.List(f.ws); len(l) != 0 {
		t.Errorf("listed %+v, want none: each reads the damaged checkpoint's entries", l)
	}
	// A checkpoint of the workspace now stores every blob again.
	f.create(t, "")
	checkAccounting(t, f)
}

// rewriteManifest changes checkpoint id's manifest file in place, as a
// hand in the store could: what it holds still parses.
func rewriteManifest(t *testing.T, f *fixture, id string, change func(m *Manifest)) {
	t.Helper()
	m, _, err := f.st.readManifestFile(id)
	if err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.storeDir, manifestsDir, id+manifestExt), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestManifestNamingAnotherBase: a manifest that parses but names as its
// base a checkpoint that is not an earlier one of its scope (a later one,
// another scope's) cannot be read whole: the next Open leaves it out with
// the deltas stored on it, every checkpoint it lists restores, and the
// scope's next checkpoint is taken (its newest listed one reads).
func TestManifestNamingAnotherBase(t *testing.T) {
	for _, which := range []string{"a later checkpoint", "another scope's"} {
		t.Run(which, func(t *testing.T) {
			f := newFixture(t, nil)
			f.write(t, "a.txt", "one\n")
			f.write(t, "b.txt", "two\n")
			f.write(t, "c.txt", "three\n")
			c1 := f.create(t, "")
			f.write(t, "a.txt", "one, changed\n")
			c2 := f.create(t, "")
			f.write(t, "b.txt", "two, changed\n")
			c3 := f.create(t, "")
			base := c3.ID
			if which == "another scope's" {
				other := filepath.Join(filepath.Dir(f.dir), "other")
				if err := os.MkdirAll(other, 0o755); err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(other, "x.txt"), []byte("x\n"), 0o644)
				ws, err := fsops.NewDir(other, fsops.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer ws.Close()
				o, err := f.st.Create(context.Background(), ws, CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				base = o.ID
				// Earlier than c2, so only the scope tells it apart.
				rewriteManifest(t, f, o.ID, func(m *Manifest) { m.Seq = 0 })
			}
			rewriteManifest(t, f, c2.ID, func(m *Manifest) { m.Base = base })
			f.reopen(t)
			checkAccounting(t, f)
			var got []string
			for _, c := range f.st.List(f.ws) {
				got = append(got, c.ID)
				os.Remove(filepath.Join(f.dir, "a.txt"))
				if _, err := f.st.Restore(context.Background(), f.ws, c.ID, nil); err != nil {
					t.Errorf("restore of %s, listed: %v", c.ID, err)
				}
			}
			if strings.Join(got, ",") != c1.ID {
				t.Errorf("listed %v, want only %s", got, c1.ID)
			}
			f.write(t, "c.txt", "three, changed\n")
			if _, err := f.st.Create(context.Background(), f.ws, CreateOptions{}); err != nil {
				t.Fatalf("the next checkpoint: %v", err)
			}
			checkAccounting(t, f)
		})
	}
}

// TestPlantedInBlobs: a directory or a symlink in place of a blob (a hand
// in the store) leaves out the checkpoints naming it, and is removed: the
// store opens, and the next checkpoint of the same content stores its
// blob again and restores it.
func TestPlantedInBlobs(t *testing.T) {
	for _, kind := range []string{"an empty directory", "a directory", "a symlink"} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, nil)
			f.write(t, "a.txt", "kept\n")
			c1 := f.create(t, "")
			f.write(t, "b.txt", "replaced in the store\n")
			f.create(t, "")
			blob := filepath.Join(f.storeDir, blobsDir, sha256hex("replaced in the store\n"))
			if err := os.Remove(blob); err != nil {
				t.Fatal(err)
			}
			switch kind {
			case "an empty directory":
				err := os.Mkdir(blob, 0o700)
				if err != nil {
					t.Fatal(err)
				}
			case "a directory":
				os.Mkdir(blob, 0o700)
				if err := os.WriteFile(filepath.Join(blob, "x"), []byte("replaced in the store\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			case "a symlink":
				if err := os.Symlink(filepath.Join(f.dir, "b.txt"), blob); err != nil {
					t.Fatal(err)
				}
			}
			f.reopen(t)
			if l := f.st.List(f.ws); len(l) != 1 || l[0].ID != c1.ID {
				t.Fatalf("listed %+v, want only %s", l, c1.ID)
			}
			if _, err := os.Lstat(blob); err == nil {
				t.Errorf("what was planted in place of the blob is kept")
			}
			c3 := f.create(t, "")
			checkAccounting(t, f)
			want := snapshot(t, f.dir)
			os.Remove(filepath.Join(f.dir, "b.txt"))
			if _, err := f.st.Restore(context.Background(), f.ws, c3.ID, nil); err != nil {
				t.Fatal(err)
			}
			if d := diffSnapshots(want, snapshot(t, f.dir)); len(d) > 0 {
				t.Fatalf("restore:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// TestDamagedKeptBaseOrSizes: a kept base emptied by a power cut, a blob
// only a kept base names cut short (a delta stored on it that changed that
// path still restores whole; one that reads it is left out), a blob
// recorded with another size than it has, and one content recorded with
// two sizes by two manifests (a hand in the store: neither is trusted). The store opens, what it lists restores every byte,
// its bytes are what its directory holds, and the next checkpoint stores
// what it needs again.
func TestDamagedKeptBaseOrSizes(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, f *fixture, base, c2, c3 Info)
		listed func(base, c2, c3 Info) []string
	}{
		{"a kept base emptied", func(t *testing.T, f *fixture, base, c2, c3 Info) {
			truncate(t, filepath.Join(f.storeDir, manifestsDir, base.ID+baseExt), 0)
		}, func(base, c2, c3 Info) []string { return nil }},
		{"a blob only a kept base names cut short, changed since", func(t *testing.T, f *fixture, base, c2, c3 Info) {
			truncate(t, filepath.Join(f.storeDir, blobsDir, sha256hex("only in the base\n")), 2)
		}, func(base, c2, c3 Info) []string { return []string{c2.ID, c3.ID} }},
		{"a blob a kept base names cut short, read by its deltas", func(t *testing.T, f *fixture, base, c2, c3 Info) {
			truncate(t, filepath.Join(f.storeDir, blobsDir, sha256hex("in every checkpoint\n")), 2)
		}, func(base, c2, c3 Info) []string { return nil }},
		{"a blob recorded with another size", func(t *testing.T, f *fixture, base, c2, c3 Info) {
			rewriteManifest(t, f, c3.ID, func(m *Manifest) {
				for i := range m.Entries {
					if m.Entries[i].Hash == sha256hex("third\n") {
						m.Entries[i].Size = 2
					}
				}
			})
		}, func(base, c2, c3 Info) []string { return []string{c2.ID} }},
		{"one content recorded with two sizes", func(t *testing.T, f *fixture, base, c2, c3 Info) {
			rewriteManifest(t, f, c3.ID, func(m *Manifest) {
				m.Entries = append(m.Entries, Entry{Path: "z.txt", Type: TypeFile, Mode: 0o644, Size: 3, Hash: sha256hex("in every checkpoint\n")})
			})
		}, func(base, c2, c3 Info) []string { return nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.MaxCount = 2 })
			f.write(t, "a.txt", "in every checkpoint\n")
			f.write(t, "b.txt", "only in the base\n")
			f.write(t, "c.txt", "three\n")
			f.write(t, "d.txt", "four\n")
			base := f.create(t, "")
			f.write(t, "b.txt", "second\n")
			c2 := f.create(t, "")
			f.write(t, "e.txt", "third\n")
			c3 := f.create(t, "")
			if len(c3.Pruned) != 1 || c3.Pruned[0] != base.ID {
				t.Fatalf("pruned %v, want %s", c3.Pruned, base.ID)
			}
			want := map[string]map[string]string{c3.ID: snapshot(t, f.dir)}
			tc.damage(t, f, base, c2, c3)
			f.reopen(t)
			checkAccounting(t, f)
			var got []string
			for _, c := range f.st.List(f.ws) {
				got = append(got, c.ID)
				os.Remove(filepath.Join(f.dir, "a.txt"))
				os.Remove(filepath.Join(f.dir, "b.txt"))
				if _, err := f.st.Restore(context.Background(), f.ws, c.ID, nil); err != nil {
					t.Fatalf("restore of %s, listed: %v", c.ID, err)
				}
			}
			if wantIDs := tc.listed(base, c2, c3); strings.Join(got, ",") != strings.Join(wantIDs, ",") {
				t.Fatalf("listed %v, want %v", got, wantIDs)
			}
			for _, p := range []string{"a.txt", "b.txt", "c.txt", "d.txt", "e.txt"} {
				os.Remove(filepath.Join(f.dir, p))
			}
			f.write(t, "a.txt", "in every checkpoint\n")
			f.write(t, "b.txt", "second\n")
			f.write(t, "c.txt", "three\n")
			f.write(t, "d.txt", "four\n")
			f.write(t, "e.txt", "third\n")
			again := f.create(t, "")
			checkAccounting(t, f)
			os.Remove(filepath.Join(f.dir, "a.txt"))
			f.write(t, "e.txt", "other\n")
			if _, err := f.st.Restore(context.Background(), f.ws, again.ID, nil); err != nil {
				t.Fatal(err)
			}
			if d := diffSnapshots(want[c3.ID], snapshot(t, f.dir)); len(d) > 0 {
				t.Fatalf("restore of the next checkpoint:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// TestDurableOpenSyncsWhatARunWithoutItLeft: a durable store's checkpoint
// reuses, for its unchanged files, blobs that a run without --fsync may
// have left unwritten; so opening a durable store that holds blobs syncs
// its file system once (syncfs), and the first checkpoint after makes only
// its own fsyncs. A store opened without --fsync, or empty, syncs nothing.
func TestDurableOpenSyncsWhatARunWithoutItLeft(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Durable = true })
	if n := f.st.fsyncs.Load(); n != 0 {
		t.Fatalf("an empty durable store made %d syncs at Open", n)
	}
	f.opts.Durable = false
	f.reopen(t)
	f.write(t, "a.txt", "written back whenever the kernel likes\n")
	f.create(t, "")
	f.reopen(t)
	if n := f.st.fsyncs.Load(); n != 0 {
		t.Fatalf("a store without --fsync made %d syncs", n)
	}
	f.opts.Durable = true
	f.reopen(t)
	if n := f.st.fsyncs.Load(); n != 1 {
		t.Fatalf("a durable store holding blobs made %d syncs at Open, want 1 (syncfs)", n)
	}
}

// TestLeftOutOnceNotAtEveryStart: a checkpoint left out after a power cut
// is set aside (its manifest renamed <id>.damaged, kept for whoever looks
// into it): the next start neither reads every manifest again for it, as a
// store with damage does (seconds for a large one), nor lists it again
// once a later checkpoint has stored its lost content anew.
func TestLeftOutOnceNotAtEveryStart(t *testing.T) {
	var warned atomic.Int64
	f := newFixture(t, func(o *Options) {
		o.Logger = slog.New(countWarnings{slog.DiscardHandler, &warned})
	})
	f.write(t, "a.txt", "kept\n")
	c1 := f.create(t, "")
	f.write(t, "b.txt", "lost by the power cut\n")
	c2 := f.create(t, "")
	truncate(t, filepath.Join(f.storeDir, blobsDir, sha256hex("lost by the power cut\n")), 0)
	f.reopen(t)
	if warned.Load() == 0 {
		t.Fatal("the checkpoint left out was not logged")
	}
	if _, err := os.Stat(filepath.Join(f.storeDir, manifestsDir, c2.ID+".damaged")); err != nil {
		t.Fatalf("the manifest left out is not set aside: %v", err)
	}
	// The same content stored again by a later checkpoint.
	f.write(t, "b.txt", "lost by the power cut\n")
	c3 := f.create(t, "")
	warned.Store(0)
	f.reopen(t)
	if n := warned.Load(); n != 0 {
		t.Errorf("the next start warned %d times again", n)
	}
	var got []string
	for _, c := range f.st.List(f.ws) {
		got = append(got, c.ID)
	}
	if want := c1.ID + "," + c3.ID; strings.Join(got, ",") != want {
		t.Errorf("listed %v, want %s", got, want)
	}
	checkAccounting(t, f)
}

// countWarnings counts the records at level Warn and above.
type countWarnings struct {
	slog.Handler
	n *atomic.Int64
}

func (c countWarnings) Enabled(context.Context, slog.Level) bool { return true }

func (c countWarnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		c.n.Add(1)
	}
	return nil
}
