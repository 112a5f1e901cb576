package srcscan

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLayering holds the layering tables of docs/architecture.md to the
// code, in the spirit of the standard library's go/build/deps_test.go:
// every package of the module (a folder with non-test Go files) belongs to
// one group of the table headed "| group | packages | may import |" (a
// package named exactly wins over a folder ending in "/", a longer folder
// over a shorter one), and each of its non-test files imports only packages
// of the groups its group may import, or an import the table headed
// "| import | why |" lists as an exception with its reason. A group that
// holds no package, and an exception the code no longer has or no longer
// needs, fail too, so the tables describe the tree as it is.
func TestLayering(t *testing.T) {
	mod := modulePath(t)

	type group struct {
		name  string
		line  int
		names []string
		may   []string
	}
	var groups []*group
	byName := map[string]*group{}
	for _, r := range docTable(t, architecture, "| group | packages | may import |") {
		g := &group{name: r.cells[0], line: r.line, names: quoted(r.cells[1])}
		if r.cells[2] != "nothing" {
			g.may = words(r.cells[2])
		}
		if g.name == "" || len(g.names) == 0 {
			t.Errorf("docs/architecture.md:%d: a layering row names its group and, in backticks, its packages", r.line)
		}
		if byName[g.name] != nil {
			t.Errorf("docs/architecture.md:%d: group %s has a row already (line %d)", r.line, g.name, byName[g.name].line)
		}
		byName[g.name] = g
		groups = append(groups, g)
	}
	for _, g := range groups {
		for _, m := range g.may {
			if byName[m] == nil {
				t.Errorf("docs/architecture.md:%d: group %s may import %q, which is no group", g.line, g.name, m)
			}
		}
	}

	type edge struct{ from, to string }
	exceptions := map[edge]int{}
	for _, r := range docTable(t, architecture, "| import | why |") {
		q := quoted(r.cells[0])
		if len(q) != 2 || r.cells[1] == "" {
			t.Errorf("docs/architecture.md:%d: an exception names two packages in backticks (`importer` → `imported`) and why", r.line)
			continue
		}
		exceptions[edge{q[0], q[1]}] = r.line
	}

	// groupOf returns the group of package p (its path below the module)
	// and how specific the match is.
	groupOf := func(p string) *group {
		var best *group
		bestScore := -1
		for _, g := range groups {
			for _, n := range g.names {
				score := -1
				switch {
				case n == p:
					score = 1 << 20
				case strings.HasSuffix(n, "/") && covers(n, p):
					score = len(n)
				}
				if score > bestScore {
					best, bestScore = g, score
				} else if score == bestScore && score >= 0 && best != g {
					t.Errorf("package %s is in groups %s and %s alike", p, best.name, g.name)
				}
			}
		}
		return best
	}

	imports := map[string]map[string]token.Position{} // package → imported package → first import
	Files(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if imports[pkg] == nil {
			imports[pkg] = map[string]token.Position{}
		}
		for _, s := range f.Imports {
			p, err := strconv.Unquote(s.Path.Value)
			if err != nil || !strings.HasPrefix(p, mod+"/") {
				continue
			}
			p = strings.TrimPrefix(p, mod+"/")
			if _, ok := imports[pkg][p]; !ok {
				imports[pkg][p] = fset.Position(s.Pos())
			}
		}
	})
	if len(imports) < 40 {
		t.Fatalf("found %d packages; the module has more", len(imports))
	}

	held := map[*group]bool{}
	exceptionUsed := map[edge]bool{}
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		g := groupOf(p)
		if g == nil {
			t.Errorf("package %s is in no group of the layering table of docs/architecture.md: give it one", p)
			continue
		}
		held[g] = true
		for q, pos := range imports[p] {
			h := groupOf(q)
			if h == nil {
				continue // reported as a package of its own
			}
			if slices.Contains(g.may, h.name) {
				if l, ok := exceptions[edge{p, q}]; ok {
					t.Errorf("docs/architecture.md:%d: %s (%s) may import %s (%s) anyway: drop the exception", l, p, g.name, q, h.name)
				}
				continue
			}
			if _, ok := exceptions[edge{p, q}]; ok {
				exceptionUsed[edge{p, q}] = true
				continue
			}
			t.Errorf("%s: %s (%s) imports %s (%s); %s may import only %s (docs/architecture.md:%d)",
				pos, p, g.name, q, h.name, g.name, orNothing(g.may), g.line)
		}
	}
	for _, g := range groups {
		if !held[g] {
			t.Errorf("docs/architecture.md:%d: group %s holds no package: drop it or fix its names", g.line, g.name)
		}
	}
	for e, l := range exceptions {
		if !exceptionUsed[e] {
			if _, ok := imports[e.from][e.to]; !ok {
				t.Errorf("docs/architecture.md:%d: %s no longer imports %s: drop the exception", l, e.from, e.to)
			}
		}
	}
}

func orNothing(groups []string) string {
	if len(groups) == 0 {
		return "nothing of the module"
	}
	return strings.Join(groups, ", ")
}

// modulePath reads the module's path from its go.mod.
func modulePath(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "module "); ok {
			return strings.TrimSpace(p)
		}
	}
	t.Fatal("../../go.mod names no module")
	return ""
}
