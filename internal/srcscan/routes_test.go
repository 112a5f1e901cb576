package srcscan

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRouteTable holds the route table of docs/architecture.md (headed
// "| route | served by | when |") to the daemon's mux: the patterns the
// daemon's non-test files mount (the first argument of every Handle,
// HandleFunc or handleWork call, a string literal, a constant, or a sum of
// them) are exactly the routes the table lists, so a route added or
// dropped in daemon/ without the table, or the other way round, fails here.
func TestRouteTable(t *testing.T) {
	documented := map[string]int{}
	for _, r := range docTable(t, architecture, "| route | served by | when |") {
		q := quoted(r.cells[0])
		if len(q) != 1 || r.cells[1] == "" || r.cells[2] == "" {
			t.Errorf("docs/architecture.md:%d: a route row names one route in backticks, what serves it and when", r.line)
			continue
		}
		if l, ok := documented[q[0]]; ok {
			t.Errorf("docs/architecture.md:%d: %s has a row already (line %d)", r.line, q[0], l)
		}
		documented[q[0]] = r.line
	}

	consts := map[string]string{}
	type mount struct {
		pos    token.Position
		expr   ast.Expr
		params map[string]bool // the enclosing function's parameters
	}
	var mounts []mount
	Files(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		if filepath.ToSlash(filepath.Dir(rel)) != "daemon" {
			return
		}
		var params map[string]bool
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				params = map[string]bool{}
				for _, field := range n.Type.Params.List {
					for _, name := range field.Names {
						params[name.Name] = true
					}
				}
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, s := range n.Specs {
					vs := s.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[name.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			case *ast.CallExpr:
				var name string
				switch fn := n.Fun.(type) {
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				case *ast.Ident:
					name = fn.Name
				}
				if (name == "Handle" || name == "HandleFunc" || name == "handleWork") && len(n.Args) == 2 {
					mounts = append(mounts, mount{fset.Position(n.Pos()), n.Args[0], params})
				}
			}
			return true
		})
	})

	var eval func(e ast.Expr) (string, bool)
	eval = func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				s, err := strconv.Unquote(e.Value)
				return s, err == nil
			}
		case *ast.Ident:
			s, ok := consts[e.Name]
			return s, ok
		case *ast.ParenExpr:
			return eval(e.X)
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				a, ok1 := eval(e.X)
				b, ok2 := eval(e.Y)
				return a + b, ok1 && ok2
			}
		}
		return "", false
	}
	mounted := map[string]token.Position{}
	for _, m := range mounts {
		if id, ok := m.expr.(*ast.Ident); ok && m.params[id.Name] {
			continue // a helper that mounts the pattern its caller gives (handleWork)
		}
		p, ok := eval(m.expr)
		if !ok || !strings.HasPrefix(p, "/") {
			t.Errorf("%s: a route mounted by a pattern this test cannot read; mount it with a constant or a literal", m.pos)
			continue
		}
		mounted[p] = m.pos
	}
	if len(mounted) < 8 {
		t.Fatalf("found %d routes mounted in daemon/; the scan no longer sees how the mux is built", len(mounted))
	}
	var missing []string
	for p, pos := range mounted {
		if _, ok := documented[p]; !ok {
			missing = append(missing, p+" ("+pos.String()+")")
		}
	}
	slices.Sort(missing)
	for _, p := range missing {
		t.Errorf("the daemon mounts %s, which the route table of docs/architecture.md does not list", p)
	}
	for p, l := range documented {
		if _, ok := mounted[p]; !ok {
			t.Errorf("docs/architecture.md:%d: the route table lists %s, which the daemon does not mount", l, p)
		}
	}
}
