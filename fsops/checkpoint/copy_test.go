package checkpoint

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// A create copies its files with several workers and fsyncs them in
// batches of syncBatch: more changed files than a batch, each content
// held by three files (copied by different workers at once), are stored
// once each, leave no temp file and no descriptor open, and restore byte
// for byte.
func TestCreateCopiesInParallelAndBatches(t *testing.T) {
	f := newFixture(t, nil)
	const files, distinct = 3*syncBatch + 7, syncBatch + 3
	content := func(round, i int) string {
		return strings.Repeat(fmt.Sprintf("round %d content %d\n", round, i%distinct), 100+i%distinct)
	}
	var want int64
	for i := range files {
		c := content(0, i)
		f.write(t, fmt.Sprintf("d%d/f%03d.txt", i%7, i), c)
		if i < distinct {
			want += int64(len(c))
		}
	}
	fds := openFDs(t)
	first := f.create(t, "")
	if first.Read != files || first.Stored != want {
		t.Fatalf("first checkpoint read %d files and stored %d bytes, want %d and %d", first.Read, first.Stored, files, want)
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%d descriptors open after the create, %d before", n, fds)
	}
	if _, tmp, blobs := storeBytes(t, f.storeDir); tmp != 0 || blobs != distinct {
		t.Fatalf("the store holds %d temp files and %d blobs, want 0 and %d", tmp, blobs, distinct)
	}
	before := snapshot(t, f.dir)
	for i := range files {
		f.write(t, fmt.Sprintf("d%d/f%03d.txt", i%7, i), content(1, i))
	}
	if second := f.create(t, ""); second.Read != files {
		t.Fatalf("second checkpoint read %d files, want %d", second.Read, files)
	}
	if _, err := f.st.Restore(context.Background(), f.ws, first.ID, nil); err != nil {
		t.Fatal(err)
	}
	if d := diffSnapshots(before, snapshot(t, f.dir)); len(d) > 0 {
		t.Fatalf("restore:\n%s", strings.Join(d, "\n"))
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%d descriptors open at the end, %d before", n, fds)
	}
}

// The walk writes its paths into its workers' chunks (scratch.names),
// reused by later walks, walks running at once included: a path handed
// out is never written over, and a checkpoint's entries own their paths
// (a create gives each new path a string of its own).
func TestWalksKeepTheirPaths(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 300 {
		f.write(t, fmt.Sprintf("a%d/%s%d", i%3, strings.Repeat("n", i%40), i), "x")
		f.write(t, fmt.Sprintf("b%d/%s%d", i%5, strings.Repeat("m", i%50), i), "y")
	}
	walk := func(rel string) []string {
		w, err := f.st.walk(context.Background(), f.ws, rel, 10000)
		if err != nil {
			t.Error(err)
			return nil
		}
		var ps []string
		for _, e := range w.entries {
			ps = append(ps, e.Path)
		}
		return ps
	}
	first := walk("a0")
	want := strings.Join(first, "\n")
	var wg sync.WaitGroup
	got := make([][]string, 8)
	for k := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[k] = walk([]string{".", "b1", "a2"}[k%3])
		}()
	}
	wg.Wait()
	if again := strings.Join(first, "\n"); again != want {
		t.Fatal("the paths of a walk changed during later walks")
	}
	for k, ps := range got {
		if w := strings.Join(walk([]string{".", "b1", "a2"}[k%3]), "\n"); strings.Join(ps, "\n") != w {
			t.Fatalf("walks at once saw other paths than one alone (walk %d)", k)
		}
	}
	if len(got[0]) != 600+8 {
		t.Fatalf("the walk of the workspace saw %d entries, want 608", len(got[0]))
	}
}
