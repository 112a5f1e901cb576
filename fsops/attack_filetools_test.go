package fsops

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// The workspace file tools' attack review (docs/security.md): what one call
// can make the daemon hold.

// TestEditResultBounded: an edit's result is bounded by the maximum read
// size before it is built. replaceAll of a one-byte oldText with a long
// newText (10^7 matches in a 10 MiB file times a 4 MiB newText is 40 TB),
// or a chain of edits that each double the text, would otherwise make the
// daemon allocate until it dies; the file is left as it was.
func TestEditResultBounded(t *testing.T) {
	const max = 1 << 20
	for _, im := range []impl{
		{"dir", func(t testing.TB) Workspace {
			ws, err := NewDir(t.TempDir(), Options{MaxReadSize: max})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ws.Close() })
			return ws
		}},
		{"memory", func(t testing.TB) Workspace {
			ws := NewMemory("/mem/ws", Options{MaxReadSize: max})
			t.Cleanup(func() { ws.Close() })
			return ws
		}},
	} {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			big := bytes.Repeat([]byte("a"), 600<<10)
			if err := ws.WriteFile("big.txt", big); err != nil {
				t.Fatal(err)
			}
			for _, dry := range []bool{false, true} {
				_, err := ws.Edit("big.txt", []Edit{{OldText: "a", NewText: "aa", ReplaceAll: true}}, dry)
				if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "edit 1 would make the file 1228800 bytes") {
					t.Fatalf("replaceAll doubling 600 KiB (dryRun %v): err = %v, want TOO_LARGE naming the size", dry, err)
				}
			}
			if got, err := ws.ReadFile("big.txt"); err != nil || !bytes.Equal(got, big) {
				t.Fatalf("file changed by a refused edit (err %v, %d bytes)", err, len(got))
			}

			if err := ws.WriteFile("small.txt", []byte("a\n")); err != nil {
				t.Fatal(err)
			}
			var chain []Edit
			for range 24 {
				chain = append(chain, Edit{OldText: "a", NewText: "aa", ReplaceAll: true})
			}
			_, err := ws.Edit("small.txt", chain, false)
			if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "edit 20 would make the file 1048577 bytes") {
				t.Fatalf("24 doubling edits: err = %v, want TOO_LARGE at edit 20 (2^20+1 bytes)", err)
			}
			if got, _ := ws.ReadFile("small.txt"); string(got) != "a\n" {
				t.Fatalf("file changed by a refused chain: %d bytes", len(got))
			}

			// Up to the bound an edit still applies.
			if _, err := ws.Edit("small.txt", chain[:19], false); err != nil {
				t.Fatalf("19 doubling edits (512 KiB): %v", err)
			}
		})
	}
}

// TestGrepOutputBounded: grep holds at most grepMaxLines lines or
// grepMaxOutput bytes of output, and searches a file only as far as its
// output can go. A file of 8 million matching lines made content mode
// allocate gigabytes (every line split out, a map entry per match, every
// line rendered) even with headLimit 5, and files_with_matches and count
// recorded every match; a single matching line of 40 MiB was output whole.
func TestGrepOutputBounded(t *testing.T) {
	root := t.TempDir()
	ws := newDirWS(t, root)
	if err := ws.WriteFile("many/f", bytes.Repeat([]byte("a\n"), 8<<20)); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile("long/f", append(bytes.Repeat([]byte("a"), 40<<20), '\n')); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts      GrepOptions
		want      func(string) bool
		wantLines int
	}{
		{GrepOptions{Pattern: "a", Path: "many", OutputMode: "content"}, func(s string) bool {
			return strings.HasPrefix(s, "many/f:a\nmany/f:a\n") && strings.HasSuffix(s, "\nmany/f:a\n"+grepCutNote)
		}, grepMaxLines + 1},
		{GrepOptions{Pattern: "a", Path: "many", OutputMode: "content", LineNumbers: true, HeadLimit: 5}, func(s string) bool {
			return s == "many/f:1:a\nmany/f:2:a\nmany/f:3:a\nmany/f:4:a\nmany/f:5:a\n[output truncated to first 5 lines; at least 1048571 more hidden; "+grepCutReason+"]"
		}, 6},
		{GrepOptions{Pattern: "a", Path: "many", OutputMode: "count"}, func(s string) bool { return s == "many/f:8388608" }, 1},
		{GrepOptions{Pattern: "a", Path: "many"}, func(s string) bool { return s == "many/f" }, 1},
		{GrepOptions{Pattern: "a", Path: "long", OutputMode: "content"}, func(s string) bool { return s == grepCutNote }, 1},
		{GrepOptions{Pattern: "a", Path: "long", OutputMode: "count"}, func(s string) bool { return s == "long/f:1" }, 1},
	} {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		res, err := ws.Grep(context.Background(), tc.opts)
		runtime.ReadMemStats(&m1)
		if err != nil {
			t.Fatalf("%+v: %v", tc.opts, err)
		}
		alloc := m1.TotalAlloc - m0.TotalAlloc
		t.Logf("%s %s headLimit %d: %d bytes of output, %d MiB allocated", tc.opts.Path, tc.opts.OutputMode, tc.opts.HeadLimit, len(res.Output), alloc>>20)
		if n := strings.Count(res.Output, "\n") + 1; n != tc.wantLines || !tc.want(res.Output) {
			t.Errorf("%s %s headLimit %d: %d lines, ends %q", tc.opts.Path, tc.opts.OutputMode, tc.opts.HeadLimit, n, res.Output[max(0, len(res.Output)-300):])
		}
		// The file read whole (up to 40 MiB), the output (up to 32 MiB) and
		// its lines: well under what one match per line costs.
		if alloc > 400<<20 {
			t.Errorf("%s %s headLimit %d allocated %d MiB", tc.opts.Path, tc.opts.OutputMode, tc.opts.HeadLimit, alloc>>20)
		}
	}
}

