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

// TestLogHandlersCut: a handler that writes the daemon's log lines
// (slog.NewTextHandler, slog.NewJSONHandler) is built only as the argument
// of clip.Handler, so no value a client decides the length of reaches a
// line uncut, whichever package logs it (daemon.New cuts a logger it is
// given the same way; daemon TestAttackLogLinesNeitherForgedNorBloated and
// TestAttackSSHUserNameInLog hold both).
func TestLogHandlersCut(t *testing.T) {
	built := 0
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		names := srcscan.ImportNames(f)
		wrapped := map[ast.Node]bool{}
		isCall := func(n ast.Node, pkg string, fns ...string) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return false
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return false
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok || names[id.Name] != pkg {
				return false
			}
			for _, fn := range fns {
				if sel.Sel.Name == fn {
					return true
				}
			}
			return false
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if isCall(n, "github.com/agentbe/agentbe-daemon/internal/clip", "Handler") {
				wrapped[n.(*ast.CallExpr).Args[0]] = true
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			if !isCall(n, "log/slog", "NewTextHandler", "NewJSONHandler") {
				return true
			}
			built++
			if !wrapped[n] {
				t.Errorf("%s: builds a log handler that is not the argument of clip.Handler: a client's path or user name would reach a line uncut", fset.Position(n.Pos()))
			}
			return true
		})
	})
	if built < 2 {
		t.Fatalf("only %d log handlers found (daemon/log.go builds two): the scan no longer matches how the module logs", built)
	}
}
