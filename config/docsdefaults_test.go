package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// flagRow is one row of the flag tables of docs/configuration.md.
type flagRow struct {
	line    int
	flags   []string // the first cell's `--flag`s
	def     string   // the default cell
	meaning string
}

// docFlagRows returns the rows of the flag tables of doc (a path from
// this package), each with the settings' keys its first cell names
// (aliases such as `--rootDir` left out).
func docFlagRows(t *testing.T, doc string) []flagRow {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	flagRE := regexp.MustCompile("`--([A-Za-z0-9-]+)`")
	var rows []flagRow
	for i, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "| `--") {
			continue
		}
		c := rowCells(l)
		if len(c) < 4 {
			t.Fatalf("%s:%d: %d cells, want 4", doc, i+1, len(c))
		}
		r := flagRow{line: i + 1, def: c[2], meaning: strings.Join(c[3:], " | ")}
		for _, m := range flagRE.FindAllStringSubmatch(c[0], -1) {
			if s := lookupSetting(m[1]); s == nil || s.key == m[1] {
				r.flags = append(r.flags, m[1])
			}
		}
		rows = append(rows, r)
	}
	if len(rows) < 20 {
		t.Fatalf("%s: found %d flag rows; the pattern no longer matches the tables", doc, len(rows))
	}
	return rows
}

// rowCells splits a table row into its cells, trimmed; an escaped \|
// stays inside its cell.
func rowCells(l string) []string {
	l = strings.TrimSpace(l)
	l = strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
	var cells []string
	start := 0
	for i := 0; i < len(l); i++ {
		if l[i] == '|' && (i == 0 || l[i-1] != '\\') {
			cells = append(cells, strings.TrimSpace(l[start:i]))
			start = i + 1
		}
	}
	return append(cells, strings.TrimSpace(l[start:]))
}

// computedDefaults are the settings whose default the daemon works out at
// start (def is empty or depends on the user); their default cell says how,
// in words, rather than a value.
var computedDefaults = map[string]bool{
	"state-dir":          true, // root's or the user's state directory
	"sandbox-helper":     true, // agentbe-sandbox beside the executable, or the daemon
	"upstream-cache-dir": true, // --state-dir's upstreams
	"ssh-host-key":       true, // --state-dir's ssh_host_ed25519_key
}

// TestDocsDefaultsMatch: the default column of docs/configuration.md, and
// of README.md's table of the common flags, is each setting's def in
// config/settings.go, so a changed default cannot leave the docs stating
// the old one. A setting without a default shows an empty cell, "—",
// "off", "none" or "(empty…)"; a row naming several flags
// (`--gateway-rate`, `--gateway-burst`) gives their defaults in order,
// comma-separated, or one default for them all.
func TestDocsDefaultsMatch(t *testing.T) {
	for _, doc := range []string{"../docs/configuration.md", "../README.md"} {
		n := checkDocDefaults(t, doc)
		if doc == "../docs/configuration.md" && n != len(settings) {
			t.Errorf("checked the defaults of %d settings in %s; there are %d", n, doc, len(settings))
		}
	}
}

// checkDocDefaults checks the default column of doc's flag tables and
// returns how many settings it checked.
func checkDocDefaults(t *testing.T, doc string) int {
	n := 0
	name := strings.TrimPrefix(doc, "../")
	for _, r := range docFlagRows(t, doc) {
		defs := []string{r.def}
		if len(r.flags) > 1 {
			if defs = strings.Split(r.def, ", "); len(defs) == 1 {
				defs = slices.Repeat(defs, len(r.flags))
			}
			if len(defs) != len(r.flags) {
				t.Errorf("%s:%d: %d flags and %d defaults (%q)", name, r.line, len(r.flags), len(defs), r.def)
				continue
			}
		}
		for i, f := range r.flags {
			s := lookupSetting(f)
			if s == nil {
				continue // --config, --check-config: not settings
			}
			n++
			doc := strings.Trim(defs[i], "`\"")
			switch {
			case computedDefaults[f]:
				if doc == "" || doc == "—" {
					t.Errorf("%s:%d: --%s's default is worked out at start; say how", name, r.line, f)
				}
			case s.def == "":
				if doc != "" && doc != "—" && doc != "off" && doc != "none" && !strings.HasPrefix(doc, "(empty") {
					t.Errorf("%s:%d: --%s's default is %q; config/settings.go gives none", name, r.line, f, doc)
				}
			case doc != s.def:
				t.Errorf("%s:%d: --%s's default is %q; config/settings.go's is %q", name, r.line, f, doc, s.def)
			}
		}
	}
	return n
}

