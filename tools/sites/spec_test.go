package sites

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

func mustSpecs(t *testing.T, page string) []Spec {
	t.Helper()
	specs, _, err := ParseFrontmatter([]byte(page))
	if err != nil {
		t.Fatal(err)
	}
	return specs
}

// TestSpecMatching mirrors the reference's spec tests.
func TestSpecMatching(t *testing.T) {
	page := `---
tools:
  - [ls]
  - [cat, {}, ";"]
  - [grep, {regex: ".*\\.md$"}]
  - [head, {regex: ".*\\.md$"}, ";"]
  - [psql, -c, {regex: "^SELECT"}, ";"]
  - [wc, {}]
---
# body
`
	specs := mustSpecs(t, page)
	for _, tc := range []struct {
		argv []string
		ok   bool
	}{
		{[]string{"ls"}, true},
		{[]string{"ls", "-la", "--color"}, true}, // extra arguments without ";"
		{[]string{"cat", "a.txt"}, true},
		{[]string{"cat", "a.txt", "-n"}, false}, // ";" forbids extras
		{[]string{"cat"}, false},                // a placeholder is required
		{[]string{"wc"}, false},
		{[]string{"wc", "dir", "-l"}, true},
		{[]string{"grep", "README.md"}, true},
		{[]string{"grep", "README.txt"}, false},
		{[]string{"head", "README.md"}, true},
		{[]string{"head", "README.md", "-n"}, false},
		{[]string{"psql", "-c", "SELECT 1"}, true},
		{[]string{"psql", "-c", "INSERT 1"}, false},
		{[]string{"psql", "-c", "SELECT 1", "--extra"}, false},
		{[]string{"rm", "-rf", "x"}, false},
		{nil, false},
	} {
		if _, ok := FirstMatch(specs, tc.argv); ok != tc.ok {
			t.Errorf("%q: allowed=%v, want %v", tc.argv, ok, tc.ok)
		}
	}
}

func TestFirstMatchWins(t *testing.T) {
	specs := mustSpecs(t, "---\ntools:\n  - [echo, \"$A\"]\n  - [echo, {}]\n---\n")
	s, ok := FirstMatch(specs, []string{"echo", "$A"})
	if !ok || s.Line != 3 {
		t.Errorf("first match: %+v %v", s, ok)
	}
}

func TestFrontmatterYAMLAndTOML(t *testing.T) {
	yaml := mustSpecs(t, "\n\n---\ntools:\n  - [ls]\n  - [cat, {}, \";\"]\n  - [psql, -c, {regex: \"^SELECT\"}]\n---\nbody")
	toml := mustSpecs(t, "+++\ntools = [\n  [\"ls\"],\n  [\"cat\", {}, \";\"],\n  [\"psql\", \"-c\", {regex = \"^SELECT\"}],\n]\n+++\nbody")
	for _, specs := range [][]Spec{yaml, toml} {
		if len(specs) != 3 || specs[0].String() != `["ls"]` || specs[1].String() != `["cat", {}, ";"]` || specs[2].String() != `["psql", "-c", {regex: "^SELECT"}]` {
			t.Errorf("specs: %v", specs)
		}
	}
	if yaml[0].Line != 5 {
		t.Errorf("YAML line of [ls] = %d, want 5 (after two blank lines and the fence)", yaml[0].Line)
	}
	_, body, _ := ParseFrontmatter([]byte("---\ntools: []\n---\n# Title\n"))
	if string(body) != "# Title\n" {
		t.Errorf("body %q", body)
	}
}

