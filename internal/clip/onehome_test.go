package clip_test

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// otherCuts are the files that cut a string before a marker by a rule of
// their own, each with the reason.
var otherCuts = map[string]string{
	"fsops/lines.go":               "read_file's long-line cut: the reference's wording, with the line's length in characters after the marker",
	"sandbox/policy/rules_code.go": "a refused path shown by its head and its tail (shorten), where the tail names the file",
}

// TestClipHasOneHome: cutting client-controlled text to a length with a
// marker after it is clip.String, so no other file writes s[:n] + "…" (or
// "...") itself, which splits a rune where n falls inside one.
func TestClipHasOneHome(t *testing.T) {
	allowed := srcscan.NewExceptions("otherCuts", otherCuts)
	slices := 0
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		rel = filepath.ToSlash(rel)
		ast.Inspect(f, func(n ast.Node) bool {
			if _, ok := n.(*ast.SliceExpr); ok {
				slices++
			}
			b, ok := n.(*ast.BinaryExpr)
			if !ok || b.Op != token.ADD {
				return true
			}
			sl, ok := b.X.(*ast.SliceExpr)
			if !ok || sl.Low != nil || sl.High == nil || sl.Slice3 {
				return true
			}
			lit, ok := b.Y.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			marker, err := strconv.Unquote(lit.Value)
			if err != nil || !strings.HasPrefix(marker, "…") && !strings.HasPrefix(marker, "...") {
				return true
			}
			if allowed.Allows(rel) {
				return true
			}
			t.Errorf("%s: cuts a string and appends %q itself; use clip.String (or list the file in otherCuts with the reason)", fset.Position(b.Pos()), marker)
			return true
		})
	})
	if slices < 100 {
		t.Fatalf("only %d slice expressions found: the scan no longer reads the module", slices)
	}
	allowed.Check(t, "cuts a string before a marker")
}
