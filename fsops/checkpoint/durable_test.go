package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestDurableFollowsTheOption: a durable store (--fsync) fsyncs each new
// blob, the blobs' directory, the manifest's temp file and the manifests'
// directory; one that is not fsyncs nothing, in a create or a prune.
func TestDurableFollowsTheOption(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.Durable = durable; o.MaxCount = 1 })
			if f.st.Durable() != durable {
				t.Fatalf("Durable() = %v", f.st.Durable())
			}
			for i := range 3 {
				f.write(t, fmt.Sprintf("f%d.txt", i), fmt.Sprintf("content %d\n", i))
			}
			f.create(t, "")
			first := f.st.fsyncs.Load()
			f.write(t, "f0.txt", "changed\n")
			f.write(t, "gone.txt", "x")
			f.create(t, "")
			os.Remove(filepath.Join(f.dir, "gone.txt"))
			if info := f.create(t, ""); len(info.Pruned) == 0 {
				t.Fatalf("no prune: %+v", info)
			}
			all := f.st.fsyncs.Load()
			if !durable {
				if all != 0 {
					t.Fatalf("%d fsyncs in a store that is not durable", all)
				}
				return
			}
			// 3 blobs, blobs/, the manifest's temp file, manifests/.
			if first != 6 {
				t.Errorf("the first checkpoint made %d fsyncs, want 6", first)
			}
			if all <= first {
				t.Errorf("the later checkpoints made no fsync (%d in all)", all)
			}
		})
	}
}

