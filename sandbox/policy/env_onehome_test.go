package policy

import (
	"go/ast"
	"go/token"
	"strconv"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// TestDeniedEnvHasOneHome: the names no command's environment may hold
// (the dynamic linker's, the shell's start-up and tracing hooks) are one
// list, DeniedEnv, which the executor drops and a tool site refuses
// (tools/sites/site.go, reservedEnv), so no other file writes one of them
// as a string and keeps a copy of the list that can fall behind it.
func TestDeniedEnvHasOneHome(t *testing.T) {
	names := map[string]bool{}
	for _, k := range []string{"LD_", "DYLD_", "BASH_FUNC_", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT",
		"BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "CDPATH", "GLOBIGNORE", "BASH_XTRACEFD"} {
		if k[len(k)-1] != '_' && !DeniedEnv(k) {
			t.Fatalf("%s is not denied: the list below is out of date", k)
		}
		names[k] = true
	}
	strs := 0
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			strs++
			if s, err := strconv.Unquote(lit.Value); err == nil && names[s] {
				t.Errorf("%s: %q: a denied environment name is policy.DeniedEnv's; call it rather than list the name again", fset.Position(lit.Pos()), s)
			}
			return true
		})
	})
	if strs < 1000 {
		t.Fatalf("only %d string literals found: the scan no longer reads the module", strs)
	}
}
