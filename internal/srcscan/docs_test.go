package srcscan

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsNameRealTests: every test the docs cite as evidence (`TestX` in
// README.md, CONTRIBUTING.md, SECURITY.md and docs/*.md) exists, so a renamed or deleted test cannot leave
// a claim in docs/security.md with nothing behind it.
func TestDocsNameRealTests(t *testing.T) {
	const root = "../.."
	defined := testDefinitions(t, root)
	if len(defined) < 200 {
		t.Fatalf("found only %d test functions under %s; the scan looked at too little", len(defined), root)
	}
	docs := repoDocs(t, root)
	cited := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)")
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cited.FindAllSubmatch(b, -1) {
			n++
			if name := string(m[1]); len(defined[name]) == 0 {
				t.Errorf("%s cites %s, which no test file defines", filepath.Base(doc), name)
			}
		}
	}
	if n < 20 {
		t.Fatalf("the docs cite only %d tests; the pattern no longer matches how they cite them", n)
	}
}

// TestDocsNameRealFiles: every file or folder of the repository the docs
// name in backticks (`ssh/sshd/server.go`, `tools/browser/`) exists, so a
// moved or renamed file cannot leave the docs pointing at nothing. A name
// counts when its first folder is one of the repository's own, or it names
// a Go file, and it names a file (its last part has a dot) or a folder (it
// ends in a slash); names
// with placeholders (`tools_<group>.go`, `*.json`) are patterns, not paths.
func TestDocsNameRealFiles(t *testing.T) {
	const root = "../.."
	top := map[string]bool{}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "node_modules" && e.Name() != ".git" {
			top[e.Name()] = true
		}
	}
	docs := repoDocs(t, root)
	quoted := regexp.MustCompile("`([A-Za-z0-9_.\\-]+/[^`\\s]*)`")
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range quoted.FindAllSubmatch(b, -1) {
			name := string(m[1])
			first, _, _ := strings.Cut(name, "/")
			last := name[strings.LastIndexByte(strings.TrimSuffix(name, "/"), '/')+1:]
			ours := top[first] || strings.HasSuffix(name, ".go")
			if !ours || strings.ContainsAny(name, "*<>{}$:?") || !(strings.HasSuffix(name, "/") || strings.Contains(last, ".")) {
				continue
			}
			n++
			if _, err := os.Stat(filepath.Join(root, name)); err != nil {
				t.Errorf("%s names %s, which the repository does not have", filepath.Base(doc), name)
			}
		}
	}
	if n < 50 {
		t.Fatalf("the docs name only %d files; the pattern no longer matches how they name them", n)
	}
}