// TestDocsBoundsMatch: where a setting's check bounds its value, the
// meaning column of docs/configuration.md states the bounds the check
// applies ("1 to 10000", "1s to 24h", "at least 64KiB"), so a tightened or
// loosened bound cannot leave the reference stating another. The bounds are
// found by asking each check, not read from its source.
func TestDocsBoundsMatch(t *testing.T) {
	rows := map[string]flagRow{}
	for _, r := range docFlagRows(t, "../docs/configuration.md") {
		for _, f := range r.flags {
			rows[f] = r
		}
	}
	n := 0
	for _, s := range settings {
		if s.check == nil {
			continue
		}
		var want string
		switch s.field(&Config{}).(type) {
		case *int:
			accepts := func(v int64) bool { return s.check(int(v)) == nil }
			lo, hi, bounded := bounds(accepts, 1<<40)
			if bounded {
				want = fmt.Sprintf("%d to %d", lo, hi)
			}
		case *time.Duration:
			accepts := func(v int64) bool { return s.check(time.Duration(v)) == nil }
			lo, hi, bounded := bounds(accepts, int64(1000*time.Hour))
			if bounded {
				want = shortDuration(time.Duration(lo)) + " to " + shortDuration(time.Duration(hi))
			}
		case *int64:
			accepts := func(v int64) bool { return s.check(v) == nil }
			if lo, _, _ := bounds(accepts, 1<<40); lo > 1 {
				want = "at least " + FormatSize(lo)
			}
		}
		if want == "" {
			continue
		}
		n++
		r, ok := rows[s.key]
		if !ok {
			t.Errorf("--%s has no row in docs/configuration.md", s.key)
			continue
		}
		if !regexp.MustCompile(`(^|[^0-9A-Za-z])` + regexp.QuoteMeta(want) + `($|[^0-9A-Za-z])`).MatchString(r.meaning) {
			t.Errorf("docs/configuration.md:%d: --%s takes %s; the row does not say so", r.line, s.key, want)
		}
	}
	if n < 10 {
		t.Fatalf("found bounds on only %d settings; the probe no longer finds them", n)
	}
}

// bounds finds the least and greatest values from 0 to max that accepts
// takes, assuming it takes one run of values; bounded is false when it
// takes max (no upper bound) and the least is 0 or 1.
func bounds(accepts func(int64) bool, max int64) (lo, hi int64, bounded bool) {
	lo = -1
	for v := int64(0); v <= max; v = v*2 + 1 { // 0, 1, 3, 7, ...: find one value it takes
		if accepts(v) {
			lo = v
			break
		}
	}
	if lo < 0 {
		return 0, 0, false
	}
	// The least: search below the value found.
	a, b := int64(0), lo // accepts(b); the least is in (a-1, b]
	if accepts(0) {
		b = 0
	}
	for a < b {
		m := a + (b-a)/2
		if accepts(m) {
			b = m
		} else {
			a = m + 1
		}
	}
	lo = b
	if accepts(max) {
		return lo, max, lo > 1
	}
	a, b = lo, max // accepts(a), not accepts(b)
	for b-a > 1 {
		m := a + (b-a)/2
		if accepts(m) {
			a = m
		} else {
			b = m
		}
	}
	return lo, a, true
}

