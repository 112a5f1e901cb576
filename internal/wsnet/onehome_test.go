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

// TestKeepaliveHasOneHome: the rule for a peer that is gone or silent
// (when to ping, how long a ping may wait, what counts as a sign of life,
// how many silent intervals make a peer dead, the close it gets) is
// wsnet.Keepalive's, for every WebSocket the daemon serves. So no other
// file sends a ping or a pong itself (gorilla's PingMessage and
// PongMessage), sets a connection's ping or pong handler, or looks at
// how long a peer has been silent (IdleFor): a face that did would hold
// a second rule, as /gateway, which had none, did not.
func TestKeepaliveHasOneHome(t *testing.T) {
	found := 0
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		imports := srcscan.ImportNames(f)
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			found++
			if pkg, ok := sel.X.(*ast.Ident); ok && imports[pkg.Name] == "github.com/gorilla/websocket" {
				switch sel.Sel.Name {
				case "PingMessage", "PongMessage":
					t.Errorf("%s: sends a %s itself; the keepalive is wsnet.Keepalive's", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			}
			switch sel.Sel.Name {
			case "SetPingHandler", "SetPongHandler", "IdleFor":
				t.Errorf("%s: calls %s; what counts as a sign of life is wsnet's (NewPeer, New) and what makes a peer dead is wsnet.Keepalive's", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	})
	if found < 1000 {
		t.Fatalf("only %d selectors found: the scan no longer reads the module", found)
	}
}
