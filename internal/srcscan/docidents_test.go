package srcscan

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsNameRealIdentifiers: every Go identifier the docs cite in
// backticks qualified by one of the repository's packages (`errcode.Error`,
// `registry.Call`, `admit.Caller.Workspace`, `sandbox.Request.Env`) is
// declared in a package of that name, and a third part is a method or field
// of the second, so a renamed function or type cannot leave the docs
// pointing at nothing. Only an exported second part counts: a lowercase one
// (`browser.goto`, `fs.read`) is a tool's name, not Go.
func TestDocsNameRealIdentifiers(t *testing.T) {
	const root = "../.."
	decls := map[string]map[string]bool{} // package name -> its names, and Type.Member
	Files(t, root, func(rel string, fset *token.FileSet, f *ast.File) {
		d := decls[f.Name.Name]
		if d == nil {
			d = map[string]bool{}
			decls[f.Name.Name] = d
		}
		// A bare member counts for a method only (`pkg.Method`): a
		// field is cited through its type.
		declare(d, f, false)
	})
	delete(decls, "main") // every command's package is main: no one package to look in

	docs := repoDocs(t, root)
	span := regexp.MustCompile("`([^`\n]+)`")
	ref := regexp.MustCompile(`^\*?([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?(?:\[[^]]*\])?(?:\(.*\))?$`)
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, s := range span.FindAllStringSubmatch(line, -1) {
				m := ref.FindStringSubmatch(s[1])
				if m == nil {
					continue
				}
				d, ok := decls[m[1]]
				if !ok {
					continue // another module's package: `os.Root`, `http.Server`
				}
				n++
				switch {
				case !d[m[2]] && !(m[3] == "" && d["."+m[2]]):
					t.Errorf("%s:%d: `%s`: package %s declares no %s", filepath.Base(doc), i+1, s[1], m[1], m[2])
				case m[3] != "" && !d[m[2]+"."+m[3]]:
					t.Errorf("%s:%d: `%s`: %s.%s has no method or field %s", filepath.Base(doc), i+1, s[1], m[1], m[2], m[3])
				}
			}
		}
	}
	if n < 50 {
		t.Fatalf("the docs cite only %d identifiers of the repository's packages; the pattern no longer matches how they cite them", n)
	}
}

// recvName is the type name of a receiver or embedded field: T, *T, T[P].
func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.Ident:
		return x.Name
	}
	return ""
}
