package fsops

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files (edit diffs from the reference's jsdiff when available)")

// editCases are edit_file calls whose diffs are checked against golden files
// in testdata/edit. The goldens were produced by the reference's own diff
// library (jsdiff 9, as agent-backend 0.13.2 calls it) via TestDiffMatchesJSDiff's
// runner, so they are the reference's bytes.
var editCases = []struct {
	name, path, original string
	edits                []Edit
}{
	{"replace-middle", "src/app.go", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
		[]Edit{{OldText: "\"hi\"", NewText: "\"hello\""}}},
	{"append-lines", "notes.md", "# Notes\n\n- one\n", []Edit{{OldText: "- one\n", NewText: "- one\n- two\n- three\n"}}},
	{"delete-lines", "a.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", []Edit{{OldText: "4\n5\n6\n", NewText: ""}}},
	{"no-newline-at-eof", "a.txt", "first\nlast", []Edit{{OldText: "last", NewText: "LAST"}}},
	{"add-newline-at-eof", "a.txt", "first\nlast", []Edit{{OldText: "last", NewText: "last\n"}}},
	{"to-empty", "a.txt", "only line\n", []Edit{{OldText: "only line\n", NewText: ""}}},
	{"two-hunks", "b.txt", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\n", []Edit{{OldText: "b\n", NewText: "B\n"}, {OldText: "m\n", NewText: "M\n"}}},
	{"merged-hunks", "b.txt", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n", []Edit{{OldText: "b\n", NewText: "B\n"}, {OldText: "h\n", NewText: "H\n"}}},
	{"replace-all", "c.py", "x = 1\ny = x + x\nprint(x)\n", []Edit{{OldText: "x", NewText: "value", ReplaceAll: true}}},
	{"transposition", "d.txt", "alpha\nbeta\ngamma\ndelta\n", []Edit{{OldText: "beta\ngamma\n", NewText: "gamma\nbeta\n"}}},
	{"crlf", "w.txt", "one\r\ntwo\r\nthree\r\n", []Edit{{OldText: "two\r\n", NewText: "2\r\n"}}},
	{"quoted-name", "dír/a \"b\".txt", "x\n", []Edit{{OldText: "x", NewText: "y"}}},
	{"no-change", "same.txt", "same\n", []Edit{{OldText: "same", NewText: "same"}}},
	{"insert-top", "t.txt", "l1\nl2\nl3\nl4\nl5\n", []Edit{{OldText: "l1\n", NewText: "l0\nl1\n"}}},
}

func TestEditDiffGolden(t *testing.T) {
	runner := jsdiffRunner(t, false)
	for _, tc := range editCases {
		t.Run(tc.name, func(t *testing.T) {
			ws := NewMemory("/ws", Options{})
			must(t, ws.WriteFile(tc.path, []byte(tc.original)))
			res, err := ws.Edit(tc.path, tc.edits, true)
			must(t, err)
			golden := filepath.Join("testdata", "edit", tc.name+".diff")
			if *update && runner != nil {
				_, mod, _, err := applyEdits(tc.path, tc.original, tc.edits, true, DefaultMaxReadSize)
				must(t, err)
				want := runner([][3]string{{tc.path, strings.ReplaceAll(tc.original, "\r\n", "\n"), mod}})[0]
				must(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				must(t, os.WriteFile(golden, []byte(want), 0o644))
			}
			want, err := os.ReadFile(golden)
			must(t, err)
			if res.Diff != string(want) {
				t.Errorf("diff mismatch\ngot:\n%s\nwant:\n%s", res.Diff, want)
			}
		})
	}
}

// jsdiffRunner returns a function rendering a patch with the reference's diff
// library through node, or nil (skipping the test when required) when node or
// the library is not installed. FSOPS_JSDIFF may point at the library's
// directory (node_modules/diff of an agent-backend 0.13.2 install).
func jsdiffRunner(t *testing.T, required bool) func(cases [][3]string) []string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if required {
			t.Skip("node is not installed; the reference's jsdiff cannot run")
		}
		return nil
	}
	var dir string
	for _, d := range []string{os.Getenv("FSOPS_JSDIFF"), "../interop/node_modules/diff", "/tmp/ref-fsops/node_modules/diff", "/tmp/ref/node_modules/diff"} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "libcjs", "index.js")); err == nil {
			dir, _ = filepath.Abs(d)
			break
		}
	}
	if dir == "" {
		if required {
			t.Skip("jsdiff (node_modules/diff of agent-backend 0.13.2) not found; set FSOPS_JSDIFF")
		}
		return nil
	}
	script := `const d = require(process.argv[1]); const fs = require('fs');
const c = JSON.parse(fs.readFileSync(0, 'utf8'));
const out = c.map(x => d.createTwoFilesPatch(x[0], x[0], x[1], x[2], undefined, undefined,
  {context: 3, timeout: 15000, maxEditLength: 20000, headerOptions: d.FILE_HEADERS_ONLY}));
process.stdout.write(JSON.stringify(out));`
	return func(cases [][3]string) []string {
		in, _ := json.Marshal(cases)
		cmd := exec.Command(node, "-e", script, filepath.Join(dir, "libcjs", "index.js"))
		cmd.Stdin = strings.NewReader(string(in))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node: %v", err)
		}
		var res []string
		must(t, json.Unmarshal(out, &res))
		return res
	}
}

// Random edits of random line files: our diff must equal jsdiff's byte for
// byte, including which of several minimal diffs it picks.
func TestDiffMatchesJSDiff(t *testing.T) {
	run := jsdiffRunner(t, true)
	rng := rand.New(rand.NewSource(1))
	words := []string{"a", "b", "c", "d", "", "x y", "}"}
	gen := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(words[rng.Intn(len(words))])
			b.WriteByte('\n')
		}
		s := b.String()
		if rng.Intn(4) == 0 && len(s) > 0 {
			s = s[:len(s)-1] // no final newline
		}
		return s
	}
	var cases [][3]string
	for i := 0; i < 300; i++ {
		old := gen(rng.Intn(25))
		lines := strings.SplitAfter(old, "\n")
		for k := rng.Intn(4); k >= 0 && len(lines) > 0; k-- {
			j := rng.Intn(len(lines))
			switch rng.Intn(3) {
			case 0:
				lines = append(lines[:j], lines[j+1:]...)
			case 1:
				lines[j] = words[rng.Intn(len(words))] + "\n"
			default:
				lines = append(lines[:j], append([]string{"new\n"}, lines[j:]...)...)
			}
		}
		cases = append(cases, [3]string{"f.txt", old, strings.Join(lines, "")})
	}
	wants := run(cases)
	for i, c := range cases {
		got, ok := unifiedDiff(c[0], c[1], c[2], 3)
		if !ok || got != wants[i] {
			t.Fatalf("case %d: old %q new %q\ngot:\n%s\nwant:\n%s", i, c[1], c[2], got, wants[i])
		}
	}
}

func TestDiffBudgetNote(t *testing.T) {
	var a, b strings.Builder
	for i := 0; i < 12000; i++ {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	res, _, changed, err := applyEdits("big.txt", a.String(), []Edit{{OldText: a.String(), NewText: b.String()}}, false, DefaultMaxReadSize)
	must(t, err)
	want := "Applied 1 edit to big.txt\n--- big.txt\n+++ big.txt\n[diff omitted: rendering exceeded the diff budget (15s / 20,000 line edits); file went from 12,001 to 12,001 lines]"
	if !changed || res.Diff != want {
		t.Errorf("got %q", res.Diff)
	}
}
