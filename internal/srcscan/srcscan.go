// Package srcscan lets a test keep a rule in one place: it parses every
// non-test Go file of the module outside the package that owns the rule, so
// the test can fail on any other file that implements the rule again.
//
// Its own tests hold docs/architecture.md to the code: the doors table
// (which files may touch files, start processes, dial out or read /proc,
// TestDoorsAllowlist), the layering table (which package groups may
// import which, TestLayering), the packages table (a row for every
// package, and the files and names a row cites are its package's:
// TestPackagesTableCoversEveryPackage, TestPackagesTableNamesRealParts) and
// the tree (every folder and package placed, TestTreeNamesEveryFolder),
// and the package doc every package's row sends a reader on to
// (TestEveryPackageHasADoc). Others hold every doc to it: a Go name a doc
// places in a file is declared there (TestDocsPlaceNamesInTheirFiles).
package srcscan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
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
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	walk(t, moduleRoot, here, fn)
}

// Files is OtherFiles without the exception: it calls fn for every non-test
// Go file below moduleRoot, the calling test's own package included.
func Files(t *testing.T, moduleRoot string, fn func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	walk(t, moduleRoot, "", fn)
}

// ImportNames maps each name f refers to an imported package by (its
// import's explicit name, else the last element of its path) to the
// package's import path.
func ImportNames(f *ast.File) map[string]string {
	names := make(map[string]string, len(f.Imports))
	for _, s := range f.Imports {
		p, err := strconv.Unquote(s.Path.Value)
		if err != nil {
			continue
		}
		name := p[strings.LastIndexByte(p, '/')+1:]
		if s.Name != nil {
			name = s.Name.Name
		}
		names[name] = p
	}
	return names
}

// walk calls fn for each non-test Go file below moduleRoot, except those
// directly in the directory skip (none when skip is "").
func walk(t *testing.T, moduleRoot, skip string, fn func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	root, err := filepath.Abs(moduleRoot)
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
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == skip {
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

// Exceptions are the files a one-home test lets break its rule, by path
// relative to the module root (slashes), each with the reason.
type Exceptions struct {
	name    string // the list's name in the test, for messages
	reasons map[string]string
	used    map[string]bool
}

// NewExceptions names a test's list of exceptions (name is the variable's
// name, to be found from a message).
func NewExceptions(name string, reasons map[string]string) *Exceptions {
	return &Exceptions{name: name, reasons: reasons, used: map[string]bool{}}
}

// Allows reports whether rel may break the rule, and records that it did.
func (e *Exceptions) Allows(rel string) bool {
	if _, ok := e.reasons[filepath.ToSlash(rel)]; !ok {
		return false
	}
	e.used[filepath.ToSlash(rel)] = true
	return true
}

// Check fails t for an exception given no reason, and for one that no
// file used: the file no longer does what the rule forbids (does says
// what, as "reads a RemoteAddr itself"), so the exception would only hide
// the next file that does.
func (e *Exceptions) Check(t testing.TB, does string) {
	t.Helper()
	for rel, why := range e.reasons {
		if strings.TrimSpace(why) == "" {
			t.Errorf("%s lists %s without a reason", e.name, rel)
		}
		if !e.used[rel] {
			t.Errorf("%s lists %s, which no longer %s: drop it", e.name, rel, does)
		}
	}
}
