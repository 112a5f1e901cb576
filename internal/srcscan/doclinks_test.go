package srcscan

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinksResolve: every relative link of README.md, CONTRIBUTING.md,
// SECURITY.md and docs/*.md ([text](file.md#section), [text](#section),
// [text](../systemd/)) names a file or folder of the repository, and its
// #section a heading of that Markdown file (GitHub's anchor: the heading
// lowercased, spaces as -, punctuation dropped, -1, -2 for repeats), so a
// renamed heading or moved file cannot leave a dead link.
func TestDocsLinksResolve(t *testing.T) {
	const root = "../.."
	docs := repoDocs(t, root)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	scheme := regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
	anchors := map[string]map[string]bool{}
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		fenced := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if scheme.MatchString(target) {
					continue // https:, mailto:
				}
				n++
				path, anchor, _ := strings.Cut(target, "#")
				file := doc
				if path != "" {
					file = filepath.Join(filepath.Dir(doc), path)
				}
				where := fmt.Sprintf("%s:%d", filepath.Base(doc), i+1)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: the link %s names nothing in the repository", where, target)
					continue
				}
				if anchor == "" || !strings.HasSuffix(file, ".md") {
					continue
				}
				a, ok := anchors[file]
				if !ok {
					a = headingAnchors(t, file)
					anchors[file] = a
				}
				if !a[anchor] {
					t.Errorf("%s: the link %s: %s has no heading whose anchor is #%s", where, target, filepath.Base(file), anchor)
				}
			}
		}
	}
	if n < 100 {
		t.Fatalf("the docs hold only %d relative links; the pattern no longer matches how they link", n)
	}
}

// headingAnchors returns the anchors GitHub gives the headings of the
// Markdown file (outside fenced blocks).
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile(`^#{1,6} (.+)$`)
	seen := map[string]int{}
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		var s strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(m[1])) {
			switch {
			case r == ' ':
				s.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				s.WriteRune(r)
			}
		}
		a := s.String()
		if k := seen[a]; k > 0 {
			out[fmt.Sprintf("%s-%d", a, k)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
