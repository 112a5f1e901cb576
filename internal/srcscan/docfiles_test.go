package srcscan

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoDocs is the documentation the docs tests read, below root:
// docs/*.md, README.md, CONTRIBUTING.md and SECURITY.md.
func repoDocs(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md"), filepath.Join(root, "SECURITY.md"))
}

// testDefinitions maps each test, fuzz target and benchmark defined in a
// _test.go file below root (hidden directories and node_modules left out)
// to the files, from root with slashes, that define it.
func testDefinitions(t *testing.T, root string) map[string][]string {
	t.Helper()
	where := map[string][]string{}
	funcTest := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+)\(`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range funcTest.FindAllSubmatch(b, -1) {
			where[string(m[1])] = append(where[string(m[1])], filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return where
}