// shortDuration writes d as the docs do: 24h, 10m, 100ms, not 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// TestDocsProseDefaultsMatch: where the prose of README.md, CONTRIBUTING.md
// or docs/*.md gives a setting's default beside the flag, as
// "`--max-batch` (64)", "`--ssh-keepalive` (30 s)", "`--max-body-bytes`
// (4 MiB)" or "`--checkpoint-max-count` (default 100, ...)", the value is the setting's def, so the prose cannot keep a
// default the code no longer has. A parenthesis that does not read as a
// value of the setting's type ("(1 to 65535)", "(alias --rootDir)") is
// prose, not a default, and is left alone.
func TestDocsProseDefaultsMatch(t *testing.T) {
	docs := proseDocs(t)
	// "(VALUE)", or "(default VALUE" up to the first ")", ":", ";" or
	// ", ": "(default 100, every scope's together)", "(default 200,000)".
	beside := regexp.MustCompile("`--([a-z0-9-]+)` \\((?:`?([^()`;,:]+?)`?\\)|default `?([^()`;:]+?)`?(?:[):;]|, ))")
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range beside.FindAllStringSubmatch(line, -1) {
				s := lookupSetting(m[1])
				if s == nil || s.key != m[1] {
					continue
				}
				said := strings.TrimSpace(m[2] + m[3])
				got, ok := sameValue(s, said)
				if !ok {
					continue // not a value: prose
				}
				n++
				if !got {
					t.Errorf("%s:%d: `--%s` (%s); config/settings.go's default is %q", strings.TrimPrefix(doc, "../"), i+1, s.key, said, s.def)
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("the docs give only %d defaults beside their flags; the pattern no longer matches how they write them", n)
	}
}

// sameValue reports whether said, read as a value of s's type (spaces
// inside allowed: "30 s", "4 MiB"), is s's default; ok is false when said
// does not read as such a value.
func sameValue(s *setting, said string) (same, ok bool) {
	v := strings.ReplaceAll(said, " ", "")
	switch s.field(&Config{}).(type) {
	case *int:
		n, err := strconv.Atoi(strings.ReplaceAll(v, ",", ""))
		if err != nil {
			return false, false
		}
		d, _ := strconv.Atoi(s.def)
		return n == d, true
	case *time.Duration:
		d, err := time.ParseDuration(v)
		if err != nil {
			return false, false
		}
		def, _ := time.ParseDuration(s.def)
		return d == def, true
	case *int64:
		if strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }) == 0 {
			return false, false
		}
		n, err := ParseSize(v)
		if err != nil {
			return false, false
		}
		def, _ := ParseSize(s.def)
		return n == def, true
	case *bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, false
		}
		return strconv.FormatBool(b) == s.def, true
	}
	return false, false
}

// TestDocsNameRealVariables: every AGENTBE_ variable README.md,
// CONTRIBUTING.md and docs/*.md name is one the daemon reads (a setting's,
// or AGENTBE_CONFIG), a pattern of settings' names (`AGENTBE_NET_ALLOW_*`),
// or one a program of the repository's other folders reads (the client
// examples' AGENTBE_TOKEN, the interop suite's AGENTBE_BIN), found in its
// files; so a renamed setting cannot leave the docs setting a variable
// nothing reads.
func TestDocsNameRealVariables(t *testing.T) {
	read := map[string]bool{"AGENTBE_CONFIG": true}
	for _, s := range settings {
		for _, e := range s.env {
			read[e] = true
		}
	}
	// The other programs' files: examples/, interop/, bench/, deploy/,
	// systemd/, and the module's tests (a benchmark's AGENTBE_SANDBOX_BIN):
	// their own variables, not the daemon's.
	var others strings.Builder
	filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && p != ".." {
				return filepath.SkipDir
			}
			return nil
		}
		top, _, _ := strings.Cut(strings.TrimPrefix(p, "../"), "/")
		program := strings.HasSuffix(p, "_test.go") ||
			slices.Contains([]string{"examples", "interop", "bench", "deploy", "systemd"}, top) && !strings.HasSuffix(p, ".md")
		if program {
			if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
				others.Write(b)
			}
		}
		return nil
	})
	docs := proseDocs(t)
	named := regexp.MustCompile(`AGENTBE_[A-Z0-9_]*[A-Z0-9](_\*)?`)
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, v := range named.FindAllString(line, -1) {
				n++
				if read[v] {
					continue
				}
				if prefix, ok := strings.CutSuffix(v, "*"); ok {
					if !slices.ContainsFunc(slices.Collect(maps.Keys(read)), func(e string) bool { return strings.HasPrefix(e, prefix) }) {
						t.Errorf("%s:%d: %s matches no setting's variable", strings.TrimPrefix(doc, "../"), i+1, v)
					}
					continue
				}
				if !regexp.MustCompile(`\b` + v + `\b`).MatchString(others.String()) {
					t.Errorf("%s:%d: %s is no setting's variable (config/settings.go), and no program of the repository reads it", strings.TrimPrefix(doc, "../"), i+1, v)
				}
			}
		}
	}
	if n < 50 {
		t.Fatalf("the docs name only %d AGENTBE_ variables; the pattern no longer matches how they name them", n)
	}
}

// proseDocs are the documents whose prose the docs tests of this package
// read: docs/*.md, README.md and CONTRIBUTING.md.
func proseDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(docs, "../README.md", "../CONTRIBUTING.md")
}