func TestFrontmatterErrors(t *testing.T) {
	for _, tc := range []struct{ name, page, want string }{
		{"none", "# just markdown\n", "no frontmatter"},
		{"unclosed", "---\ntools: [[ls]]\n", "frontmatter line 1: the --- fence is not closed"},
		{"bad yaml", "---\ntools: [[ls]\n---\n", "frontmatter line"},
		{"unknown key", "---\ntools:\n  - [cat, {path: x}]\n---\n", `frontmatter line 3: unknown key "path" in a placeholder`},
		{"bad regex", "---\ntools:\n  - [ls]\n  - [cat, {regex: \"(\"}]\n---\n", `frontmatter line 4: invalid regex "("`},
		{"not a list", "---\ntools: ls\n---\n", "frontmatter line 2: `tools` must be a list"},
		{"empty tool", "---\ntools:\n  - []\n---\n", "frontmatter line 3: a tool must be a non-empty list"},
		{"null element", "---\ntools:\n  - [cat, ~]\n---\n", "frontmatter line 3: an empty element"},
		{"nested list", "---\ntools:\n  - [cat, [a]]\n---\n", "frontmatter line 3: an element must be"},
		{"toml unknown key", "+++\ntools = [[\"cat\", {glob = \"x\"}]]\n+++\n", `unknown key "glob"`},
		{"toml bad", "+++\ntools = [[\"cat\"\n+++\n", "invalid TOML"},
		{"toml number", "+++\ntools = [[\"cat\", 1]]\n+++\n", "an element must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseFrontmatter([]byte(tc.page))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want it to contain %q", err, tc.want)
			}
			if tc.name == "none" && !errors.Is(err, ErrNoFrontmatter) {
				t.Errorf("not ErrNoFrontmatter: %v", err)
			}
		})
	}
}

// FuzzParseFrontmatter: no page panics the parser, and every spec it
// accepts has between 1 and MaxSpecParts parts.
func FuzzParseFrontmatter(f *testing.F) {
	f.Add([]byte("---\ntools:\n  - [ls]\n  - [cat, {}, \";\"]\n  - [x, {regex: \"^a\"}]\n---\n"))
	f.Add([]byte("+++\ntools = [[\"ls\"], [\"cat\", {}, \";\"]]\n+++\n"))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, page []byte) {
		specs, _, err := ParseFrontmatter(page)
		if err != nil {
			return
		}
		for _, s := range specs {
			if len(s.Parts) == 0 || len(s.Parts) > MaxSpecParts {
				t.Fatalf("accepted spec %v", s)
			}
		}
	})
}

// FuzzSpecMatch: matching never panics, and a spec always matches the argv
// built from its own literals and placeholder values that satisfy it.
func FuzzSpecMatch(f *testing.F) {
	f.Add("cat", "a.txt", "-n", true)
	f.Add("ls", "", "", false)
	f.Fuzz(func(t *testing.T, cmd, arg, extra string, noExtra bool) {
		s := Spec{Parts: []Part{{Literal: cmd}, {Any: true}}, NoExtra: noExtra}
		if !s.Match([]string{cmd, arg}) {
			t.Fatalf("%v does not match its own shape", s)
		}
		if got := s.Match([]string{cmd, arg, extra}); got == noExtra {
			t.Fatalf("%v with an extra element: %v", s, got)
		}
		s.Match([]string{extra})
	})
}

