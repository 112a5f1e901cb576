package ratelog_test

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// unlimited are the warnings about a refusal that are logged each time,
// with the reason.
var unlimited = map[string]string{
	"ssh/sshauth/auth.go":         "a failed SSH login is a security event logged each time, as sshd logs each (fail2ban reads them); an address's attempts are already slowed by the back-off and cut by --ssh-max-auth-tries",
	"sandbox/trampoline.go":       "the operator's --sandbox-helper judged once at start",
	"tools/upstream/transport.go": "an upstream server (the operator's program, not a client) whose requests are dropped is logged at the 1st, 2nd, 4th, 8th… drop, so a flood of n makes log2(n) lines",
}

// TestRefusalWarningsAreRateLimited: a warning about something the daemon
// refused is logged through an Every (the client decides how often it is
// refused), so no other file logs one with log.Warn directly, and none
// counts the refusals between lines itself.
func TestRefusalWarningsAreRateLimited(t *testing.T) {
	allowed := srcscan.NewExceptions("unlimited", unlimited)
	calls := 0
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		rel = filepath.ToSlash(rel)
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.Contains(lit.Value, "refused_since_last_warning") {
				t.Errorf("%s: counts refusals between warnings itself; use ratelog.Every", fset.Position(lit.Pos()))
			}
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Warn" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			msg, _ := strconv.Unquote(lit.Value)
			calls++
			low := strings.ToLower(msg)
			if !strings.Contains(low, "refused") && !strings.Contains(low, "too many") {
				return true
			}
			if allowed.Allows(rel) {
				return true
			}
			t.Errorf("%s: %q is logged at warn for every refusal; log it through a ratelog.Every (or list the file in unlimited with the reason)", fset.Position(call.Pos()), msg)
			return true
		})
	})
	if calls < 20 {
		t.Fatalf("only %d warnings with a literal message found: the scan no longer matches how the module logs", calls)
	}
	allowed.Check(t, "logs a refusal at warn")
}
