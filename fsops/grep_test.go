package fsops

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// grepTree is a workspace exercising ripgrep's defaults: a git repository
// with nested .gitignore files, an .ignore file, hidden files and
// directories, a binary file, CRLF and unterminated lines, several file types
// and a symlink (not followed while walking).
var grepTree = map[string]string{
	".git/HEAD":                 "ref: refs/heads/main\n",
	".gitignore":                "*.log\n/build/\nsecret*\n!secret_ok.txt\n",
	".ignore":                   "ignored_by_dot_ignore.txt\n",
	"README.md":                 "# Title\nfoo in readme\n",
	"main.go":                   "package main\n\nfunc foo() {}\n\nfunc main() {\n\tfoo()\n}\n",
	"app.log":                   "foo in a log\n",
	"build/out.txt":             "foo built\n",
	"src/build/kept.txt":        "foo kept: /build/ is anchored\n",
	"secret.txt":                "foo secret\n",
	"secret_ok.txt":             "foo whitelisted\n",
	"ignored_by_dot_ignore.txt": "foo\n",
	".hidden.txt":               "foo hidden\n",
	".config/x.txt":             "foo in hidden dir\n",
	"bin.dat":                   "foo\x00binary\n",
	"late.bin":                  "foo\n" + strings.Repeat("x", 70000) + "\n\x00tail foo\n",
	"crlf.txt":                  "a\r\nfoo\r\nb\r\n",
	"nonl.txt":                  "x\nfoo",
	"lib/util.py":               "def foo():\n    return 'FOO'\n",
	"lib/.gitignore":            "gen_*\n",
	"lib/gen_x.py":              "foo generated\n",
	"lib/deep/a.js":             "const foo = 1;\nconst bar = foo + 1;\n\n\n\n\n\nfoo();\n",
	"lib/deep/b.ts":             "let x: Foo = foo;\n",
	"ctx.txt":                   "1\n2\nfoo 3\n4\n5\n6\n7\n8\nfoo 9\n10\nfoo 11\n12\n",
	"multi.txt":                 "start\nmiddle\nend\nstart again\nend\n",
	"link_to_lib":               "->lib",
}

// grepCases are the grep tool calls checked against golden output (from rg)
// and, when rg is installed, against rg itself.
var grepCases = []struct {
	name string
	opts GrepOptions
}{
	{"files", GrepOptions{Pattern: "foo"}},
	{"count", GrepOptions{Pattern: "foo", OutputMode: "count"}},
	{"content", GrepOptions{Pattern: "foo", OutputMode: "content"}},
	{"content-n", GrepOptions{Pattern: "foo", OutputMode: "content", LineNumbers: true}},
	{"context", GrepOptions{Pattern: "foo", OutputMode: "content", LineNumbers: true, Before: 1, After: 2}},
	{"context-no-n", GrepOptions{Pattern: "foo", OutputMode: "content", After: 1}},
	{"case-insensitive", GrepOptions{Pattern: "FOO", CaseInsensitive: true, OutputMode: "count"}},
	{"regex", GrepOptions{Pattern: `foo\(\)|def \w+`, OutputMode: "content", LineNumbers: true}},
	{"glob", GrepOptions{Pattern: "foo", Glob: "*.txt"}},
	{"glob-negated", GrepOptions{Pattern: "foo", Glob: "!*.txt"}},
	{"glob-anchored", GrepOptions{Pattern: "foo", Glob: "lib/**"}},
	{"type-go", GrepOptions{Pattern: "foo", Type: "go", OutputMode: "content"}},
	{"type-js", GrepOptions{Pattern: "foo", Type: "js", OutputMode: "count"}},
	{"type-py", GrepOptions{Pattern: "foo", Type: "py"}},
	{"path-dir", GrepOptions{Pattern: "foo", Path: "lib", OutputMode: "content", LineNumbers: true}},
	{"path-dot", GrepOptions{Pattern: "foo", Path: "."}},
	{"path-file", GrepOptions{Pattern: "foo", Path: "nonl.txt", OutputMode: "content"}},
	{"path-hidden-file", GrepOptions{Pattern: "foo", Path: ".hidden.txt", OutputMode: "content"}},
	{"path-binary-file", GrepOptions{Pattern: "foo", Path: "bin.dat", OutputMode: "content"}},
	{"path-late-binary", GrepOptions{Pattern: "foo", Path: "late.bin", OutputMode: "content", LineNumbers: true}},
	{"path-late-binary-count", GrepOptions{Pattern: "foo", Path: "late.bin", OutputMode: "count"}},
	{"path-late-binary-files", GrepOptions{Pattern: "foo", Path: "late.bin"}},
	{"multiline", GrepOptions{Pattern: `start.*?end`, Multiline: true, OutputMode: "content", LineNumbers: true}},
	{"multiline-count", GrepOptions{Pattern: `start.*?end`, Multiline: true, OutputMode: "count"}},
	{"anchors", GrepOptions{Pattern: `^foo|foo$`, OutputMode: "content", LineNumbers: true}},
	{"whitespace-class", GrepOptions{Pattern: `\d\s`, OutputMode: "count"}},
	{"no-match", GrepOptions{Pattern: "zzzz_nothing"}},
	{"head-limit", GrepOptions{Pattern: "foo", OutputMode: "content", HeadLimit: 3}},
}

