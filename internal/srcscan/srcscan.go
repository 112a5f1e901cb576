// Package srcscan lets a test keep a rule in one place: it parses every
// non-test Go file of the module outside the package that owns the rule, so
// the test can fail on any other file that implements the rule again.
package srcscan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// OtherFiles calls fn for each non-test Go file below the module root
// moduleRoot (relative to the calling test's directory, e.g. "../.."),
// except those of the calling test's own package directory. rel is the
// file's path relative to the root. It fails the test if it parsed fewer
// than 20 files: a rule checked against too little proves nothing.
func OtherFiles(t *testing.T, moduleRoot string, fn func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == here {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		fn(rel, fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("walked %d Go files under %s; the check looked at too little", files, root)
	}
}
