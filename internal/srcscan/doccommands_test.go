package srcscan

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsGoTestCommandsRun: every package a `go test` or `go vet` command
// in the docs names (`go test -bench X ./tools/procs/`, `./ssh/...`) is a
// folder of the repository that holds Go files, so a moved package cannot
// leave the docs with a command that finds nothing to run. A `cd DIR &&`
// before the command is followed.
func TestDocsGoTestCommandsRun(t *testing.T) {
	const root = "../.."
	docs := repoDocs(t, root)
	// One command: what follows `go test` or `go vet` up to the end of its
	// code (a span, or a line of a fenced block) or the next command.
	command := regexp.MustCompile(`(?:cd ([A-Za-z0-9_./-]+) && )?go (?:test|vet)\b([^;&|)#]*)`)
	span := regexp.MustCompile("`([^`]+)`")
	quotedArg := regexp.MustCompile(`'[^']*'`) // a -run or -bench pattern may hold | and )
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var code []string // fenced lines, and inline spans with their line breaks as spaces
		var prose strings.Builder
		fenced := false
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				code = append(code, line)
			} else {
				prose.WriteString(line + "\n")
			}
		}
		for _, m := range span.FindAllStringSubmatch(prose.String(), -1) {
			code = append(code, strings.ReplaceAll(m[1], "\n", " "))
		}
		for _, c := range code {
			c = quotedArg.ReplaceAllString(c, "''")
			for _, m := range command.FindAllStringSubmatch(c, -1) {
				dir := root
				if m[1] != "" {
					dir = filepath.Join(root, m[1])
				}
				for _, arg := range strings.Fields(m[2]) {
					if !strings.HasPrefix(arg, "./") {
						continue
					}
					n++
					pkg := strings.TrimSuffix(strings.TrimSuffix(arg, "..."), "/")
					if !holdsGo(filepath.Join(dir, pkg), strings.HasSuffix(arg, "...")) {
						t.Errorf("%s: `go test %s`: %s holds no Go package", filepath.Base(doc), strings.TrimSpace(m[2]), arg)
					}
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("the docs name only %d packages in go test commands; the pattern no longer matches how they write them", n)
	}
}

// holdsGo reports whether dir holds a .go file (below it too, with deep).
func holdsGo(dir string, deep bool) bool {
	found := false
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || found {
			return filepath.SkipAll
		}
		if d.IsDir() && p != dir && !deep {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}