func TestParseEnvFile(t *testing.T) {
	env, err := ParseEnvFile("site.env", []byte("# secrets\n\nAPI_KEY=abc=def\nexport TOKEN=\"quoted value\"\nSINGLE='x y'\n"))
	if err != nil || env["API_KEY"] != "abc=def" || env["TOKEN"] != "quoted value" || env["SINGLE"] != "x y" || len(env) != 3 {
		t.Errorf("%v %v", env, err)
	}
	for _, bad := range []string{"NOEQUALS\n", "1KEY=x\n", "A B=c\n"} {
		if _, err := ParseEnvFile("site.env", []byte("OK=1\n"+bad)); err == nil || !strings.HasPrefix(err.Error(), "site.env:2: ") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// FuzzParseEnvFile: an error names the file and the line at fault (one
// that is not blank, a comment or KEY=VALUE); every name taken is a
// variable name; and what is taken, written back as KEY="VALUE" lines,
// reads back the same.
func FuzzParseEnvFile(f *testing.F) {
	for _, s := range []string{
		"# secrets\n\nAPI_KEY=abc=def\nexport TOKEN=\"quoted value\"\nSINGLE='x y'\n",
		"OK=1\nNOEQUALS\n", "OK=1\n1KEY=x\n", "OK=1\nA B=c\n",
		"LD_PRELOAD=/tmp/evil.so\nPATH=/tmp/evil\nexport API_KEY='s3cret-value'\nBASH_ENV=/tmp/evil.sh\n",
		"A=\"\"\"\r\nB= ' x ' \nexport  C = 'q\"\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := ParseEnvFile("site.env", data)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "site.env:") {
				t.Fatalf("error does not name the file: %v", err)
			}
			num, _, ok := strings.Cut(strings.TrimPrefix(msg, "site.env:"), ":")
			n, convErr := strconv.Atoi(num)
			if !ok || convErr != nil {
				return // not a line's: the file as a whole (a line over the scanner's limit)
			}
			lines := strings.Split(string(data), "\n")
			if n < 1 || n > len(lines) {
				t.Fatalf("error names line %d of %d: %v", n, len(lines), err)
			}
			l := strings.TrimPrefix(strings.TrimSpace(lines[n-1]), "export ")
			if k, _, ok := strings.Cut(l, "="); ok && envKeyRe().MatchString(strings.TrimSpace(k)) {
				t.Fatalf("error names line %d, %q, which is KEY=VALUE: %v", n, lines[n-1], err)
			}
			return
		}
		var back strings.Builder
		for k, v := range env {
			if !envKeyRe().MatchString(k) {
				t.Fatalf("took %q as a name", k)
			}
			if strings.ContainsAny(v, "\n") {
				t.Fatalf("value of %s holds a newline: %q", k, v)
			}
			fmt.Fprintf(&back, "%s=\"%s\"\n", k, v)
		}
		again, err := ParseEnvFile("back.env", []byte(back.String()))
		if err != nil || !maps.Equal(again, env) {
			t.Fatalf("%q read as %q; written back as %q it reads %q, %v", data, env, back.String(), again, err)
		}
	})
}

// FuzzComponents: the component blocks found are in order, apart, within
// the page, each from a line that opens a component fence to a line that
// closes it; and each block's command line, split into argv, reads back as
// the same argv when its words are written again quoted.
func FuzzComponents(f *testing.F) {
	f.Add("# Report\n\n```component\necho counted 42\n```\n\n```sh\necho no\n```\n\n```component\nls 'a b' \"c'd\"\n```\n")
	f.Add("````component\necho a | wc\n```\n````\n```component\nrm -rf data\n")
	f.Add("```component\n\t x'' \"\" \t\n\n```")
	f.Add("```component\na'\"b\"' \"'\"\n```\n")
	f.Fuzz(func(t *testing.T, page string) {
		prev := 0
		for _, c := range findComponents([]byte(page)) {
			if c.start < prev || c.end <= c.start || c.end > len(page) {
				t.Fatalf("block [%d,%d) after %d in a page of %d bytes", c.start, c.end, prev, len(page))
			}
			prev = c.end
			block := strings.Split(strings.TrimSuffix(page[c.start:c.end], "\n"), "\n")
			open, last := strings.TrimSpace(block[0]), strings.TrimSpace(block[len(block)-1])
			if strings.Trim(open, "`") != "component" || len(block) < 2 || !strings.HasPrefix(last, "```") || strings.Trim(last, "`") != "" {
				t.Fatalf("block %q does not run from a component fence to a closing one", page[c.start:c.end])
			}
			argv, err := splitWords(c.line)
			if err != nil {
				continue
			}
			// Each word as quoted pieces: a ' in "…", the rest in '…'.
			var back []string
			for _, w := range argv {
				q := "''"
				for p := range strings.SplitSeq(w, "'") {
					q += "'" + p + `'"'"`
				}
				back = append(back, strings.TrimSuffix(q, `"'"`))
			}
			again, err := splitWords(strings.Join(back, " "))
			if err != nil || !slices.Equal(again, argv) {
				t.Fatalf("%q split as %q; written back as %q it splits as %q, %v", c.line, argv, back, again, err)
			}
		}
	})
}

