package srcscan

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsTestsInNamedPackage: where the docs name the package of the
// tests they cite ("`daemon` `TestAttackPreviewFlood`, `TestX`", as the
// attack table of docs/security.md does) or their file ("`TestPortInUse`
// (`cmd/agent-backend/startup_test.go`)"), the tests are defined there, so
// a test moved to another package cannot leave the docs sending a reader to
// the wrong one. TestDocsNameRealTests holds only that each exists.
func TestDocsTestsInNamedPackage(t *testing.T) {
	const root = "../.."
	where := testDefinitions(t, root) // test -> the files (from root) defining it
	docs := repoDocs(t, root)
	const tests = "(?:`(?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+`(?:, and |, | and | or )?)+"
	byPackage := regexp.MustCompile("`([a-z][a-z0-9/]*)` (" + tests + ")")
	byFile := regexp.MustCompile("(" + tests + ") \\(`([A-Za-z0-9_./-]+_test\\.go)`")
	name := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+)`")
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(doc)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range byPackage.FindAllStringSubmatch(line, -1) {
				pkg := m[1]
				for _, tm := range name.FindAllStringSubmatch(m[2], -1) {
					n++
					files := where[tm[1]]
					if len(files) > 0 && !slices.ContainsFunc(files, func(f string) bool {
						dir := filepath.ToSlash(filepath.Dir(f))
						return dir == pkg || strings.HasSuffix(dir, "/"+pkg)
					}) {
						t.Errorf("%s:%d: `%s` `%s`: the test is in %v", base, i+1, pkg, tm[1], files)
					}
				}
			}
			for _, m := range byFile.FindAllStringSubmatch(line, -1) {
				file := m[2]
				for _, tm := range name.FindAllStringSubmatch(m[1], -1) {
					n++
					if files := where[tm[1]]; len(files) > 0 && !slices.Contains(files, file) {
						t.Errorf("%s:%d: `%s` (`%s`): the test is in %v", base, i+1, tm[1], file, files)
					}
				}
			}
		}
	}
	if n < 100 {
		t.Fatalf("the docs place only %d tests in a package or file; the patterns no longer match how they cite them", n)
	}
}
