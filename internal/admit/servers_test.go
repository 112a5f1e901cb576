package admit

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// servers are the non-test files of the module that run an HTTP server,
// each with what admits its requests. A file that serves the workspace
// names the admission in its own source (a token the check looks for); the
// others say why no admission applies.
var servers = map[string]struct {
	admits string // a string the file must contain: where its requests are admitted
	why    string
}{
	"daemon/daemon.go": {"d.handleWork(", "the daemon's port: every route that does work is mounted through handleWork (the Origin and Host rules), " +
		"and each face, /site/ and /preview/ admit with the daemon's admit.Rules"},
	"cmd/agent-backend/site.go": {"s.Handler(rules)", "`site serve`: the site's handler takes admit.Rules (sites.Site.Handler), as on the daemon's /site/"},
	"tools/browser/proxy.go": {"", "the browser's egress proxy: listens on loopback for Chromium's own uid only and does no work on the workspace; " +
		"what it dials passes netguard"},
	"internal/previewtest/previewtest.go":     {"", "a test helper: a server inside the workspace that previews proxy to"},
	"internal/previewtest/previewsrv/main.go": {"", "a test helper: the same, as a program run through the sandbox"},
	"bench/loadgen/floors.go":                 {"", "a benchmark floor (an echo server), run by the load generator only"},
	"bench/loadgen/echo.go":                   {"", "the same benchmark floor as a process of its own (loadgen echo-serve), run by the load generator only"},
	"bench/loadgen/features.go":               {"", "a benchmark fixture: the small page previews proxy to in compare.sh's features round (loadgen http-serve, started inside the workspace)"},
	"bench/browser/main.go":                   {"", "a benchmark fixture: the 200-link page both browsers load in bench/browser/peer.sh, a fixed body on 127.0.0.1"},
}

// TestEveryServerAdmits: each non-test file that runs an HTTP server (an
// http.Server, http.Serve, http.ListenAndServe[TLS], httptest.NewServer)
// is in servers; one that serves the workspace contains its admission and
// the read deadlines, so a new server, or a server built without admit,
// fails here.
func TestEveryServerAdmits(t *testing.T) {
	found := map[string]bool{}
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		rel = filepath.ToSlash(rel)
		ast.Inspect(f, func(n ast.Node) bool {
			var sel *ast.SelectorExpr
			switch n := n.(type) {
			case *ast.CompositeLit:
				sel, _ = n.Type.(*ast.SelectorExpr)
			case *ast.CallExpr:
				sel, _ = n.Fun.(*ast.SelectorExpr)
			}
			if sel == nil {
				return true
			}
			pkg, _ := sel.X.(*ast.Ident)
			if pkg == nil {
				return true
			}
			switch pkg.Name + "." + sel.Sel.Name {
			case "http.Server", "http.Serve", "http.ServeTLS", "http.ListenAndServe", "http.ListenAndServeTLS", "httptest.NewServer", "httptest.NewTLSServer", "httptest.NewUnstartedServer":
				found[rel] = true
				s, ok := servers[rel]
				if !ok {
					t.Errorf("%s runs an HTTP server (%s.%s, %s) that is not in servers: admit its requests with internal/admit "+
						"(or, for a server that does no work on the workspace, say why) and list it", rel, pkg.Name, sel.Sel.Name, fset.Position(n.Pos()))
				} else if s.why == "" {
					t.Errorf("%s: servers gives no reason", rel)
				}
			}
			return true
		})
	})
	for rel, s := range servers {
		if !found[rel] {
			t.Errorf("servers lists %s, which runs no HTTP server any more: drop it", rel)
			continue
		}
		if s.admits == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../..", rel))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), s.admits) {
			t.Errorf("%s runs an HTTP server but no longer contains %q: %s", rel, s.admits, s.why)
		}
		// A server that serves the workspace has the deadlines too: the
		// header's and, around its handler, the body's (deadline.go) and
		// the reply's (stall.go).
		for _, rule := range []string{"admit.HeaderTimeout", "admit.BodyDeadline(", "admit.ReplyDeadline("} {
			if !strings.Contains(string(b), rule) {
				t.Errorf("%s serves the workspace without %s: a client that declares a body, sends half a header or stops reading its reply would hold its connection for ever", rel, rule)
			}
		}
	}
}
