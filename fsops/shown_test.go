package fsops

import (
	"go/ast"
	"go/token"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// TestShownName: a name is quoted when it holds a control character, a
// line or paragraph separator or bytes that are not UTF-8, and shown as it
// is otherwise.
func TestShownName(t *testing.T) {
	for in, want := range map[string]string{
		"a.txt":            "a.txt",
		"dir/ü 日本.txt":     "dir/ü 日本.txt",
		"x\n[DIR] secrets": `"x\n[DIR] secrets"`,
		"tab\there":        `"tab\there"`,
		"a\u2028b":         `"a\u2028b"`,
		"a\u2029b":         `"a\u2029b"`,
		"bad\xffname":      `"bad\xffname"`,
	} {
		if got := ShownName(in); got != want {
			t.Errorf("ShownName(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestShownNameHasOneHome: how a name is shown in the text the model reads
// is ShownName, so no other file decides by itself which names to quote (a
// function that asks unicode.IsControl and calls strconv.Quote), and misses
// what ShownName quotes.
func TestShownNameHasOneHome(t *testing.T) {
	srcscan.OtherFiles(t, "..", func(_ string, fset *token.FileSet, f *ast.File) {
		names := srcscan.ImportNames(f)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			var control, quote bool
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok {
					switch names[x.Name] + "." + sel.Sel.Name {
					case "unicode.IsControl":
						control = true
					case "strconv.Quote":
						quote = true
					}
				}
				return true
			})
			if control && quote {
				t.Errorf("%s: %s quotes names with control characters by itself; show a name with fsops.ShownName", fset.Position(fn.Pos()), fn.Name.Name)
			}
		}
	})
}
