package fsops

import (
	"strings"
	"testing"
)

var excluderPatterns = []string{
	"", "/", "./", "./a", "a/", "/a", "a//b", "a/b", "a/b/c", "b/c", "!a", "!!a", "a!", "*.log", "**/x",
	"x/**", "a/*", "{a,b}", "{a,b}/c", "a{", "a}", "[ab]", "a?", `a\b`, "**", "*", ".git", "node_modules",
	"*.egg-info", "dir.d", "a/./b", "..", ".",
}

var excluderPaths = []string{
	"a", "b", "c", "a/b", "a/b/c", "x/a/b", "x/a/b/y", "b/c", "x/b/c", "a/c", "b/a", "x.log", "d/x.log",
	"x", "x/y", "y/x", "ab", "aa", "a!", "!a", "a}", "a{", "[ab]", `a\b`, "a.egg-info", "d/a.egg-info",
	".git", "src/.git/HEAD", "node_modules/x", "p/node_modules", "dir.d", "dir.d/f", "..", ".", "a/./b",
}

// TestTreeExcluderMatchesReference: the compiled excludes give the
// reference's answer (treeExcluded) for every pattern, alone and with the
// defaults, on every path.
func TestTreeExcluderMatchesReference(t *testing.T) {
	sets := [][]string{DefaultTreeExcludes}
	for _, p := range excluderPatterns {
		sets = append(sets, []string{p}, append([]string{p}, DefaultTreeExcludes...))
	}
	for _, set := range sets {
		x := newTreeExcluder(set)
		for _, rel := range excluderPaths {
			if got, want := x.excluded(rel), treeExcluded(rel, set); got != want {
				t.Errorf("excludes %q, path %q: compiled %v, reference %v", set, rel, got, want)
			}
		}
	}
}

func FuzzTreeExcluder(f *testing.F) {
	for i, p := range excluderPatterns {
		f.Add(p, excluderPaths[i%len(excluderPaths)])
	}
	f.Fuzz(func(t *testing.T, pattern, rel string) {
		// Paths as the walk makes them: names joined by "/", none empty.
		if rel == "" || strings.HasPrefix(rel, "/") || strings.HasSuffix(rel, "/") || strings.Contains(rel, "//") || len(pattern) > 64 {
			return
		}
		set := []string{pattern}
		if got, want := newTreeExcluder(set).excluded(rel), treeExcluded(rel, set); got != want {
			t.Fatalf("exclude %q, path %q: compiled %v, reference %v", pattern, rel, got, want)
		}
	})
}
