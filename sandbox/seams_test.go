//go:build linux

package sandbox

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// bwrapFlags are flags only a bwrap argv has. Outside this package, a string
// literal holding one means a second copy of the sandbox's argv, which would
// drift from the one commands really run under (bench/floor measures the
// sandbox through BwrapArgv for that reason).
var bwrapFlags = []string{
	"--bind-fd", "--ro-bind", "--dev-bind", "--unshare-", "--share-net",
	"--die-with-parent", "--new-session", "--clearenv", "--proc", "--tmpfs",
	"--symlink", "--remount-ro", "--cap-drop", "--as-pid-1",
}

// TestBwrapArgvHasOneHome fails when code outside sandbox spells a bwrap
// flag: such code must take its argv from sandbox.BwrapArgv.
func TestBwrapArgvHasOneHome(t *testing.T) {
	srcscan.OtherFiles(t, "..", func(_ string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, word := range strings.Fields(s) {
				for _, flag := range bwrapFlags {
					if word == flag || (strings.HasSuffix(flag, "-") && strings.HasPrefix(word, flag)) {
						t.Errorf("%s: bwrap flag %q: build bwrap argv with sandbox.BwrapArgv", fset.Position(lit.Pos()), word)
					}
				}
			}
			return true
		})
	})
}

// TestWorkspaceBindingHasOneHome fails when code outside sandbox builds a
// sandbox.Request that names its directory by string (Dir or Boundary)
// instead of handing over the workspace the file door validated
// (Request.Workspace), which the executor opens once and binds by
// descriptor: every face binds a workspace to a command the same way.
func TestWorkspaceBindingHasOneHome(t *testing.T) {
	byName := map[string]bool{"Dir": true, "Boundary": true}
	srcscan.OtherFiles(t, "..", func(_ string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if n, ok := n.(*ast.CompositeLit); ok {
				sel, ok := n.Type.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Request" || !isIdent(sel.X, "sandbox") {
					return true
				}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && byName[k.Name] {
							t.Errorf("%s: sandbox.Request{%s: ...}: bind the workspace with Request.Workspace", fset.Position(kv.Pos()), k.Name)
						}
					}
				}
			}
			return true
		})
	})
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
