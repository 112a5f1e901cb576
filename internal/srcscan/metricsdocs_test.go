package srcscan

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDocsNameRealMetrics: every metric the daemon registers
// (internal/metrics's New* constructors called with an agentbe_ name) is
// named in README.md or docs/*.md, every agentbe_ metric the docs name is
// registered, and where the docs give a metric's labels (`name{a,b}`,
// `name{a="v"}`, or the labels cell of a table row that starts with the
// metric) they are the ones it is registered with. A renamed metric or
// label would otherwise leave dashboards built from the docs empty.
func TestDocsNameRealMetrics(t *testing.T) {
	const root = "../.."
	registered := map[string][]string{} // name -> label names
	where := map[string]string{}
	Files(t, root, func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			var fn string
			switch x := call.Fun.(type) {
			case *ast.SelectorExpr:
				fn = x.Sel.Name
			case *ast.Ident:
				fn = x.Name
			}
			if !strings.HasPrefix(fn, "New") {
				return true
			}
			name, ok := stringLit(call.Args[0])
			if !ok || !strings.HasPrefix(name, "agentbe_") {
				return true
			}
			// The label names: the string literals after the help text
			// (and, for a histogram, its buckets).
			var labels []string
			for _, a := range call.Args[2:] {
				if s, ok := stringLit(a); ok {
					labels = append(labels, s)
				}
			}
			if prev, ok := where[name]; ok {
				t.Errorf("%s registers %s, which %s registers too", rel, name, prev)
			}
			registered[name], where[name] = labels, rel
			return true
		})
	})
	if len(registered) < 10 {
		t.Fatalf("found only %d agentbe_ metrics registered; the scan no longer finds how they are made", len(registered))
	}

	docs := repoDocs(t, root)
	named := map[string]bool{}
	mention := regexp.MustCompile(`agentbe_[a-z0-9_]*[a-z0-9]`)
	withLabels := regexp.MustCompile(`(agentbe_[a-z0-9_]+)\{([^}]*)\}`)
	tableRow := regexp.MustCompile("^\\| `(agentbe_[a-z0-9_]+)` \\| ([^|]*) \\|")
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(doc)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range mention.FindAllString(line, -1) {
				named[m] = true
				if _, ok := registered[m]; !ok {
					t.Errorf("%s:%d names the metric %s, which nothing registers", base, i+1, m)
				}
			}
			for _, m := range withLabels.FindAllStringSubmatch(line, -1) {
				labels, ok := registered[m[1]]
				if !ok {
					continue
				}
				for _, l := range strings.Split(m[2], ",") {
					l, _, _ = strings.Cut(strings.TrimSpace(l), "=")
					if !slices.Contains(labels, l) {
						t.Errorf("%s:%d gives %s the label %q; it has %q (%s)", base, i+1, m[1], l, labels, where[m[1]])
					}
				}
				if !strings.Contains(m[2], "=") && len(strings.Split(m[2], ",")) != len(labels) {
					t.Errorf("%s:%d gives %s the labels {%s}; it has %q (%s)", base, i+1, m[1], m[2], labels, where[m[1]])
				}
			}
			if m := tableRow.FindStringSubmatch(line); m != nil {
				labels, ok := registered[m[1]]
				if !ok {
					continue
				}
				var cell []string
				for _, l := range strings.Split(m[2], ",") {
					if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
						cell = append(cell, l)
					}
				}
				if !slices.Equal(cell, labels) && !(len(cell) == 0 && len(labels) == 0) {
					t.Errorf("%s:%d: the labels of %s are %q; it has %q (%s)", base, i+1, m[1], cell, labels, where[m[1]])
				}
			}
		}
	}
	for name := range registered {
		if !named[name] {
			t.Errorf("%s registers the metric %s, which no doc names: say what it counts (docs/tools.md, or the doc of its feature)", where[name], name)
		}
	}
}

// stringLit returns the value of a string literal expression.
func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