// FuzzFrontmatterFormsAgree: the same tool written in YAML and in TOML
// frontmatter is the same spec, or refused in both; and a spec taken is
// written by Spec.String as YAML that reads back as the same spec.
func FuzzFrontmatterFormsAgree(f *testing.F) {
	f.Add("cat", "-n", "^a", true)
	f.Add("git", ";", "[", false)
	f.Add("../x", "a\tb", "", true)
	f.Add("ls", "é\u2028", `\d+`, false)
	f.Fuzz(func(t *testing.T, cmd, lit, re string, noExtra bool) {
		// A string both languages read alike: ASCII, everything else
		// escaped (each library refuses some raw characters the other
		// takes, C1 controls in YAML).
		q := func(s string) string {
			var b strings.Builder
			b.WriteByte('"')
			for _, r := range s {
				switch {
				case r == '"' || r == '\\':
					b.WriteString(`\` + string(r))
				case r < 0x20 || r >= 0x7f && r <= 0xffff:
					fmt.Fprintf(&b, `\u%04X`, r)
				case r > 0xffff:
					fmt.Fprintf(&b, `\U%08X`, r)
				default:
					b.WriteRune(r)
				}
			}
			b.WriteByte('"')
			return b.String()
		}
		elems := []string{q(cmd), "{}", q(lit)}
		yamlRe, tomlRe := "{regex: "+q(re)+"}", "{regex = "+q(re)+"}"
		tail := ""
		if noExtra {
			tail = `, ";"`
		}
		yml := "---\ntools:\n  - [" + strings.Join(elems, ", ") + ", " + yamlRe + tail + "]\n---\nbody\n"
		tml := "+++\ntools = [[" + strings.Join(elems, ", ") + ", " + tomlRe + tail + "]]\n+++\nbody\n"
		ys, _, yerr := ParseFrontmatter([]byte(yml))
		ts, _, terr := ParseFrontmatter([]byte(tml))
		if (yerr == nil) != (terr == nil) {
			t.Fatalf("YAML %q: %v; TOML %q: %v", yml, yerr, tml, terr)
		}
		if yerr != nil {
			return
		}
		if len(ys) != 1 || len(ts) != 1 || ys[0].String() != ts[0].String() || ys[0].NoExtra != noExtra {
			t.Fatalf("YAML %q gives %v; TOML %q gives %v", yml, ys, tml, ts)
		}
		if !utf8.ValidString(cmd + lit + re) {
			return // Spec.String's %q writes a stray byte as \x.., which YAML reads as a character
		}
		back, _, err := ParseFrontmatter([]byte("---\ntools:\n  - " + ys[0].String() + "\n---\n"))
		if err != nil || len(back) != 1 || back[0].String() != ys[0].String() {
			t.Fatalf("%v written as YAML reads as %v, %v", ys[0], back, err)
		}
	})
}

// TestLoadEnvFileNeitherWaitsNorSwallows: an env file that is a FIFO is
// refused at once instead of holding the start (testenv.FIFO's late
// writer), and one over MaxEnvFileBytes is refused before it is read whole;
// each error names the file.
func TestLoadEnvFileNeitherWaitsNorSwallows(t *testing.T) {
	dir := t.TempDir()
	fifo, big := filepath.Join(dir, "fifo.env"), filepath.Join(dir, "big.env")
	testenv.FIFO(t, fifo, "A=late\n")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#\n"), MaxEnvFileBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, want string }{{fifo, "not a regular file (a FIFO)"}, {big, "larger than"}} {
		if env, err := LoadEnvFile(c.name); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("LoadEnvFile(%s): %v, %v; want an error naming the file and %q", c.name, env, err, c.want)
		}
	}
}
