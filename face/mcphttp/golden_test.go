package mcphttp

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current output")

type toolCase struct {
	tool string
	args map[string]any
}

// goldenCases are run in order against one fixture workspace (writes,
// edits and moves change it for the cases after them). Each tool's cases
// cover its success formats and its failures; the goldens were checked
// against agent-backend 0.13.2's daemon on the same tree (see
// testdata/README.md for where and why we differ).
var goldenCases = []toolCase{
	{"read_text_file", map[string]any{"path": "a.txt"}},
	{"read_text_file", map[string]any{"path": "b.txt"}},
	{"read_text_file", map[string]any{"path": "empty.txt"}},
	{"read_text_file", map[string]any{"path": "big.txt", "offset": 1490}},
	{"read_text_file", map[string]any{"path": "big.txt", "offset": 10, "limit": 3}},
	{"read_text_file", map[string]any{"path": "big.txt", "offset": 5000}},
	{"read_text_file", map[string]any{"path": "big.txt", "limit": 9999, "offset": 1499}},
	{"read_text_file", map[string]any{"path": "a.txt", "limit": 2}},
	{"read_text_file", map[string]any{"path": "a.txt", "head": 2}},
	{"read_text_file", map[string]any{"path": "a.txt", "tail": 2}},
	{"read_text_file", map[string]any{"path": "a.txt", "head": 1, "tail": 1}},
	{"read_text_file", map[string]any{"path": "a.txt", "offset": 0}},
	{"read_text_file", map[string]any{"path": "a.txt", "limit": -1}},
	{"read_text_file", map[string]any{"path": "a.txt", "offset": 1.5}},
	{"read_text_file", map[string]any{}},
	{"read_text_file", map[string]any{"path": 5}},
	{"read_text_file", map[string]any{"path": "missing.txt"}},
	{"read_text_file", map[string]any{"path": "sub"}},
	{"read_text_file", map[string]any{"path": "link_in"}},
	{"read_media_file", map[string]any{"path": "img.png"}},
	{"read_media_file", map[string]any{"path": "snd.wav"}},
	{"read_media_file", map[string]any{"path": "a.txt"}},
	{"read_media_file", map[string]any{"path": "data.json", "force": true}},
	{"read_media_file", map[string]any{"path": "missing.png"}},
	{"read_media_file", map[string]any{"path": "noext"}},
	{"read_multiple_files", map[string]any{"paths": []string{"a.txt", "missing.txt", "b.txt", "../x"}}},
	{"read_multiple_files", map[string]any{"paths": []string{}}},
	{"write_file", map[string]any{"path": "new/dir/w.txt", "content": "written\n"}},
	{"write_file", map[string]any{"path": "sub", "content": "x"}},
	{"write_file", map[string]any{"path": "w2.txt"}},
	{"edit_file", map[string]any{"path": "edit.txt", "edits": []any{map[string]any{"oldText": "gamma", "newText": "GAMMA"}}, "dryRun": true}},
	{"edit_file", map[string]any{"path": "edit.txt", "edits": []any{map[string]any{"oldText": "gamma", "newText": "GAMMA"}, map[string]any{"oldText": "iota\nkappa", "newText": "iota"}}}},
	{"edit_file", map[string]any{"path": "edit.txt", "edits": []any{map[string]any{"oldText": "nothere", "newText": "x"}}}},
	{"edit_file", map[string]any{"path": "dup.txt", "edits": []any{map[string]any{"oldText": "foo", "newText": "x"}}}},
	{"edit_file", map[string]any{"path": "dup.txt", "edits": []any{map[string]any{"oldText": "foo", "newText": "baz", "replaceAll": true}}}},
	{"edit_file", map[string]any{"path": "dup.txt", "edits": []any{map[string]any{"oldText": "bar", "newText": "bar"}}}},
	{"edit_file", map[string]any{"path": "b.txt", "edits": []any{map[string]any{"oldText": "newline", "newText": "newline at last"}}}},
	{"edit_file", map[string]any{"path": "missing.txt", "edits": []any{map[string]any{"oldText": "a", "newText": "b"}}}},
	{"create_directory", map[string]any{"path": "made/x/y"}},
	{"create_directory", map[string]any{"path": "a.txt"}},
	{"list_directory", map[string]any{"path": "."}},
	{"list_directory", map[string]any{"path": "sub"}},
	{"list_directory", map[string]any{"path": "missing"}},
	{"list_directory", map[string]any{"path": "a.txt"}},
	{"list_directory_with_sizes", map[string]any{"path": "."}},
	{"list_directory_with_sizes", map[string]any{"path": ".", "sortBy": "size"}},
	{"list_directory_with_sizes", map[string]any{"path": "sub"}},
	{"list_directory_with_sizes", map[string]any{"path": ".", "sortBy": "bogus"}},
	{"directory_tree", map[string]any{"path": "."}},
	{"directory_tree", map[string]any{"path": "sub", "excludePatterns": []string{"*.md"}}},
	{"directory_tree", map[string]any{"path": "sub", "excludePatterns": []string{"**/*.md"}}},
	{"directory_tree", map[string]any{"path": "users", "includeDefaultExcludes": false}},
	{"directory_tree", map[string]any{"path": "made"}},
	{"directory_tree", map[string]any{"path": "missing"}},
	{"move_file", map[string]any{"source": "b.txt", "destination": "moved/b2.txt"}},
	{"move_file", map[string]any{"source": "missing.txt", "destination": "x.txt"}},
	{"move_file", map[string]any{"source": "a.txt", "destination": "dup.txt"}},
	{"search_files", map[string]any{"path": ".", "pattern": "*.txt"}},
	{"search_files", map[string]any{"path": ".", "pattern": "**/*.md"}},
	{"search_files", map[string]any{"path": ".", "pattern": "**/.env"}},
	{"search_files", map[string]any{"path": ".", "pattern": "*.nothing"}},
	{"search_files", map[string]any{"path": "sub", "pattern": "**", "excludePatterns": []string{"deep"}}},
	{"search_files", map[string]any{"path": "missing", "pattern": "*"}},
	{"get_file_info", map[string]any{"path": "a.txt"}},
	{"get_file_info", map[string]any{"path": "sub"}},
	{"get_file_info", map[string]any{"path": "missing"}},
	{"list_allowed_directories", map[string]any{}},
	{"exec", map[string]any{"command": "echo hi; echo err >&2"}},
	{"exec", map[string]any{"command": "echo out; echo oops >&2; exit 3"}},
	{"exec", map[string]any{"command": "echo only-out; exit 2"}},
	{"exec", map[string]any{"command": "exit 1"}},
	{"exec", map[string]any{"command": `printf "%s" "$FOO"`, "env": map[string]string{"FOO": "bar"}}},
	{"exec", map[string]any{"command": `test "$(pwd)" = "$HOME" && echo home-is-cwd`}},
	{"exec", map[string]any{"command": "rm -rf /"}},
	{"exec", map[string]any{"command": "eval ls"}},
	{"exec", map[string]any{"command": ""}},
	{"exec", map[string]any{"command": "   "}},
	{"exec", map[string]any{"command": `printf ""`}},
	{"exec", map[string]any{"command": "head -c 300000 /dev/zero | tr '\\0' y"}},
	{"grep", map[string]any{"pattern": "line"}},
	{"grep", map[string]any{"pattern": "line", "outputMode": "content", "lineNumbers": true}},
	{"grep", map[string]any{"pattern": "secret", "outputMode": "count"}},
	{"grep", map[string]any{"pattern": "zzzzzz_none"}},
	{"grep", map[string]any{"pattern": "e", "path": "sub", "outputMode": "content", "headLimit": 1}},
	{"grep", map[string]any{"pattern": "(", "outputMode": "content"}},
	{"nonexistent_tool", map[string]any{}},
}