// rgArgs builds the reference's rg command line for opts (plus --sort path,
// which makes rg's order deterministic; ours always is).
func rgArgs(o GrepOptions) []string {
	args := []string{"--color=never", "--no-heading", "--with-filename", "--sort", "path"}
	if o.CaseInsensitive {
		args = append(args, "-i")
	}
	if o.Multiline {
		args = append(args, "-U", "--multiline-dotall")
	}
	mode := o.OutputMode
	switch {
	case mode == "" || mode == "files_with_matches":
		args = append(args, "-l")
	case mode == "count":
		args = append(args, "-c")
	case mode == "content" && o.LineNumbers:
		args = append(args, "-n")
	}
	if mode == "content" {
		if o.Before > 0 {
			args = append(args, "-B", strconv.Itoa(o.Before))
		}
		if o.After > 0 {
			args = append(args, "-A", strconv.Itoa(o.After))
		}
	}
	if o.Glob != "" {
		args = append(args, "--glob", o.Glob)
	}
	if o.Type != "" {
		args = append(args, "--type", o.Type)
	}
	args = append(args, "--", o.Pattern)
	if o.Path != "" {
		args = append(args, o.Path)
	}
	return args
}

// rgOutput runs rg like the reference does (from the root, output trimmed,
// head limit applied the same way).
func rgOutput(t testing.TB, rg, root string, o GrepOptions) string {
	cmd := exec.Command(rg, rgArgs(o)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 1) {
		t.Fatalf("rg %v: %v", rgArgs(o), err)
	}
	g := &grepper{opts: o}
	text := strings.TrimSpace(string(out))
	if text != "" {
		g.out = []string{text}
	}
	return g.result().Output
}

func newGrepWorkspaces(t *testing.T) (string, []Workspace) {
	root := t.TempDir()
	writeTree(t, root, grepTree)
	mem := NewMemory("/mem", Options{})
	for p, c := range grepTree {
		if !strings.HasPrefix(c, "->") {
			must(t, mem.WriteFile(p, []byte(c)))
		}
	}
	return root, []Workspace{newDirWS(t, root), mem}
}

func TestGrepGolden(t *testing.T) {
	root, wss := newGrepWorkspaces(t)
	rg, _ := exec.LookPath("rg")
	for _, tc := range grepCases {
		golden := filepath.Join("testdata", "grep", tc.name+".golden")
		if *update && rg != "" {
			must(t, os.MkdirAll(filepath.Dir(golden), 0o755))
			must(t, os.WriteFile(golden, []byte(rgOutput(t, rg, root, tc.opts)), 0o644))
		}
		want, err := os.ReadFile(golden)
		must(t, err)
		for i, ws := range wss {
			res, err := ws.Grep(context.Background(), tc.opts)
			if err != nil {
				t.Errorf("%s[%d]: %v", tc.name, i, err)
				continue
			}
			if res.Output != string(want) {
				t.Errorf("%s[%s]: output mismatch\ngot:\n%s\nwant:\n%s", tc.name, []string{"dir", "memory"}[i], res.Output, want)
			}
			if (res.Output == "") != (res.Matches == 0) {
				t.Errorf("%s: Matches=%d with output %q", tc.name, res.Matches, res.Output)
			}
		}
	}
}

// The same cases against the installed rg, live (CI installs ripgrep).
func TestGrepMatchesRipgrep(t *testing.T) {
	rg := testenv.Command(t, "ripgrep", "rg")
	root, wss := newGrepWorkspaces(t)
	for _, tc := range grepCases {
		want := rgOutput(t, rg, root, tc.opts)
		res, err := wss[0].Grep(context.Background(), tc.opts)
		must(t, err)
		if res.Output != want {
			t.Errorf("%s: differs from rg %v\ngot:\n%s\nrg:\n%s", tc.name, rgArgs(tc.opts), res.Output, want)
		}
	}
	// An absolute path inside the root prints absolute, as rg does; another
	// absolute path is the relative one (rg, run by the reference, would
	// search the host's /lib instead).
	abs := GrepOptions{Pattern: "foo", Path: wss[0].Root() + "/lib", OutputMode: "content"}
	res, err := wss[0].Grep(context.Background(), abs)
	must(t, err)
	if want := rgOutput(t, rg, root, abs); res.Output != want || !strings.HasPrefix(want, wss[0].Root()) {
		t.Errorf("absolute path: got\n%s\nrg:\n%s", res.Output, want)
	}
	res, err = wss[0].Grep(context.Background(), GrepOptions{Pattern: "foo", Path: "/lib"})
	must(t, err)
	if want := rgOutput(t, rg, root, GrepOptions{Pattern: "foo", Path: "lib"}); res.Output != want {
		t.Errorf("other absolute path: got\n%s\nwant\n%s", res.Output, want)
	}
}

