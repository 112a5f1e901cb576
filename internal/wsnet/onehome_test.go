package wsnet_test

import (
	"go/ast"
	"go/token"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// TestCloseFrameHasOneHome: a close frame's payload is wsnet.CloseFrame
// (its reason cut to what a control frame holds, on a rune boundary), so
// no other file formats one with gorilla's FormatCloseMessage.
func TestCloseFrameHasOneHome(t *testing.T) {
	calls := 0
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		imports := srcscan.ImportNames(f)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			calls++
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && imports[pkg.Name] == "github.com/gorilla/websocket" && sel.Sel.Name == "FormatCloseMessage" {
				t.Errorf("%s: formats a close frame itself; use wsnet.CloseFrame", fset.Position(call.Pos()))
			}
			return true
		})
	})
	if calls < 1000 {
		t.Fatalf("only %d calls found: the scan no longer reads the module", calls)
	}
}
