package opfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

func judged() (met, dirs int) {
	judgements.Lock()
	defer judgements.Unlock()
	return judgements.met, judgements.dirs
}

// judgeTree is a tree of files for the Judge's tests: dir/a/{1..5}.md,
// dir/b/{1..5}.md, a link dir/l to dir/a, a directory others may write
// (dir/open, 0777) holding a file, and a ConfigMap volume's layout
// (dir/cm). It returns dir, resolved.
func judgeTree(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"a", "b", "open"} {
		must(os.Mkdir(filepath.Join(dir, d), 0o755))
		for i := 1; i <= 5; i++ {
			must(os.WriteFile(filepath.Join(dir, d, fmt.Sprintf("%d.md", i)), []byte("x"), 0o644))
		}
	}
	must(os.Chmod(filepath.Join(dir, "open"), 0o777))
	must(os.Symlink("a", filepath.Join(dir, "l")))
	testenv.ConfigMapVolume(t, filepath.Join(dir, "cm"), map[string]string{"p.md": "x", "q.md": "y"})
	return dir
}

// TestJudgeAnswersAsCheckModes: one Judge asked about many names in a row
// (links, "..", relative names, missing files, refused directories, a
// ConfigMap volume, names it has walked from the directories it knows)
// gives each the answer CheckModes gives it alone.
func TestJudgeAnswersAsCheckModes(t *testing.T) {
	dir := judgeTree(t)
	t.Chdir(dir)
	var names []string
	for _, n := range []string{
		"a/1.md", "a/2.md", "b/1.md", "l/3.md", "l/../b/2.md", "a/../l/4.md", "a//5.md", "a/./5.md", "a/missing.md",
		"open/1.md", "open/2.md", "open/../a/1.md", "cm/p.md", "cm/q.md", "cm/..data/p.md", "missing/x.md", "a", "l", "a/1.md/x",
	} {
		names = append(names, filepath.Join(dir, n), dir+"/"+n, n)
	}
	var j Judge
	for _, round := range []string{"first", "again"} {
		for _, n := range names {
			want, got := CheckModes(n), j.CheckModes(n)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: Judge.CheckModes(%s) = %v; CheckModes = %v", round, n, got, want)
			}
		}
	}
}

// TestJudgeJudgesEachDirectoryOnce: a Judge judges each directory on the
// ways of a batch's files once: fifteen files in two directories, five
// of them named through a link, cost the directories from / to each,
// once; the walks of the files after the first start from the directory
// they share, and meet again only the directory a link leads to; a new
// Judge judges them all again.
func TestJudgeJudgesEachDirectoryOnce(t *testing.T) {
	dir := judgeTree(t)
	dirs := map[string]bool{}
	for d := dir; ; d = filepath.Dir(d) {
		dirs[d] = true
		if d == "/" {
			break
		}
	}
	want := len(dirs) + 2 // a and b
	for range 2 {
		var j Judge
		met, judgedBefore := judged()
		for _, d := range []string{"a", "b", "l"} {
			for i := 1; i <= 5; i++ {
				if err := j.CheckModes(filepath.Join(dir, d, fmt.Sprintf("%d.md", i))); err != nil {
					t.Fatal(err)
				}
			}
		}
		m, n := judged()
		if n-judgedBefore != want || m-met != want+5 {
			t.Errorf("15 files in 2 directories %d deep (5 through a link): %d directories judged, %d met; want %d judged, each once, and %d met (a again through the link, 5 times)", len(dirs), n-judgedBefore, m-met, want, want+5)
		}
	}
}

// TestJudgeKeepsNoFileVerdict: a file made writable by others after a
// Judge passed it is refused by the same Judge; a directory made writable
// by others is refused by the next batch's Judge (a Judge lasts one
// request).
func TestJudgeKeepsNoFileVerdict(t *testing.T) {
	dir := judgeTree(t)
	f := filepath.Join(dir, "a", "1.md")
	var j Judge
	if err := j.CheckModes(f); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := j.CheckModes(f); err == nil || !strings.Contains(err.Error(), "is writable by its group or by others") {
		t.Errorf("a file made writable by others, judged again by the same Judge: %v", err)
	}
	if err := os.Chmod(f, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := j.CheckModes(f); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "a"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := new(Judge).CheckModes(filepath.Join(dir, "a", "2.md")); err == nil || !strings.Contains(err.Error(), "lies in "+filepath.Join(dir, "a")) {
		t.Errorf("a directory made writable by others, judged by the next batch's Judge: %v", err)
	}
}

// TestConfigMapVolumeRefusalSaysSo: a plain `configMap:` volume's mount
// point (0777 without the sticky bit, holding the kubelet's ..data link)
// is refused with the way out: mount it through a projected volume
// (docs/deploy.md). Another directory others may write is refused
// without it; a projected volume's (1777) is accepted.
func TestConfigMapVolumeRefusalSaysSo(t *testing.T) {
	const hint = "(a Kubernetes configMap volume? mount it through a projected volume: docs/deploy.md)"
	dir := judgeTree(t)
	cm := filepath.Join(dir, "cm")
	if err := CheckModes(filepath.Join(cm, "p.md")); err != nil {
		t.Fatalf("a projected volume's layout (1777): %v", err)
	}
	if err := os.Chmod(cm, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{filepath.Join(cm, "p.md"), filepath.Join(cm, "..data", "q.md"), cm} {
		if _, err := Read(name, 1024); err == nil || !strings.Contains(err.Error(), "lies in "+cm+", which its group or others may write (mode 0777, others may write it) without the sticky bit") || !strings.HasSuffix(err.Error(), hint) {
			t.Errorf("Read(%s) in a configMap volume's mount point: %v", name, err)
		}
	}
	if err := CheckModes(filepath.Join(dir, "open", "1.md")); err == nil || strings.Contains(err.Error(), "Kubernetes") {
		t.Errorf("a directory others may write without ..data: %v", err)
	}
}

// BenchmarkJudge: 800 files in 40 directories judged each alone
// (CheckModes: every directory from / walked and judged for each) and by
// one Judge (each directory once). Run:
//
//	go test -run '^$' -bench Judge ./internal/opfile/
func BenchmarkJudge(b *testing.B) {
	dir := b.TempDir()
	var files []string
	for d := range 40 {
		sub := filepath.Join(dir, "site", fmt.Sprintf("area%02d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for p := range 20 {
			f := filepath.Join(sub, fmt.Sprintf("page%02d.md", p))
			if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
			files = append(files, f)
		}
	}
	b.Run("alone", func(b *testing.B) {
		for b.Loop() {
			for _, f := range files {
				if err := CheckModes(f); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("one-judge", func(b *testing.B) {
		for b.Loop() {
			var j Judge
			for _, f := range files {
				if err := j.CheckModes(f); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