// normalize replaces what differs between runs: the temp root and the
// inode-change and access times get_file_info reports (reads move atime).
var createdRE = regexp.MustCompile(`"(created|accessed)": "[^"]*"`)

func normalize(s, root string) string {
	s = strings.ReplaceAll(s, root, "$ROOT")
	return createdRE.ReplaceAllString(s, `"$1": "$$TIME"`)
}

// TestGolden runs every tool's cases over real loopback HTTP with the go-sdk
// client and compares with testdata/golden/<tool>.golden.
func TestGolden(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, nil)
	got := map[string]*strings.Builder{}
	var order []string
	for _, c := range goldenCases {
		b := got[c.tool]
		if b == nil {
			b = &strings.Builder{}
			got[c.tool] = b
			order = append(order, c.tool)
		}
		args, _ := json.Marshal(c.args)
		b.WriteString("### " + string(args) + "\n")
		out := call(t, cs, c.tool, c.args)
		if c.tool == "exec" && len(out) > 2000 {
			// Only the shape of a truncated output matters here.
			out = out[:300] + "\n[... " + "golden cut ...]\n" + out[len(out)-300:]
		}
		b.WriteString(normalize(out, e.root) + "\n")
	}
	for _, tool := range order {
		file := filepath.Join("testdata", "golden", tool+".golden")
		if *update {
			os.MkdirAll(filepath.Dir(file), 0o755)
			if err := os.WriteFile(file, []byte(got[tool].String()), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
		}
		if g := got[tool].String(); g != string(want) {
			t.Errorf("%s: output differs from %s\n%s", tool, file, lineDiff(string(want), g))
		}
	}
}

// lineDiff shows the first differing lines, enough to see what changed.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	n := 0
	for i := 0; i < max(len(w), len(g)) && n < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			n++
			b.WriteString("line " + itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\n")
		}
	}
	return b.String()
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
