package procnet_test

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// TestSocketTablesHaveOneHome: the kernel's TCP socket tables (/proc/net/tcp,
// /proc/PID/net/tcp and tcp6) are opened and read by procnet alone
// (ListenersOf, SocketUID), so what a table too big, unreadable or
// unparseable means is decided once, and told to the caller as an error. No
// other file names a path with "/net/tcp" in it.
func TestSocketTablesHaveOneHome(t *testing.T) {
	literals := 0
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			literals++
			if s, err := strconv.Unquote(lit.Value); err == nil && strings.Contains(s, "/net/tcp") {
				t.Errorf("%s: names the socket table %q; ask internal/procnet (ListenersOf, SocketUID)", fset.Position(lit.Pos()), s)
			}
			return true
		})
	})
	if literals < 1000 {
		t.Fatalf("only %d string literals found: the scan no longer reads the module", literals)
	}
}
