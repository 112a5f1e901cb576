package fsops

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkFallbackHasOneHome keeps the absolute-link fallback in inRoot:
// in this package's non-test files, os.Root's escape refusal is tested
// (isEscape) only by inRoot and by mapErr (which classifies it), and links
// are resolved by hand (followLinks) only by inRoot and resolveLinks. An
// operation that wants the fallback calls inRoot (or do, or run); a second
// copy of "try, escape?, follow links, retry" fails here.
func TestLinkFallbackHasOneHome(t *testing.T) {
	allowed := map[string]map[string]bool{
		"isEscape":    {"inRoot": true, "mapErr": true},
		"followLinks": {"inRoot": true, "resolveLinks": true},
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	parsed := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed++
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				var callee string
				switch fn := c.Fun.(type) {
				case *ast.Ident:
					callee = fn.Name
				case *ast.SelectorExpr:
					callee = fn.Sel.Name
				}
				callers, rule := allowed[callee]
				if !rule {
					return true
				}
				calls[callee+" in "+fd.Name.Name]++
				if !callers[fd.Name.Name] {
					t.Errorf("%s: %s calls %s: take the link fallback through inRoot (dir_links.go)", fset.Position(c.Pos()), fd.Name.Name, callee)
				}
				return true
			})
		}
	}
	if parsed < 10 {
		t.Fatalf("parsed %d files; the check looked at too little", parsed)
	}
	// The check must see the helper itself, or it proves nothing.
	for _, want := range []string{"isEscape in inRoot", "followLinks in inRoot", "isEscape in mapErr"} {
		if calls[want] == 0 {
			t.Errorf("no call %s found: the scan is not looking at the code it guards", want)
		}
	}
}
