package srcscan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// packagesHeader heads the table of docs/architecture.md that says what
// each package owns.
const packagesHeader = "| package | owns |"

// modulePackages returns every package of the module (a folder with
// non-test Go files, from the root with slashes, as TestLayering counts
// them) with the names each declares at top level, and Type.Member for
// the methods and fields of its types.
func modulePackages(t *testing.T) map[string]map[string]bool {
	t.Helper()
	pkgs := map[string]map[string]bool{}
	Files(t, "../..", func(rel string, _ *token.FileSet, f *ast.File) {
		dir := filepath.ToSlash(filepath.Dir(rel))
		d := pkgs[dir]
		if d == nil {
			d = map[string]bool{}
			pkgs[dir] = d
		}
		declare(d, f, true)
	})
	return pkgs
}

// declare adds the names f declares to d: functions, types, variables and
// constants by name, methods and fields and interface methods as
// Type.Member, methods also as .Member (a doc may cite a method bare), and
// with bareFields fields and interface methods as .Member too (a row may
// cite a field bare).
func declare(d map[string]bool, f *ast.File, bareFields bool) {
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if decl.Recv != nil && len(decl.Recv.List) > 0 {
				if r := recvName(decl.Recv.List[0].Type); r != "" {
					d[r+"."+decl.Name.Name] = true
				}
				d["."+decl.Name.Name] = true // a method, cited bare: `Close`
				continue
			}
			d[decl.Name.Name] = true
		case *ast.GenDecl:
			for _, s := range decl.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					d[s.Name.Name] = true
					var fields *ast.FieldList
					switch ty := s.Type.(type) {
					case *ast.StructType:
						fields = ty.Fields
					case *ast.InterfaceType:
						fields = ty.Methods
					}
					if fields == nil {
						continue
					}
					for _, fl := range fields.List {
						for _, n := range fl.Names {
							d[s.Name.Name+"."+n.Name] = true
							if bareFields {
								d["."+n.Name] = true // a field, cited bare: `Msg`
							}
						}
						if len(fl.Names) == 0 {
							if n := recvName(fl.Type); n != "" {
								d[s.Name.Name+"."+n] = true
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						d[n.Name] = true
					}
				}
			}
		}
	}
}

// TestPackagesTableCoversEveryPackage: every package of the module has a
// row in the packages table of docs/architecture.md (its folder named
// exactly, or a folder ending in "/" above it), and every folder a row
// names is there, so a package added, moved or removed cannot leave the
// map a newcomer reads first without it or pointing at nothing.
func TestPackagesTableCoversEveryPackage(t *testing.T) {
	pkgs := modulePackages(t)
	if len(pkgs) < 40 {
		t.Fatalf("found %d packages; the module has more", len(pkgs))
	}
	var names []string
	for _, r := range docTable(t, architecture, packagesHeader) {
		q := quoted(r.cells[0])
		if len(q) == 0 {
			t.Errorf("docs/architecture.md:%d: a packages row names its packages in backticks", r.line)
		}
		for _, n := range q {
			if fi, err := os.Stat(filepath.Join("..", "..", n)); err != nil || !fi.IsDir() {
				t.Errorf("docs/architecture.md:%d: `%s` is no folder of the repository", r.line, n)
			}
			names = append(names, n)
		}
	}
	for p := range pkgs {
		if !slices.ContainsFunc(names, func(n string) bool { return covers(n, p) }) {
			t.Errorf("package %s has no row in the packages table of docs/architecture.md (%q): add one, or name a folder above it ending in /", p, packagesHeader)
		}
	}
}