// matchSegmentsByEverySplit is the definition matchSegments is held to:
// every split at every "**" tried (exponential; small inputs only).
func matchSegmentsByEverySplit(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 1 && pat[1] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 1 {
				return len(name) > 0
			}
			for i := 0; i <= len(name); i++ {
				if matchSegmentsByEverySplit(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 || !matchSegment(pat[0], name[0]) {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// TestGlobBacktrackingBounded: globstars and braces cannot make one match
// take exponential time or memory. "**/a/**/a/..." against a deep path of
// "a" segments tried every split at every "**" (the pattern below ran for
// hours on one path); braces expanded to 2^n patterns per path matched; a
// .gitignore in the workspace reaches the same matcher through grep. The
// matcher is also held to the exhaustive definition on small inputs.
func TestGlobBacktrackingBounded(t *testing.T) {
	deep := strings.Repeat("a/", 60) + "c"
	pat := strings.Repeat("**/a/", 12) + "**/b"
	if globMatch(pat, deep) {
		t.Errorf("%q matched %q", pat, deep)
	}
	if !globMatch(strings.Repeat("**/a/", 12)+"**/c", deep) || !globMatch("a/**", deep) || globMatch("a/**", "a") || !globMatch("**/c/**/**", "c/x") || !globMatch("**", "x") {
		t.Errorf("the matcher lost a match")
	}

	// The exhaustive definition on every small pattern and path.
	segs := []string{"**", "a", "*", "b"}
	names := []string{"a", "b"}
	var pats [][]string
	var gen func(cur []string, n int)
	gen = func(cur []string, n int) {
		pats = append(pats, append([]string(nil), cur...))
		if n == 0 {
			return
		}
		for _, s := range segs {
			gen(append(cur, s), n-1)
		}
	}
	gen(nil, 5)
	for _, p := range pats {
		for n := 0; n <= 5; n++ {
			for bits := 0; bits < 1<<n; bits++ {
				var name []string
				for i := range n {
					name = append(name, names[bits>>i&1])
				}
				if got, want := matchSegments(p, name), matchSegmentsByEverySplit(p, name); got != want {
					t.Fatalf("matchSegments(%q, %q) = %v, want %v", p, name, got, want)
				}
			}
		}
	}

	ws := newDirWS(t, t.TempDir())
	if err := ws.WriteFile(deep, []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := ws.Search(ctx, ".", pat, SearchOptions{}); err != nil {
		t.Fatalf("search with %d globstars: %v", 13, err)
	}
	if _, err := ws.Search(ctx, ".", "**", SearchOptions{Exclude: []string{pat}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Tree(ctx, ".", TreeOptions{Exclude: []string{pat}}); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile(".gitignore", []byte(strings.Repeat("**/a/", 12)+"**/b\n")); err != nil {
		t.Fatal(err)
	}
	if err := ws.Mkdir(".git", false); err != nil {
		t.Fatal(err)
	}
	if res, err := ws.Grep(ctx, GrepOptions{Pattern: "x"}); err != nil || res.Output != deep {
		t.Fatalf("grep under a globstar .gitignore: %q, %v", res.Output, err)
	}

	// Braces: twenty groups are a million patterns; 64 KiB of them would
	// be built 10,000 times over before the first one is whole.
	bomb := strings.Repeat("{a,b}", 20)
	huge := strings.Repeat("{a,b}", 13000)
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"pattern", func() error { _, err := ws.Search(ctx, ".", bomb, SearchOptions{}); return err }()},
		{"exclude", func() error { _, err := ws.Search(ctx, ".", "**", SearchOptions{Exclude: []string{huge}}); return err }()},
		{"tree exclude", func() error { _, err := ws.Tree(ctx, ".", TreeOptions{Exclude: []string{bomb}}); return err }()},
		{"too long", func() error {
			_, err := ws.Search(ctx, ".", strings.Repeat("a", MaxGlobBytes+1), SearchOptions{})
			return err
		}()},
		{"grep glob", func() error {
			_, err := ws.Grep(ctx, GrepOptions{Pattern: "x", Glob: strings.Repeat("**/a/", MaxGlobBytes/5+1)})
			return err
		}()},
	} {
		if !errcode.Is(tc.err, errcode.InvalidArgument) {
			t.Errorf("%s: err = %v, want INVALID_ARGUMENT naming the bound", tc.name, tc.err)
		}
	}
	if got := expandBraces("**/*.{go,{md,txt}}"); strings.Join(got, " ") != "**/*.go **/*.md **/*.txt" {
		t.Errorf("expandBraces: %q", got)
	}
}

// TestWalkOutputBounded: directory_tree and search_files build at most
// MaxWalkOutput bytes of answer. Symlinks that stay inside are followed
// (only a link back to an ancestor is cut), so 9 directories that each hold
// 8 links to the next are 19 million paths; and a file's node in the
// tree's JSON is indented by its depth, so 20,000 files 1,000 directories
// down were 400 MB of JSON. Each is refused with TOO_LARGE instead.
func TestWalkOutputBounded(t *testing.T) {
	root := t.TempDir()
	ws := newDirWS(t, root)
	// os.Root follows at most 8 links in one path, so the DAG is 9 levels of
	// 8 links each: 8^8 paths at the last level. Long names make each path
	// count.
	long := strings.Repeat("l", 200)
	for i := range 9 {
		d := filepath.Join(root, "dag", strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for l := range 8 {
			if err := os.Symlink("../"+strconv.Itoa(i+1), filepath.Join(d, long+strconv.Itoa(l))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "dag", "9"), 0o755); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "deep", strings.Repeat("d/", 1000))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		if err := os.WriteFile(filepath.Join(deep, strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		what  string
		bound int64 // walkOutputBound: lowered where each node costs a walk of 8 links
		f     func() (int, error)
	}{
		{"tree of the link DAG", 2 << 20, func() (int, error) {
			nodes, err := ws.Tree(ctx, "dag/0", TreeOptions{})
			return len(TreeJSON(nodes)), err
		}},
		{"search of the link DAG", 2 << 20, func() (int, error) {
			hits, err := ws.Search(ctx, "dag/0", "**", SearchOptions{})
			return len(hits), err
		}},
		{"tree of deep files", MaxWalkOutput, func() (int, error) {
			nodes, err := ws.Tree(ctx, "deep", TreeOptions{})
			return len(TreeJSON(nodes)), err
		}},
	} {
		walkOutputBound = tc.bound
		n, err := tc.f()
		walkOutputBound = MaxWalkOutput
		if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "MaxWalkOutput") {
			t.Errorf("%s: %d, err = %v; want TOO_LARGE naming MaxWalkOutput", tc.what, n, err)
		}
	}
	// Below the bound the answers are whole.
	if hits, err := ws.Search(ctx, "dag/6", "**", SearchOptions{}); err != nil || len(hits) != 8+64+512 {
		t.Errorf("search of the DAG's last levels: %d hits, %v", len(hits), err)
	}
	if nodes, err := ws.Tree(ctx, "deep/"+strings.Repeat("d/", 1000), TreeOptions{}); err != nil || len(nodes) != 10000 {
		t.Errorf("the 10,000 files from their own directory: %d nodes, %v", len(nodes), err)
	}
	if nodes, err := ws.Tree(ctx, filepath.Join(deep, ".."), TreeOptions{Exclude: []string{"1*", "2*", "3*", "4*", "5*", "6*", "7*", "8*", "9*"}}); err != nil || len(nodes) != 1 {
		t.Errorf("the deep directory without its files: %d nodes, %v", len(nodes), err)
	}
}

// TestEditDiffWorkBounded: the diff of an edit is searched for within
// diffWork steps. Replacing 50,000 alternating lines with a shuffle of the
// same lines (the same multiset, so the lower bound does not cut the search
// short) took 67 s and 9.5 GB of allocations to reach the 20,000-edit
// budget, and edit_file takes no deadline. Past diffWork the diff is the
// budget's note, and the edit is still applied.
func TestEditDiffWorkBounded(t *testing.T) {
	const n = 50000
	r := rand.New(rand.NewPCG(1, 2))
	var a, b strings.Builder
	for i := range n {
		a.WriteString([]string{"a\n", "b\n"}[i%2])
	}
	for _, p := range r.Perm(n) {
		b.WriteString([]string{"a\n", "b\n"}[p%2])
	}
	ws := newDirWS(t, t.TempDir())
	if err := ws.WriteFile("f", []byte(a.String())); err != nil {
		t.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	res, err := ws.Edit("f", []Edit{{OldText: a.String(), NewText: b.String()}}, false)
	runtime.ReadMemStats(&m1)
	if err != nil {
		t.Fatal(err)
	}
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 1<<30 {
		t.Errorf("the diff allocated %d MiB", alloc>>20)
	}
	if want := "Applied 1 edit to f\n--- f\n+++ f\n[diff omitted: rendering exceeded the diff budget"; !strings.HasPrefix(res.Diff, want) {
		t.Errorf("diff %.200q, want the budget's note", res.Diff)
	}
	if got, _ := ws.ReadFile("f"); string(got) != b.String() {
		t.Errorf("the edit was not applied")
	}
}

// TestWritesReplaceNotWriteThrough: a hard link to a file outside the
// workspace (link(2) by a command) and a setuid file are replaced by
// write_file and edit_file, never written through or kept setuid: the write
// goes to a temp file renamed over the name, with the old permission bits
// only (fs.FileMode.Perm). Reads do read a hard link: it is the same file,
// which the command that made the link could already reach.
func TestWritesReplaceNotWriteThrough(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("outside\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	ws := newDirWS(t, root)
	if err := os.Link(outside, filepath.Join(root, "link")); err != nil {
		t.Skipf("no hard link across the two temp directories: %v", err)
	}
	if err := ws.WriteFile("link", []byte("mine\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(root, "link2")); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Edit("link2", []Edit{{OldText: "outside", NewText: "edited"}}, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(outside); string(got) != "outside\n" {
		t.Errorf("the outside file was written through a hard link: %q", got)
	}
	if got, _ := ws.ReadFile("link2"); string(got) != "edited\n" {
		t.Errorf("link2 after the edit: %q", got)
	}

	suid := filepath.Join(root, "suid")
	if err := os.WriteFile(suid, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(suid, 0o6755); err != nil {
		t.Fatal(err)
	}
	for _, write := range []func() error{
		func() error { return ws.WriteFile("suid", []byte("#!/bin/sh\necho hi\n")) },
		func() error { _, err := ws.Edit("suid", []Edit{{OldText: "hi", NewText: "ho"}}, false); return err },
	} {
		if err := write(); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(suid, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o7777 != 0o755 {
			t.Errorf("rewritten setuid file has mode %o, want 755", st.Mode&0o7777)
		}
		if err := unix.Chmod(suid, 0o6755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGrepBinaryTextHeldBounded: the text before the NUL of the binary files
// of one directory, held from their search until the in-order merge, is at
// most grepMaxBinaryHeld; past it a file is read again when merged. Eight
// files of 24 MiB of text and a NUL held 192 MiB; a directory of 256 MiB
// ones held them all.
func TestGrepBinaryTextHeldBounded(t *testing.T) {
	ws := newDirWS(t, t.TempDir())
	const files, size = 8, 24 << 20
	text := append([]byte("needle\n"), bytes.Repeat([]byte("hay\n"), (size-7)/4)...)
	var names []string
	for i := range files {
		name := "f" + strconv.Itoa(i)
		names = append(names, name)
		if err := ws.WriteFile("bin/"+name, append(append([]byte(nil), text...), 0, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	w := ws.(walker)
	g := &grepper{w: w, opts: GrepOptions{Pattern: "needle", OutputMode: "content"}, ctx: context.Background(), rgCap: rgBufferSize}
	g.linesLeft.Store(grepMaxLines)
	g.bytesLeft.Store(grepMaxOutput)
	if err := g.setup(); err != nil {
		t.Fatal(err)
	}
	d, err := openGrepDir(w, "bin")
	if err != nil {
		t.Fatal(err)
	}
	results := g.searchAll(d, "bin", names, "bin")
	d.close()
	held, binaries := 0, 0
	for _, r := range results {
		if r.binary != nil {
			binaries++
			held += len(r.binary.text)
		}
	}
	if binaries != files || held > grepMaxBinaryHeld {
		t.Errorf("%d binary files, %d MiB of their text held until the merge; want %d files, at most %d MiB", binaries, held>>20, files, grepMaxBinaryHeld>>20)
	}
	// Merged, every file is searched as rg would: the match before the NUL
	// and the warning.
	res, err := ws.Grep(context.Background(), GrepOptions{Pattern: "needle", OutputMode: "content", Path: "bin"})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range names {
		want = append(want, "bin/"+n+":needle", binaryNotice("bin/"+n, "WARNING: stopped searching binary file after match", len(text)))
	}
	if res.Output != strings.Join(want, "\n") {
		t.Errorf("grep of the binary files:\n%s\nwant\n%s", res.Output, strings.Join(want, "\n"))
	}
}
