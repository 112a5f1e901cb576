package config

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every setting belongs to one of the groups --help prints, so a row added
// without one fails here rather than vanishing from --help's sections.
func TestEverySettingHasAGroup(t *testing.T) {
	for _, s := range settings {
		if !slices.Contains(groups, s.group) {
			t.Errorf("setting --%s has group %q; give its row group: one of %v (config/groups.go)", s.key, s.group, groups)
		}
	}
	seen := map[string]Group{}
	for _, g := range Groups() {
		flags := GroupFlags(g)
		if len(flags) == 0 {
			t.Errorf("group %s has no setting", g)
		}
		for _, f := range flags {
			if prev, ok := seen[f]; ok {
				t.Errorf("--%s is in %s and %s", f, prev, g)
			}
			seen[f] = g
		}
	}
	if len(seen) != len(settings) {
		t.Errorf("the groups hold %d settings; there are %d", len(seen), len(settings))
	}
}

// docSections reads the "## Flags" part of docs/configuration.md: its
// "### Group" headings in order, and the flags named in the first cell of
// each table row under each.
func docSections(t *testing.T, doc string) (headings []string, flags map[string][]string) {
	t.Helper()
	start := strings.Index(doc, "\n## Flags\n")
	if start < 0 {
		t.Fatal(`docs/configuration.md has no "## Flags" section`)
	}
	part := doc[start+len("\n## Flags\n"):]
	if end := strings.Index(part, "\n## "); end >= 0 {
		part = part[:end]
	}
	flagRE := regexp.MustCompile("`--([A-Za-z0-9-]+)`")
	flags = map[string][]string{}
	current := ""
	for _, l := range strings.Split(part, "\n") {
		switch {
		case strings.HasPrefix(l, "### "):
			current = strings.TrimSpace(strings.TrimPrefix(l, "### "))
			headings = append(headings, current)
		case strings.HasPrefix(l, "| `--"):
			if current == "" {
				t.Fatalf("docs/configuration.md: a flag row before the first group heading: %s", l)
			}
			first := strings.SplitN(l[1:], " | ", 2)[0]
			for _, m := range flagRE.FindAllStringSubmatch(first, -1) {
				flags[current] = append(flags[current], m[1])
			}
		}
	}
	return headings, flags
}

// docs/configuration.md's table is grouped as --help is: a heading per
// group in the same order, under each exactly that group's flags, and last
// "Other" for the flags that are not settings (--config, --check-config).
func TestDocsGroupsMatch(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	headings, flags := docSections(t, string(b))
	var want []string
	for _, g := range Groups() {
		want = append(want, string(g))
	}
	want = append(want, "Other")
	if !slices.Equal(headings, want) {
		t.Fatalf("docs/configuration.md's flag sections are %q; want %q (config/groups.go)", headings, want)
	}
	rows := map[string]string{} // flag → the section documenting it
	for _, h := range headings {
		for _, f := range flags[h] {
			if prev, ok := rows[f]; ok {
				t.Errorf("docs/configuration.md documents --%s under %s and under %s", f, prev, h)
			}
			rows[f] = h
		}
	}
	for _, g := range Groups() {
		for _, f := range GroupFlags(g) {
			if rows[f] != string(g) {
				t.Errorf("docs/configuration.md documents --%s under %q; its group is %s", f, rows[f], g)
			}
		}
	}
	for _, f := range flags["Other"] {
		if lookupSetting(f) != nil {
			t.Errorf("docs/configuration.md documents the setting --%s under Other", f)
		}
	}
	if !slices.Contains(flags["Other"], ConfigFlag) {
		t.Errorf("docs/configuration.md does not document --%s under Other", ConfigFlag)
	}
}

func TestDocSections(t *testing.T) {
	doc := "# C\n\n## Flags\n\nText.\n\n### Serving\n\n| flag | x |\n|---|---|\n| `--root` | a `--not-this` |\n| `--a`, `--b` | x |\n\n### Other\n\n| `--config` | y |\n\n## Rules\n\n| `--zzz` | z |\n"
	headings, flags := docSections(t, doc)
	if !slices.Equal(headings, []string{"Serving", "Other"}) {
		t.Errorf("headings %q", headings)
	}
	if !slices.Equal(flags["Serving"], []string{"root", "a", "b"}) || !slices.Equal(flags["Other"], []string{"config"}) || len(flags) != 2 {
		t.Errorf("flags %q", flags)
	}
}
