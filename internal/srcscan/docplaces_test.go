package srcscan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsPlaceNamesInTheirFiles: where a doc (docs/*.md, README.md,
// CONTRIBUTING.md, SECURITY.md) says which file holds a Go name, that file
// declares it, so a name moved to another file, renamed or removed cannot
// leave the docs sending a reader to the wrong place. The file is a path
// from the root with a slash, ending in .go (not _test.go: tests are
// TestDocsTestsInNamedPackage's), and the sentence places one name, or a
// list of them joined by ", ", " and " or " or ", in exactly these forms:
//
//   - "`toolList` in `tools/workspace/tools.go`"
//   - "`inRoot` (`fsops/dir_links.go`"
//   - "(`bindSessions`, `face/mcphttp/http.go`" followed by ")", ";" or ":",
//     a parenthesis that cites the name, then its file
//   - "`daemon/http.go`'s `instrument`" and "`daemon/wire.go` (`startUpstreams`"
//
// A name may end in "()". A bare name is declared at the file's top level,
// or is a method or field declared there; a qualified one drops the file's
// own package (`sshd.Config` in `ssh/sshd/config.go` is Config); Type.Member
// is a method of Type or a field of its struct declared in the file; and
// x.Member with x not a type the file declares (a variable or receiver:
// `executor.launch`) is a method or field declared there. A name that
// looks like Go but is not (the kernel's constant, in foreign) is skipped,
// and the sentences that cite a name that is not the file's Go beside the
// file that handles it (MCP's `exec` (`sandbox/direct.go`)) are listed in
// notDeclared, each with why.
func TestDocsPlaceNamesInTheirFiles(t *testing.T) {
	const root = "../.."
	const name = "`[A-Za-z_][A-Za-z0-9_.]*(?:\\(\\))?`"
	const names = "(?P<names>(?:" + name + "(?:, and |, | and | or ))*" + name + ")"
	const file = "`(?P<file>[a-z][A-Za-z0-9_./-]*/[A-Za-z0-9_.-]+\\.go)`"
	forms := []*regexp.Regexp{
		regexp.MustCompile(names + ",? (?:\\(|in )" + file),
		regexp.MustCompile("\\(" + names + ", " + file + "[);:]"),
		regexp.MustCompile(file + "(?:'s | \\()" + names),
	}
	one := regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_.]*?)(?:\\(\\))?`")
	test := regexp.MustCompile(`^(Test|Fuzz|Benchmark)[A-Z]`)
	parsed := map[string]*placedFile{}
	n := 0
	for _, doc := range repoDocs(t, root) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(doc)
		for i, line := range strings.Split(string(b), "\n") {
			seen := map[string]bool{} // name + file: the forms overlap
			for _, form := range forms {
				for _, m := range form.FindAllStringSubmatch(line, -1) {
					path := m[form.SubexpIndex("file")]
					if strings.HasSuffix(path, "_test.go") {
						continue // TestDocsTestsInNamedPackage's
					}
					for _, nm := range one.FindAllStringSubmatch(m[form.SubexpIndex("names")], -1) {
						id := nm[1]
						if test.MatchString(id) || foreign[id] != "" || strings.HasSuffix(id, ".go") || seen[id+" "+path] || notDeclared.Allows(id+" in "+path) {
							continue
						}
						seen[id+" "+path] = true
						n++
						pf := parsed[path]
						if pf == nil {
							pf = parsePlaced(filepath.Join(root, path))
							parsed[path] = pf
						}
						if pf.err != nil {
							t.Errorf("%s:%d: `%s` in `%s`: %v", base, i+1, id, path, pf.err)
							continue
						}
						if why := pf.lacks(id); why != "" {
							t.Errorf("%s:%d: `%s` in `%s`: %s", base, i+1, id, path, why)
						}
					}
				}
			}
		}
	}
	notDeclared.Check(t, "cites a name beside that file")
	if n < 40 {
		t.Fatalf("the docs place only %d names in files; the patterns no longer match how they place them", n)
	}
}

// notDeclared are the sentences TestDocsPlaceNamesInTheirFiles reads as
// placing a name in a file where the name is not the file's Go but
// something the file handles, as "name in file" with whose the name is.
var notDeclared = NewExceptions("notDeclared", map[string]string{
	"exec in sandbox/direct.go":            "MCP's exec tool (docs/performance.md); the file is the direct start it takes",
	"slog in daemon/http.go":               "the standard library's log/slog (docs/performance.md); the file's instrument writes the request's line with it",
	"flock in fsops/checkpoint/store.go":   "flock(2) (docs/security.md); the store takes it on its lock file",
	"str in tools/extensions/modules.go":   "Starlark's builtin the daemon replaces (docs/security.md); modules.go lists the modules, text.go (cited beside it) makes the builtin",
	"repr in tools/extensions/modules.go":  "Starlark's builtin, as str",
	"print in tools/extensions/modules.go": "Starlark's builtin, as str",
	"fail in tools/extensions/modules.go":  "Starlark's builtin, as str",
})

// placedFile is a Go file a doc places names in: its package's name and
// what it declares (declare's map), and the types among them.
type placedFile struct {
	pkg   string
	decls map[string]bool
	types map[string]bool
	err   error
}

func parsePlaced(path string) *placedFile {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return &placedFile{err: err}
	}
	pf := &placedFile{pkg: f.Name.Name, decls: map[string]bool{}, types: map[string]bool{}}
	declare(pf.decls, f, true)
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
			for _, s := range g.Specs {
				pf.types[s.(*ast.TypeSpec).Name.Name] = true
			}
		}
	}
	return pf
}

// lacks says why the file does not declare id, or "" when it does.
func (pf *placedFile) lacks(id string) string {
	parts := strings.Split(id, ".")
	if len(parts) > 1 && parts[0] == pf.pkg {
		parts = parts[1:]
	}
	switch len(parts) {
	case 1:
		if !pf.decls[parts[0]] && !pf.decls["."+parts[0]] {
			return "the file declares no " + parts[0]
		}
	case 2:
		x, member := parts[0], parts[1]
		if pf.decls[x+"."+member] {
			return ""
		}
		if pf.types[x] || ast.IsExported(x) {
			return "the file declares no method or field " + member + " of " + x
		}
		if !pf.decls["."+member] {
			return "the file declares no method or field " + member
		}
	default:
		return "a name of more than Type.Member after the file's package (" + pf.pkg + ") is not one this check reads"
	}
	return ""
}
