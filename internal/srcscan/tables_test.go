package srcscan

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// architecture is the document whose tables TestDoorsAllowlist and
// TestLayering hold to the code.
var architecture = filepath.Join("..", "..", "docs", "architecture.md")

// docTable returns the rows of the Markdown table in doc whose header line
// is header (cells trimmed, the separator line skipped), each with its line
// number. It fails the test if doc has no such table or the table is empty:
// a check against a table nobody can find proves nothing.
func docTable(t *testing.T, doc, header string) []tableRow {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == header {
			if start >= 0 {
				t.Fatalf("%s has two tables headed %q", doc, header)
			}
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("%s has no table headed %q", doc, header)
	}
	width := len(cells(header))
	var rows []tableRow
	for i := start + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		c := cells(lines[i])
		if len(c) != width {
			t.Fatalf("%s:%d: %d cells, want %d (a | inside a cell?)", doc, i+1, len(c), width)
		}
		rows = append(rows, tableRow{line: i + 1, cells: c})
	}
	if len(rows) == 0 {
		t.Fatalf("%s: the table headed %q has no rows", doc, header)
	}
	return rows
}

type tableRow struct {
	line  int
	cells []string
}

// cells splits a table line into its cells, trimmed; a "\|" is a "|"
// inside a cell, as in Markdown.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	const bar = "\x00"
	c := strings.Split(strings.ReplaceAll(line, `\|`, bar), "|")
	for i := range c {
		c[i] = strings.ReplaceAll(strings.TrimSpace(c[i]), bar, "|")
	}
	return c
}

var backticked = regexp.MustCompile("`([^`]+)`")

// quoted returns the backticked names of a cell, in order.
func quoted(cell string) []string {
	var names []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		names = append(names, m[1])
	}
	return names
}

// words splits a cell of comma-separated words ("files, processes").
func words(cell string) []string {
	var w []string
	for _, s := range strings.Split(cell, ",") {
		if s = strings.Trim(strings.TrimSpace(s), "`"); s != "" {
			w = append(w, s)
		}
	}
	return w
}

// covers reports whether the name of a table (a file, or a folder ending
// in "/", which covers everything below it) covers the slash-separated
// path p.
func covers(name, p string) bool {
	if strings.HasSuffix(name, "/") {
		return strings.HasPrefix(p+"/", name)
	}
	return p == name
}
