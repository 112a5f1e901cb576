package daemon

import (
	"go/ast"
	"go/token"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// routeTableHeader heads the route table of docs/architecture.md.
const routeTableHeader = "| route | methods | admission | served by | when |"

// docRoute is one row of that table.
type docRoute struct {
	line                     int
	pattern, methods, admits string
	when                     string
}

// docRoutes reads the route table of docs/architecture.md: a route in
// backticks, the methods (GET, or "any": the handler answers each), the
// admission (none, guard, operator, caller), what serves it and when.
func docRoutes(t *testing.T) []docRoute {
	t.Helper()
	doc := filepath.Join("..", "docs", "architecture.md")
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == routeTableHeader {
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("%s has no table headed %q", doc, routeTableHeader)
	}
	quoted := regexp.MustCompile("^`([^`]+)`$")
	var rows []docRoute
	for i := start + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		c := strings.Split(strings.Trim(strings.TrimSpace(lines[i]), "|"), "|")
		for j := range c {
			c[j] = strings.TrimSpace(c[j])
		}
		m := quoted.FindStringSubmatch(c[0])
		if len(c) != 5 || m == nil || c[3] == "" || c[4] == "" {
			t.Errorf("%s:%d: a route row names one route in backticks, its methods, its admission, what serves it and when", doc, i+1)
			continue
		}
		rows = append(rows, docRoute{line: i + 1, pattern: m[1], methods: c[1], admits: c[2], when: c[4]})
	}
	if len(rows) == 0 {
		t.Fatalf("%s: the route table has no rows", doc)
	}
	return rows
}

// TestRouteTable holds the route table of docs/architecture.md to the
// daemon's: the routes of the rows of parts (every one the daemon can
// mount) are exactly the table's, each with the methods and the admission
// the table says; a daemon with every flag that adds a route mounts each
// of them on its mux, and one with the defaults mounts exactly those the
// table says are always there; and nothing in daemon/ mounts a route but
// Daemon.mount, which mounts the table's.
func TestRouteTable(t *testing.T) {
	code := map[string]route{}
	for _, r := range allRoutes(parts) {
		code[r.pattern] = r
	}
	documented := map[string]bool{}
	var always []string
	for _, d := range docRoutes(t) {
		if documented[d.pattern] {
			t.Errorf("docs/architecture.md:%d: %s has a row already", d.line, d.pattern)
		}
		documented[d.pattern] = true
		r, ok := code[d.pattern]
		if !ok {
			t.Errorf("docs/architecture.md:%d: the route table lists %s, which no row of parts (daemon/parts.go) serves", d.line, d.pattern)
			continue
		}
		methods := "any"
		if r.get {
			methods = "GET"
		}
		if d.methods != methods || d.admits != string(r.admit) {
			t.Errorf("docs/architecture.md:%d: %s: methods %q, admission %q; the daemon's row says %q, %q", d.line, d.pattern, d.methods, d.admits, methods, r.admit)
		}
		if strings.HasPrefix(d.when, "always") || strings.HasPrefix(d.when, "unless") {
			always = append(always, d.pattern)
		}
	}
	for p := range code {
		if !documented[p] {
			t.Errorf("the daemon serves %s (daemon/parts.go), which the route table of docs/architecture.md does not list", p)
		}
	}

	mounted := func(d *Daemon, pattern string) bool {
		_, got := d.mux.Handler(httptest.NewRequest("GET", pattern, nil))
		return got == pattern
	}
	c := testConfig(t)
	d, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for p := range code {
		want := slices.Contains(always, p)
		if got := mounted(d, p); got != want {
			t.Errorf("with the defaults, %s mounted: %v, want %v (the table's when)", p, got, want)
		}
	}
	c = testConfig(t)
	c.GatewayTools, c.Previews = true, true
	c.Site = t.TempDir()
	must(t, os.WriteFile(filepath.Join(c.Site, "README.md"), []byte("# site\n"), 0o644))
	must(t, c.Validate())
	all, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	for p := range code {
		if !mounted(all, p) {
			t.Errorf("with every flag that adds a route, %s is not mounted", p)
		}
	}

	// Only mount (and handleWork, which it calls) puts a route on the mux.
	srcscan.Files(t, "..", func(rel string, fset *token.FileSet, f *ast.File) {
		if filepath.ToSlash(filepath.Dir(rel)) != "daemon" {
			return
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Name.Name == "mount" || fn.Name.Name == "handleWork" {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Handle" || sel.Sel.Name == "HandleFunc" || sel.Sel.Name == "handleWork") {
						t.Errorf("%s: %s mounts a route itself; give it to a row of parts (daemon/parts.go)", fset.Position(call.Pos()), fn.Name.Name)
					}
				}
				return true
			})
		}
	})
}
