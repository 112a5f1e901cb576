package fsops

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var treeFiles = map[string]string{
	"README.md":              "hello\n",
	"src/main.go":            "package main\n",
	"src/<tag>&.txt":         "",
	"src/empty/":             "/",
	"src/ünï.txt":            "ü",
	".git/config":            "x",
	"node_modules/a/b.js":    "x",
	"pkg/dist/out.js":        "x",
	"pkg/app.egg-info/x.txt": "x",
	"app.egg-info/y.txt":     "y",
	"notes.log":              "log",
}

// The tree JSON of a fixed workspace, default excludes on, plus "*.log".
func TestTreeGolden(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			for p, c := range treeFiles {
				if c == "/" {
					must(t, ws.Mkdir(p, true))
					continue
				}
				must(t, ws.WriteFile(p, []byte(c)))
			}
			nodes, err := ws.Tree(context.Background(), "", TreeOptions{DefaultExcludes: true, Exclude: []string{"*.log"}})
			must(t, err)
			got := TreeJSON(nodes)
			golden := filepath.Join("testdata", "tree", "default-excludes.json")
			if im.name == "memory" {
				// Memory directories exist only while they hold files.
				golden = filepath.Join("testdata", "tree", "default-excludes-memory.json")
			}
			if *update {
				must(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				must(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			must(t, err)
			if got != string(want) {
				t.Errorf("tree JSON:\n%s\nwant:\n%s", got, want)
			}
		})
	}
	if got := TreeJSON(nil); got != "[]" {
		t.Errorf("empty tree = %q", got)
	}
}

// TreeJSON must be exactly what JSON.stringify(tree, null, 2) prints.
func TestTreeJSONMatchesJavaScript(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	size := int64(3)
	nodes := []TreeNode{
		{Name: "a<b>&\"c\"\u2028", Type: "directory", Children: []TreeNode{}},
		{Name: "d", Type: "directory", Children: []TreeNode{{Name: "ü.txt", Type: "file", Size: &size}}},
		{Name: "e", Type: "file", Size: &size},
	}
	ours := TreeJSON(nodes)
	cmd := exec.Command(node, "-e", `let s='';process.stdin.on('data',d=>s+=d).on('end',()=>process.stdout.write(JSON.stringify(JSON.parse(s),null,2)))`)
	cmd.Stdin = strings.NewReader(ours)
	out, err := cmd.Output()
	must(t, err)
	if string(out) != ours {
		t.Errorf("ours:\n%s\nJavaScript:\n%s", ours, out)
	}
}

// globMatch must agree with minimatch(path, pattern, {dot: true}), which the
// reference's search_files and directory_tree use.
func TestGlobMatchesMinimatch(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	var mm string
	for _, d := range []string{os.Getenv("FSOPS_MINIMATCH"), "../interop/node_modules/minimatch", "/tmp/ref-fsops/node_modules/minimatch", "/tmp/ref/node_modules/minimatch"} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "package.json")); err == nil {
			mm, _ = filepath.Abs(d)
			break
		}
	}
	if mm == "" {
		t.Skip("minimatch (node_modules of agent-backend 0.13.2) not found; set FSOPS_MINIMATCH")
	}
	patterns := []string{"*.go", "**/*.go", "src/**", "src/**/*.ts", "**", "*", "?.txt", "[ab].txt", "[!a].txt",
		"{a,b}/*.js", "**/node_modules", "**/node_modules/**", ".git", "**/.git", "*.egg-info", "a/*/c", "**/x/**/y",
		"src/*", "!*.go", "a/**/b"}
	paths := []string{"a.go", "src/a.go", "src/b/c.ts", "src", ".hidden.go", "src/.x.go", "a.txt", "b.txt", "c.txt",
		"a/x.js", "b/y.js", "node_modules", "x/node_modules", "x/node_modules/y", ".git", "d/.git", "p.egg-info",
		"q/p.egg-info", "a/b/c", "a/x/y", "a/x/z/y", "a/b", "a"}
	var pairs [][2]string
	for _, p := range patterns {
		for _, s := range paths {
			pairs = append(pairs, [2]string{p, s})
		}
	}
	in, _ := json.Marshal(pairs)
	script := `const {minimatch} = require(process.argv[1]); let s='';
process.stdin.on('data',d=>s+=d).on('end',()=>{const c=JSON.parse(s);
process.stdout.write(JSON.stringify(c.map(([p,x])=>minimatch(x,p,{dot:true}))))})`
	cmd := exec.Command(node, "-e", script, mm)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	must(t, err)
	var want []bool
	must(t, json.Unmarshal(out, &want))
	for i, pr := range pairs {
		if got := globMatch(pr[0], pr[1]); got != want[i] {
			t.Errorf("globMatch(%q, %q) = %v, minimatch says %v", pr[0], pr[1], got, want[i])
		}
	}
}

// localeLess must sort like String.prototype.localeCompare, which the
// reference uses to order search results.
func TestLocaleLessMatchesJavaScript(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	names := []string{"b.txt", "B.txt", "a.txt", "A.txt", "a_b", "a-b", "a.b", "a/b", "a b", "a1", "a10", "a2",
		"_x", "-x", ".x", "x", "X", "Zeta", "alpha", "src/a.ts", "src/A.ts", "src-a", "src_a", "src.a", "ä", "z"}
	in, _ := json.Marshal(names)
	cmd := exec.Command(node, "-e", `let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{const a=JSON.parse(s);a.sort((x,y)=>x.localeCompare(y));process.stdout.write(JSON.stringify(a))})`)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	must(t, err)
	var want []string
	must(t, json.Unmarshal(out, &want))
	got := append([]string(nil), names...)
	sortLocale(got)
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Errorf("order:\n%q\nJavaScript:\n%q", got, want)
	}
}