func TestGrepErrors(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			must(t, ws.WriteFile("a.txt", []byte("x\n")))
			ctx := context.Background()
			for _, tc := range []struct {
				opts GrepOptions
				code errcode.Code
				msg  string
			}{
				{GrepOptions{}, errcode.InvalidArgument, "empty pattern"},
				{GrepOptions{Pattern: "("}, errcode.InvalidArgument, "invalid regex"},
				{GrepOptions{Pattern: `a\nb`}, errcode.InvalidArgument, `the literal "\n" is not allowed`},
				{GrepOptions{Pattern: "x", Type: "nope"}, errcode.InvalidArgument, "unrecognized file type: nope"},
				{GrepOptions{Pattern: "x", OutputMode: "lines"}, errcode.InvalidArgument, "outputMode must be"},
				{GrepOptions{Pattern: "x", Before: -1}, errcode.InvalidArgument, "must not be negative"},
				{GrepOptions{Pattern: "x", Path: "missing"}, errcode.NotFound, "no such file"},
				{GrepOptions{Pattern: "x", Path: "../.."}, errcode.PathEscapeAttempt, "escapes"},
			} {
				_, err := ws.Grep(ctx, tc.opts)
				e := wantCode(t, err, tc.code)
				if !strings.Contains(e.Msg, tc.msg) {
					t.Errorf("%+v: message %q lacks %q", tc.opts, e.Msg, tc.msg)
				}
			}
			// multiline allows \n
			res, err := ws.Grep(ctx, GrepOptions{Pattern: `x\n`, Multiline: true})
			must(t, err)
			if res.Output != "a.txt" {
				t.Errorf("multiline \\n: %q", res.Output)
			}
		})
	}
}

func TestGrepCancelled(t *testing.T) {
	ws := newDirWS(t, t.TempDir())
	must(t, ws.WriteFile("d/a.txt", []byte("x")))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ws.Grep(ctx, GrepOptions{Pattern: "x"})
	if err == nil {
		t.Fatal("grep with a cancelled context succeeded")
	}
}

// Binary files whose NUL falls around ripgrep's read-buffer boundaries: what
// is searched before rg gives up must match rg exactly.
func TestGrepBinaryBoundariesMatchRipgrep(t *testing.T) {
	rg := testenv.Command(t, "ripgrep", "rg")
	root := t.TempDir()
	files := map[string]string{}
	line := "foo " + strings.Repeat("y", 95) + "\n" // 100 bytes
	for _, nul := range []int{0, 10, 65435, 65535, 65536, 65537, 65600, 100000, 131072, 140000} {
		text := strings.Repeat(line, 1600) // 160,000 bytes
		files[fmt.Sprintf("n%06d.bin", nul)] = text[:nul] + "\x00" + text[nul:]
	}
	files["longline.bin"] = "foo\n" + strings.Repeat("z", 150000) + "\nfoo\n\x00foo\n"
	writeTree(t, root, files)
	ws := newDirWS(t, root)
	for _, opts := range []GrepOptions{
		{Pattern: "foo", OutputMode: "content", LineNumbers: true},
		{Pattern: "foo", OutputMode: "count"},
		{Pattern: "foo"},
	} {
		res, err := ws.Grep(context.Background(), opts)
		must(t, err)
		if want := rgOutput(t, rg, root, opts); res.Output != want {
			t.Errorf("%+v:\ngot  %d bytes, %q...\nwant %d bytes, %q...", opts, len(res.Output), head(res.Output), len(want), head(want))
		}
		for name := range files {
			o := opts
			o.Path = name
			res, err := ws.Grep(context.Background(), o)
			must(t, err)
			if want := rgOutput(t, rg, root, o); res.Output != want {
				t.Errorf("explicit %s %+v:\ngot  %q\nwant %q", name, opts, tail(res.Output), tail(want))
			}
		}
	}
}

func head(s string) string { return s[:min(len(s), 200)] }
func tail(s string) string { return s[max(0, len(s)-300):] }