// TestPackagesTableNamesRealParts: what a row of the packages table of
// docs/architecture.md names in backticks as its package's own is there: a
// bare file name (`parts.go`, `sshd/peer.sh`) is a file below one of the
// row's folders, and an exported bare name (`Listen`) or Type.Member
// (`Conn.Serve`) is declared by one of the row's packages. Names qualified
// by a package (`fsops.Workspace`) and paths from the root are
// TestDocsNameRealIdentifiers' and TestDocsNameRealFiles'; names of other
// modules a row cites are listed in foreign with why.
func TestPackagesTableNamesRealParts(t *testing.T) {
	pkgs := modulePackages(t)
	const root = "../.."
	file := regexp.MustCompile(`^[A-Za-z0-9_.\-/]+\.(go|sh|golden|txt|json|star|md)$`)
	ident := regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?(\(\))?$`)
	test := regexp.MustCompile(`^(Test|Fuzz|Benchmark)[A-Z]`)
	n := 0
	for _, r := range docTable(t, architecture, packagesHeader) {
		dirs := quoted(r.cells[0])
		for _, name := range quoted(r.cells[1]) {
			switch {
			case foreign[name] != "":
				continue
			case file.MatchString(name):
				first, _, _ := strings.Cut(name, "/")
				if _, err := os.Stat(filepath.Join(root, first)); err == nil && strings.Contains(name, "/") {
					continue // a path from the root: TestDocsNameRealFiles'
				}
				n++
				if !slices.ContainsFunc(dirs, func(d string) bool { return below(filepath.Join(root, d), name) }) {
					t.Errorf("docs/architecture.md:%d: `%s`: no such file below %s", r.line, name, strings.Join(dirs, ", "))
				}
			case ident.MatchString(name) && !test.MatchString(name):
				id := strings.TrimSuffix(name, "()")
				n++
				if !slices.ContainsFunc(dirs, func(d string) bool {
					for p, decl := range pkgs {
						if covers(d, p) && (decl[id] || !strings.Contains(id, ".") && decl["."+id]) {
							return true
						}
					}
					return false
				}) {
					t.Errorf("docs/architecture.md:%d: `%s`: declared by none of %s", r.line, name, strings.Join(dirs, ", "))
				}
			}
		}
	}
	if n < 100 {
		t.Fatalf("the packages table names only %d files and identifiers; the patterns no longer match how it names them", n)
	}
}

// foreign are the names the packages table cites that look like its
// packages' own files or identifiers but are not, each with whose they are.
var foreign = map[string]string{
	"GOGC":             "the Go runtime's environment variable",
	"O_NONBLOCK":       "open(2)'s flag",
	"RLIMIT_NOFILE":    "the kernel's limit on open descriptors",
	"StrictModes":      "OpenSSH sshd's option",
	"CallToolResult":   "MCP's result type, as the go-sdk names it",
	"IOTransport":      "the go-sdk's stdio transport",
	"mcp_servers.json": "the upstreams file's shape, as MCP clients name it",
}

// below reports whether a file named name (a base name, or a path with
// slashes) is dir/name or below dir at any depth (a testdata file).
func below(dir, name string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || found {
			return filepath.SkipDir
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(dir, path)
		found = filepath.ToSlash(rel) == name || (!d.IsDir() && !strings.Contains(name, "/") && d.Name() == name)
		return nil
	})
	return found
}

// TestTreeNamesEveryFolder: the tree at the head of docs/architecture.md
// (the indented block under "## The tree", a folder or several at the
// start of each entry) names every top-level folder of the repository
// (hidden ones, node_modules and the build outputs .gitignore anchors at
// the root left out), names only folders that are there, and places every
// package of the module: an entry names it, or a folder entry ending in
// "/" holds it, or the tree's text names its path (`fsops/checkpoint` in
// the entry of fsops).
func TestTreeNamesEveryFolder(t *testing.T) {
	const root = "../.."
	b, err := os.ReadFile(architecture)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n## The tree\n")
	if !ok {
		t.Fatal("docs/architecture.md has no section \"## The tree\"")
	}
	var block []string
	for _, l := range strings.Split(after, "\n") {
		if strings.HasPrefix(l, "## ") {
			break
		}
		if strings.HasPrefix(l, "    ") {
			block = append(block, l)
		} else if len(block) > 0 && strings.TrimSpace(l) != "" {
			break // the block ended
		}
	}
	var entries []string
	for _, l := range block {
		if strings.HasPrefix(l, "     ") {
			continue // the rest of the entry above
		}
		for i, w := range strings.Fields(l) {
			if i > 0 && !strings.HasSuffix(w, "/") {
				break
			}
			entries = append(entries, w)
		}
	}
	if len(entries) < 15 {
		t.Fatalf("the tree of docs/architecture.md has %d entries (%v); the parse no longer matches how it is written", len(entries), entries)
	}
	text := strings.Join(block, "\n")
	for _, e := range entries {
		if fi, err := os.Stat(filepath.Join(root, e)); err != nil || !fi.IsDir() {
			t.Errorf("the tree of docs/architecture.md names %s, which is no folder of the repository", e)
		}
	}

	ignored := map[string]bool{}
	if gi, err := os.ReadFile(filepath.Join(root, ".gitignore")); err == nil {
		for _, l := range strings.Split(string(gi), "\n") {
			if n, ok := strings.CutPrefix(strings.TrimSpace(l), "/"); ok && strings.HasSuffix(n, "/") && !strings.Contains(strings.TrimSuffix(n, "/"), "/") {
				ignored[strings.TrimSuffix(n, "/")] = true
			}
		}
	}
	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range top {
		n := d.Name()
		if !d.IsDir() || strings.HasPrefix(n, ".") || n == "node_modules" || ignored[n] {
			continue
		}
		if !slices.ContainsFunc(entries, func(e string) bool { return e == n || strings.HasPrefix(e, n+"/") }) {
			t.Errorf("the tree of docs/architecture.md does not name the folder %s/", n)
		}
	}

	word := func(p string) *regexp.Regexp {
		return regexp.MustCompile(`(^|[\s(,])` + regexp.QuoteMeta(p) + `($|[\s),:/])`)
	}
	for p := range modulePackages(t) {
		if slices.ContainsFunc(entries, func(e string) bool { return covers(e, p) }) || word(p).MatchString(text) {
			continue
		}
		t.Errorf("the tree of docs/architecture.md does not place the package %s: name it in its folder's entry, or give it an entry", p)
	}
}

// TestEveryPackageHasADoc: every package of the module says what it is in
// a package doc comment ("Package x …", or "Command x …" for a program),
// the next step the packages table of docs/architecture.md sends a reader
// to (`go doc` on it).
func TestEveryPackageHasADoc(t *testing.T) {
	const root = "../.."
	docs := map[string]string{} // package folder -> its doc comment
	for dir := range modulePackages(t) {
		docs[dir] = ""
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if f.Doc != nil {
				docs[dir] += f.Doc.Text()
			}
		}
	}
	for dir, doc := range docs {
		name := filepath.Base(dir)
		switch {
		case doc == "":
			t.Errorf("package %s has no package doc comment", dir)
		case !strings.HasPrefix(doc, "Package ") && !strings.HasPrefix(doc, "Command "):
			t.Errorf("package %s: its doc comment starts %q; a package's starts \"Package %s\", a program's \"Command …\"", dir, strings.SplitN(doc, "\n", 2)[0], name)
		}
	}
}
