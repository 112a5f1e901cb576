package admit

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// TestAdmissionHasOneHome keeps admission here: no other non-test file of
// the module
//
//   - applies the Origin and Host rules itself (a Check, Wrap or
//     OriginAllowed call in a file that imports internal/httpguard, or on
//     a Guard field): Rules.Begin does, once per request;
//   - looks a token up (Identify, IdentifyRequest, AllowsHeader,
//     AllowsHeaderOrQuery) outside internal/httpguard, which implements
//     them: Admission.Admit does, once, and its Caller says who calls;
//   - builds a registry.Call naming who calls or what its token may not
//     do (Caller, ReadOnly, NoExec, Bound): Caller.Call does, from the
//     admitted caller, so no face can call as someone else or drop a
//     token's restriction.
func TestAdmissionHasOneHome(t *testing.T) {
	guardMethods := map[string]bool{"Check": true, "Wrap": true, "OriginAllowed": true}
	tokenMethods := map[string]bool{"Identify": true, "IdentifyRequest": true, "IdentifyCredential": true, "Reidentify": true, "AllowsHeader": true, "AllowsHeaderOrQuery": true}
	callerKeys := map[string]bool{"Caller": true, "ReadOnly": true, "NoExec": true, "Bound": true}
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		rel = filepath.ToSlash(rel)
		inHTTPGuard := strings.HasPrefix(rel, "internal/httpguard/")
		importsGuard := false
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasSuffix(p, "/internal/httpguard") {
				importsGuard = true
			}
		}
		inRegistry := strings.HasPrefix(rel, "tools/registry/")
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || inHTTPGuard {
					return true
				}
				name := sel.Sel.Name
				onGuard := false
				if x, ok := sel.X.(*ast.SelectorExpr); ok && x.Sel.Name == "Guard" {
					onGuard = true
				}
				if guardMethods[name] && (importsGuard || onGuard) {
					t.Errorf("%s: %s calls %s: the Origin and Host rules are internal/admit's (Rules.Begin, Rules.Admit, Rules.Guarded), applied once per request",
						fset.Position(n.Pos()), rel, name)
				}
				if tokenMethods[name] {
					t.Errorf("%s: %s looks a token up (%s): admission does, once (Admission.Admit), and its Caller says who calls",
						fset.Position(n.Pos()), rel, name)
				}
			case *ast.CompositeLit:
				isCall := false
				switch typ := n.Type.(type) {
				case *ast.SelectorExpr:
					id, ok := typ.X.(*ast.Ident)
					isCall = ok && id.Name == "registry" && typ.Sel.Name == "Call"
				case *ast.Ident:
					isCall = inRegistry && typ.Name == "Call"
				}
				if !isCall {
					return true
				}
				for _, el := range n.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					if k, ok := kv.Key.(*ast.Ident); ok && callerKeys[k.Name] {
						t.Errorf("%s: %s builds a registry.Call with %s: admit.Caller.Call builds every call from the admitted caller",
							fset.Position(kv.Pos()), rel, k.Name)
					}
				}
			}
			return true
		})
	})
}

// TestReplyLimitWordingHasOneHome: the refusal of an answer past
// --max-reply-bytes is worded by ReplyTooLarge alone; a face that words it
// itself (a string literal naming the flag) would drift from the others.
func TestReplyLimitWordingHasOneHome(t *testing.T) {
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.Contains(lit.Value, "--max-reply-bytes); ask for less") {
				t.Errorf("%s: %s words the reply limit's refusal itself: call admit.ReplyTooLarge", fset.Position(lit.Pos()), rel)
			}
			return true
		})
	})
}