// TestPowerCutLeavesWholeCheckpoints plays what a power cut can leave of
// a store that is not durable, the kernel having written back some of its
// writes and not others, in any order: a blob cut short (alone, or shared
// with an older checkpoint), and a manifest renamed into place whose
// content was lost. The next Open lists only checkpoints that restore
// whole, removes the damaged blob and what only the checkpoints left out
// named, counts what is left, and a new checkpoint of the same content
// stores the blob again rather than reuse the damaged one.
func TestPowerCutLeavesWholeCheckpoints(t *testing.T) {
	long := strings.Repeat("the newest work\n", 100)
	cases := []struct {
		name   string
		damage func(t *testing.T, f *fixture, c1, c2, c3 Info)
		listed func(c1, c2, c3 Info) []string
	}{
		{"a blob cut short", func(t *testing.T, f *fixture, c1, c2, c3 Info) {
			truncate(t, filepath.Join(f.storeDir, blobsDir, sha256hex(long)), int64(len(long)/2))
		}, func(c1, c2, c3 Info) []string { return []string{c1.ID} }},
		{"a shared blob cut short", func(t *testing.T, f *fixture, c1, c2, c3 Info) {
			truncate(t, filepath.Join(f.storeDir, blobsDir, sha256hex("kept\n")), 0)
		}, func(c1, c2, c3 Info) []string { return nil }},
		{"a manifest emptied", func(t *testing.T, f *fixture, c1, c2, c3 Info) {
			// c3 is stored as a delta of c2: it goes with it.
			truncate(t, filepath.Join(f.storeDir, manifestsDir, c2.ID+manifestExt), 0)
		}, func(c1, c2, c3 Info) []string { return []string{c1.ID} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.write(t, "a.txt", "kept\n")
			c1 := f.create(t, "")
			f.write(t, "b.txt", long)
			c2 := f.create(t, "")
			f.write(t, "c.txt", "later\n")
			c3 := f.create(t, "")
			want := snapshot(t, f.dir)
			tc.damage(t, f, c1, c2, c3)
			f.reopen(t)

			var got []string
			for _, c := range f.st.List(f.ws) {
				got = append(got, c.ID)
				if _, err := f.st.Restore(context.Background(), f.ws, c.ID, nil); err != nil {
					t.Fatalf("restore of %s, listed after the cut: %v", c.ID, err)
				}
			}
			if wantIDs := tc.listed(c1, c2, c3); strings.Join(got, ",") != strings.Join(wantIDs, ",") {
				t.Fatalf("listed %v, want %v", got, wantIDs)
			}
			n, _, _ := storeBytes(t, f.storeDir)
			manifests, _ := os.ReadDir(filepath.Join(f.storeDir, manifestsDir))
			var left int64 // the manifests left out stay on disk, uncounted
			for _, m := range manifests {
				id := strings.TrimSuffix(m.Name(), manifestExt)
				if !strings.Contains(strings.Join(got, ","), id) {
					fi, _ := m.Info()
					left += fi.Size()
				}
			}
			if st := f.st.Stats(); st.Bytes != n-left {
				t.Errorf("stats say %d bytes, the store holds %d (and %d of manifests left out)", st.Bytes, n-left, left)
			}
			blobs, _ := os.ReadDir(filepath.Join(f.storeDir, blobsDir))
			for _, b := range blobs {
				fi, _ := b.Info()
				if _, ok := f.st.blobSize[b.Name()]; !ok {
					t.Errorf("blob %s (%d bytes) is kept, uncounted", b.Name(), fi.Size())
				}
			}

			// The workspace as it was at c3: a new checkpoint stores what
			// the damaged ones held again, and restores every byte.
			for _, p := range []string{"a.txt", "b.txt", "c.txt"} {
				os.Remove(filepath.Join(f.dir, p))
			}
			f.write(t, "a.txt", "kept\n")
			f.write(t, "b.txt", long)
			f.write(t, "c.txt", "later\n")
			again := f.create(t, "")
			if fi, err := os.Stat(filepath.Join(f.storeDir, blobsDir, sha256hex(long))); err != nil || fi.Size() != int64(len(long)) {
				t.Fatalf("the blob of b.txt after a new checkpoint: %v, %v", fi, err)
			}
			f.write(t, "b.txt", "damaged\n")
			os.Remove(filepath.Join(f.dir, "a.txt"))
			if _, err := f.st.Restore(context.Background(), f.ws, again.ID, nil); err != nil {
				t.Fatal(err)
			}
			if d := diffSnapshots(want, snapshot(t, f.dir)); len(d) > 0 {
				t.Fatalf("restore of the new checkpoint:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

func truncate(t *testing.T, p string, n int64) {
	t.Helper()
	if err := os.Truncate(p, n); err != nil {
		t.Fatal(err)
	}
}

// TestSetAsideManifestsBounded: an unreadable manifest is set aside as
// the ones Open leaves out are, and Open keeps only the newest keepDamaged
// of them, which no bound of the store counts.
func TestSetAsideManifestsBounded(t *testing.T) {
	f := newFixture(t, nil)
	f.write(t, "a.txt", "kept\n")
	c1 := f.create(t, "")
	dir := filepath.Join(f.storeDir, manifestsDir)
	now := time.Now()
	for i := range 20 {
		p := filepath.Join(dir, fmt.Sprintf("cp-old%02d%s", i, damagedExt))
		if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		// cp-old00 the oldest.
		mod := now.Add(time.Duration(i-40) * time.Minute)
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cp-bad"+manifestExt), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.reopen(t)
	if list := f.st.List(f.ws); len(list) != 1 || list[0].ID != c1.ID {
		t.Fatalf("list %+v, want %s", list, c1.ID)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var aside []string
	for _, n := range names {
		if strings.HasSuffix(n.Name(), damagedExt) {
			aside = append(aside, n.Name())
		}
		if n.Name() == "cp-bad"+manifestExt {
			t.Errorf("the unreadable manifest is still %s", n.Name())
		}
	}
	sort.Strings(aside)
	want := []string{"cp-bad" + damagedExt}
	for i := 20 - (keepDamaged - 1); i < 20; i++ {
		want = append(want, fmt.Sprintf("cp-old%02d%s", i, damagedExt))
	}
	sort.Strings(want)
	if strings.Join(aside, " ") != strings.Join(want, " ") {
		t.Fatalf("set aside after Open:\n%v\nwant the newest %d:\n%v", aside, keepDamaged, want)
	}
}
